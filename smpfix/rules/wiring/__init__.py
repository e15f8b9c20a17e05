"""SMP1xx: wiring the model and optimizer (DistributedModel, DistributedOptimizer, init order, devices).

Rule modules import the rule framework (smpfix.rules.rule), program, job and base; never each other."""
