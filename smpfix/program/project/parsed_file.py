"""A parsed file of the project: its text, tree, facts and node index, and what follows from them.

Every question about one tree (its parents, the definitions that reach a use, the order its
calls run in, where a value goes) has one answer, whatever script or rule asks it. A helper
module that ten scripts import is parsed once (``ModuleStore``), and so are its answers: each
is worked out the first time it is asked and kept with the parse, as long as the parse lives.

The answers are typed and keyed by their class: a question is a class with an ``of_file``
constructor (``Names.of_file(file)``), and ``file.answer(Names)``
builds it once. Answers that depend on more than the tree (the job, the launchers, the scripts
importing a helper) are not kept here but on the analysis's ``Program``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Optional, Protocol, TypeVar

from smpfix.base.parents import ParentIndex

if TYPE_CHECKING:
    import libcst as cst

    from smpfix.base.walker import NodeIndex
    from smpfix.program.facts import FileFacts

A = TypeVar("A", bound="PerFile")


class PerFile(Protocol):
    """A question about one tree, answered from the file alone."""

    @classmethod
    def of_file(cls: type[A], file: ParsedFile) -> A: ...


class _Answers:
    """The answers worked out for one tree, by question (shared by every spelling of its path)."""

    def __init__(self) -> None:
        self.by_kind: dict[type, Any] = {}


@dataclass(frozen=True)
class ParsedFile:
    """A file of the project (the one checked, or one it imports), parsed once with its facts."""

    path: str
    text: str
    module: cst.Module
    facts: FileFacts
    # The tree's node index (``base.walker``): walks of the tree replay it and searches of a
    # subtree are slices of it.
    index: NodeIndex
    _answers: _Answers = field(default_factory=_Answers, compare=False, repr=False)

    def answer(self, kind: type[A]) -> A:
        """``kind.of_file(self)``, worked out once for this tree."""
        found = self._answers.by_kind.get(kind)
        if found is None:
            found = self._answers.by_kind[kind] = kind.of_file(self)
        return found  # type: ignore[no-any-return]

    @cached_property
    def parents(self) -> ParentIndex:
        """Every node's parent and enclosing function, from the node index."""
        return ParentIndex(self.module, self.index)

    def nodes_of(self, *kinds: type) -> list[cst.CSTNode]:
        """The nodes of exactly these types (LibCST node classes), in source order: read from
        the node index built in the one traversal of the tree, not by walking it again."""
        order, by_type = self.index.order, self.index.by_type()
        positions = [position for kind in kinds for position in by_type.get(kind, ())]
        if len(kinds) > 1:
            positions.sort()
        return [order[position] for position in positions]

    def renamed(self, path: str) -> ParsedFile:
        """The same parse, and its answers, under another spelling of its path."""
        return self if path == self.path else replace(self, path=path)

    def code_for(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)


def parse_file(path: str, text: str) -> Optional[ParsedFile]:
    """``text`` parsed, indexed and with its facts; None when LibCST cannot (or must not) parse
    it."""
    from smpfix.base import nesting
    from smpfix.base.parse import parse_module
    from smpfix.base.walker import indexed
    from smpfix.program.facts import collect

    try:
        if nesting.refusal(text) is not None:  # LibCST would crash on it
            return None
        with nesting.recursion_headroom():
            module = parse_module(text)
            with indexed(module) as index:
                facts = collect(module)
        return ParsedFile(path, text, module, facts, index)
    except Exception:  # a syntax error, or syntax this LibCST cannot represent
        return None
