"""Pieces of a finding's title, which must fit on one line of at most 100 characters.

A title names the code it is about, and that code can be of any length (a call with twenty
arguments, a long attribute chain), so rules quote it through ``snippet``: short code is kept
whole, long code keeps its head and tail around an ellipsis.
"""

from __future__ import annotations

from collections.abc import Sequence

from smpfix.job.jobfacts import FeatureState, Tri

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


_PARALLELISM = " parallelism"


def unknown_settings(states: Sequence[FeatureState]) -> str:
    """The settings smpfix cannot see among ``states``, short: "pipeline or tensor parallelism".

    A warning's title names the condition it depends on; several parallelisms share one noun so
    that the title stays on one line (the evidence lists each setting with its source)."""
    titles = list(dict.fromkeys(s.feature.title for s in states if s.state is Tri.UNKNOWN))
    if len(titles) > 1 and all(title.endswith(_PARALLELISM) for title in titles):
        heads = [title[: -len(_PARALLELISM)] for title in titles]
        return " or ".join(heads) + _PARALLELISM
    return " or ".join(titles) or "model parallelism"
