"""SMP102: weights loaded on the wrong side of ``smp.DistributedModel`` for the job's parallelism.

Under tensor parallelism the wrap replaces layers with distributed modules that do not
inherit weights, so weights must be loaded *after* it; under sharded data parallelism the
library (1.12) cannot load a full checkpoint into the wrapped model and tells users to load
it into the original model *before* the wrap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument, bound_names, names_in
from smpfix.base.edits import DeleteStatementLines, InsertStatementAfter
from smpfix.base.findings import Applicability, Severity
from smpfix.base.imports import dotted_name
from smpfix.base.parents import CodeScope
from smpfix.base.walker import Ancestry
from smpfix.job.jobfacts import FeatureState, Tri
from smpfix.job.versions import leading
from smpfix.program.facts import Wrap
from smpfix.program.model import Program
from smpfix.program.names import StatementRef
from smpfix.program.objects.hf_models import pretrained_model_call
from smpfix.program.paths.conditions import expression_key
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet
from smpfix.rules.wiring._wording import sentence


@dataclass(frozen=True)
class _StateLoad:
    """A ``X.load_state_dict(...)`` call and what it loads into."""

    call: cst.Call
    root: Optional[str]
    direct: bool
    line: Optional[cst.SimpleStatementLine]
    scope: Optional[CodeScope]


def _root(expr: cst.BaseExpression) -> Optional[str]:
    while isinstance(expr, (cst.Attribute, cst.Call, cst.Subscript)):
        expr = expr.func if isinstance(expr, cst.Call) else expr.value
    return expr.value if type(expr) is cst.Name else None


# SMP 1.15 loads full checkpoints into a model sharded by sharded data parallelism.
BEFORE_FULL_LOADS_UNDER_SDP = (1, 14)


class WeightsLoadedBeforeWrap(Rule):
    summary = (
        "Under tensor parallelism load weights after `smp.DistributedModel`; under sharded data"
        " parallelism load a full checkpoint before it."
    )
    fix_availability = FixAvailability.UNSAFE
    depends_on = ("TP", "SDP")
    tensor_parallelism = TensorParallelism.MARKING
    finding_ranges = {"SDP full load after wrap": (None, BEFORE_FULL_LOADS_UNDER_SDP)}

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self._loads: list[_StateLoad] = []
        self._full_resumes: list[cst.Call] = []
        self._resumes: list[cst.Call] = []

    # -- collecting --------------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        member = self.program.facts.smp_member(node.func)
        if member == "resume_from_checkpoint":
            self._resumes.append(node)
            partial = argument(node, "partial", 2)
            if partial is not None and self.program.facts.literal(partial.value) is False:
                self._full_resumes.append(node)
        func = node.func
        if type(func) is cst.Attribute and func.attr.value == "load_state_dict" and member is None:
            line = self.ancestry.nearest(cst.SimpleStatementLine)
            scope = self.ancestry.nearest(cst.FunctionDef) or self.program.module
            self._loads.append(
                _StateLoad(
                    node,
                    _root(func.value),
                    type(func.value) is cst.Name,
                    line if type(line) is cst.SimpleStatementLine else None,
                    scope if isinstance(scope, (cst.FunctionDef, cst.Module)) else None,
                )
            )

    # -- tensor parallelism: loads before the wrap -------------------------------------------
    def leave_Module(self, node: cst.Module) -> None:
        for wrap in self.program.facts.distributed_models:
            if wrap.where is not None:
                self._check_loads_before(wrap, wrap.where)
        self._check_full_loads_after()

    def _check_loads_before(self, wrap: Wrap, where: StatementRef) -> None:
        model = wrap.argument_name
        if model is None:
            inline = (
                pretrained_model_call(self.program.facts, wrap.argument)
                if wrap.argument is not None
                else None
            )
            if inline is not None:
                self._flag_before(wrap, None, inline, None)
            return
        for load in self._loads:
            if (
                load.root == model
                and load.scope is where.scope
                and self.program.order.runs_before(load.call, wrap.call)
            ):
                self._flag_before(wrap, model, load.call, load)
        assert wrap.argument is not None
        for pretrained in self._pretrained_reaching(model, wrap.argument, 0):
            self._flag_before(wrap, model, pretrained, None)

    def _pretrained_reaching(self, name: str, use: cst.CSTNode, depth: int) -> list[cst.Call]:
        """``from_pretrained(...)`` calls whose model reaches ``use`` of ``name``: through the
        assignments that reach it, and method chains on the name (``model = model.half()``)."""
        found: list[cst.Call] = []
        for assignment in self.program.names.reaching(name, use).assignments:
            pretrained = pretrained_model_call(self.program.facts, assignment.value)
            if pretrained is not None:
                found.append(pretrained)
                continue
            root = assignment.value
            while type(root) is cst.Call and type(root.func) is cst.Attribute:
                root = root.func.value
            if type(root) is cst.Name and root is not assignment.value and depth < 4:
                found.extend(self._pretrained_reaching(root.value, root, depth + 1))
        return found

    def _flag_before(
        self, wrap: Wrap, model: Optional[str], load_node: cst.Call, load: Optional[_StateLoad]
    ) -> None:
        replaced = self.program.tp_replacement
        tp, sdp = self.feature("TP", at=load_node), self.feature("SDP", at=load_node)
        if replaced.state is Tri.OFF:
            # Nothing marks modules for tensor parallelism: the wrap keeps the loaded weights.
            return
        if self.program.job.value("_match_weights") is True:
            # The internal `_match_weights` setting has the library slice and copy the original
            # weights into the distributed modules (library 1.12.1 `TensorParallelismRegistry.
            # distribute`).
            return
        if replaced.state is Tri.UNKNOWN and (
            tp.state is Tri.OFF or (tp.state is Tri.UNKNOWN and sdp.state is Tri.ON)
        ):
            # Without TP nothing is re-initialised; under SDP loading before the wrap is the advice.
            return
        if self._reloaded_after(wrap, load_node):
            # The documented fine-tuning order: the pretrained state dict, taken (and
            # translated) before the wrap, is loaded into the wrapped model after it.
            return
        marked = self._inside_marking(load_node)
        if (
            replaced.state is Tri.ON
            and sdp.state is Tri.ON
            and tp.state is not Tri.ON
            and not marked
        ):
            # Under SDP alone a full load before the wrap is the library's advice, unless the
            # load happens inside the marking itself (``from_pretrained`` under
            # ``smp.model_creation(tensor_parallelism=True)``): those modules are replaced.
            return
        severity = Severity.ERROR if replaced.state is Tri.ON else Severity.WARNING
        named = f"`{model}`" if model is not None else "the model"
        if load is not None:
            code = self.program.code_for(load_node)
            title = f"{snippet(code, 24)} loads weights before the wrap"
            lead = f"`{code}` loads weights into {named} before `smp.DistributedModel` wraps it"
            advice = (
                "Load them into the wrapped model after the wrap (`model.load_state_dict(...)`"
                " there translates Hugging Face state dicts), or use"
                " `smp.resume_from_checkpoint(path, partial=False)` (SMP 1.10 and later)."
            )
        else:
            subject = f"`{model}`" if model is not None else "the model"
            title = f"{subject} built with `from_pretrained(...)` before the wrap"
            lead = (
                f"{sentence(subject)} is built with `from_pretrained(...)`, weights included,"
                " before `smp.DistributedModel` wraps it"
            )
            advice = (
                "Build it with `from_config(...)` under `smp.tensor_parallelism()`, wrap it, then"
                " load the weights into the wrapped model (`model.load_state_dict(...)`, which"
                " translates Hugging Face state dicts) or use `smp.resume_from_checkpoint(path,"
                " partial=False)` (SMP 1.10 and later)."
            )
        if marked and tp.state is not Tri.ON:
            advice += (
                " Marking replaces modules at any `tensor_parallel_degree`, 1 included; under"
                " sharded data parallelism, SMP 1.15 loads a full checkpoint into the wrapped"
                " model (the official GPT-J example saves the pretrained weights with"
                " `torch.save` first, then calls `smp.resume_from_checkpoint(..., partial=False)`"
                " after the wrap)."
            )
        if replaced.state is Tri.ON:
            title += (
                ": TP layers start from random weights"
                if tp.state is Tri.ON or not marked
                else ": marked layers start from random weights"
            )
            condition = f", and {replaced.condition()}:"
        elif tp.state is Tri.ON:
            title += ": lost if it marks layers for TP"
            condition = f"; {tp.condition()}, and {replaced.condition()},"
        else:
            title += ": lost if tensor parallelism is on"
            condition = f"; {tp.condition()} and the program marks the model's modules for it,"
        why = (
            " the wrap replaces its layers with tensor-parallel modules that are initialised afresh"
            " and do not inherit the loaded weights, so training silently starts from random"
            " weights."
        )
        fix = self._fix(wrap, load) if load is not None else None
        facts = (
            (replaced.feature_state(),)
            if replaced.state is Tri.ON and tp.state is not Tri.ON
            else (tp,)
        )
        self.report(
            load_node,
            title,
            explanation=f"{lead}{condition}{why} {advice}",
            severity=severity,
            fix=fix,
            job_facts=facts,
        )

    def _reloaded_after(self, wrap: Wrap, load_node: cst.CSTNode) -> bool:
        """Weights go into the wrapped model after the wrap whenever ``load_node`` ran before
        it: ``model.load_state_dict(...)`` on the name the wrap assigned (and nothing else
        reaches it there), or ``smp.resume_from_checkpoint(...)``, in the wrap's function and
        under no condition that ``load_node`` does not share (a reload under ``if
        args.resume:`` leaves a fresh run with the replaced, random layers)."""
        where = wrap.where
        if where is None or wrap.target is None:
            return False
        shared = self._conditions(load_node)
        reloads = [
            load.call
            for load in self._loads
            if load.direct and load.root == wrap.target and self._holds_wrap(wrap, load.call)
        ]
        reloads += [
            resume
            for resume in self._resumes
            if self.program.names.scope_of(resume) is where.scope
            and self.program.order.runs_before(wrap.call, resume)
        ]
        return any(self._conditions(reload) <= shared for reload in reloads)

    def _holds_wrap(self, wrap: Wrap, load: cst.Call) -> bool:
        """``load``'s receiver is the wrapped model: only the wrap's assignment reaches it."""
        func = load.func
        assert type(func) is cst.Attribute
        reaching = self.program.names.reaching(wrap.target or "", func.value)
        return (
            bool(reaching.assignments)
            and not reaching.opaque
            and not reaching.others
            and all(assignment.value is wrap.call for assignment in reaching.assignments)
        )

    def _conditions(self, node: cst.CSTNode) -> frozenset[tuple[str, bool]]:
        """The conditions ``node`` runs under in its function, as (test, side) pairs."""
        return frozenset(
            (expression_key(requirement.test), requirement.holds)
            for requirement in self.program.branches.requirements(node)
        )

    def _inside_marking(self, node: cst.CSTNode) -> bool:
        """``node`` runs inside ``with smp.tensor_parallelism():`` or
        ``with smp.model_creation(tensor_parallelism=...)`` whose value this job makes true."""
        facts = self.program.facts
        for ancestor in self.program.parents.ancestors(node):
            if type(ancestor) is not cst.With:
                continue
            for item in ancestor.items:
                call = item.item
                if type(call) is not cst.Call:
                    continue
                member = facts.smp_member(call.func)
                if member == "tensor_parallelism":
                    enabled = argument(call, "enabled", 0)
                elif member == "model_creation":
                    enabled = argument(call, "tensor_parallelism", 0)
                    if enabled is None:
                        continue
                else:
                    continue
                if enabled is None:
                    return True
                truth = self.program.conditions.truth(enabled.value)
                if truth.known and truth.value:
                    return True
        return False

    def _fix(self, wrap: Wrap, load: _StateLoad) -> Optional[PendingFix]:
        """Move ``model.load_state_dict(...)`` to just after the wrap, onto the wrapped name."""
        where = wrap.where
        line = load.line
        if (
            where is None
            or wrap.target is None
            or line is None
            or not load.direct
            or load.root is None
        ):
            return None
        ref = self.program.facts.statement_of(line)
        if (
            ref is None
            or ref.block is not where.block
            or not isinstance(ref.block, (cst.Module, cst.IndentedBlock))
        ):
            return None
        if (
            len(line.body) != 1
            or type(line.body[0]) is not cst.Expr
            or line.body[0].value is not load.call
        ):
            return None
        inputs = (
            set().union(*(names_in(arg.value) for arg in load.call.args))
            if load.call.args
            else set()
        )
        if load.root in inputs:
            return None
        between: Sequence[cst.BaseStatement] = ref.block.body[ref.index + 1 : where.index]
        rebound: set[str] = set().union(*(bound_names(s) for s in between)) if between else set()
        if inputs & rebound:
            # Moving the load past a new value of what it reads would load something else.
            return None
        func = load.call.func
        assert type(func) is cst.Attribute
        renamed = load.call.with_changes(func=func.with_changes(value=cst.Name(wrap.target)))
        moved = line.with_changes(body=[line.body[0].with_changes(value=renamed)])
        return PendingFix(
            Applicability.UNSAFE,
            f"Load the weights into `{wrap.target}` after `smp.DistributedModel`",
            (
                DeleteStatementLines(line),
                InsertStatementAfter(where.statement, moved, self.program.module),
            ),
        )

    # -- sharded data parallelism: full checkpoints after the wrap ---------------------------
    def _check_full_loads_after(self) -> None:
        sdp, tp = self.feature("SDP"), self.feature("TP")
        if sdp.state is not Tri.ON or tp.state is Tri.ON:
            # With TP on as well, weights must be loaded after the wrap (and 1.15 loads full
            # checkpoints there).
            return
        for call in self._full_resumes:
            code = self.program.code_for(call)
            self._flag_after(
                call,
                f"{snippet(code, 30)} resumes from a full checkpoint under sharded data"
                " parallelism",
                f"`{code}` resumes from a full checkpoint",
                sdp,
            )
        wrapped = {w.target: w for w in self.program.facts.distributed_models if w.target}
        for load in self._loads:
            wrap = wrapped.get(load.root or "")
            if (
                wrap is None
                or not self.program.order.runs_before(wrap.call, load.call)
                or not load.call.args
            ):
                continue
            if self._is_full_state(load.call.args[0].value, load.scope):
                code = self.program.code_for(load.call)
                self._flag_after(
                    load.call,
                    f"{snippet(code, 30)} loads a full state dict into the sharded model",
                    f"`{code}` loads a full state dict into the wrapped model",
                    sdp,
                )

    def _is_full_state(
        self, expr: cst.BaseExpression, scope: Optional[CodeScope], depth: int = 0
    ) -> bool:
        """A whole-model state dict: ``torch.load(...)``, ``smp.load(..., partial=False)``,
        ``x.state_dict()``, a translation."""
        while type(expr) is cst.Subscript:
            expr = expr.value
        if type(expr) is cst.Name and depth < 3:
            return any(
                self._is_full_state(a.value, scope, depth + 1)
                for a in self.program.names.reaching(expr.value, expr).assignments
            )
        if type(expr) is not cst.Call:
            return False
        if self.program.facts.qualified_name(expr.func) == "torch.load":
            return True
        if self.program.facts.smp_member(expr.func) == "load":
            partial = argument(expr, "partial")
            return partial is not None and self.program.facts.literal(partial.value) is False
        name = dotted_name(expr.func) or ""
        last = name.rsplit(".", 1)[-1]
        return last == "state_dict" or last.startswith("translate_")

    def _flag_after(self, node: cst.Call, title: str, lead: str, sdp: FeatureState) -> None:
        explanation = (
            f"{lead}, and {sdp.condition()}."
            f" {leading(self.version_condition(until=BEFORE_FULL_LOADS_UNDER_SDP))} the library"
            " shards the wrapped model's parameters and, before 1.15, accepts only partial"
            " checkpoints there (SMPValidationError in 1.12). Load the full state dict into the"
            " original model with `load_state_dict` before `smp.DistributedModel`, as the"
            " library's own error message advises, or resume from a partial checkpoint saved with"
            " `smp.save_checkpoint` (or move to SMP 1.15, which loads full checkpoints there)."
        )
        self.report(
            node,
            title,
            explanation=explanation,
            severity=Severity.ERROR,
            job_facts=(sdp,),
            until=BEFORE_FULL_LOADS_UNDER_SDP,
        )
