"""Adding keyword arguments to a call the way the call is already written.

``f(a, b)`` becomes ``f(a, b, seed=0)``; a call written one argument per line with a trailing
comma gets a new line in the same style, so the fix reads as if a person had typed it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import libcst as cst

from smpfix.base.edits import AppendElement


def append_arguments(call: cst.Call, arguments: Sequence[str]) -> Optional[AppendElement]:
    """An edit adding ``arguments`` (``["rank=smp.dp_rank()"]``) after the call's last argument,
    in the call's layout (``AppendElement``), wrapped one argument per line when the call's line
    would grow too long. None for a call without arguments."""
    if not call.args:
        return None
    return AppendElement(call, tuple(arguments))
