"""Reading a file into text and writing fixed text back without losing anything.

A training script may be latin-1 with a PEP 263 coding line, start with a BOM, use CRLF, or
be read-only. The text smpfix analyzes is decoded exactly once here, and written back with the
same encoding, BOM and file mode, through an atomic replace, only if the file on disk is still
the one that was read.
"""

from __future__ import annotations

import codecs
import functools
import glob
import io
import os
import signal
import stat
import sys
import threading
import tokenize
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Optional, Union

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


# UTF-32 first: its little-endian mark starts with UTF-16's.
_WIDE_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def decode(path: str, raw: bytes) -> SourceFile:
    """Decode ``raw`` as Python source does: BOM, then PEP 263 declaration, then UTF-8."""
    for mark, name in _WIDE_BOMS:
        if raw.startswith(mark):
            raise SourceError(
                f"not checked: the file is {name} text (it starts with a {name} byte order mark);"
                " Python reads source as UTF-8 or an ASCII-compatible encoding"
            )
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
            f"cannot decode as {encoding}: "
            f"{exc.reason if isinstance(exc, UnicodeDecodeError) else exc}",
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
    A file without any write permission bit is read-only even for root, who may write it
    anyway: ``chmod a-w`` is how a person says "do not touch".

    An edit saved meanwhile (by an editor, in place or by its own rename) is kept and
    reported, never overwritten: the file is held open from the first look to the end, and
    right before the rename its bytes, and the identity (device, inode), size and
    modification time of what the path names, must still be those of the file that was read.
    On Linux the rename is an exchange (``renameat2(RENAME_EXCHANGE)``): what it took away
    from the path is checked once more to be that same, unchanged file, and is put back if
    not. What remains is the moment between that last check and putting it back (two system
    calls; elsewhere, between the check and the rename): an edit landing exactly then is lost.
    """
    try:
        data = source.encode(new_text)
    except UnicodeEncodeError as exc:
        raise SourceError(
            f"cannot write: the fixed text cannot be encoded as {source.encoding} ({exc.reason})"
        ) from None
    target = os.path.realpath(source.path)
    try:
        held = os.open(target, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise SourceError(f"cannot write: {exc.strerror or exc}") from None
    try:
        with _ctrl_c_after():
            _replace_held(source, data, target, held)
    finally:
        os.close(held)


@contextmanager
def _ctrl_c_after() -> Iterator[None]:
    """Ctrl-C during the block takes effect when it ends: a ``KeyboardInterrupt`` raised
    between creating the temporary file and removing it (before the ``try`` that cleans up,
    or inside the cleanup itself) left the temporary file behind. Signal handlers run in the
    main thread only; elsewhere the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    try:
        previous = signal.signal(signal.SIGINT, lambda number, frame: received.append(number))
    except ValueError:  # not the main interpreter
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received:
            signal.raise_signal(signal.SIGINT)


def _replace_held(source: SourceFile, data: bytes, target: str, held: int) -> None:
    info = os.fstat(held)
    mode = stat.S_IMODE(info.st_mode)
    if not mode & _WRITE_BITS or not os.access(target, os.W_OK):
        raise SourceError("cannot write: file is read-only")
    folder = os.path.dirname(target) or "."
    name = os.path.basename(target)[:100]
    _remove_stale_temporaries(folder, name)
    try:
        import tempfile  # only when a file is written: a check never loads it

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
        if _held_bytes(held) != source.raw or not _unchanged(os.stat(target), info, held):
            raise ConcurrentModification("file changed on disk since it was read; not overwritten")
        if not _exchange(tmp, target):
            os.replace(tmp, target)
        elif not _unchanged(os.stat(tmp), info, held) or _held_bytes(held) != source.raw:
            _exchange(tmp, target)  # what was taken away was someone's edit: put it back
            raise ConcurrentModification("file changed on disk since it was read; not overwritten")
    except BaseException as exc:
        try:
            os.unlink(tmp)  # the fix, or after an exchange the old file
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise SourceError(f"cannot write: {exc.strerror or exc}") from None
        raise
    else:
        try:
            os.unlink(tmp)  # after an exchange: the old file
        except OSError:
            pass


def _unchanged(now: os.stat_result, read: os.stat_result, held: int) -> bool:
    """Whether ``now`` (what a path names) is the held file, not written since ``read``."""
    current = os.fstat(held)
    return (now.st_dev, now.st_ino) == (read.st_dev, read.st_ino) and (
        current.st_size,
        current.st_mtime_ns,
    ) == (read.st_size, read.st_mtime_ns)


def _held_bytes(held: int) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    while True:
        chunk = os.pread(held, 1 << 20, offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(first: str, second: str) -> bool:
    """Swap two paths atomically (Linux ``renameat2``); False where that is not possible."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    if (
        renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE)
        == 0
    ):
        return True
    import ctypes
    import errno

    error = ctypes.get_errno()
    if error in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(error, os.strerror(error))


@functools.lru_cache(maxsize=1)
def _renameat2() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # a C library without it (glibc before 2.28, musl)
        return None


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
    import tempfile

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
