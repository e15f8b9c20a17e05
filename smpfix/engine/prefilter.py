"""A byte-level test that skips files which cannot involve the library, before any parsing.

Every SMP v1 script imports ``smdistributed``, every SMP v2 script imports ``torch.sagemaker``
(or ``from torch import sagemaker``) and every launcher names ``smdistributed`` in its
``distribution``; a file without those bytes gets no findings from any rule, so it is neither
decoded nor parsed. Like TorchFix's substring check, this may let an irrelevant file through (a
comment that mentions the library) but never skips a relevant one.
"""

from __future__ import annotations

_MARKER = b"smdistributed"
_V2_MARKERS = (b"import torch.sagemaker", b"from torch.sagemaker", b"from torch import sagemaker")


def may_involve_smp(raw: bytes) -> bool:
    # Non-UTF-8 encodings that are ASCII-compatible keep the marker's bytes; UTF-16 files
    # are not Python source that CPython accepts, so they are not considered here.
    return _MARKER in raw or any(marker in raw for marker in _V2_MARKERS)
