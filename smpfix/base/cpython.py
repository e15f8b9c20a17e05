"""CPython's own parser, for what LibCST does not say: exact syntax errors and statement lines.

``ast.parse`` only parses; it never runs anything. It does warn about the user's code
(``SyntaxWarning: invalid escape sequence`` from Python 3.12), and those warnings would be
printed on smpfix's standard error once per parse: they belong to the user's own tools, so
they are silenced here.
"""

from __future__ import annotations

import ast
import warnings


def parse(text: str) -> ast.Module:
    """``ast.parse(text)`` without warnings; raises what ``ast.parse`` raises."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text)
