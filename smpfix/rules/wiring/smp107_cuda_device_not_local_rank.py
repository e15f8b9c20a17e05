"""SMP107: the GPU is chosen by a rank other than ``smp.local_rank()``, or hard-coded."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.edits import NodeEdit, ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.fixes.references import smp_reference
from smpfix.program.facts import RANK_FUNCTIONS
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet
from smpfix.rules.wiring._device_fallback import in_single_process_fallback

_CUDA_INDEX = re.compile(r"cuda:\d+")
# Calls whose argument is a device *index*: "cuda" without one is an error there.
_SET_DEVICE = frozenset({"torch.cuda.set_device", "torch.cuda.device"})
# The last name of every callee the device checks look at (imported names are resolved as well).
_DEVICE_CALL_NAMES = frozenset({"set_device", "device", "cuda", "to"})
_ENV_GETTERS = frozenset({"os.environ.get", "os.getenv"})
# Keywords that take a device in torch and Hugging Face APIs.
_DEVICE_KEYWORDS = frozenset({"device", "map_location"})


@dataclass(frozen=True)
class _WrongIndex:
    """A device index that is not the process's local rank: which kind, and how to name it."""

    kind: str  # "rank", "env" or "literal"
    described: str


class CudaDeviceNotLocalRank(Rule):
    summary = (
        "Each process must use GPU `smp.local_rank()`; a global rank, `LOCAL_RANK` or a hard-coded"
        " `cuda:0` picks the wrong one."
    )
    fix_availability = FixAvailability.SOMETIMES_SAFE
    tensor_parallelism = TensorParallelism.NONE

    # -- device indices in device APIs -------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        spelled = (
            func.attr.value
            if type(func) is cst.Attribute
            else func.value
            if type(func) is cst.Name
            else None
        )
        imported = type(func) is cst.Name and func.value in self.program.facts.imports.bindings
        if spelled not in _DEVICE_CALL_NAMES and not imported:
            self._check_index(node, argument(node, "device"))
            return
        qualified = self.program.facts.qualified_name(func)
        if qualified in _SET_DEVICE:
            self._check_index(node, argument(node, "device", 0), set_device=True)
        elif qualified == "torch.device":
            self._check_torch_device(node)
        elif qualified is None and type(func) is cst.Attribute and func.attr.value == "cuda":
            self._check_index(node, argument(node, "device", 0), remove_literal=True)
        elif qualified is None and type(func) is cst.Attribute and func.attr.value == "to":
            self._check_index(node, argument(node, "device", 0))
        else:
            self._check_index(node, argument(node, "device"))

    def _check_torch_device(self, call: cst.Call) -> None:
        first = argument(call, "type", 0)
        if first is None:
            return
        if self.program.facts.literal(first.value) == "cuda":
            self._check_index(call, argument(call, "index", 1), remove_literal=True)
        elif type(first.value) is cst.Integer:
            self._check_index(call, first)

    def _check_index(
        self,
        call: cst.Call,
        arg: Optional[cst.Arg],
        *,
        set_device: bool = False,
        remove_literal: bool = False,
    ) -> None:
        if arg is None:
            return
        wrong = self._classify(arg.value)
        if wrong is None:
            return
        shown = self.program.code_for(arg.value)
        if wrong.kind == "literal":
            if in_single_process_fallback(self.program, call):
                return
            message = (
                f"`{self.program.code_for(call)}` hard-codes GPU {shown}: every process on a host"
                " (one per GPU) uses that GPU, while the library placed this process's model on"
                f" GPU `smp.local_rank()`, so GPU {shown} runs out of memory or tensors end up on"
                " the wrong device. "
                + (
                    "Use `smp.local_rank()`."
                    if set_device
                    else (
                        'Use the current device (`"cuda"`, `.cuda()`), which `smp.init()` sets to'
                        " `smp.local_rank()`."
                    )
                )
            )
            self.report(
                arg.value,
                f"{snippet(self.program.code_for(call), 40)} hard-codes GPU {shown} for every"
                " process on the host",
                explanation=message,
                fix=self._literal_index_fix(call, arg, set_device, remove_literal),
            )
            return
        self.report(
            arg.value,
            self._rank_title(call, wrong),
            explanation=self._rank_message(call, arg.value, wrong),
            fix=self._local_rank_fix(call, arg.value, wrong),
        )

    def _classify(self, expr: cst.BaseExpression) -> Optional[_WrongIndex]:
        function = self.program.facts.smp_rank_function(expr)
        if function in RANK_FUNCTIONS and function != "local_rank":
            return _WrongIndex("rank", f"`smp.{function}()`")
        if self._local_rank_env(expr):
            return _WrongIndex("env", "the `LOCAL_RANK` environment variable")
        if type(expr) is cst.Integer:
            return _WrongIndex("literal", expr.value)
        return None

    def _local_rank_env(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """``int(os.environ["LOCAL_RANK"])`` (or ``.get``/``getenv``), or a name assigned once from
        it."""
        if type(expr) is cst.Name and depth == 0:
            assignment = self.program.facts.names.assignment(expr.value, expr)
            return assignment is not None and self._local_rank_env(assignment.value, depth + 1)
        if not (
            type(expr) is cst.Call
            and type(expr.func) is cst.Name
            and expr.func.value == "int"
            and expr.args
        ):
            return False
        inner = expr.args[0].value
        if (
            type(inner) is cst.Subscript
            and self.program.facts.qualified_name(inner.value) == "os.environ"
        ):
            index = inner.slice[0].slice if len(inner.slice) == 1 else None
            return (
                type(index) is cst.Index and self.program.facts.literal(index.value) == "LOCAL_RANK"
            )
        if (
            type(inner) is cst.Call
            and self.program.facts.qualified_name(inner.func) in _ENV_GETTERS
            and inner.args
        ):
            return self.program.facts.literal(inner.args[0].value) == "LOCAL_RANK"
        return False

    def _rank_title(self, call: cst.Call, wrong: _WrongIndex) -> str:
        shown = snippet(self.program.code_for(call), 30)
        if wrong.kind == "rank":
            return f"{shown} picks the GPU by {wrong.described}, not by rank on the host"
        return f"{shown} picks the GPU from `LOCAL_RANK`, which MPI does not set"

    def _rank_message(self, call: cst.Call, expr: cst.BaseExpression, wrong: _WrongIndex) -> str:
        shown = self.program.code_for(call)
        source = (
            wrong.described
            if type(expr) is cst.Call
            else f"`{self.program.code_for(expr)}` ({wrong.described})"
        )
        if wrong.kind == "rank":
            why = (
                f"`{shown}` selects the GPU by {source}, which is not an index on this host: on the"
                " second node of an 8-GPU cluster `smp.rank()` is 8 or more, and the data,"
                " pipeline and tensor parallel ranks repeat across hosts, so processes pick a"
                " missing GPU or share one"
            )
        else:
            why = (
                f"`{shown}` selects the GPU from {source}, which torchrun sets but the MPI launcher"
                " that SageMaker uses for the library does not (Open MPI exports"
                " OMPI_COMM_WORLD_LOCAL_RANK), so this raises KeyError or falls back to one GPU"
                " for every process"
            )
        return f"{why}. Use `smp.local_rank()`, the index of this process's GPU on its host."

    # -- device strings ----------------------------------------------------------------------
    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if "cuda:" not in node.value:
            return
        value = node.evaluated_value
        if not isinstance(value, str) or not _CUDA_INDEX.fullmatch(value):
            return
        if in_single_process_fallback(self.program, node):
            return
        parent = self.ancestry.parent(1)
        call = self.ancestry.parent(2)
        if type(parent) is cst.Arg and type(call) is cst.Call:
            direct = (
                parent.keyword is None
                and self._is_device_api(call)
                or (parent.keyword is not None and parent.keyword.value in _DEVICE_KEYWORDS)
            )
            set_device = self.program.facts.qualified_name(call.func) in _SET_DEVICE
            self._report_string(node, Severity.ERROR if direct else Severity.WARNING, set_device)
        elif type(parent) is cst.DictElement and parent.value is node:
            # A `map_location={"cuda:1": "cuda:0"}` target is a device; its keys name saved
            # locations.
            holder = self.ancestry.parent(3)
            mapped = (
                type(holder) is cst.Arg
                and holder.keyword is not None
                and holder.keyword.value in _DEVICE_KEYWORDS
            )
            self._report_string(node, Severity.ERROR if mapped else Severity.WARNING, False)
        elif isinstance(parent, (cst.Assign, cst.AnnAssign, cst.IfExp, cst.Param, cst.Return)):
            self._report_string(node, Severity.WARNING, False)

    def _is_device_api(self, call: cst.Call) -> bool:
        qualified = self.program.facts.qualified_name(call.func)
        if qualified in _SET_DEVICE or qualified == "torch.device":
            return True
        return (
            qualified is None
            and type(call.func) is cst.Attribute
            and call.func.attr.value in ("to", "cuda")
        )

    def _report_string(self, node: cst.SimpleString, severity: Severity, set_device: bool) -> None:
        shown = node.value
        stored = severity is Severity.WARNING
        where = "is stored as a device" if stored else "hard-codes a GPU"
        message = (
            f"{shown} {where}: every process on a host (one per GPU) would use that GPU, while the"
            " library placed this process's model on GPU `smp.local_rank()`, so that GPU runs out"
            " of memory or tensors end up on the wrong device. "
            + (
                "Use `smp.local_rank()`."
                if set_device
                else (
                    'Use `"cuda"`, the current device, which `smp.init()` sets to'
                    " `smp.local_rank()`."
                )
            )
        )
        if set_device:
            fix = self._local_rank_fix(
                None, node, _WrongIndex("literal", shown), applicability=Applicability.UNSAFE
            )
        else:
            replacement = f"{node.prefix}{node.quote}cuda{node.quote}"
            fix = PendingFix(
                Applicability.UNSAFE,
                f"Use {replacement}, the current device",
                (ReplaceNode(node, replacement),),
            )
        title = (
            f"{snippet(shown, 20)} is stored as a device: one GPU for every process on the host"
            if stored
            else f"{snippet(shown, 20)} hard-codes one GPU for every process on the host"
        )
        self.report(node, title, explanation=message, severity=severity, fix=fix)

    # -- fixes -------------------------------------------------------------------------------
    def _local_rank_fix(
        self,
        call: Optional[cst.Call],
        expr: cst.BaseExpression,
        wrong: _WrongIndex,
        applicability: Optional[Applicability] = None,
    ) -> Optional[PendingFix]:
        reference = smp_reference(self.program.file, "local_rank")
        if reference is None:
            return None
        if applicability is None:
            applicability = Applicability.SAFE
            if wrong.kind == "env" and call is not None and self._before_init(call):
                # `smp.local_rank()` needs the library initialised; the env var did not.
                applicability = Applicability.UNSAFE
        edits: tuple[NodeEdit, ...] = (*reference.edits, ReplaceNode(expr, f"{reference.text}()"))
        return PendingFix(applicability, f"Use `{reference.text}()`", edits)

    def _before_init(self, call: cst.Call) -> bool:
        inits = self.program.facts.smp_init_calls
        return not inits or all(self.program.order.runs_before(call, init) for init in inits)

    def _literal_index_fix(
        self, call: cst.Call, arg: cst.Arg, set_device: bool, remove_literal: bool
    ) -> Optional[PendingFix]:
        if set_device:
            return self._local_rank_fix(
                call, arg.value, _WrongIndex("literal", ""), applicability=Applicability.UNSAFE
            )
        if remove_literal:
            remaining = [a for a in call.args if a is not arg]
            if remaining:
                last = remaining[-1]
                remaining[-1] = last.with_changes(comma=cst.MaybeSentinel.DEFAULT)
            shortened = self.program.code_for(call.with_changes(args=remaining))
            return PendingFix(
                Applicability.UNSAFE,
                f"Use `{shortened}`, the current device",
                (ReplaceNode(call, shortened),),
            )
        value = '"cuda"'
        return PendingFix(
            Applicability.UNSAFE, 'Use "cuda", the current device', (ReplaceNode(arg.value, value),)
        )
