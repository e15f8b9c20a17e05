"""Is this device the single-process fallback of a per-process choice?

Scripts that run both distributed and alone pick the GPU in a switch:
``if distributed: device = f"cuda:{local_rank}" else: device = "cuda:0"``. The arm that runs
with one process per GPU derives the index from the process's local rank; the other arm is for
a run with one process, where GPU 0 is the right answer. A hard-coded index there is not the
per-process mistake SMP107 is about, whatever the switch tests: the arm beside it shows the
author chose the GPU by local rank wherever several processes share a host.

A local-rank query is ``smp.local_rank()`` (or a name assigned once from it), any library's
``local_rank()`` resolved through the imports (Horovod's ``hvd.local_rank()``), the
``LOCAL_RANK`` environment variable, or an attribute (``args.local_rank``) that the file
assigns from one of those.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from smpfix.base.walker import iter_nodes
from smpfix.program.model import Program

_ENV_GETTERS = frozenset({"os.environ.get", "os.getenv"})


def in_single_process_fallback(program: Program, node: cst.CSTNode) -> bool:
    """``node`` is in one arm of an ``if`` (statement or expression) whose other arm queries the
    local rank while its own arm does not; the statements after an ``if`` whose body returns
    are its other arm."""
    child: cst.CSTNode = node
    for ancestor in program.parents.ancestors(node):
        if type(ancestor) in (cst.FunctionDef, cst.ClassDef):
            return False
        arms: tuple[cst.CSTNode, ...] = ()
        if type(ancestor) is cst.If and ancestor.orelse is not None:
            arms = (ancestor.body, ancestor.orelse)
        elif type(ancestor) is cst.IfExp:
            arms = (ancestor.body, ancestor.orelse)
        if child in arms:
            other = arms[1] if child is arms[0] else arms[0]
            if _queries_local_rank(program, other) and not _queries_local_rank(program, child):
                return True
        if isinstance(ancestor, (cst.IndentedBlock, cst.Module)) and _after_returning_arm(
            program, ancestor.body, child
        ):
            return True
        child = ancestor
    return False


def _after_returning_arm(
    program: Program, block: Sequence[cst.CSTNode], statement: cst.CSTNode
) -> bool:
    """``if distributed: return per_rank`` followed by ``statement``: the statements after an
    ``if`` whose body always leaves are its ``else``."""
    if not any(statement is other for other in block):
        return False
    for earlier in block:
        if earlier is statement:
            return False
        if (
            type(earlier) is cst.If
            and earlier.orelse is None
            and _leaves(earlier.body)
            and _queries_local_rank(program, earlier.body)
            and not _queries_local_rank(program, statement)
        ):
            return True
    return False


def _leaves(body: cst.BaseSuite) -> bool:
    """The suite ends in ``return`` or ``raise``."""
    last: cst.CSTNode = body.body[-1] if isinstance(body, cst.IndentedBlock) else body
    if type(last) is cst.SimpleStatementLine:
        last = last.body[-1]
    elif type(last) is cst.SimpleStatementSuite:
        last = last.body[-1]
    return type(last) in (cst.Return, cst.Raise)


def _queries_local_rank(program: Program, arm: cst.CSTNode) -> bool:
    return any(_is_query(program, node, attributes=True) for node in iter_nodes(arm))


def _is_query(program: Program, node: cst.CSTNode, *, attributes: bool) -> bool:
    facts = program.facts
    if type(node) is cst.Call:
        if facts.smp_rank_function(node) == "local_rank":
            return True
        qualified = facts.qualified_name(node.func) or ""
        if qualified.rsplit(".", 1)[-1] == "local_rank" and "." in qualified:
            return True
        return qualified in _ENV_GETTERS and _names_local_rank(program, node.args)
    if type(node) is cst.Name:
        return facts.smp_rank_function(node) == "local_rank"
    if type(node) is cst.Subscript:
        return (
            facts.qualified_name(node.value) == "os.environ"
            and len(node.slice) == 1
            and type(node.slice[0].slice) is cst.Index
            and facts.literal(node.slice[0].slice.value) == "LOCAL_RANK"
        )
    if type(node) is cst.Attribute and attributes and type(node.value) is cst.Name:
        values = facts.owned_attribute_assignments.get((node.value.value, node.attr.value), [])
        return any(
            value is not None
            and any(_is_query(program, inner, attributes=False) for inner in iter_nodes(value))
            for value in values
        )
    return False


def _names_local_rank(program: Program, args: Sequence[cst.Arg]) -> bool:
    return bool(args) and program.facts.literal(args[0].value) == "LOCAL_RANK"
