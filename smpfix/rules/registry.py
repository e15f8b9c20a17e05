"""Where the rules are, and their metadata for the CLI (codes, names, fix safety, job dependencies).

Rules live one module each in the family folders of ``smpfix/rules/`` (``wiring/``,
``data_pipeline/``, ...); the framework modules beside those folders are not rules.
Resolving ``--select``/``--ignore`` needs the rule codes, but importing the rules imports
LibCST (about a quarter of a second), which a run over a tree without SMP code never needs.
Every rule module is named for its rule (``smp101_optimizer_before_distributed_model.py``
defines ``SMP101``; ``tests/test_rule_index.py`` holds every module to that), so the codes
come from a listing of the family folders; the rule classes, and their names, are imported
only when a selector is a rule name or a rule actually runs. A file's analysis imports only
the rules it enables whose family can apply to the file (``smpfix.rules.scope``).
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
import re
import sys
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from smpfix.job.jobfacts import FEATURES
from smpfix.job.versions import describe_range, text
from smpfix.rules.scope import Scope, scope_of

if TYPE_CHECKING:
    from smpfix.rules.rule import Rule

_RULE_MODULE = re.compile(r"^(smp\d+)_\w+$")


@dataclass(frozen=True)
class _RuleModule:
    """A module in a family folder, ``smpfix.rules.<family>.<name>``: the code its name
    promises (``smp101_...`` -> ``SMP101``; None for another name) and its scope."""

    qualified: str
    family: str
    name: str
    code: Optional[str]
    scope: Scope

    @classmethod
    def of(cls, package: str, family: str, name: str) -> _RuleModule:
        match = _RULE_MODULE.match(name)
        code = match.group(1).upper() if match is not None else None
        return cls(f"{package}.{family}.{name}", family, name, code, scope_of(code or "", family))


@functools.cache
def _rule_modules() -> tuple[_RuleModule, ...]:
    """Every module in the family folders (listed once per process: listing costs more than
    a file's analysis spends asking for its rules)."""
    import smpfix.rules as package

    found = []
    for family in pkgutil.iter_modules(package.__path__):
        if not family.ispkg:
            continue
        path = [os.path.join(folder, family.name) for folder in package.__path__]
        for module in pkgutil.iter_modules(path):
            if not module.name.startswith("_"):
                found.append(_RuleModule.of(package.__name__, family.name, module.name))
    return tuple(found)


@functools.cache
def _rules_in(qualified: str) -> tuple[type[Rule], ...]:
    """The rules a module defines (imported once)."""
    from smpfix.rules.rule import Rule

    importlib.import_module(qualified)
    return tuple(
        value
        for value in vars(sys.modules[qualified]).values()
        if isinstance(value, type)
        and issubclass(value, Rule)
        and value.code
        and value.__module__ == qualified
    )


def all_rules() -> tuple[type[Rule], ...]:
    """Every rule defined in the family folders of ``smpfix.rules``, sorted by code.

    Subclasses defined elsewhere (a test's probe rule) are not rules of smpfix; they run only
    when passed in ``AnalysisOptions.extra_rules``.
    """
    found = {rule.code: rule for module in _rule_modules() for rule in _rules_in(module.qualified)}
    return tuple(found[code] for code in sorted(found))


def rules_for(codes: Collection[str], facts: Any) -> tuple[type[Rule], ...]:
    """The rules among ``codes`` whose family's scope admits a file with ``facts``, sorted by
    code; only their modules are imported (a module named for no code is always imported)."""
    found: dict[str, type[Rule]] = {}
    for module in _rule_modules():
        code = module.code
        if (code is not None and code not in codes) or not module.scope.admits(facts):
            continue
        for rule in _rules_in(module.qualified):
            if rule.code in codes:
                found[rule.code] = rule
    return tuple(found[code] for code in sorted(found))


def rules_of_scope(scope: Scope, codes: Collection[str]) -> tuple[type[Rule], ...]:
    """The rules among ``codes`` in the families of ``scope`` (the configuration rules, to
    check ``[tool.smpfix.job]``), importing only those."""
    found = {
        rule.code: rule
        for module in _rule_modules()
        if module.scope is scope and (module.code is None or module.code in codes)
        for rule in _rules_in(module.qualified)
        if rule.code in codes
    }
    return tuple(found[code] for code in sorted(found))


def rule_codes() -> Optional[tuple[str, ...]]:
    """Every rule code, sorted, read from the rule modules' names without importing them.

    None when some module in a family folder does not follow the naming (the caller then
    imports the rules to learn their codes).
    """
    codes = [module.code for module in _rule_modules()]
    if any(code is None for code in codes):
        return None
    return tuple(sorted(code for code in codes if code is not None))


def known_codes() -> tuple[str, ...]:
    """Every rule code, importing the rules only when some module's name does not give its code."""
    codes = rule_codes()
    return codes if codes is not None else tuple(rule.code for rule in all_rules())


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
            "finding_versions": {
                what: describe_range(*bounds) for what, bounds in rule.finding_ranges.items()
            },
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
