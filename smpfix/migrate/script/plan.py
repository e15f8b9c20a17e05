"""What a script migration decided, before any code is written.

The transformations read the program model of the file as it was and record here what to
write: new code for an expression, statements to put around, in place of, or after a
statement, a decorator to drop, a statement to move below another, the imports the new code
needs, ``TODO`` comments, and the items of the report. ``rewrite.py`` then writes it all in
one pass over the tree, so every decision is made against the original code and every item's
line is a line of the original file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Optional

import libcst as cst

from smpfix.migrate.items import MigrationItem, Outcome

ExpressionRewrite = Callable[[cst.BaseExpression], cst.BaseExpression]
StatementRewrite = Callable[[cst.BaseStatement], Sequence[cst.BaseStatement]]

TODO_PREFIX = "# smpfix-migrate: TODO"


def leading_lines(statement: cst.BaseStatement) -> Sequence[cst.EmptyLine]:
    return getattr(statement, "leading_lines", ())


def in_place_of(*code: str) -> StatementRewrite:
    """A rewrite writing the statements ``code`` in place of one, with its blank and comment
    lines above the first."""
    new = [cst.parse_statement(each) for each in code]

    def rewrite(old: cst.BaseStatement) -> Sequence[cst.BaseStatement]:
        return [new[0].with_changes(leading_lines=leading_lines(old)), *new[1:]]

    return rewrite


def todo_comment(topic: str, what: str, link: str) -> str:
    """The one form of a left-over task: the topic, what a person must finish, the v2 page."""
    return f"{TODO_PREFIX}({topic}): {what} <{link}>"


@dataclass
class Plan:
    """The decisions of one migration of one file (built by one run, then written once)."""

    path: str
    expressions: dict[int, ExpressionRewrite] = field(default_factory=dict)
    statements: dict[int, StatementRewrite] = field(default_factory=dict)
    after: dict[int, list[cst.BaseStatement]] = field(default_factory=dict)
    dropped: set[int] = field(default_factory=set)
    # A statement moved below another: moved id -> anchor id (the anchor comes later).
    moves: dict[int, int] = field(default_factory=dict)
    decorators: set[int] = field(default_factory=set)
    comments: dict[int, list[str]] = field(default_factory=dict)
    # Import statements to add, as code, in the order first asked for.
    imports: list[str] = field(default_factory=list)
    # The v1 references (name or attribute nodes) a transformation has replaced.
    handled: set[int] = field(default_factory=set)
    items: list[MigrationItem] = field(default_factory=list)
    # Nodes kept alive while their ids are keys above.
    _keep: list[cst.CSTNode] = field(default_factory=list)

    def _key(self, node: cst.CSTNode) -> int:
        self._keep.append(node)
        return id(node)

    def replace(self, node: cst.BaseExpression, rewrite: ExpressionRewrite) -> None:
        self.expressions[self._key(node)] = rewrite

    def replace_with(self, node: cst.BaseExpression, code: str) -> None:
        expression = cst.parse_expression(code)
        self.replace(node, lambda _: expression)

    def replace_statement(self, statement: cst.BaseStatement, rewrite: StatementRewrite) -> None:
        self.statements[self._key(statement)] = rewrite

    def insert_after(self, anchor: cst.BaseStatement, *code: str) -> None:
        self.after.setdefault(self._key(anchor), []).extend(
            cst.parse_statement(each) for each in code
        )

    def drop(self, statement: cst.BaseStatement) -> None:
        self.dropped.add(self._key(statement))

    def move_after(self, statement: cst.BaseStatement, anchor: cst.BaseStatement) -> None:
        self.moves[self._key(statement)] = self._key(anchor)

    def drop_decorator(self, decorator: cst.Decorator) -> None:
        self.decorators.add(self._key(decorator))

    def comment(self, statement: cst.BaseStatement, text: str) -> None:
        notes = self.comments.setdefault(self._key(statement), [])
        if text not in notes:
            notes.append(text)

    def need_import(self, code: str) -> None:
        if code not in self.imports:
            self.imports.append(code)

    def handle(self, *references: Optional[cst.CSTNode]) -> None:
        for reference in references:
            if reference is not None:
                self.handled.add(self._key(reference))

    def add(
        self,
        line: int,
        outcome: Outcome,
        topic: str,
        message: str,
        link: str,
        blocking: bool = False,
    ) -> None:
        self.items.append(
            MigrationItem(self.path, line, outcome, topic, message, link, blocking=blocking)
        )
