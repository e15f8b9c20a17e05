"""Questions about call sites that many rules ask: "which argument is ``drop_last``?"."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional, Union

import libcst as cst


def argument(call: cst.Call, keyword: str, position: Optional[int] = None) -> Optional[cst.Arg]:
    """The argument bound to parameter ``keyword``, given by keyword or at ``position``.

    A positional argument after ``*args`` cannot be placed, so it is not returned.
    """
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg
    if position is None:
        return None
    index = 0
    for arg in call.args:
        if arg.keyword is not None or arg.star == "**":
            break
        if arg.star == "*":
            return None
        if index == position:
            return arg
        index += 1
    return None


def has_star_kwargs(call: cst.Call) -> bool:
    """``f(**kwargs)`` may set any keyword, so a rule cannot say a keyword is missing."""
    return any(arg.star == "**" for arg in call.args)


# Node kinds for the cached type tests below (``isinstance`` on LibCST classes goes through
# ``ABCMeta`` and dominated these subtree scans).
_ATTRIBUTE, _ARG, _NAME = (cst.Attribute,), (cst.Arg,), (cst.Name,)
_BINDERS = (
    cst.Assign,
    cst.AnnAssign,
    cst.AugAssign,
    cst.For,
    cst.CompFor,
    cst.WithItem,
    cst.NamedExpr,
    cst.FunctionDef,
    cst.ClassDef,
    cst.Import,
    cst.ImportFrom,
)


def names_in(node: cst.CSTNode) -> set[str]:
    """Every plain name read anywhere inside ``node`` (attribute names excluded)."""
    from smpfix.base.walker import is_subclass, iter_nodes

    not_reads: set[int] = set()
    names: list[cst.Name] = []
    for child in iter_nodes(node):
        kind = type(child)
        if is_subclass(kind, _ATTRIBUTE):
            not_reads.add(id(child.attr))  # type: ignore[attr-defined]
        elif is_subclass(kind, _ARG):
            if child.keyword is not None:  # type: ignore[attr-defined]
                not_reads.add(id(child.keyword))  # type: ignore[attr-defined]
        elif is_subclass(kind, _NAME):
            names.append(child)  # type: ignore[arg-type]
    return {child.value for child in names if id(child) not in not_reads}


def target_names(target: cst.BaseExpression) -> set[str]:
    """Names bound by an assignment or loop target (``x``, ``(x, y)``, ``[x, *rest]``);
    attributes and subscripts bind none."""
    # Exact node types (LibCST's have no subclasses): faster than ABCMeta's isinstance.
    if type(target) is cst.Name:
        return {target.value}
    if type(target) is cst.Tuple or type(target) is cst.List:
        found: set[str] = set()
        for element in target.elements:
            found |= target_names(element.value)
        return found
    if type(target) is cst.StarredElement:
        return target_names(target.value)
    return set()


def target_path(target: cst.BaseExpression, name: str) -> Optional[tuple[int, ...]]:
    """Where ``name`` sits in an unpacking target: ``()`` for ``name`` itself, ``(1, 0)`` in
    ``a, (name, b)``; None when the target does not bind it by position (after a ``*rest``)."""
    if type(target) is cst.Name:
        return () if target.value == name else None
    if type(target) is cst.Tuple or type(target) is cst.List:
        for index, element in enumerate(target.elements):
            if type(element) is cst.StarredElement:
                return None
            inner = target_path(element.value, name)
            if inner is not None:
                return (index, *inner)
    return None


def bound_names(statement: cst.CSTNode) -> set[str]:
    """Names a statement (re)binds: assignment targets, loop and ``with`` targets, defs, imports."""
    from smpfix.base.walker import nodes_of_type

    bound: set[str] = set()
    for node in nodes_of_type(statement, *_BINDERS):
        kind = type(node)
        if kind is cst.Assign:
            for target in node.targets:  # type: ignore[attr-defined]
                bound.update(target_names(target.target))
        elif kind is cst.WithItem:
            if node.asname is not None:  # type: ignore[attr-defined]
                bound.update(target_names(node.asname.name))  # type: ignore[attr-defined]
        elif kind is cst.FunctionDef or kind is cst.ClassDef:
            bound.add(node.name.value)  # type: ignore[attr-defined]
        elif kind is cst.Import or kind is cst.ImportFrom:
            if type(node.names) is not cst.ImportStar:  # type: ignore[attr-defined]
                _bound_by_import(node, bound)  # type: ignore[arg-type]
        else:  # AnnAssign, AugAssign, For, CompFor, NamedExpr
            bound.update(target_names(node.target))  # type: ignore[attr-defined]
    return bound


def _bound_by_import(node: Union[cst.Import, cst.ImportFrom], bound: set[str]) -> None:
    for alias in node.names:  # type: ignore[union-attr]
        if alias.asname is not None:
            bound.update(target_names(alias.asname.name))  # type: ignore[arg-type]
        else:
            name = alias.name
            while type(name) is cst.Attribute:
                name = name.value  # type: ignore[assignment]
            if type(name) is cst.Name:
                bound.add(name.value)


def called_name(call: cst.Call, bindings: Mapping[str, str]) -> Optional[str]:
    """The last name of what ``call`` calls, through import aliases.

    ``"DistributedSampler"`` for ``Sampler(...)`` after ``from torch.utils.data import
    DistributedSampler as Sampler``, ``"barrier"`` for ``smp.barrier()``. A cheap first filter
    for rules that look at a few names, before resolving the full qualified name; None when
    the callee is not a name or an attribute (``f()()``, ``fs[0]()``).
    """
    func = call.func
    if type(func) is cst.Attribute:  # exact node types: faster than ABCMeta's isinstance
        return func.attr.value
    if type(func) is cst.Name:
        bound = bindings.get(func.value)
        return bound.rsplit(".", 1)[-1] if bound is not None else func.value
    return None
