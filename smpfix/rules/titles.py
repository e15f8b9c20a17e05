"""Pieces of a finding's title, which must fit on one line of at most 100 characters.

A title names the code it is about, and that code can be of any length (a call with twenty
arguments, a long attribute chain), so rules quote it through ``snippet``: short code is kept
whole, long code keeps its head and tail around an ellipsis.
"""

from __future__ import annotations

# How much of a piece of code a title quotes, by default.
SNIPPET_LIMIT = 40


def snippet(code: str, limit: int = SNIPPET_LIMIT) -> str:
    """``code`` on one line, quoted in backticks, at most ``limit`` characters inside them."""
    flat = " ".join(code.split())
    if len(flat) > limit:
        head = (limit - 1) * 2 // 3
        tail = limit - 1 - head
        flat = f"{flat[:head].rstrip()}…{flat[len(flat) - tail :].lstrip()}"
    return f"`{flat}`"
