"""A byte-level test that skips files which cannot involve the library, before any parsing.

Every SMP v1 script imports ``smdistributed``, every SMP v2 script imports ``torch.sagemaker``
(or ``from torch import sagemaker``) and every launcher names ``smdistributed`` in its
``distribution``; a file without those bytes gets no findings from any rule, so it is neither
decoded nor parsed. Like TorchFix's substring check, this may let an irrelevant file through (a
comment that mentions the library) but never skips a relevant one.
"""

from __future__ import annotations

import codecs
from typing import Optional

_MARKER = b"smdistributed"
_V2_MARKERS = (b"import torch.sagemaker", b"from torch.sagemaker", b"from torch import sagemaker")


def file_may_involve_smp(path: str) -> bool:
    """``may_involve_smp`` for a file too large to read whole (scanned in chunks): one that
    cannot involve the library is skipped like any other, not reported as too large."""
    from smpfix.base.safe_read import contains

    return any(contains(path, marker) for marker in (_MARKER, *_V2_MARKERS))


def may_involve_smp(raw: bytes) -> bool:
    # Non-UTF-8 encodings that are ASCII-compatible keep the marker's bytes. UTF-16 and UTF-32
    # text (recognised by its byte order mark) does not, so it is decoded first; CPython does
    # not run such a file, and checking it reports that rather than passing it in silence.
    if _MARKER in raw or any(marker in raw for marker in _V2_MARKERS):
        return True
    wide = wide_encoding(raw)
    if wide is None:
        return False
    text = raw.decode(wide, errors="replace")
    return any(marker.decode() in text for marker in (_MARKER, *_V2_MARKERS))


def wide_encoding(raw: bytes) -> Optional[str]:
    """``utf-32``/``utf-16`` when ``raw`` starts with their byte order mark, else None."""
    if raw.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        return "utf-32"
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    return None
