"""Does the program mark modules for tensor parallelism: yes, provably no, or unknown.

``smp.DistributedModel`` replaces a module with its distributed counterpart only when the
program marked it (library 1.12.1 ``DistributedModel._replace_tp_counterparts`` asks
``module_manager.should_tensor_parallelize``, and never looks at the degree): inside
``with smp.tensor_parallelism():``, ``with smp.model_creation(tensor_parallelism=...)`` with a
value that is not literally false, through ``smp.set_tensor_parallelism(module)``, or by
building ``smp.nn.Distributed*`` modules directly. So:

- the harm of replaced modules (an optimizer holding the old parameters, weights loaded
  before the wrap lost, identical slices from one seed) needs a marking, whatever
  ``tensor_parallel_degree`` says: a script whose model is built in code smpfix can see, and
  that marks nothing there or in the project modules it imports, has none (OFF);
- a marking that is on replaces modules even at degree 1 (the official GPT-2 example creates
  its model with ``tensor_parallelism=smp.tp_size() > 1 or args.use_distributed_transformer > 0``,
  whose argument defaults to 1): ON;
- a model from code smpfix cannot see (a function parameter, an import from outside the
  checked paths), or a marking whose value smpfix cannot fold: UNKNOWN.

Rules about rank topology (``dp_rank`` guards, size identities) do not ask this: they depend
on the degree alone.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.imports import library_member
from smpfix.job.jobfacts import FEATURES, FeatureState, Tri
from smpfix.program.facts import FileFacts
from smpfix.program.objects.wrapped_model import model_class, wrapped_constructions
from smpfix.program.paths.conditions import Conditions
from smpfix.program.project.local_modules import LocalModules
from smpfix.program.project.parsed_file import ParsedFile

# Libraries whose model constructors smpfix knows never call the library's marking API.
_MODEL_LIBRARIES = frozenset(
    {"torch", "torchvision", "transformers", "timm", "torchtext", "torchaudio", "diffusers"}
)
_MAX_MODULE_DEPTH = 2

_SPELLED = {
    "tensor_parallelism": "`smp.tensor_parallelism()`",
    "model_creation": "`smp.model_creation(tensor_parallelism=...)`",
    "set_tensor_parallelism": "`smp.set_tensor_parallelism(...)`",
}


@dataclass(frozen=True)
class Marking:
    """One construct that marks modules, with the expression that enables it (None: always)."""

    description: str
    node: cst.CSTNode
    enabled: Optional[cst.BaseExpression]
    file: str


@dataclass(frozen=True)
class Replacement:
    """Whether ``smp.DistributedModel`` replaces modules with distributed ones in this program."""

    state: Tri
    source: str

    def condition(self) -> str:
        """Words for a message: "... marks modules for tensor parallelism (...)" or "if ..."."""
        if self.state is Tri.ON:
            return f"the program marks modules for tensor parallelism ({self.source})"
        if self.state is Tri.OFF:
            return f"the program marks no module for tensor parallelism ({self.source})"
        return f"if the program marks modules for tensor parallelism ({self.source})"

    def feature_state(self) -> FeatureState:
        """The same answer as a job fact, for the report's list of facts it relied on."""
        return FeatureState(FEATURES["TP"], self.state, self.source)


def markings(parsed: ParsedFile, file: str) -> list[Marking]:
    """The marking constructs in one file whose value is not literally false (``file``: how
    messages name it)."""
    facts = parsed.facts
    found: list[Marking] = []
    for call in facts.library_calls(*_SPELLED):
        member = facts.smp_member(call.func)
        if member == "tensor_parallelism":
            enabled = argument(call, "enabled", 0)
            found.append(Marking(_SPELLED[member], call, enabled.value if enabled else None, file))
        elif member == "model_creation":
            enabled = argument(call, "tensor_parallelism", 0)
            if enabled is not None:
                found.append(Marking(_SPELLED[member], call, enabled.value, file))
        elif member == "set_tensor_parallelism":
            enabled = argument(call, "enabled", 1)
            found.append(Marking(_SPELLED[member], call, enabled.value if enabled else None, file))
    # Every script importing a helper module asks this of it: searched once per tree.
    distributed = parsed.answer(DistributedModuleUse)
    if distributed.node is not None:
        found.append(Marking(f"`smp.{distributed.member}`", distributed.node, None, file))
    return [
        marking
        for marking in found
        if marking.enabled is None or facts.literal(marking.enabled) is not False
    ]


@dataclass(frozen=True)
class DistributedModuleUse:
    """The first use of one of the library's distributed modules (``smp.nn.DistributedLinear``)
    in a file, with its member name (None when the file uses none)."""

    node: Optional[cst.CSTNode] = None
    member: str = ""

    @classmethod
    def of_file(cls, file: ParsedFile) -> DistributedModuleUse:
        found = _distributed_module(file)
        return cls(*found) if found is not None else cls()


def _distributed_module(file: ParsedFile) -> Optional[tuple[cst.CSTNode, str]]:
    imports = file.facts.imports
    if not imports.imports_module("smdistributed.modelparallel"):
        return None
    # A plain name is the library's module only when an import binds it (``DistributedLinear``
    # itself, not an alias); attributes are tested by their last word first, over the index's
    # list: nearly none passes.
    names = {
        local
        for local, qualified in imports.bindings.items()
        if _distributed_word(local)
        and (library_member(qualified) or "").startswith("nn.Distributed")
    }
    order, by_type = file.index.order, file.index.by_type()
    candidates = (
        [
            position
            for position in by_type.get(cst.Name, ())
            if order[position].value in names  # type: ignore[attr-defined]
        ]
        if names
        else []
    )
    candidates.extend(
        position
        for position in by_type.get(cst.Attribute, ())
        if _distributed_word(order[position].attr.value)  # type: ignore[attr-defined]
    )
    for position in sorted(candidates):
        node = order[position]
        assert type(node) is cst.Name or type(node) is cst.Attribute
        member = file.facts.smp_member(node)
        if member is not None and member.startswith("nn.Distributed"):
            return node, member
    return None


def _distributed_word(last: str) -> bool:
    return last.startswith("Distributed") and last not in (
        "DistributedModel",
        "DistributedOptimizer",
    )


def module_replacement(
    file: ParsedFile, modules: Optional[LocalModules], conditions: Conditions
) -> Replacement:
    """The answer for the script ``file`` (see the module docstring)."""
    facts, module, path = file.facts, file.module, file.path
    own = markings(file, _shown(path))
    others = [
        m
        for linked in _imported(facts, modules, path)
        for m in markings(linked, _shown(linked.path))
    ]
    undecided: list[str] = []
    for marking in others:
        if marking.enabled is None:
            return Replacement(Tri.ON, f"{marking.description} in {marking.file}")
        # Another file's condition: its arguments are not this script's to fold.
        undecided.append(f"{marking.description} in {marking.file}")
    for marking in own:
        if marking.enabled is None:
            return Replacement(Tri.ON, f"{marking.description} in {marking.file}")
        truth = conditions.truth(marking.enabled)
        code = " ".join(module.code_for_node(marking.enabled).split())
        if truth.known and truth.value:
            how = f": {truth.how[0]}" if truth.how else ""
            return Replacement(
                Tri.ON, f"{marking.description} in {marking.file} with `{code}` true{how}"
            )
        if not truth.known:
            undecided.append(f"{marking.description} with `{code}`")
    if undecided:
        return Replacement(Tri.UNKNOWN, f"{undecided[0]} may be on")
    hidden = _hidden_model(file, modules)
    if hidden is not None:
        return Replacement(Tri.UNKNOWN, f"the model comes from {hidden}, which smpfix cannot see")
    if not facts.distributed_models:
        return Replacement(Tri.UNKNOWN, "this file does not build the model it trains")
    return Replacement(
        Tri.OFF,
        "nothing in this script or the project modules it imports calls `smp.tensor_parallelism`,"
        " `smp.model_creation(tensor_parallelism=...)`, `smp.set_tensor_parallelism` or"
        " `smp.nn.Distributed*`",
    )


def _hidden_model(file: ParsedFile, modules: Optional[LocalModules]) -> Optional[str]:
    """How a wrapped model escapes smpfix (a parameter, an unknown import), or None if all are
    visible."""
    facts = file.facts
    for wrap in facts.distributed_models:
        built = wrapped_constructions(facts, wrap)
        if not built:
            argument_code = (
                cst.Module(body=[]).code_for_node(wrap.argument)
                if wrap.argument is not None
                else "?"
            )
            return f"`{argument_code}`"
        for construction in built:
            if not _visible(file, construction.call, modules):
                return f"`{cst.Module(body=[]).code_for_node(construction.call.func)}(...)`"
    return None


def _visible(file: ParsedFile, call: cst.Call, modules: Optional[LocalModules]) -> bool:
    """A constructor smpfix can see into, or one from a model library that never marks modules."""
    facts = file.facts
    if model_class(file, call, modules) is not None:
        return True
    func = call.func
    if type(func) is cst.Attribute and func.attr.value in (
        "from_pretrained",
        "from_config",
        "_from_config",
    ):
        func = func.value
    if type(func) is cst.Name and (func.value in facts.functions or func.value in facts.classes):
        return True
    qualified = facts.qualified_name(func)
    if qualified is None:
        return False
    if qualified.split(".", 1)[0] in _MODEL_LIBRARIES:
        return True
    return modules is not None and modules.definition(qualified) is not None


def _imported(facts: FileFacts, modules: Optional[LocalModules], path: str) -> Iterator[ParsedFile]:
    """The project modules the script imports, and the ones those import (two levels)."""
    if modules is None:
        return
    seen: set[str] = {path}
    frontier: Sequence[tuple[FileFacts, str]] = [(facts, path)]
    for _ in range(_MAX_MODULE_DEPTH):
        following: list[tuple[FileFacts, str]] = []
        for owner_facts, owner in frontier:
            for linked in modules.for_importer(owner).imported_modules(owner_facts):
                if linked.path not in seen:
                    seen.add(linked.path)
                    following.append((linked.facts, linked.path))
                    yield linked
        frontier = following


def _shown(path: str) -> str:
    return os.path.basename(path) if path else "this script"
