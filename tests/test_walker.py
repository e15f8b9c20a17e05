"""The shared walker: replaying an indexed tree calls the same handlers in the same order,
with the same ancestry, whether it visits every node or jumps between the handled ones."""

from __future__ import annotations

import random
from pathlib import Path

import libcst as cst
import pytest
from smp_scripts import render

from smpfix.base import walker
from smpfix.base.parents import ParentIndex
from smpfix.base.walker import Ancestry, Dispatch, indexed, walk

FIXTURES = Path(__file__).resolve().parent / "fixtures"


class _Recorder:
    """Records every call with the ids of the ancestry it saw; handles a few node types."""

    def __init__(self, ancestry: Ancestry, log: list[tuple[str, int, tuple[int, ...]]]) -> None:
        self.ancestry = ancestry
        self.log = log

    def _note(self, event: str, node: cst.CSTNode) -> None:
        self.log.append((event, id(node), tuple(id(n) for n in self.ancestry.stack)))

    def visit_Call(self, node: cst.Call) -> None:
        self._note("visit_Call", node)

    def leave_Call(self, node: cst.Call) -> None:
        self._note("leave_Call", node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._note("leave_FunctionDef", node)

    def visit_If(self, node: cst.If) -> None:
        self._note("visit_If", node)

    def leave_Module(self, node: cst.Module) -> None:
        self._note("leave_Module", node)

    def visit_Name(self, node: cst.Name) -> None:  # a leaf: visited and left at once
        self._note("visit_Name", node)

    def leave_Name(self, node: cst.Name) -> None:
        self._note("leave_Name", node)

    def visit_Arg(self, node: cst.Arg) -> None:
        if len(self.log) % 7 == 3:
            raise ValueError("a rule that crashes now and then")
        self._note("visit_Arg", node)


def _calls(
    root: cst.CSTNode, share: float, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[str, int, tuple[int, ...]]]:
    monkeypatch.setattr(walker, "_SPARSE_SHARE", share)
    log: list[tuple[str, int, tuple[int, ...]]] = []
    ancestry = Ancestry()
    ancestry.stack.append(root)  # a walk may start below nodes already on the stack
    walk(
        root,
        Dispatch([_Recorder(ancestry, log)]),
        ancestry,
        lambda handler, exc: log.append(("error", 0, ())),
    )
    assert ancestry.stack == [root]
    return log


def _modules() -> list[cst.Module]:
    rng = random.Random(7)
    texts = [render(rng).text for _ in range(5)]
    texts += [path.read_text(encoding="utf-8") for path in sorted(FIXTURES.glob("SMP1*/*.py"))[:20]]
    return [cst.parse_module(text) for text in texts]


def test_jumping_between_handled_nodes_replays_a_full_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in _modules():
        with indexed(module):
            dense = _calls(module, 0.0, monkeypatch)
            sparse = _calls(module, 1.0, monkeypatch)
            assert sparse == dense and dense
            for function in [
                node for node in walker.iter_nodes(module) if isinstance(node, cst.FunctionDef)
            ][:3]:
                assert _calls(function, 1.0, monkeypatch) == _calls(function, 0.0, monkeypatch)
        assert _calls(module, 1.0, monkeypatch) == dense  # no index: a traversal


def test_parents_from_the_index_match_a_fresh_walk() -> None:
    for module in _modules()[:8]:
        fresh = ParentIndex(module)
        with indexed(module):
            from_index = ParentIndex(module)
            nodes = list(walker.iter_nodes(module))
        assert set(map(id, from_index.nodes())) == set(map(id, fresh.nodes()))
        for node in nodes:
            assert from_index.parent_of(node) is fresh.parent_of(node)
            assert from_index.scope_of(node) is fresh.scope_of(node)
            assert from_index.indentation(node) == fresh.indentation(node)


def test_nodes_of_a_type_from_the_index_match_a_search() -> None:
    kinds = [(cst.Call,), (cst.Import, cst.ImportFrom), (cst.Name, cst.Attribute, cst.If)]
    for module in _modules()[:8]:
        subtrees = [module, *walker.nodes_of_type(module, cst.FunctionDef, cst.If)[:5]]
        searched = [
            [node for node in walker.iter_nodes(root) if type(node) in types]
            for root in subtrees
            for types in kinds
        ]
        with indexed(module):
            from_index = [
                walker.nodes_of_type(root, *types) for root in subtrees for types in kinds
            ]
        assert [list(map(id, nodes)) for nodes in from_index] == [
            list(map(id, nodes)) for nodes in searched
        ]
        assert any(searched)
