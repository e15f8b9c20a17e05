"""Which estimators after an untaken branch read what the branch assigns.

Launcher notebooks often choose the distribution in one cell and build the estimator in a
later one::

    if hyperparameters.get("data_parallel"):
        distribution = {"smdistributed": {"dataparallel": {"enabled": True}}}
    elif hyperparameters.get("model_parallel"):
        distribution = {"smdistributed": {"modelparallel": {...}}, "mpi": {...}}
    ...
    estimator = PyTorch(entry_point="train.py", distribution=distribution, ...)

SageMaker starts the job of the branch the values take; the ``elif`` is a job the code
offers (flip one hyperparameter and it runs). The offer is that branch followed by the code
after the ``if``, and only the estimators there that read a name the branch wrote (directly,
or through a later assignment such as ``kwargs = {"distribution": distribution}``) are its
launches: an estimator that reads none of it is the same job whichever branch runs. Only a
branch that spells the library's ``distribution`` itself counts: ``if preset == "large":
extra = {...}`` picks values of the one job, and offering every preset as a job would only
repeat its findings as hints.

This module only reads the syntax tree; ``smpfix.job.launcher`` replays the offer.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import libcst as cst

from smpfix.base.walker import iter_nodes


def _base_name(target: cst.BaseExpression) -> str:
    """``distribution`` for ``distribution``, ``distribution["mpi"]`` and ``a["b"]["c"]``."""
    while type(target) is cst.Subscript:
        target = target.value
    return target.value if type(target) is cst.Name else ""


def _targets(node: cst.CSTNode) -> list[cst.BaseExpression]:
    if type(node) is cst.Assign:
        return [target.target for target in node.targets]
    if type(node) in (cst.AnnAssign, cst.AugAssign):
        return [node.target]  # type: ignore[attr-defined]
    return []


def _written(node: cst.CSTNode) -> set[str]:
    """The names ``node`` (a statement or any node inside one) binds or updates in place."""
    names = {_base_name(target) for target in _targets(node)}
    func = node.func if type(node) is cst.Call else None
    if type(func) is cst.Attribute and func.attr.value in ("update", "setdefault"):
        names.add(_base_name(func.value))
    names.discard("")
    return names


def assigned_names(statements: Sequence[Any]) -> frozenset[str]:
    """Every name the statements (and the blocks nested in them) bind or update."""
    names: set[str] = set()
    for statement in statements:
        for node in iter_nodes(statement):
            names |= _written(node)
    return frozenset(names)


def _reads(node: cst.CSTNode, names: Collection[str]) -> bool:
    return any(type(inner) is cst.Name and inner.value in names for inner in iter_nodes(node))


def _last_name(func: cst.BaseExpression) -> str:
    if type(func) is cst.Name:
        return func.value
    if type(func) is cst.Attribute:
        return func.attr.value
    return ""


# The keys that make a ``distribution`` the library's: a branch that writes them chooses the
# training strategy (a preset branch that only changes a degree does not).
_STRATEGY_KEYS = frozenset({"smdistributed", "modelparallel"})


def chooses_strategy(branch: Sequence[Any]) -> bool:
    """The branch spells a ``distribution`` of the library (``"smdistributed"`` or
    ``"modelparallel"`` as a string): it picks this strategy over the others of the ``if``."""
    for statement in branch:
        for node in iter_nodes(statement):
            if type(node) is cst.SimpleString and node.evaluated_value in _STRATEGY_KEYS:
                return True
    return False


def reading_estimators(
    branch: Sequence[Any], continuation: Sequence[Any], estimators: Collection[str]
) -> frozenset[int]:
    """The ids of the estimator calls in ``continuation`` (named by their last name in
    ``estimators``) that read a name ``branch`` writes, following assignments in order; none
    when the branch does not choose the library's strategy (``chooses_strategy``): the values
    of a preset branch are alternatives of one job, not another job."""
    if not chooses_strategy(branch):
        return frozenset()
    tainted = set(assigned_names(branch))
    if not tainted:
        return frozenset()
    found: set[int] = set()
    for statement in continuation:
        for node in iter_nodes(statement):
            if type(node) is cst.Call and _last_name(node.func) in estimators:
                if any(_reads(arg.value, tainted) for arg in node.args):
                    found.add(id(node))
            elif _targets(node) and _reads(node, tainted):
                tainted |= _written(node)
    return frozenset(found)
