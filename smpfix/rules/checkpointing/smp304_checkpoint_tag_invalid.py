"""SMP304: a checkpoint tag that is not a string, or differs between ranks."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.edits import ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.base.walker import Ancestry, iter_nodes
from smpfix.program.facts import FileFacts
from smpfix.program.flow.numeric_values import NumericValues, enclosing_scope
from smpfix.program.model import Program
from smpfix.program.objects.checkpoint_api import (
    CHECKPOINT_API_SINCE,
    CheckpointCall,
    checkpoint_call,
    raises_on_purpose,
)
from smpfix.program.ranks.rank_groups import cut
from smpfix.program.ranks.rank_terms import rank_terms
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet, unknown_settings

# Environment variables that hold a process's rank under MPI or torchrun.
_RANK_VARIABLES = frozenset(
    {"RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"}
)


class CheckpointTagInvalid(Rule):
    summary = (
        "The `tag` of `smp.save_checkpoint`/`smp.resume_from_checkpoint` is a number (raises) or"
        " depends on the rank (hangs)."
    )
    fix_availability = FixAvailability.SAFE
    depends_on = ("PP", "TP")
    since = CHECKPOINT_API_SINCE
    tensor_parallelism = TensorParallelism.DEGREE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self.numbers = NumericValues(self.program.file)

    def visit_Call(self, node: cst.Call) -> None:
        found = checkpoint_call(self.program.facts, node)
        if found is None or raises_on_purpose(self.ancestry.stack):
            return
        tag = found.argument("tag")
        if tag is None or tag.star:
            return
        if found.saves and found.value("model") is None and found.value("optimizer") is None:
            return  # the library saves nothing and never looks at the tag
        scope = enclosing_scope(self.ancestry.stack, self.program.module)
        if self.numbers.is_number(tag.value, scope):
            self._flag_number(found, tag.value)
        else:
            self._check_rank(found, tag.value)

    def _flag_number(self, found: CheckpointCall, tag: cst.BaseExpression) -> None:
        spelled = self.program.code_for(tag)
        callee = self.program.code_for(found.call.func)
        if found.saves:
            failure = (
                "`save_checkpoint` accepts only a `str` tag and raises SMPCheckpointError on every"
                " rank"
            )
        else:
            failure = "`resume_from_checkpoint` joins the tag to strings and raises TypeError"
        title = f"checkpoint tag {snippet(spelled, 30)} is a number: the first checkpoint fails"
        explanation = (
            f"The checkpoint tag of `{callee}(...)` is a number, but {failure}, so the job dies at"
            f" its first checkpoint. Pass a string: `tag=str({spelled})` (or an f-string such as"
            f' `f"step_{{{spelled}}}"`, the same on the save and the resume side).'
        )
        fix = PendingFix(
            Applicability.SAFE, "Wrap the tag in `str(...)`", (ReplaceNode(tag, f"str({spelled})"),)
        )
        self.report(
            found.call,
            title,
            explanation=explanation,
            severity=Severity.ERROR,
            fix=fix,
            implied=CHECKPOINT_API_SINCE,
        )

    def _check_rank(self, found: CheckpointCall, tag: cst.BaseExpression) -> None:
        functions = [term.member for term in rank_terms(tag, self.program.facts) if term.is_rank]
        if _reads_rank_variable(tag, self.program.facts):
            functions.append("rank")
        if not functions:
            return
        split = cut(functions, "WORLD", self.program.job)
        if split is None:
            return
        spelled = self.program.code_for(tag)
        if found.saves:
            effect = (
                "`save_checkpoint` gathers the tags of all ranks and rank 0 raises"
                " SMPCheckpointError when they differ, while every other rank waits in the barrier"
                " that follows: the job hangs"
            )
        else:
            effect = (
                "each rank looks for a different checkpoint, and a checkpoint written by"
                " `save_checkpoint` has one tag for all ranks, so most ranks find nothing to load"
            )
        condition = f" ({split.condition()})" if split.condition() else ""
        tag_code = snippet(spelled, 26)
        if not split.definite:
            settings = unknown_settings(split.states)
            title = f"checkpoint tag {tag_code} differs by rank if {settings} is on"
        elif found.saves:
            title = f"checkpoint tag {tag_code} differs by rank: the job hangs"
        else:
            title = f"checkpoint tag {tag_code} differs by rank: most ranks load nothing"
        explanation = (
            f"The checkpoint tag depends on the rank{condition}: {effect}. Use a tag that is the"
            ' same on every rank, such as the training step (`f"step_{total_steps}"`); the'
            " library adds the rank to file names itself."
        )
        severity = Severity.ERROR if split.definite else Severity.WARNING
        states = split.states if not split.definite else ()
        self.report(
            found.call,
            title,
            explanation=explanation,
            severity=severity,
            job_facts=states,
            implied=CHECKPOINT_API_SINCE,
        )


def _reads_rank_variable(expr: cst.BaseExpression, facts: FileFacts) -> bool:
    """``os.environ["RANK"]``, ``os.environ.get("LOCAL_RANK")`` or ``os.getenv("RANK")`` in
    ``expr``."""
    for node in iter_nodes(expr):
        key: Optional[cst.BaseExpression] = None
        if type(node) is cst.Subscript and facts.qualified_name(node.value) == "os.environ":
            element = node.slice[0].slice if node.slice else None
            key = element.value if type(element) is cst.Index else None
        elif (
            type(node) is cst.Call
            and node.args
            and facts.qualified_name(node.func) in ("os.environ.get", "os.getenv")
        ):
            key = node.args[0].value
        if key is not None and facts.literal(key) in _RANK_VARIABLES:
            return True
    return False
