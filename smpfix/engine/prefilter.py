"""A byte-level test that skips files which cannot involve the library, before any parsing.

Every SMP v1 script imports ``smdistributed`` and every launcher names it in its
``distribution``; a file without those bytes gets no findings from any rule, so it is
neither decoded nor parsed. Like TorchFix's substring check, this may let an irrelevant file
through (a comment that mentions the library) but never skips a relevant one.
"""

from __future__ import annotations

_MARKER = b"smdistributed"


def file_may_involve_smp(path: str) -> bool:
    """``may_involve_smp`` for a file too large to read whole (scanned in chunks): one that
    cannot involve the library is skipped like any other, not reported as too large."""
    from smpfix.base.safe_read import contains

    return contains(path, _MARKER)


def may_involve_smp(raw: bytes) -> bool:
    # Non-UTF-8 encodings that are ASCII-compatible keep the marker's bytes; UTF-16 files
    # are not Python source that CPython accepts, so they are not considered here.
    return _MARKER in raw
