"""SMP104: modules that share a parameter placed on different pipeline partitions by hand."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.findings import Severity
from smpfix.base.imports import dotted_name
from smpfix.base.walker import Ancestry, children, iter_nodes
from smpfix.job.jobfacts import Tri
from smpfix.program.facts import FileFacts
from smpfix.program.model import Program
from smpfix.program.objects.creation_contexts import contexts_of
from smpfix.rules.rule import Rule, TensorParallelism

# Calls in `__init__` that run a class's own `tie_weights` (Hugging Face models call it from these).
_TIE_TRIGGERS = frozenset({"tie_weights", "post_init", "init_weights"})


@dataclass(frozen=True)
class _Placement:
    partition: int
    described: str


@dataclass(frozen=True)
class _Tie:
    """``self.<first>...`` and ``self.<second>...`` end up sharing a parameter at ``node``."""

    node: cst.CSTNode
    first: str
    second: str


@dataclass(frozen=True)
class _ModuleClass:
    name: str
    placements: dict[str, set[Optional[int]]]
    ties: tuple[_Tie, ...]


def _methods(cls: cst.ClassDef) -> dict[str, cst.FunctionDef]:
    body = cls.body.body if type(cls.body) is cst.IndentedBlock else ()
    return {s.name.value: s for s in body if type(s) is cst.FunctionDef}


def _self_name(function: cst.FunctionDef) -> Optional[str]:
    params = (*function.params.posonly_params, *function.params.params)
    return params[0].name.value if params else None


def _child_of(expr: cst.BaseExpression, self_name: str, min_parts: int) -> Optional[str]:
    """``"wte"`` for ``self.wte.weight`` (at least ``min_parts`` names after ``self``)."""
    dotted = dotted_name(expr)
    if dotted is None:
        return None
    parts = dotted.split(".")
    return parts[1] if parts[0] == self_name and len(parts) > min_parts else None


def _returned_child(function: Optional[cst.FunctionDef]) -> Optional[str]:
    """For ``def get_input_embeddings(self): return self.wte``: ``"wte"``."""
    if function is None:
        return None
    self_name = _self_name(function)
    returns = [
        n for n in iter_nodes(function.body) if type(n) is cst.Return and n.value is not None
    ]
    if len(returns) != 1 or self_name is None:
        return None
    value = returns[0].value
    assert value is not None
    return _child_of(value, self_name, 1)


class SharedParametersSplitAcrossPartitions(Rule):
    summary = (
        "Modules that share a parameter (tied embeddings) must be on the same partition under"
        " manual partitioning."
    )
    depends_on = ("PP",)
    tensor_parallelism = TensorParallelism.NONE

    @classmethod
    def precondition(cls, facts: FileFacts) -> bool:
        # Without `smp.partition`/`smp.set_partition` nothing is placed by hand.
        return any(item.feature == "PP" for item in facts.evidence)

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self._classes: list[_ModuleClass] = []
        self._set_partition: dict[str, set[int]] = {}

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        methods = _methods(node)
        init = methods.get("__init__")
        self_name = _self_name(init) if init is not None else None
        if init is None or self_name is None:
            return
        placements: dict[str, set[Optional[int]]] = {}
        ties: list[_Tie] = []
        self._scan(init.body, None, self_name, methods, placements, ties)
        if ties:
            self._classes.append(_ModuleClass(node.name.value, placements, tuple(ties)))

    def visit_Call(self, node: cst.Call) -> None:
        if self.program.facts.smp_member(node.func) != "set_partition":
            return
        module, index = argument(node, "module", 0), argument(node, "partition", 1)
        if module is None or index is None or type(module.value) is not cst.Attribute:
            return
        value = self.program.facts.literal(index.value)
        if isinstance(value, int) and not isinstance(value, bool):
            self._set_partition.setdefault(module.value.attr.value, set()).add(value)

    # -- reading one class -------------------------------------------------------------------
    def _scan(
        self,
        node: cst.CSTNode,
        partition: Optional[int],
        self_name: str,
        methods: dict[str, cst.FunctionDef],
        placements: dict[str, set[Optional[int]]],
        ties: list[_Tie],
    ) -> None:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return
        if type(node) is cst.With:
            for context in contexts_of(self.program.facts, node):
                if context.member == "partition":
                    partition = context.partition
            self._scan(node.body, partition, self_name, methods, placements, ties)
            return
        if type(node) is cst.Assign:
            self._assignment(node, partition, self_name, placements, ties)
        elif type(node) is cst.Call:
            ties.extend(self._tie_call(node, self_name, methods))
        for child in children(node):
            self._scan(child, partition, self_name, methods, placements, ties)

    def _assignment(
        self,
        node: cst.Assign,
        partition: Optional[int],
        self_name: str,
        placements: dict[str, set[Optional[int]]],
        ties: list[_Tie],
    ) -> None:
        for target in node.targets:
            child = _child_of(target.target, self_name, 0)
            if (
                child is not None
                and type(target.target) is cst.Attribute
                and dotted_name(target.target) == f"{self_name}.{child}"
            ):
                placements.setdefault(child, set()).add(partition)
            tie = _assignment_tie(node, target.target, self_name)
            if tie is not None:
                ties.append(tie)

    def _tie_call(
        self, call: cst.Call, self_name: str, methods: dict[str, cst.FunctionDef]
    ) -> list[_Tie]:
        func = call.func
        if (
            type(func) is cst.Attribute
            and dotted_name(func.value) == self_name
            and func.attr.value in _TIE_TRIGGERS
        ):
            custom = methods.get("tie_weights")
            if custom is not None:
                inner_self = _self_name(custom) or self_name
                return [
                    tie
                    for n in iter_nodes(custom.body)
                    if type(n) is cst.Assign
                    for target in n.targets
                    if (tie := _assignment_tie(n, target.target, inner_self)) is not None
                ]
            if func.attr.value == "tie_weights":
                return self._embedding_tie(call, methods)
        for arg in call.args:
            if (
                arg.keyword is not None
                and arg.keyword.value == "tie_word_embeddings"
                and self.program.facts.literal(arg.value) is True
            ):
                return self._embedding_tie(arg, methods)
        return []

    @staticmethod
    def _embedding_tie(node: cst.CSTNode, methods: dict[str, cst.FunctionDef]) -> list[_Tie]:
        """Hugging Face ties the output embeddings to the input embeddings the class returns."""
        output = _returned_child(methods.get("get_output_embeddings"))
        inputs = _returned_child(methods.get("get_input_embeddings"))
        return [_Tie(node, output, inputs)] if output and inputs and output != inputs else []

    # -- deciding ----------------------------------------------------------------------------
    def _placement(self, child: str, cls: _ModuleClass) -> Optional[_Placement]:
        moved = self._set_partition.get(child, set())
        if len(moved) == 1:
            index = next(iter(moved))
            return _Placement(index, f"placed with `smp.set_partition(..., {index})`")
        found = cls.placements.get(child, set())
        literal = next(iter(found)) if len(found) == 1 else None
        if literal is not None:
            return _Placement(literal, f"created under `smp.partition({literal})`")
        return None

    def leave_Module(self, node: cst.Module) -> None:
        auto = self.program.job.value("auto_partition")
        pp = self.feature("PP")
        if auto is True or pp.state is Tri.OFF:
            # The partition contexts are ignored with auto-partitioning, which colocates shared
            # parameters.
            return
        severity = Severity.ERROR if auto is False else Severity.WARNING
        setting = self.program.job.settings.get("auto_partition")
        if auto is False:
            source = f" ({setting.source})" if setting is not None else ""
            condition = f"`auto_partition` is False{source}, so manual partitioning puts"
        else:
            condition = "if `auto_partition` is False, manual partitioning puts"
        for cls in self._classes:
            for tie in cls.ties:
                first, second = self._placement(tie.first, cls), self._placement(tie.second, cls)
                if first is None or second is None or first.partition == second.partition:
                    continue
                where = f"tied `{tie.first}` and `{tie.second}` are on different partitions"
                title = (
                    f"{where}: one parameter on two devices"
                    if auto is False
                    else f"{where} if `auto_partition` is False"
                )
                explanation = (
                    f"In `{cls.name}`, `{self.program.code_for(tie.node)}` makes `{tie.first}`"
                    f" ({first.described}) share a parameter with `{tie.second}`"
                    f" ({second.described}); {condition} the two modules on different pipeline"
                    " stages, but a shared parameter can live on only one device. Place both on"
                    " the same partition (one `smp.partition(...)` block or `smp.set_partition`"
                    " index), or let auto-partitioning colocate them."
                )
                self.report(
                    tie.node,
                    title,
                    explanation=explanation,
                    evidence=(
                        f"`{tie.first}` is {first.described}",
                        f"`{tie.second}` is {second.described}",
                    ),
                    severity=severity,
                    job_facts=(pp,),
                )


def _assignment_tie(node: cst.Assign, target: cst.BaseExpression, self_name: str) -> Optional[_Tie]:
    """``self.lm_head.weight = self.wte.weight``: two different children, one parameter."""
    first = _child_of(target, self_name, 1)
    second = _child_of(node.value, self_name, 1)
    if first is None or second is None or first == second:
        return None
    return _Tie(node, first, second)
