"""Wording shared by the wiring rules' findings.

A finding's title is short and lower-case; its explanation reuses the condition phrases the job
model words for the middle of a sentence ("tensor parallelism is enabled (launch.py:12)"), which
open a sentence there and so need a capital.
"""

from __future__ import annotations


def sentence(words: str) -> str:
    """``words`` opening a sentence: the first letter upper-case, the rest untouched."""
    return words[:1].upper() + words[1:]
