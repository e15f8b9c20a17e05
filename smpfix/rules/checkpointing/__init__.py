"""SMP3xx: checkpointing and saving (rank guards, collectives, full and partial checkpoints).

Rule modules import the rule framework (smpfix.rules.rule), program, job and base; never each other."""
