"""SMP502: ``smp.mp_size() * smp.dp_size()`` taken for the world size under tensor parallelism."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

import libcst as cst

from smpfix.base.edits import NodeEdit, ReplaceNode
from smpfix.base.findings import Applicability
from smpfix.fixes.references import smp_reference
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet


def _factors(node: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """The operands of a chain of multiplications, ``a * (b * c)`` -> a, b, c."""
    if type(node) is cst.BinaryOperation and type(node.operator) is cst.Multiply:
        yield from _factors(node.left)
        yield from _factors(node.right)
    else:
        yield node


class MpDpSizeIdentityUnderTp(Rule):
    summary = (
        "`smp.mp_size() * smp.dp_size()` is not the world size under tensor parallelism; `pp_size()"
        " * dp_size()` is."
    )
    fix_availability = FixAvailability.UNSAFE
    depends_on = ("TP",)
    tensor_parallelism = TensorParallelism.DEGREE

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if type(node.operator) is not cst.Multiply:
            return
        parent = self.ancestry.parent()
        if type(parent) is cst.BinaryOperation and type(parent.operator) is cst.Multiply:
            return  # the outermost multiplication of a chain looks at all of it
        factors = list(_factors(node))
        sizes = [self.program.facts.smp_rank_function(factor) for factor in factors]
        if "mp_size" not in sizes or "dp_size" not in sizes:
            return
        tp = self.feature("TP", at=node)
        severity = self.severity_when(tp)
        if severity is None:
            return
        mp_factor = factors[sizes.index("mp_size")]
        spelled = self.program.code_for(node)
        spelled = spelled if len(spelled) <= 60 and "\n" not in spelled else "this product"
        condition = (
            "under tensor parallelism" if tp.state.value == "on" else "if tensor parallelism is on"
        )
        self.report(
            node,
            f"{snippet(self.program.code_for(node), 30)} is `tp_size()` times the world size"
            f" {condition}",
            explanation=(
                "The tensor-parallel group is part of both the model-parallel and the"
                " data-parallel group, so `mp_size() * dp_size()` is `tp_size()` times the world"
                " size. If the pipeline degree is meant, use `pp_size()` (`pp_size() * dp_size()`"
                " and `mp_size() * rdp_size()` both equal `smp.size()`)."
            ),
            evidence=(f"`{spelled}` multiplies `mp_size()` by `dp_size()`",),
            severity=severity,
            fix=self._fix(mp_factor),
            job_facts=(tp,),
        )

    def _fix(self, factor: cst.BaseExpression) -> Optional[PendingFix]:
        """``mp_size`` -> ``pp_size`` in this product only; unsafe, since the intent decides."""
        edits: list[NodeEdit] = []
        if type(factor) is cst.Call and type(factor.func) is cst.Attribute:
            edits.append(ReplaceNode(factor.func.attr, "pp_size"))
        else:
            reference = smp_reference(self.program.file, "pp_size")
            if reference is None:
                return None
            edits.extend(reference.edits)
            target = factor.func if type(factor) is cst.Call else factor
            text = reference.text if type(factor) is cst.Call else f"{reference.text}()"
            edits.append(ReplaceNode(target, text))
        return PendingFix(
            Applicability.UNSAFE,
            "Use `pp_size()` instead of `mp_size()` in this product",
            tuple(edits),
        )
