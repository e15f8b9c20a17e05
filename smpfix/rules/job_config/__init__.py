"""SMP8xx: the job configuration (launchers, notebooks, smp.init dicts, [tool.smpfix.job]).

Rule modules import the rule framework (smpfix.rules.rule, config_rule), program, job and base; never each other."""
