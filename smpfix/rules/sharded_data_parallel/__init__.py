"""SMP6xx: sharded data parallelism specifics.

Rule modules import the rule framework (smpfix.rules.rule), program, job and base; never each other."""
