"""Rule metadata for the CLI (codes, names, fix safety, job dependencies) without running them.

Resolving ``--select``/``--ignore`` needs the rule codes, but importing the rules imports
LibCST (about a quarter of a second), which a run over a tree without SMP code never needs.
Every rule module is named for its rule (``smp101_optimizer_before_distributed_model.py``
defines ``SMP101``; ``tests/test_rule_index.py`` holds every module to that), so the codes
come from a listing of ``smpfix/rules/``; the rule classes, and their names, are imported
only when a selector is a rule name or a rule actually runs.
"""

from __future__ import annotations

import pkgutil
import re
from collections.abc import Iterator, Mapping
from typing import Any, Optional

from smpfix.jobfacts import FEATURES

_RULE_MODULE = re.compile(r"^(smp\d+)_\w+$")


def rule_codes() -> Optional[tuple[str, ...]]:
    """Every rule code, sorted, read from the rule modules' names without importing them.

    None when some module in ``smpfix/rules/`` does not follow the naming (the caller then
    imports the rules to learn their codes).
    """
    import smpfix.rules as package

    codes = []
    for module in pkgutil.iter_modules(package.__path__):
        match = _RULE_MODULE.match(module.name)
        if match is None:
            if not module.name.startswith("_"):
                return None
            continue
        codes.append(match.group(1).upper())
    return tuple(sorted(codes))


def rule_names() -> dict[str, str]:
    from smpfix.rule import all_rules

    return {rule.code: rule.name for rule in all_rules()}


class RuleNames(Mapping[str, str]):
    """Rule code -> rule name, where asking for the codes does not import the rules.

    Iteration, ``len`` and ``in`` use :func:`rule_codes`; looking up a name imports the rules
    once (per instance, which is also what a worker process receives).
    """

    def __init__(self) -> None:
        self._codes = rule_codes()
        self._names: Optional[dict[str, str]] = None

    def _loaded(self) -> dict[str, str]:
        if self._names is None:
            self._names = rule_names()
        return self._names

    def codes(self) -> tuple[str, ...]:
        return self._codes if self._codes is not None else tuple(self._loaded())

    def __getitem__(self, code: str) -> str:
        return self._loaded()[code]

    def __iter__(self) -> Iterator[str]:
        return iter(self.codes())

    def __len__(self) -> int:
        return len(self.codes())

    def __contains__(self, code: object) -> bool:
        return code in self.codes()


def rule_table() -> list[dict[str, Any]]:
    from smpfix.rule import all_rules

    return [
        {
            "code": rule.code,
            "name": rule.name,
            "summary": rule.summary,
            "fix": rule.fix_availability.value,
            "default_severity": rule.default_severity.value,
            "depends_on": [FEATURES[key].setting for key in rule.depends_on],
        }
        for rule in all_rules()
    ]


def find_rule(key: str) -> Optional[dict[str, Any]]:
    lowered = key.strip().lower()
    for row in rule_table():
        if row["code"].lower() == lowered or row["name"] == lowered:
            return row
    return None
