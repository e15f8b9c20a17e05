"""SMP9xx: smpfix's own comments (suppressions that suppress nothing).

Rule modules import the rule framework (smpfix.rules.rule), suppressions and base; never each other."""
