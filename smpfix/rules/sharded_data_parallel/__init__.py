"""SMP6xx: sharded data parallelism specifics.

Rule modules import the rule framework (smpfix.rules.rule), program, job and base; never each other.
"""

from smpfix.rules.scope import FileScope

# The files its rules can report on, read by the registry before it imports any of them.
SCOPE = FileScope.PYTORCH
