"""Writing a plan into the tree in one LibCST pass, keeping every comment and all formatting.

Each decision of ``Plan`` is keyed by the original node; LibCST hands the transformer the
original node with the rewritten one, so the plan applies to exactly the nodes the program
model described, and nodes nobody touched are written back as they were.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Union

import libcst as cst

from smpfix.migrate.script.plan import Plan, leading_lines

_Statement = Union[cst.SimpleStatementLine, cst.BaseCompoundStatement]


class _Writer(cst.CSTTransformer):
    def __init__(self, plan: Plan) -> None:
        super().__init__()
        self.plan = plan
        self.moved: dict[int, list[cst.BaseStatement]] = {}
        # Dropped statements, as rewritten: their block removes them (``_without_dropped``).
        # Kept alive in ``_held``, so that no later node takes the id of one.
        self.gone: set[int] = set()
        self._held: list[cst.CSTNode] = []

    def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> object:  # type: ignore[override]
        updated = super().on_leave(original, updated)  # type: ignore[assignment]
        key = id(original)
        plan = self.plan
        if key in plan.expressions and isinstance(updated, cst.BaseExpression):
            new = plan.expressions[key](updated)
            if hasattr(updated, "lpar") and hasattr(new, "lpar") and updated.lpar and not new.lpar:
                new = new.with_changes(lpar=updated.lpar, rpar=updated.rpar)
            updated = new
        if isinstance(original, cst.Decorator) and key in plan.decorators:
            return cst.RemoveFromParent()
        if not isinstance(original, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return updated
        assert isinstance(updated, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
        if key in plan.dropped:
            self.gone.add(id(updated))
            self._held.append(updated)
            return updated
        statements: list[cst.BaseStatement] = (
            list(plan.statements[key](updated)) if key in plan.statements else [updated]
        )
        statements = self._commented(key, statements)
        if key in plan.moves:
            self.moved.setdefault(plan.moves[key], []).extend(statements)
            return cst.RemoveFromParent()
        statements.extend(plan.after.get(key, ()))
        statements.extend(self.moved.pop(key, ()))
        if len(statements) == 1:
            return statements[0]
        return cst.FlattenSentinel(statements)

    def _commented(
        self, key: int, statements: Sequence[cst.BaseStatement]
    ) -> list[cst.BaseStatement]:
        """The statements with the plan's comments above the first one (a comment already
        there is not written twice)."""
        result = list(statements)
        notes = self.plan.comments.get(key, ())
        if not result or not notes:
            return result
        first = result[0]
        leading = list(getattr(first, "leading_lines", ()))
        present = {line.comment.value for line in leading if line.comment is not None}
        leading.extend(
            cst.EmptyLine(comment=cst.Comment(note)) for note in notes if note not in present
        )
        result[0] = first.with_changes(leading_lines=leading)
        return result

    def _without_dropped(self, body: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement]:
        """``body`` without the dropped statements; the blank and comment lines above each go
        to the statement that follows it in the block (none follows: they go too)."""
        kept: list[cst.BaseStatement] = []
        carried: list[cst.EmptyLine] = []
        for statement in body:
            if id(statement) in self.gone:
                carried.extend(getattr(statement, "leading_lines", ()))
                continue
            if carried:
                leading = [*carried, *getattr(statement, "leading_lines", ())]
                statement = statement.with_changes(leading_lines=leading)
                carried = []
            kept.append(statement)
        return kept

    def leave_IndentedBlock(
        self, _original: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        body = self._without_dropped(updated_node.body)
        if not body:
            body = [cst.SimpleStatementLine([cst.Pass()])]
        return updated_node.with_changes(body=body)

    def leave_Module(self, _original: cst.Module, updated_node: cst.Module) -> cst.Module:
        """The dropped statements out; the new imports in place of the first dropped import
        (with its blank and comment lines), else after the module's leading imports."""
        body: list[cst.BaseStatement] = list(updated_node.body)
        new: list[cst.BaseStatement] = [
            cst.parse_statement(code) for code in _merged(self.plan.imports)
        ]
        replaced = next(
            (
                at
                for at, statement in enumerate(body)
                if id(statement) in self.gone and _imports_only(statement)
            ),
            None,
        )
        if new and replaced is not None:
            new[0] = new[0].with_changes(leading_lines=leading_lines(body[replaced]))
            return updated_node.with_changes(
                body=self._without_dropped([*body[:replaced], *new, *body[replaced + 1 :]])
            )
        body = self._without_dropped(body)
        at = _after_imports(body)
        return updated_node.with_changes(body=[*body[:at], *new, *body[at:]])


def _imports_only(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(each, (cst.Import, cst.ImportFrom)) for each in statement.body
    )


def _merged(imports: Sequence[str]) -> list[str]:
    """``import`` statements first, then one ``from m import a, b`` per module, by module name
    (the names of a module in the order first asked for)."""
    plain = sorted(code for code in imports if code.startswith("import "))
    members: dict[str, list[str]] = {}
    for code in imports:
        if code.startswith("from "):
            module, _, names = code[len("from ") :].partition(" import ")
            members.setdefault(module, []).append(names)
    return [
        *plain,
        *(f"from {module} import {', '.join(names)}" for module, names in sorted(members.items())),
    ]


def _after_imports(body: Sequence[cst.BaseStatement]) -> int:
    """Where new imports go: after the last import of the module's leading statements
    (its docstring, ``__future__`` imports and imports), else after the docstring."""
    at = 0
    for position, statement in enumerate(body):
        if not isinstance(statement, cst.SimpleStatementLine):
            break
        small = statement.body
        if all(isinstance(each, (cst.Import, cst.ImportFrom)) for each in small):
            at = position + 1
        elif position == 0 and _is_docstring(statement):
            at = 1
        elif at:
            break
        else:
            break
    return at


def _is_docstring(statement: cst.SimpleStatementLine) -> bool:
    first = statement.body[0]
    return isinstance(first, cst.Expr) and isinstance(
        first.value, (cst.SimpleString, cst.ConcatenatedString)
    )


def write(module: cst.Module, plan: Plan) -> str:
    """The module's code with the plan written in."""
    return module.visit(_Writer(plan)).code
