"""Reading a file into text and writing fixed text back without losing anything.

A training script may be latin-1 with a PEP 263 coding line, start with a BOM, use CRLF, or
be read-only. The text smpfix analyzes is decoded exactly once here, and written back with the
same encoding, BOM and file mode, through an atomic replace, only if the file on disk is still
the one that was read.
"""

from __future__ import annotations

import codecs
import glob
import io
import os
import stat
import tempfile
import tokenize
from dataclasses import dataclass
from typing import Optional, Union

from smpfix.base.safe_read import RefusedFile, limit_for, read_regular


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
        raise SourceError(
            f"cannot decode as {encoding}: {exc.reason if isinstance(exc, UnicodeDecodeError) else exc}",
            line,
        ) from None
    return SourceFile(path=path, text=text, raw=raw, encoding=encoding, bom=bom)


def read_bytes(path: str) -> Optional[bytes]:
    """A file's bytes, or None when it cannot or must not be read (a FIFO, a device, a file
    over the cap of ``smpfix.base.safe_read``); whoever needs the reason reads it again."""
    try:
        return read_regular(path, limit_for(path))
    except OSError:
        return None


def read_raw(path: str) -> bytes:
    """A source file's bytes; ``SourceError`` with the one-line reason when it cannot or must
    not be read."""
    try:
        return read_regular(path, limit_for(path))
    except RefusedFile as exc:
        raise SourceError(exc.message) from None
    except OSError as exc:
        raise SourceError(f"cannot read: {exc.strerror or exc}") from None


def read(path: str) -> SourceFile:
    return decode(path, read_raw(path))


class ConcurrentModification(SourceError):
    """The file changed on disk after smpfix read it; writing would lose someone's edit."""


# Temporary files are named after their target: ``.smpfix-<name>.<random>.tmp``. They never
# end in ``.py``/``.ipynb`` and are hidden, so discovery never takes one for a source; one
# left behind by a killed run is removed the next time its target is written.
TEMP_PREFIX = ".smpfix-"
TEMP_SUFFIX = ".tmp"
_WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


def write_atomic(source: SourceFile, new_text: str) -> None:
    """Replace ``source.path`` with ``new_text`` atomically, keeping encoding, BOM and mode.

    The temporary file lives in the same folder (a rename across file systems is not atomic)
    and is removed on any failure, so an interrupted run leaves either the old or the new file.
    The file on disk is compared with what was read after the new text is safely on disk and
    just before the rename, so an edit made meanwhile is kept and reported, not overwritten.
    A file without any write permission bit is read-only even for root, who may write it
    anyway: ``chmod a-w`` is how a person says "do not touch".
    """
    try:
        data = source.encode(new_text)
    except UnicodeEncodeError as exc:
        raise SourceError(
            f"cannot write: the fixed text cannot be encoded as {source.encoding} ({exc.reason})"
        ) from None
    target = os.path.realpath(source.path)
    try:
        info = os.stat(target)
    except OSError as exc:
        raise SourceError(f"cannot write: {exc.strerror or exc}") from None
    mode = stat.S_IMODE(info.st_mode)
    if not mode & _WRITE_BITS or not os.access(target, os.W_OK):
        raise SourceError("cannot write: file is read-only")
    folder = os.path.dirname(target) or "."
    name = os.path.basename(target)[:100]
    _remove_stale_temporaries(folder, name)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{name}.", suffix=TEMP_SUFFIX, dir=folder)
    except OSError as exc:
        raise SourceError(f"cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        _keep_owner(tmp, info)
        if _current_bytes(target) != source.raw:
            raise ConcurrentModification("file changed on disk since it was read; not overwritten")
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise SourceError(f"cannot write: {exc.strerror or exc}") from None
        raise


def _current_bytes(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _keep_owner(tmp: str, info: os.stat_result) -> None:
    """Give the new file the old one's owner and group (possible for root, harmless otherwise)."""
    if hasattr(os, "chown") and (info.st_uid, info.st_gid) != (os.getuid(), os.getgid()):
        try:
            os.chown(tmp, info.st_uid, info.st_gid)
        except OSError:
            pass


def _remove_stale_temporaries(folder: str, name: str) -> None:
    """Remove temporary files of ``name`` that a killed run left behind."""
    pattern = os.path.join(glob.escape(folder), f"{glob.escape(TEMP_PREFIX + name)}.*{TEMP_SUFFIX}")
    for stale in glob.glob(pattern):  # the literal leading dot matches hidden names
        try:
            os.unlink(stale)
        except OSError:
            pass


def write_bytes_atomic(
    path: Union[str, os.PathLike[str]], data: bytes, prefix: str = ".smpfix-"
) -> None:
    """Write a file smpfix owns (a report, a cache entry): temporary file, then rename."""
    folder = os.path.dirname(os.path.abspath(path)) or "."
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
