"""SMP5xx: randomness, initialization and rank identities under tensor parallelism.

Rule modules import the rule framework (smpfix.rules.rule), program, job and base; never each other.
"""

from smpfix.rules.scope import FileScope

# The files its rules can report on, read by the registry before it imports any of them.
SCOPE = FileScope.PYTORCH
