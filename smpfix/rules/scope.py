"""Which files a rule, or a whole rule family, can report on, known without importing its rules.

Importing a rule module costs about a millisecond (and its family's helpers more), which a
one-file pre-commit run pays for every rule. Every rule of a family needs the same kind of
file: one that imports the library (either flavour), the PyTorch flavour (tensor and
sharded data parallelism exist only there), the TensorFlow flavour, one that states a
configuration (a launcher or an ``smp.init({...})`` dict), or any file at all. Each family
package declares that scope in its ``__init__.py`` (``SCOPE = FileScope.SMP``), which the
registry reads without importing the rule modules, so a file's analysis imports only the
rules it can run. A rule's own ``scope`` (``Rule.scope``, its family's unless it declares a
narrower one) must lie within its family's: ``Rule.__init_subclass__`` refuses the class
otherwise, so the family's scope is a necessary condition of every rule in it.

Nothing here imports LibCST: the registry, which the command line loads at start-up, uses it.
"""

from __future__ import annotations

import enum
from types import ModuleType
from typing import Any

from smpfix.base.flavour import BOTH, ONLY_PYTORCH, ONLY_TENSORFLOW, Flavour


class Library(str, enum.Enum):
    """Which library's jobs a rule checks: SMP v1 (``smdistributed.modelparallel``), SMP v2
    (``torch.sagemaker``), or either (the rules about mixing the two up). The analysis runs a
    rule on a job of its library only (``smpfix.job.smp_v2`` decides a job's library)."""

    V1 = "SMP v1"
    V2 = "SMP v2"
    EITHER = "SMP v1 or v2"

    def checks(self, v2_job: bool) -> bool:
        """Whether a rule of this library runs on a job of SMP v2 (``v2_job``) or v1."""
        return self is Library.EITHER or (self is Library.V2) == v2_job


class FileScope(str, enum.Enum):
    """The files a rule, or a family's rules, may apply to (a necessary condition)."""

    ANY = "any file"
    SMP = "files that import the library (either flavour)"
    PYTORCH = "files that import the PyTorch flavour"
    TENSORFLOW = "files that import the TensorFlow flavour"
    CONFIGURATION = "files that state a configuration (a launcher, or an smp.init({...}) dict)"
    SMP_V2 = "files that import SMP v2 (torch.sagemaker)"
    EITHER_LIBRARY = (
        "files that import SMP v1 or v2, or state a configuration (a launcher, an init dict)"
    )

    def admits(self, facts: Any) -> bool:
        """Whether a file with these facts (``program.facts.FileFacts``) is in the scope."""
        if self is FileScope.ANY:
            return True
        if self is FileScope.SMP:
            return bool(facts.imports_smp)
        if self is FileScope.PYTORCH:
            return Flavour.PYTORCH in facts.flavours
        if self is FileScope.TENSORFLOW:
            return Flavour.TENSORFLOW in facts.flavours
        if self is FileScope.SMP_V2:
            return bool(facts.imports_smp_v2)
        configuration = bool(facts.estimator_calls) or facts.init_config_call is not None
        if self is FileScope.EITHER_LIBRARY:
            return configuration or bool(facts.imports_smp) or bool(facts.imports_smp_v2)
        return configuration

    def within(self, other: FileScope) -> bool:
        """Whether every file this scope admits, ``other`` admits too."""
        return (
            self is other
            or other is FileScope.ANY
            or (other is FileScope.SMP and self in (FileScope.PYTORCH, FileScope.TENSORFLOW))
            or (other is FileScope.EITHER_LIBRARY and self is not FileScope.ANY)
        )

    @property
    def of_scripts(self) -> bool:
        """Scripts that import the library: a rule of such a scope runs on the scripts of its
        flavours (a configuration rule judges each configuration's flavour instead)."""
        return self in (FileScope.SMP, FileScope.PYTORCH, FileScope.TENSORFLOW)

    @property
    def flavours(self) -> frozenset[Flavour]:
        """The flavours a rule of this scope may declare (SMP v2 has PyTorch alone)."""
        if self in (FileScope.PYTORCH, FileScope.SMP_V2):
            return ONLY_PYTORCH
        if self is FileScope.TENSORFLOW:
            return ONLY_TENSORFLOW
        return BOTH


def declared_scope(family: ModuleType) -> FileScope:
    """The scope a family package declares (``SCOPE`` in its ``__init__.py``)."""
    scope = getattr(family, "SCOPE", None)
    if not isinstance(scope, FileScope):
        raise TypeError(
            f"the rule family {family.__name__} must declare the files its rules can report on: "
            "SCOPE = FileScope.<...> (smpfix.rules.scope) in its __init__.py"
        )
    return scope
