"""SMP3xx: checkpointing and saving (rank guards, collectives, full and partial checkpoints).

Rule modules import the rule framework (smpfix.rules.rule), program, job and base; never each other.
"""

from smpfix.rules.scope import FileScope

# The files its rules can report on, read by the registry before it imports any of them.
SCOPE = FileScope.SMP
