"""SMP8xx: the job configuration (launchers, notebooks, smp.init dicts, [tool.smpfix.job]).

Rule modules import the rule framework (smpfix.rules.rule, config_rule), program, job and base;
never each other.
"""

from smpfix.rules.scope import FileScope

# The files its rules can report on, read by the registry before it imports any of them.
SCOPE = FileScope.CONFIGURATION
