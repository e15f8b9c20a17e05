"""SMP504: a ``torch.distributed`` reduction over every rank, averaged by the data-parallel size."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument, bound_names, has_star_kwargs
from smpfix.base.edits import NodeEdit, ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.base.walker import iter_nodes
from smpfix.fixes.arguments import append_arguments
from smpfix.fixes.references import smp_reference
from smpfix.job.jobfacts import FeatureState, Tri
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet

# Reductions whose result a script averages, and the position of their `group` parameter.
_REDUCTIONS = {"torch.distributed.all_reduce": 2, "torch.distributed.reduce": 3}
# Collectives that need torch.distributed's default process group.
_COLLECTIVES = frozenset(
    {
        "all_reduce",
        "reduce",
        "all_gather",
        "all_gather_object",
        "reduce_scatter",
        "broadcast",
        "broadcast_object_list",
        "barrier",
        "gather",
        "scatter",
        "all_to_all",
    }
)
_GROUP_OF = {"dp_size": "get_dp_process_group", "rdp_size": "get_rdp_process_group"}


@dataclass(frozen=True)
class _Average:
    """The division that turns the world sum into a mean: where, and by which size."""

    node: cst.CSTNode
    size: str


class CollectiveOnWorldGroup(Rule):
    summary = (
        "A `torch.distributed` reduction over all ranks divided by `smp.dp_size()`/`rdp_size()`, or"
        " any collective without ddp."
    )
    fix_availability = FixAvailability.UNSAFE
    depends_on = ("PP", "TP", "DDP")
    tensor_parallelism = TensorParallelism.DEGREE

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.program.facts.qualified_name(node.func) or ""
        if not qualified.startswith("torch.distributed."):
            return
        if self._without_process_group(node, qualified):
            return
        position = _REDUCTIONS.get(qualified)
        if (
            position is None
            or not node.args
            or node.args[0].keyword is not None
            or has_star_kwargs(node)
        ):
            return
        group = argument(node, "group", position)
        if group is not None and not self._world(group.value):
            return
        tensor = node.args[0].value
        if type(tensor) is not cst.Name:
            return
        average = self._average_after(node, tensor.value)
        if average is not None:
            self._flag(node, tensor.value, group, average)

    # -- torch.distributed without a process group -----------------------------------------
    def _without_process_group(self, call: cst.Call, qualified: str) -> bool:
        """A collective when the job has ``ddp`` off and the script starts no process group."""
        if qualified.rsplit(".", 1)[-1] not in _COLLECTIVES:
            return False
        if self._starts_process_group():
            return False
        ddp = self.feature("DDP", call)
        if ddp.state is not Tri.OFF:
            return False
        self.report(
            call,
            f"{snippet(self.program.code_for(call.func) + '(...)')} needs the default process"
            " group, but ddp is off",
            explanation=(
                "torch.distributed's default process group is created by the library only with"
                ' `"ddp": True`, so the call raises "Default process group has not been'
                ' initialized". Turn on `ddp` in the modelparallel parameters, or use the'
                " library's own collectives (`smp.allgather`, `smp.broadcast`, `smp.barrier`)."
            ),
            severity=Severity.ERROR,
            job_facts=(ddp,),
        )
        return True

    def _starts_process_group(self) -> bool:
        return bool(self.program.facts.calls_of("torch.distributed.init_process_group"))

    # -- the average after a world reduction -------------------------------------------------
    def _world(self, expr: cst.BaseExpression) -> bool:
        """``group=None``, ``dist.group.WORLD`` or ``smp.get_world_process_group()``."""
        if self.program.facts.literal(expr) is None:
            return True
        if self.program.facts.qualified_name(expr) == "torch.distributed.group.WORLD":
            return True
        return (
            type(expr) is cst.Call
            and self.program.facts.smp_member(expr.func) == "get_world_process_group"
        )

    def _average_after(self, call: cst.Call, name: str) -> Optional[_Average]:
        """The first division of ``name`` (or of a value read from it) by ``smp.dp_size()`` or
        ``smp.rdp_size()`` after ``call`` in the same function."""
        statement = self.ancestry.nearest(cst.SimpleStatementLine)
        ref = self.program.facts.statement_of(statement) if statement is not None else None
        if ref is None:
            return None
        for later in ref.block.body[ref.index + 1 :]:  # type: ignore[union-attr]
            for node in iter_nodes(later):
                size = self._division_by_size(node, name)
                if size is not None:
                    return _Average(node, size)
            if name in bound_names(later):
                return None  # `name` holds something else from here on
        return None

    def _division_by_size(self, node: cst.CSTNode, name: str) -> Optional[str]:
        divisor: Optional[cst.BaseExpression] = None
        if (
            type(node) is cst.BinaryOperation
            and type(node.operator) is cst.Divide
            and _reads(node.left, name)
        ):
            divisor = node.right
        elif (
            type(node) is cst.AugAssign
            and type(node.operator) is cst.DivideAssign
            and _reads(node.target, name)
        ):
            divisor = node.value
        elif (
            type(node) is cst.Call
            and type(node.func) is cst.Attribute
            and node.func.attr.value in ("div", "div_")
            and _reads(node.func.value, name)
            and node.args
        ):
            divisor = node.args[0].value
        if divisor is None:
            return None
        size = self.program.facts.smp_rank_function(divisor)
        return size if size in _GROUP_OF else None

    def _flag(self, call: cst.Call, name: str, group: Optional[cst.Arg], average: _Average) -> None:
        pp, tp = self.feature("PP", call), self.feature("TP", call)
        states = (pp,) if average.size == "dp_size" else (pp, tp)
        on = [s for s in states if s.state is Tri.ON]
        unknown = [s for s in states if s.state is Tri.UNKNOWN]
        if not on and not unknown:
            # one pipeline stage (and, for rdp_size, no tensor parallelism): the world is the group
            return
        spelled = self.program.code_for(call.func)
        size = f"smp.{average.size}()"
        if average.size == "dp_size":
            why = (
                "every pipeline stage holds a copy of a value returned from the step, so the sum"
                " over all ranks counts each data-parallel replica `pp_size` times"
            )
        else:
            why = (
                "the sum over all ranks counts every pipeline stage's copy and every"
                " tensor-parallel rank, while `rdp_size()` counts only the model replicas"
            )
        if on:
            title = f"all-reduced `{name}` is divided by `{size}`: the mean comes out too large"
        else:
            short = (
                "pipeline or tensor parallelism" if len(unknown) > 1 else unknown[0].feature.title
            )
            title = f"all-reduced `{name}` is averaged wrongly if {short} is on"
        self.report(
            call,
            title,
            explanation=(
                f"`{spelled}({name})` sums `{name}` over all ranks, but the result is divided by"
                f" `{size}`: {why}, and the mean comes out too large {_condition(on, unknown)}."
                f" Reduce over the matching group, `group=smp.{_GROUP_OF[average.size]}()` (as the"
                " official GPT-2 example does), or divide by `smp.size()` for a mean over all"
                " ranks."
            ),
            severity=Severity.ERROR if on else Severity.WARNING,
            fix=self._fix(call, group, average.size),
            job_facts=tuple(on or unknown),
        )

    def _fix(self, call: cst.Call, group: Optional[cst.Arg], size: str) -> Optional[PendingFix]:
        reference = smp_reference(self.program.file, _GROUP_OF[size])
        if reference is None:
            return None
        value = f"{reference.text}()"
        edits: list[NodeEdit] = list(reference.edits)
        if group is not None:
            edits.append(ReplaceNode(group.value, value))
        else:
            added = append_arguments(call, [f"group={value}"])
            if added is None:
                return None
            edits.append(added)
        return PendingFix(Applicability.UNSAFE, f"Reduce over `{value}`", tuple(edits))


def _reads(expr: cst.CSTNode, name: str) -> bool:
    """``name`` itself, or a value read from it (``loss.item()``, ``loss[0]``)."""
    current = expr
    while True:
        if type(current) is cst.Name:
            return current.value == name
        if type(current) is cst.Attribute:
            current = current.value
        elif type(current) is cst.Call:
            current = current.func
        elif type(current) is cst.Subscript:
            current = current.value
        else:
            return False


def _condition(on: list[FeatureState], unknown: list[FeatureState]) -> str:
    if on:
        return "because " + " and ".join(state.condition() for state in on)
    titles = " or ".join(state.feature.title for state in unknown)
    return f"if {titles} is enabled"
