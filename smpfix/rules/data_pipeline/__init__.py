"""SMP2xx: the data pipeline (last batches, samplers, sharding, data RNG seeds).

Rule modules import the rule framework (smpfix.rules.rule), program, job and base; never each other."""
