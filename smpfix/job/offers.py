"""Launcher values that are commented out: an offer the user can take, not a setting.

Launchers and notebooks keep alternatives in the parameters dict as comments
(``# "shard_optimizer_state": True,``) for the user to switch on. SageMaker never sees them,
so the job runs without them; but a finding that holds only with such a value is still worth
a hint, naming the line (``JobFacts.feature`` makes the feature "offered", ``Rule.report``
caps what depends on it at hint). Only comments inside the parameters dict display count, and
only those that read as one entry ``"key": literal`` of a key the library accepts.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Union

import libcst as cst

# ``# "fp16": True,`` or ``#'microbatches': 4`` (one entry; a trailing comma or comment is fine).
_ENTRY = re.compile(r"""#\s*(["'])(?P<key>\w+)\1\s*:\s*(?P<value>[^,#]+?)\s*,?\s*(#.*)?$""")


@dataclass(frozen=True)
class CommentedEntry:
    """One commented-out ``"key": value`` entry of a parameters dict, and its comment."""

    key: str
    value: Union[bool, int, float, str]
    comment: cst.Comment


def commented_entries(parameters: cst.CSTNode, keys: Collection[str]) -> list[CommentedEntry]:
    """The commented-out entries inside the dict display ``parameters`` whose key is in
    ``keys`` and whose value is a plain literal, in order."""
    if type(parameters) is not cst.Dict:
        return []
    found: list[CommentedEntry] = []
    for comment in _comments(parameters):
        match = _ENTRY.match(comment.value.strip())
        if match is None or match["key"] not in keys:
            continue
        try:
            value = ast.literal_eval(match["value"])
        except (ValueError, SyntaxError, RecursionError, MemoryError):
            continue
        if isinstance(value, (bool, int, float, str)):
            found.append(CommentedEntry(match["key"], value, comment))
    return found


def _comments(node: cst.CSTNode) -> list[cst.Comment]:
    """The comments inside ``node``, in order. The walker skips whitespace, where LibCST
    keeps comments, so this walks every child."""
    found: list[cst.Comment] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if type(current) is cst.Comment:
            found.append(current)
        stack.extend(reversed(current.children))
    return found
