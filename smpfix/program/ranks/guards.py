"""Recognising rank guards: conditions that let only some ranks run a block.

``if smp.dp_rank() == 0:``, ``if not smp.rdp_rank():``, ``if rank == 0 and step % 100 == 0:``
(``rank`` assigned once from a rank call), ``if is_main():`` (a helper whose body returns one
such comparison; ``if is_main_process(smp.rank()):`` with the comparison on its parameter; the
helper local or, given the project's modules, imported from one of them), and
``if smp.dp_rank() != 0: return`` before the guarded statements.
Shared by the checkpoint rules (the SMP3xx pages).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.literals import literal_value
from smpfix.program.facts import FileFacts
from smpfix.program.names import StatementRef
from smpfix.program.project.local_modules import LocalModules
from smpfix.program.ranks.rank_terms import attribute_terms, helper_function


@dataclass(frozen=True)
class RankGuard:
    """One rank test inside a condition.

    ``node`` is what names the rank in the condition: the call ``smp.dp_rank()``, or the
    name of a variable assigned from it, or the helper call ``is_main()``; ``call`` is the
    library call itself wherever it is (inside the helper, or the variable's assignment).
    """

    function: str
    node: cst.BaseExpression
    call: Optional[cst.Call]
    via_variable: bool = False
    via_helper: Optional[cst.FunctionDef] = None


# A helper's parameters bound to the caller's arguments, with the facts that resolve them.
Arguments = Mapping[str, tuple[cst.BaseExpression, FileFacts]]


def _rank_test(
    expr: cst.BaseExpression,
    facts: FileFacts,
    depth: int = 0,
    modules: Optional[LocalModules] = None,
    arguments: Optional[Arguments] = None,
) -> Optional[tuple[RankGuard, bool]]:
    """(guard, True if the condition holds on rank 0 only) for one comparison-like test."""
    if type(expr) is cst.UnaryOperation and type(expr.operator) is cst.Not:
        found = _rank_value(expr.expression, facts, depth, arguments, modules)
        if found is not None:
            return found, True
        inner = _rank_test(expr.expression, facts, depth, modules, arguments)
        return (inner[0], not inner[1]) if inner is not None else None
    if type(expr) is cst.Comparison and len(expr.comparisons) == 1:
        target = expr.comparisons[0]
        sides = [(expr.left, target.comparator), (target.comparator, expr.left)]
        for rank_side, other in sides:
            if literal_value(other) != 0 or literal_value(other) is False:
                continue
            found = _rank_value(rank_side, facts, depth, arguments, modules)
            if found is None:
                continue
            if isinstance(target.operator, (cst.Equal, cst.Is)):
                return found, True
            if isinstance(target.operator, (cst.NotEqual, cst.IsNot, cst.GreaterThan)):
                return found, False
    if type(expr) is cst.Call and isinstance(expr.func, (cst.Name, cst.Attribute)) and depth < 2:
        return _helper_test(expr, facts, depth, modules)
    return None


def _helper_test(
    call: cst.Call,
    facts: FileFacts,
    depth: int,
    modules: Optional[LocalModules],
) -> Optional[tuple[RankGuard, bool]]:
    """``is_main()`` or ``is_main_process(smp.rank())``: a helper, of this file or imported from
    a project module, whose body returns one rank test (of its parameter, bound to the
    caller's argument)."""
    found = helper_function(call, facts, modules)
    if found is None:
        return None
    helper, helper_facts = found
    returned = _single_return(helper)
    if returned is None:
        return None
    bound = _bound_arguments(helper, call, facts)
    inner = _rank_test(returned, helper_facts, depth + 1, modules, bound)
    if inner is None:
        return None
    guard, positive = inner
    # A rank call in another file is not this file's to rewrite: only the caller's argument is.
    local = helper_facts is facts or any(guard.call is value for value, _ in bound.values())
    return (
        RankGuard(
            guard.function,
            call,
            guard.call if local else None,
            guard.via_variable,
            helper,
        ),
        positive,
    )


def _bound_arguments(function: cst.FunctionDef, call: cst.Call, facts: FileFacts) -> Arguments:
    """The helper's parameters the call passes, positionally or by keyword."""
    parameters = [param.name.value for param in function.params.params]
    bound: dict[str, tuple[cst.BaseExpression, FileFacts]] = {}
    for position, arg in enumerate(call.args):
        if arg.star:
            break
        if arg.keyword is not None:
            bound[arg.keyword.value] = (arg.value, facts)
        elif position < len(parameters):
            bound[parameters[position]] = (arg.value, facts)
    return bound


def _rank_value(
    expr: cst.BaseExpression,
    facts: FileFacts,
    depth: int,
    arguments: Optional[Arguments] = None,
    modules: Optional[LocalModules] = None,
) -> Optional[RankGuard]:
    if type(expr) is cst.Attribute:
        # ``if args.rank == 0:`` where every assignment of ``args.rank`` (here, or in the
        # project module whose ``init_distributed(args)`` sets it) is one rank call. Not the
        # call itself: a fix does not reach into the attribute.
        terms = attribute_terms(expr, facts, depth, modules)
        member = terms[0].member if terms else None
        if member in _RANKS and terms[0].from_library:
            return RankGuard(member, expr, None)
        return None
    if type(expr) is cst.Call and not expr.args:
        member = facts.smp_member(expr.func)
        if member is not None and member.endswith("rank") and member in _RANKS:
            return RankGuard(member, expr, expr)
    if type(expr) is cst.Name:
        if arguments is not None and expr.value in arguments:
            value, caller = arguments[expr.value]
            return _rank_value(value, caller, depth)
        if not facts.may_hold_rank(expr.value):
            return None
        assignment = facts.names.assignment(expr.value, expr)
        if assignment is not None and type(assignment.value) is cst.Call:
            found = _rank_value(assignment.value, facts, depth)
            if found is not None:
                return RankGuard(found.function, expr, found.call, via_variable=True)
    return None


_RANKS = frozenset({"rank", "local_rank", "dp_rank", "rdp_rank", "mp_rank", "pp_rank", "tp_rank"})


def _single_return(function: cst.FunctionDef) -> Optional[cst.BaseExpression]:
    body = function.body
    statements = body.body if type(body) is cst.IndentedBlock else body.body
    real = [s for s in statements if not _is_docstring(s)]
    if len(real) != 1:
        return None
    only = real[0]
    small = only.body[0] if type(only) is cst.SimpleStatementLine and len(only.body) == 1 else only
    if type(small) is cst.Return and small.value is not None:
        return small.value
    return None


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        type(statement) is cst.SimpleStatementLine
        and len(statement.body) == 1
        and type(statement.body[0]) is cst.Expr
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def guards_of(
    test: cst.BaseExpression, facts: FileFacts, modules: Optional[LocalModules] = None
) -> list[tuple[RankGuard, bool]]:
    """Every rank test that must hold for ``test`` to be true (the conjuncts of an ``and``);
    with ``modules``, helpers imported from the project's modules are read too."""
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.And:
        return guards_of(test.left, facts, modules) + guards_of(test.right, facts, modules)
    found = _rank_test(test, facts, modules=modules)
    return [found] if found is not None else []


def rank_zero_guards(
    test: cst.BaseExpression, facts: FileFacts, modules: Optional[LocalModules] = None
) -> list[RankGuard]:
    """Rank tests in ``test`` that restrict the body to rank 0 of some group."""
    return [guard for guard, positive in guards_of(test, facts, modules) if positive]


def early_exit_guard(statement: cst.CSTNode, facts: FileFacts) -> list[RankGuard]:
    """For ``if smp.dp_rank() != 0: return`` (or ``continue``): the guards of what follows."""
    if type(statement) is not cst.If or statement.orelse is not None:
        return []
    body = statement.body.body
    if len(body) != 1:
        return []
    only = body[0]
    small = only.body[0] if type(only) is cst.SimpleStatementLine and len(only.body) == 1 else None
    if not isinstance(small, (cst.Return, cst.Continue)):
        return []
    test = statement.test
    found = _rank_test(test, facts)
    if found is not None and not found[1]:
        return [found[0]]
    return []


def guarded_by_early_exit(
    ref: StatementRef, facts: FileFacts
) -> Iterator[tuple[RankGuard, cst.If]]:
    """Early-exit rank guards that precede ``ref`` in its block."""
    body: Sequence[cst.CSTNode] = ref.block.body  # type: ignore[assignment]
    for earlier in body[: ref.index]:
        for guard in early_exit_guard(earlier, facts):
            yield guard, earlier  # type: ignore[misc]
