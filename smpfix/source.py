"""Reading a file into text and writing fixed text back without losing anything.

A training script may be latin-1 with a PEP 263 coding line, start with a BOM, use CRLF, or
be read-only. The text smpfix analyzes is decoded exactly once here, and written back with the
same encoding, BOM and file mode, through an atomic replace, only if the file on disk is still
the one that was read.
"""

from __future__ import annotations

import codecs
import io
import os
import stat
import tempfile
import tokenize
from dataclasses import dataclass


class SourceError(Exception):
    """A file that cannot be turned into text; the message is the user-facing reason."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


@dataclass(frozen=True)
class SourceFile:
    path: str
    text: str
    raw: bytes
    encoding: str
    bom: bool

    def encode(self, text: str) -> bytes:
        """The bytes to write for ``text``, in the file's own encoding and BOM."""
        data = text.encode(self.encoding)
        return (codecs.BOM_UTF8 + data) if self.bom else data


def decode(path: str, raw: bytes) -> SourceFile:
    """Decode ``raw`` as Python source does: BOM, then PEP 263 declaration, then UTF-8."""
    if b"\x00" in raw:
        raise SourceError("file contains NUL bytes; it is not Python source")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        raise SourceError(f"cannot determine the encoding: {exc}") from None
    bom = raw.startswith(codecs.BOM_UTF8)
    body = raw[len(codecs.BOM_UTF8) :] if bom else raw
    if encoding == "utf-8-sig":
        encoding = "utf-8"
    try:
        text = body.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        line = body[: getattr(exc, "start", 0)].count(b"\n") + 1
        raise SourceError(f"cannot decode as {encoding}: {exc.reason if isinstance(exc, UnicodeDecodeError) else exc}", line) from None
    return SourceFile(path=path, text=text, raw=raw, encoding=encoding, bom=bom)


def read(path: str) -> SourceFile:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise SourceError(f"cannot read: {exc.strerror or exc}") from None
    return decode(path, raw)


class ConcurrentModification(SourceError):
    """The file changed on disk after smpfix read it; writing would lose someone's edit."""


def write_atomic(source: SourceFile, new_text: str) -> None:
    """Replace ``source.path`` with ``new_text`` atomically, keeping encoding, BOM and mode.

    The temporary file lives in the same folder (a rename across file systems is not atomic)
    and is removed on any failure, so an interrupted run leaves either the old or the new file.
    """
    data = source.encode(new_text)
    target = os.path.realpath(source.path)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
        with open(target, "rb") as handle:
            current = handle.read()
    except OSError as exc:
        raise SourceError(f"cannot write: {exc.strerror or exc}") from None
    if current != source.raw:
        raise ConcurrentModification("file changed on disk since it was read; not overwritten")
    if not os.access(target, os.W_OK):
        raise SourceError("cannot write: file is read-only")
    folder = os.path.dirname(target) or "."
    fd, tmp = tempfile.mkstemp(prefix=".smpfix-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_text_atomic(path: str, text: str) -> None:
    """Write an output file (a report) atomically; used by ``--output-file``."""
    folder = os.path.dirname(os.path.abspath(path)) or "."
    fd, tmp = tempfile.mkstemp(prefix=".smpfix-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
