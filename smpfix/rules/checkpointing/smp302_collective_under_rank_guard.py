"""SMP302: a collective that only some ranks reach, because a rank guard lets only them in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument, called_name
from smpfix.base.edits import (
    DeleteStatementLines,
    InsertStatementAfter,
    NodeEdit,
    ReplaceNode,
    UnwrapIf,
)
from smpfix.base.findings import Applicability, Severity
from smpfix.base.flavour import BOTH
from smpfix.base.walker import Ancestry, iter_nodes
from smpfix.fixes.references import callee
from smpfix.job.jobfacts import Tri
from smpfix.program.model import Program
from smpfix.program.order.collectives import GROUP_BARRIERS, FunctionCollectives
from smpfix.program.ranks.guards import RankGuard, guarded_by_early_exit, guards_of
from smpfix.program.ranks.rank_groups import GROUP_WORDS, Cut, cut, group_constant
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet, unknown_settings

_CHECKPOINT = frozenset({"save_checkpoint", "resume_from_checkpoint"})
# Methods of the wrapped model/optimizer that gather inside the model-parallel group.
_GATHERING_METHODS = frozenset({"state_dict", "cpu"})
_NAMES = _CHECKPOINT | _GATHERING_METHODS | set(GROUP_BARRIERS) | {"barrier", "allgather"}


@dataclass(frozen=True)
class Collective:
    """A call every rank of ``group`` must make; ``inner`` is the one a local function reaches."""

    call: cst.Call
    kind: str
    group: str
    inner: Optional[Collective] = None


@dataclass(frozen=True)
class PathGuard:
    """A rank test on the way to a call: in an ``if`` body, its ``else``, or after an early exit."""

    guard: RankGuard
    statement: cst.If
    branch: str


class CollectiveUnderRankGuard(Rule):
    flavours = BOTH
    summary = (
        "A collective (`smp.save_checkpoint`, `smp.barrier`, a full `state_dict()`, a step"
        " function, ...) reached only under a rank guard deadlocks the ranks left out."
    )
    fix_availability = FixAvailability.SOMETIMES_SAFE
    depends_on = ("TP", "PP")
    tensor_parallelism = TensorParallelism.DEGREE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self.wrapped = (
            self.program.facts.distributed_model_names() | self.program.facts.optimizer_names()
        )
        # Filled during the walk, completed at the end: which local functions make a
        # collective call (directly, or through the local functions they call).
        self.functions: dict[str, Collective] = {}
        self.callees: dict[str, set[str]] = {}
        self.local_calls: list[tuple[cst.Call, tuple[cst.CSTNode, ...]]] = []

    # -- what is a collective -------------------------------------------------------------------
    def _collective(self, call: cst.Call) -> Optional[Collective]:
        imported = self._imported_collective(call)
        if imported is not None:
            return imported
        name = called_name(call, self.program.facts.imports.bindings)
        if (
            name not in _NAMES
            and name not in self.program.facts.step_functions
            and name not in self.functions
        ):
            return None
        member = self.program.facts.smp_member(call.func)
        if member in _CHECKPOINT:
            return Collective(call, "checkpoint", "WORLD")
        if member == "barrier":
            group = self._group(call, 0, default="WORLD")
            return Collective(call, "barrier", group) if group is not None else None
        if member in GROUP_BARRIERS:
            return Collective(call, "barrier", GROUP_BARRIERS[member])
        if member == "allgather":
            group = self._group(call, 1, default=None)
            return Collective(call, "allgather", group) if group is not None else None
        func = call.func
        if (
            type(func) is cst.Attribute
            and func.attr.value in _GATHERING_METHODS
            and type(func.value) is cst.Name
            and func.value.value in self.wrapped
        ):
            return Collective(call, func.attr.value, "MP_GROUP")
        if type(func) is cst.Name:
            if func.value in self.program.facts.step_functions:
                return Collective(call, "step", "WORLD")
            inner = self.functions.get(func.value)
            if inner is not None:
                return Collective(call, "function", inner.group, inner)
        return None

    def _imported_collective(self, call: cst.Call) -> Optional[Collective]:
        """``evaluate(...)`` (or ``engine.evaluate(...)``) of a project module, whose function
        runs a step function, saves a checkpoint or waits at a barrier."""
        modules, facts = self.program.modules, self.program.facts
        func = call.func
        if modules is None or (type(func) is not cst.Name and type(func) is not cst.Attribute):
            return None
        if type(func) is cst.Name and func.value not in facts.imports.bindings:
            return None
        qualified = facts.qualified_name(func)
        if qualified is None or qualified.startswith(("smdistributed.", "torch.")):
            return None
        definition = modules.definition(qualified)
        if definition is None:
            return None
        linked, name = definition
        reached = linked.answer(FunctionCollectives).get(name)
        if reached is None:
            return None
        inner = Collective(reached.call, reached.kind, reached.group)
        return Collective(call, "function", reached.group, inner)

    def _group(self, call: cst.Call, position: int, default: Optional[str]) -> Optional[str]:
        arg = argument(call, "group", position)
        if arg is None:
            return default
        return group_constant(self.program.facts.smp_member(arg.value))

    # -- where it runs ----------------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if (
            type(func) is cst.Name
            and func.value in self.program.facts.functions
            and func.value not in self.program.facts.step_functions
        ):
            # A local function: whether it reaches a collective is known at the end of the file.
            caller = self._enclosing_function()
            if caller is not None and caller != func.value:
                self.callees.setdefault(caller, set()).add(func.value)
            # Guards are worked out at the end, only for functions that turn out to matter.
            self.local_calls.append((node, tuple(self.ancestry.stack)))
            return
        collective = self._collective(node)
        if collective is None:
            return
        caller = self._enclosing_function()
        if caller is not None:
            self.functions.setdefault(caller, collective)
        self._check(collective, self._path_guards(self.ancestry.stack))

    def leave_Module(self, node: cst.Module) -> None:
        for _ in range(len(self.callees)):
            grew = False
            for caller, called in self.callees.items():
                if caller in self.functions:
                    continue
                reached = next(
                    (self.functions[name] for name in sorted(called) if name in self.functions),
                    None,
                )
                if reached is not None:
                    self.functions[caller] = reached
                    grew = True
            if not grew:
                break
        for call, stack in self.local_calls:
            collective = self._collective(call)
            if collective is not None:
                self._check(collective, self._path_guards(stack))

    def _enclosing_function(self) -> Optional[str]:
        function = self.ancestry.nearest(cst.FunctionDef)
        return function.name.value if type(function) is cst.FunctionDef else None

    def _check(self, collective: Collective, path: list[PathGuard]) -> None:
        guards = [g for g in path if not self._owned_by_smp301(collective, g)]
        guards = [g for g in guards if not self._matched_in_other_branch(collective, g)]
        if not guards:
            return
        found = cut([g.guard.function for g in guards], collective.group, self.program.job)
        if found is None:
            return
        self._flag(collective, guards, found)

    def _path_guards(self, stack: Sequence[cst.CSTNode]) -> list[PathGuard]:
        """The rank guards on the way from the enclosing function to the last node of ``stack``."""
        found: list[PathGuard] = []
        for index in range(len(stack) - 2, -1, -1):
            node, child = stack[index], stack[index + 1]
            if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                break
            if type(node) is cst.If:
                if child is node.body:
                    found.extend(
                        PathGuard(guard, node, "body")
                        for guard, _ in guards_of(
                            node.test, self.program.facts, self.program.modules
                        )
                    )
                elif child is node.orelse and type(node.test) is not cst.BooleanOperation:
                    found.extend(
                        PathGuard(guard, node, "else")
                        for guard, _ in guards_of(
                            node.test, self.program.facts, self.program.modules
                        )
                    )
            ref = self.program.facts.statements.get(node)
            if ref is not None:
                found.extend(
                    PathGuard(guard, exit_if, "after")
                    for guard, exit_if in guarded_by_early_exit(ref, self.program.facts)
                )
        return found

    def _owned_by_smp301(self, collective: Collective, guard: PathGuard) -> bool:
        """A full ``state_dict()`` under ``dp_rank() == 0``: SMP301 reports it (fine without TP)."""
        if (
            collective.kind != "state_dict"
            or guard.guard.function != "dp_rank"
            or guard.branch == "else"
        ):
            return False
        return self.feature("TP").state is not Tri.OFF

    def _matched_in_other_branch(self, collective: Collective, guard: PathGuard) -> bool:
        """``if rank == 0: smp.barrier() else: smp.barrier()`` reaches the collective everywhere."""
        if guard.branch == "after" or guard.statement.orelse is None:
            return False
        other = guard.statement.orelse if guard.branch == "body" else guard.statement.body
        for node in iter_nodes(other):
            if type(node) is cst.Call:
                found = self._collective(node)
                if (
                    found is not None
                    and found.kind == collective.kind
                    and found.group == collective.group
                ):
                    return True
        return False

    # -- reporting --------------------------------------------------------------------------------
    def _what(self, collective: Collective) -> str:
        call = collective.call
        name = f"`{callee(call, self.program.module)}(...)`"
        kind = collective.kind
        if (
            kind == "checkpoint"
            and self.program.facts.smp_member(call.func) == "resume_from_checkpoint"
        ):
            return (
                f"{name} is a collective: every rank must call it (each loads its own partition,"
                " and the ranks wait for each other at barriers)"
            )
        if kind == "checkpoint":
            return (
                f"{name} is a collective: every rank must call it (it gathers the checkpoint tag"
                " from all ranks and waits at barriers), and it picks the ranks that write by"
                " itself"
            )
        if kind == "barrier":
            return f"{name} waits for {GROUP_WORDS[collective.group]}"
        if kind == "allgather":
            return f"{name} gathers from {GROUP_WORDS[collective.group]}"
        if kind in _GATHERING_METHODS:
            return (
                f"{name} on the wrapped object gathers its partitions from the tensor- and"
                " pipeline-parallel peers of the model replica"
            )
        if kind == "step":
            return (
                f"{name} is an `smp.step` function: it runs the pipeline and the gradient allreduce"
                " with the other ranks"
            )
        assert collective.inner is not None
        inner = collective.inner
        while inner.inner is not None:
            inner = inner.inner
        return (
            f"{name} reaches `{callee(inner.call, self.program.module)}(...)`, a collective over"
            f" {GROUP_WORDS[inner.group]}"
        )

    def _where(self, guard: PathGuard) -> str:
        test = self.program.code_for(guard.statement.test)
        if guard.branch == "body":
            return f"`{test}`"
        if guard.branch == "else":
            return f"`{test}` is false (the `else` branch)"
        return f"`{test}` is false (past the early exit)"

    def _flag(self, collective: Collective, guards: Sequence[PathGuard], found: Cut) -> None:
        where = " and ".join(dict.fromkeys(self._where(g) for g in guards))
        condition = found.condition()
        consequence = (
            "the ranks the guard leaves out never reach it, so the ranks inside wait for them and"
            " the job hangs"
        )
        if condition:
            consequence += f" ({condition})"
        if collective.kind in _GATHERING_METHODS:
            advice = (
                "Call it where `rdp_rank() == 0` (every rank of one model replica), or on every"
                " rank."
            )
        else:
            advice = "Call it on every rank, outside the guard."
        name = snippet(f"{callee(collective.call, self.program.module)}(...)", 32)
        title = (
            f"{name} runs only under a rank guard: the job hangs"
            if not condition
            else f"{name} under a rank guard hangs if {unknown_settings(found.states)} is on"
        )
        what = self._what(collective)
        explanation = (
            f"{what[:1].upper()}{what[1:]}, but here it only runs where {where}: {consequence}."
            f" {advice}"
        )
        if collective.kind == "checkpoint":
            severity = Severity.ERROR
        else:
            severity = Severity.ERROR if found.definite else Severity.WARNING
        fix = self._fix(collective, guards) if collective.kind == "checkpoint" else None
        self.report(
            collective.call,
            title,
            explanation=explanation,
            severity=severity,
            fix=fix,
            job_facts=found.states,
        )

    # -- the fix ----------------------------------------------------------------------------------
    def _fix(self, collective: Collective, guards: Sequence[PathGuard]) -> Optional[PendingFix]:
        """Unwrap the only guard around a lone checkpoint call; otherwise an unsafe rewrite.

        Safe: the ``if`` has no ``else``, tests nothing but ranks, and its body is just the
        call. Unsafe: the test also checks something else (only the rank tests go), or the
        body does more (the call moves after the ``if``).
        """
        statements = {id(g.statement) for g in guards}
        if len(statements) != 1 or guards[0].branch != "body":
            return None
        guard_if = guards[0].statement
        if guard_if.orelse is not None or self.program.facts.statements.get(guard_if) is None:
            return None
        line = self._statement_of(collective.call, guard_if.body)
        if line is None or _has_multiline_string(line):
            return None
        conjuncts = _conjuncts(guard_if.test)
        rest = [c for c in conjuncts if not guards_of(c, self.program.facts, self.program.modules)]
        if len(guard_if.body.body) == 1:
            if not rest:
                return PendingFix(
                    Applicability.SAFE,
                    "Call it on every rank (remove the rank guard)",
                    (UnwrapIf(guard_if),),
                )
            test = " and ".join(self.program.code_for(c) for c in rest)
            edits: tuple[NodeEdit, ...] = (ReplaceNode(guard_if.test, test),)
            return PendingFix(Applicability.UNSAFE, "Drop the rank test from the guard", edits)
        if type(line) is not cst.SimpleStatementLine:
            return None
        moved = (
            DeleteStatementLines(line),
            InsertStatementAfter(guard_if, line, self.program.module),
        )
        return PendingFix(
            Applicability.UNSAFE, "Move the call out of the rank guard, after it", moved
        )

    @staticmethod
    def _statement_of(call: cst.Call, body: cst.BaseSuite) -> Optional[cst.CSTNode]:
        """The body statement that is exactly ``call`` (or ``x = call``)."""
        if type(body) is cst.SimpleStatementSuite:
            only = body.body[0] if len(body.body) == 1 else None
            return only if isinstance(only, (cst.Expr, cst.Assign)) and only.value is call else None
        for statement in body.body:
            if type(statement) is cst.SimpleStatementLine and len(statement.body) == 1:
                small = statement.body[0]
                if isinstance(small, (cst.Expr, cst.Assign)) and small.value is call:
                    return statement
        return None


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.And:
        return _conjuncts(test.left) + _conjuncts(test.right)
    return [test]


def _has_multiline_string(node: cst.CSTNode) -> bool:
    strings = (cst.SimpleString, cst.FormattedString)
    return any(
        isinstance(n, strings) and "\n" in cst.Module(body=[]).code_for_node(n)
        for n in iter_nodes(node)
    )
