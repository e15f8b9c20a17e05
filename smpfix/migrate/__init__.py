"""``smpfix migrate``: move an SMP v1 job (launcher, script, helpers) to SMP v2.

What moves mechanically is rewritten with LibCST, keeping comments and formatting; what needs a
person is rewritten into the v2 shape with a ``# smpfix-migrate: TODO(...)`` comment, or only
reported. ``items.py`` is the vocabulary both halves (launchers, scripts) report in.
"""
