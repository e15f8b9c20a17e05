"""SMP4xx: the step function, forward and backward.

Rule modules import the rule framework (smpfix.rules.rule), program, job and base; never each other."""
