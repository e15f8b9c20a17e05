"""Where the rules are, and their metadata for the CLI (codes, names, fix safety, job dependencies).

Rules live one module each in the family folders of ``smpfix/rules/`` (``wiring/``,
``data_pipeline/``, ...); the framework modules beside those folders are not rules, and
neither are a family's helper modules (``_dataset_sizes.py``). Resolving ``--select``/``--ignore``
needs the rule codes and names, but importing the rules imports LibCST (about a quarter of a
second), which a run over a tree without SMP code never needs. A rule module's name is its
rule's code and name (``smp101_optimizer_before_distributed_model.py`` defines ``SMP101``,
``optimizer-before-distributed-model``; ``Rule.__init_subclass__`` gives the class both), so
they come from a listing of the family folders; the rule classes are imported only when a
rule actually runs or its other metadata is asked for. A file's analysis imports only the
rules it enables whose family's scope admits the file (``smpfix.rules.scope``).
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
import re
import sys
from collections.abc import Collection
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Optional

from smpfix.job.jobfacts import FEATURES
from smpfix.job.versions import describe_range, text
from smpfix.rules.scope import FileScope, Library, declared_scope

if TYPE_CHECKING:
    from smpfix.rules.rule import Rule

_PACKAGE = "smpfix.rules"
_RULE_MODULE = re.compile(r"^(smp\d+)_(\w+)$")


@dataclass(frozen=True)
class RuleModule:
    """A rule module, ``smpfix.rules.<family>.smpNNN_<words>``, and what its name says: the
    rule's code (``SMPNNN``) and name (the words, hyphenated)."""

    qualified: str
    family: str
    code: str
    rule_name: str


def rule_module(qualified: str) -> Optional[RuleModule]:
    """The rule module ``qualified`` names; None for any other module (the framework's, a
    family's helpers, a test's)."""
    package, _, rest = qualified.rpartition(".")
    parent, _, family = package.rpartition(".")
    match = _RULE_MODULE.match(rest)
    if parent != _PACKAGE or match is None:
        return None
    return RuleModule(qualified, family, match.group(1).upper(), match.group(2).replace("_", "-"))


def _own_module(qualified: str) -> ModuleType:
    """A family package or rule module of smpfix's own, by a name listed from its own package
    (the one import of a module named at run time)."""
    importlib.import_module(qualified)
    return sys.modules[qualified]


def family_scope(family: str) -> FileScope:
    """The scope the family package ``smpfix.rules.<family>`` declares (importing the package
    alone, none of its rules)."""
    return declared_scope(_own_module(f"{_PACKAGE}.{family}"))


@functools.cache
def _family_scopes() -> dict[str, FileScope]:
    """Each family folder and its scope."""
    import smpfix.rules as package

    return {
        family.name: family_scope(family.name)
        for family in pkgutil.iter_modules(package.__path__)
        if family.ispkg
    }


@functools.cache
def _rule_modules() -> tuple[RuleModule, ...]:
    """Every rule module in the family folders (listed once per process: listing costs more
    than a file's analysis spends asking for its rules). Any other module there must be a
    helper, named with a leading underscore."""
    import smpfix.rules as package

    found = []
    for family in _family_scopes():
        path = [os.path.join(folder, family) for folder in package.__path__]
        for module in pkgutil.iter_modules(path):
            if module.name.startswith("_"):
                continue
            qualified = f"{_PACKAGE}.{family}.{module.name}"
            listed = rule_module(qualified)
            if listed is None:
                raise TypeError(
                    f"{qualified}: a module in a rule family's folder is a rule, named "
                    "smp<number>_<rule_name>.py, or a helper, named _<name>.py"
                )
            found.append(listed)
    return tuple(found)


@functools.cache
def _rule_in(qualified: str) -> type[Rule]:
    """The rule a rule module defines (imported once): exactly one."""
    from smpfix.rules.rule import Rule

    found = [
        value
        for value in vars(_own_module(qualified)).values()
        if isinstance(value, type) and issubclass(value, Rule) and value.__module__ == qualified
    ]
    if len(found) != 1:
        raise TypeError(f"{qualified} must define one rule (a subclass of Rule), not {len(found)}")
    return found[0]


def all_rules() -> tuple[type[Rule], ...]:
    """Every rule defined in the family folders of ``smpfix.rules``, sorted by code.

    Subclasses defined elsewhere (a test's probe rule) are not rules of smpfix; they run only
    when passed in ``AnalysisOptions.extra_rules``.
    """
    return tuple(_rule_in(module.qualified) for module in sorted(_rule_modules(), key=_code))


def _code(module: RuleModule) -> str:
    return module.code


def rule_of(code: str) -> Optional[type[Rule]]:
    """The rule with this code, importing its module alone; None for an unknown code."""
    for module in _rule_modules():
        if module.code == code:
            return _rule_in(module.qualified)
    return None


def rules_for(codes: Collection[str], facts: Any) -> tuple[type[Rule], ...]:
    """The rules among ``codes`` whose family's scope admits a file with ``facts``, sorted by
    code; only their modules are imported."""
    scopes = _family_scopes()
    return tuple(
        _rule_in(module.qualified)
        for module in sorted(_rule_modules(), key=_code)
        if module.code in codes and scopes[module.family].admits(facts)
    )


def rules_of_scope(scope: FileScope, codes: Collection[str]) -> tuple[type[Rule], ...]:
    """The rules among ``codes`` whose scope is ``scope`` (the configuration rules, to check
    ``[tool.smpfix.job]``), importing only those of the families that can hold such rules."""
    scopes = _family_scopes()
    found = (
        _rule_in(module.qualified)
        for module in sorted(_rule_modules(), key=_code)
        if module.code in codes and scope.within(scopes[module.family])
    )
    return tuple(rule for rule in found if rule.scope is scope)


def rule_codes() -> tuple[str, ...]:
    """Every rule code, sorted, read from the rule modules' names without importing them."""
    return tuple(sorted(module.code for module in _rule_modules()))


def rule_names() -> dict[str, str]:
    """Rule code -> rule name, sorted by code, read from the rule modules' names."""
    return {module.code: module.rule_name for module in sorted(_rule_modules(), key=_code)}


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
    """``all``, ``1.13+``, or with the narrower ranges of some findings: ``all; fp16_params
    1.10+``."""
    both = rule.library is Library.EITHER and rule.since is None and rule.until is None
    parts = ["1.x, 2.x" if both else describe_range(rule.since, rule.until)]
    parts += [f"{what} {describe_range(*bounds)}" for what, bounds in rule.finding_ranges.items()]
    return "; ".join(parts)


def find_rule(key: str) -> Optional[dict[str, Any]]:
    lowered = key.strip().lower()
    for row in rule_table():
        if row["code"].lower() == lowered or row["name"] == lowered:
            return row
    return None
