"""SMP900: a suppression comment that suppresses nothing.

This rule has no visitor: whether a comment is used is only known once every other rule has
reported and the findings have been matched against the file's suppressions, so the
analysis judges the comments then (``smpfix.suppressions.unused``) when SMP900 is selected.
The class gives the rule its code, name and page like any other, so ``smpfix rules``,
``smpfix explain SMP900``, ``--select`` and ``--ignore`` treat it as one.
"""

from __future__ import annotations

from smpfix.base.findings import Severity
from smpfix.rules.rule import FixAvailability, Rule, TensorParallelism
from smpfix.suppressions.unused import CODE, NAME


class UnusedSuppression(Rule):
    code = CODE
    name = NAME
    summary = (
        "A `# smpfix: ignore[...]` or `# noqa: SMPxxx` comment suppresses nothing; remove the stale"
        " code."
    )
    fix_availability = FixAvailability.SAFE
    default_severity = Severity.HINT
    tensor_parallelism = TensorParallelism.NONE
