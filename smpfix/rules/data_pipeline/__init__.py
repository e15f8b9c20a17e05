"""SMP2xx: the data pipeline (last batches, samplers, sharding, data RNG seeds), and SMP802.

SMP802 (a loader's batch against ``microbatches``) keeps its configuration-rule code but checks
scripts, so it lives with the script rules: the configuration rules' folder is imported only for
files that state a configuration.

Rule modules import the rule framework (smpfix.rules.rule), program, job and base; never each other.
"""

from smpfix.rules.scope import FileScope

# The files its rules can report on, read by the registry before it imports any of them.
SCOPE = FileScope.SMP
