"""SMP5xx: randomness, initialization and rank identities under tensor parallelism.

Rule modules import the rule framework (smpfix.rules.rule), program, job and base; never each other."""
