"""Which files a rule family can report on, known without importing its rules.

Importing a rule module costs about a millisecond (and its family's helpers more), which a
one-file pre-commit run pays for every rule. Every rule of a family needs the same kind of
file: one that imports the library (either flavour), the PyTorch flavour (tensor and
sharded data parallelism exist only there), the TensorFlow flavour, one that states a
configuration (a launcher or an ``smp.init({...})`` dict), or any file at all. The registry keeps that scope per family folder (and for the
few rules that differ from their family, per rule), so a file's analysis imports only the
rules it can run; the analysis applies the same scope whether or
not a rule happens to be imported already, so results never depend on import order.
``tests/test_rule_index.py`` holds every rule's ``applies_to`` to its family's scope.

Nothing here imports LibCST: the registry, which the command line loads at start-up, uses it.
"""

from __future__ import annotations

import enum
from typing import Any

from smpfix.base.flavour import Flavour


class Scope(str, enum.Enum):
    """The files a family's rules may apply to (a necessary condition; ``applies_to`` decides)."""

    ANY = "any file"
    SMP = "files that import the library (either flavour)"
    PYTORCH = "files that import the PyTorch flavour"
    TENSORFLOW = "files that import the TensorFlow flavour"
    CONFIGURATION = "files that state a configuration (a launcher, or an smp.init({...}) dict)"

    def admits(self, facts: Any) -> bool:
        """Whether a file with these facts (``program.facts.FileFacts``) is in the scope."""
        if self is Scope.ANY:
            return True
        if self is Scope.SMP:
            return bool(facts.imports_smp)
        if self is Scope.PYTORCH:
            return Flavour.PYTORCH in facts.flavours
        if self is Scope.TENSORFLOW:
            return Flavour.TENSORFLOW in facts.flavours
        return bool(facts.estimator_calls) or facts.init_config_call is not None


# Family folder -> scope. A family not listed here is imported for every file (``ANY``): a new
# family works at once, and is pruned once it is listed.
FAMILY_SCOPES: dict[str, Scope] = {
    "wiring": Scope.SMP,
    "data_pipeline": Scope.SMP,
    "checkpointing": Scope.SMP,
    "step_function": Scope.SMP,
    "tensor_parallel": Scope.PYTORCH,
    "sharded_data_parallel": Scope.PYTORCH,
    "tensorflow": Scope.TENSORFLOW,
    "job_config": Scope.CONFIGURATION,
    "comments": Scope.ANY,
}


# The few rules whose scope differs from their family's (a script rule among the configuration
# rules). ``tests/test_rule_index.py`` says when a rule needs an entry here.
RULE_SCOPES: dict[str, Scope] = {
    "SMP802": Scope.SMP,  # the batch size of a loader in the script against microbatches
}


def scope_of(code: str, family: str) -> Scope:
    """A rule's scope: its own entry in ``RULE_SCOPES``, else its family's (``ANY`` when the
    family is not listed)."""
    return RULE_SCOPES.get(code) or FAMILY_SCOPES.get(family, Scope.ANY)
