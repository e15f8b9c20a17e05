"""Adding keyword arguments to a call the way the call is already written.

``f(a, b)`` becomes ``f(a, b, seed=0)``; a call written one argument per line with a trailing
comma gets a new line in the same style, so the fix reads as if a person had typed it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import libcst as cst

from smpfix.base.edits import InsertAfter


def block_indentation(ancestors: Sequence[cst.CSTNode], module: cst.Module) -> str:
    """The indentation of the statement holding the innermost of ``ancestors``."""
    return "".join(
        node.indent if node.indent is not None else module.default_indent
        for node in ancestors
        if type(node) is cst.IndentedBlock
    )


def append_arguments(
    call: cst.Call, arguments: Sequence[str], indentation: str, module: cst.Module
) -> Optional[InsertAfter]:
    """An edit adding ``arguments`` (``["rank=smp.dp_rank()"]``) after the call's last argument.

    ``indentation`` is the indentation of the statement holding the call (see
    ``block_indentation``). None for a call without arguments.
    """
    args = call.args
    if not args:
        return None
    last = args[-1]
    before = (
        args[-2].comma.whitespace_after
        if len(args) > 1 and type(args[-2].comma) is cst.Comma
        else None
    )
    if len(args) == 1:
        before = call.whitespace_before_args
    after = last.comma.whitespace_after if type(last.comma) is cst.Comma else None
    if type(before) is cst.ParenthesizedWhitespace and type(after) is cst.ParenthesizedWhitespace:
        indent = (indentation if before.indent else "") + before.last_line.value
        newline = module.default_newline
        return InsertAfter(
            after.first_line, "".join(f"{indent}{text},{newline}" for text in arguments)
        )
    return InsertAfter(last, "".join(f", {text}" for text in arguments))
