"""Where the rules are, and their metadata for the CLI (codes, names, fix safety, job dependencies).

Rules live one module each in the family folders of ``smpfix/rules/`` (``wiring/``,
``data_pipeline/``, ...); the framework modules beside those folders are not rules.
Resolving ``--select``/``--ignore`` needs the rule codes, but importing the rules imports
LibCST (about a quarter of a second), which a run over a tree without SMP code never needs.
Every rule module is named for its rule (``smp101_optimizer_before_distributed_model.py``
defines ``SMP101``; ``tests/test_rule_index.py`` holds every module to that), so the codes
come from a listing of the family folders; the rule classes, and their names, are imported
only when a selector is a rule name or a rule actually runs.
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Optional

from smpfix.job.jobfacts import FEATURES
from smpfix.job.versions import describe_range, text

if TYPE_CHECKING:
    from smpfix.rules.rule import Rule

_RULE_MODULE = re.compile(r"^(smp\d+)_\w+$")


def _rule_modules() -> Iterator[tuple[str, str]]:
    """``(qualified module name, module name)`` of every module in the family folders."""
    import smpfix.rules as package

    for family in pkgutil.iter_modules(package.__path__):
        if not family.ispkg:
            continue
        path = [os.path.join(folder, family.name) for folder in package.__path__]
        for module in pkgutil.iter_modules(path):
            yield f"{package.__name__}.{family.name}.{module.name}", module.name


@functools.cache
def _import_rule_modules() -> None:
    """Import every rule module (once: listing the folders costs more than a file's analysis
    asks for all the rules)."""
    for qualified, _ in _rule_modules():
        importlib.import_module(qualified)


def all_rules() -> tuple[type[Rule], ...]:
    """Every rule defined in the family folders of ``smpfix.rules``, sorted by code.

    Subclasses defined elsewhere (a test's probe rule) are not rules of smpfix; they run only
    when passed in ``AnalysisOptions.extra_rules``.
    """
    from smpfix.rules.rule import Rule

    _import_rule_modules()
    found: dict[str, type[Rule]] = {}
    pending = list(Rule.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.code and cls.__module__.startswith("smpfix.rules."):
            found[cls.code] = cls
    return tuple(found[code] for code in sorted(found))


def rule_codes() -> Optional[tuple[str, ...]]:
    """Every rule code, sorted, read from the rule modules' names without importing them.

    None when some module in a family folder does not follow the naming (the caller then
    imports the rules to learn their codes).
    """
    codes = []
    for _, name in _rule_modules():
        match = _RULE_MODULE.match(name)
        if match is None:
            if not name.startswith("_"):
                return None
            continue
        codes.append(match.group(1).upper())
    return tuple(sorted(codes))


def rule_names() -> dict[str, str]:
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
    return [
        {
            "code": rule.code,
            "name": rule.name,
            "summary": rule.summary,
            "fix": rule.fix_availability.value,
            "default_severity": rule.default_severity.value,
            "depends_on": [FEATURES[key].setting for key in rule.depends_on],
            "since": None if rule.since is None else text(rule.since),
            "until": None if rule.until is None else text(rule.until),
            "versions": _versions(rule),
            "finding_versions": {what: describe_range(*bounds) for what, bounds in rule.finding_ranges.items()},
            "flavours": sorted(flavour.value for flavour in rule.flavours),
        }
        for rule in all_rules()
    ]


def _versions(rule: type[Rule]) -> str:
    """``all``, ``1.13+``, or with the narrower ranges of some findings: ``all; fp16_params 1.10+``."""
    parts = [describe_range(rule.since, rule.until)]
    parts += [f"{what} {describe_range(*bounds)}" for what, bounds in rule.finding_ranges.items()]
    return "; ".join(parts)


def find_rule(key: str) -> Optional[dict[str, Any]]:
    lowered = key.strip().lower()
    for row in rule_table():
        if row["code"].lower() == lowered or row["name"] == lowered:
            return row
    return None
