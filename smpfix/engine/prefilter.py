"""A byte-level test that skips files which cannot involve the library, before any parsing.

Every SMP v1 script imports ``smdistributed`` and every launcher names it in its
``distribution``; a file without those bytes gets no findings from any rule, so it is
neither decoded nor parsed. Like TorchFix's substring check, this may let an irrelevant file
through (a comment that mentions the library) but never skips a relevant one.
"""

from __future__ import annotations

import codecs
from typing import Optional

_MARKER = b"smdistributed"


def file_may_involve_smp(path: str) -> bool:
    """``may_involve_smp`` for a file too large to read whole (scanned in chunks): one that
    cannot involve the library is skipped like any other, not reported as too large."""
    from smpfix.base.safe_read import contains

    return contains(path, _MARKER)


def may_involve_smp(raw: bytes) -> bool:
    # Non-UTF-8 encodings that are ASCII-compatible keep the marker's bytes. UTF-16 and UTF-32
    # text (recognised by its byte order mark) does not, so it is decoded first; CPython does
    # not run such a file, and checking it reports that rather than passing it in silence.
    if _MARKER in raw:
        return True
    wide = wide_encoding(raw)
    return wide is not None and _MARKER.decode() in raw.decode(wide, errors="replace")


def wide_encoding(raw: bytes) -> Optional[str]:
    """``utf-32``/``utf-16`` when ``raw`` starts with their byte order mark, else None."""
    if raw.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        return "utf-32"
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    return None
