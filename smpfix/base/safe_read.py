"""Reading a file smpfix decided to open on its own, without hanging, flooding or wandering.

A path smpfix reads may come from a launcher (``"parameters": "/dev/zero"``), from a
pre-commit hook naming a FIFO, or from a link planted in a repository. Reading such a path
the ordinary way blocks forever (a FIFO without a writer, a terminal), fills the memory
(``/dev/zero``, a link to a huge file) or leaks a file outside the project into the analysis.
So every such read goes through ``read_regular``: the path must name a regular file (links
followed), lie inside ``inside`` when given (a file a launcher names must be in the project),
and hold at most ``limit`` bytes. The file is opened non-blocking, its identity is checked
again on the open descriptor (it may have been swapped for a FIFO since the first look), and
at most ``limit + 1`` bytes are ever read. What is refused raises ``RefusedFile`` with a
one-line reason; the caller reports it and goes on with the other files.

This module is shared by the command line, the engine and the language server, so it needs
nothing above ``smpfix.base``.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Optional

from smpfix.base.nesting import MAX_CHARACTERS

# A JSON file a launcher names (``"parameters": "smp_config.json"``) is a few hundred bytes.
JSON_LIMIT = 10_000_000
# A Python source over this cannot be under ``MAX_CHARACTERS`` in any encoding Python reads
# (at most four bytes a character, plus a byte order mark), so the cap refuses nothing the
# analysis would have taken.
SOURCE_LIMIT = 4 * MAX_CHARACTERS + 4
# A notebook also carries its outputs (images, tables) that smpfix never analyzes.
NOTEBOOK_LIMIT = 100_000_000
# ``pyproject.toml``, ``.gitignore``: configuration, written by hand.
CONFIGURATION_LIMIT = 10_000_000

_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


class RefusedFile(OSError):
    """A file smpfix will not read; ``message`` is the one-line reason shown to the user.

    It is an ``OSError`` so that code which already reports unreadable files reports this one
    the same way (``strerror`` is the message).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.strerror = message


def limit_for(path: str) -> int:
    """The byte cap for a source file smpfix checks: a notebook carries outputs."""
    return NOTEBOOK_LIMIT if path.endswith(".ipynb") else SOURCE_LIMIT


def read_regular(path: str, limit: int, inside: Optional[str] = None) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes (inside ``inside``).

    Raises ``RefusedFile`` for a FIFO, socket, device or folder, a file over the cap, or a
    path (links followed) outside ``inside``; ``OSError`` when the file cannot be read.
    """
    first = os.stat(path)  # before opening: opening a device can itself have effects
    _require_regular(first, limit)
    if inside is not None and not is_inside(path, inside):
        raise RefusedFile("not read: it is outside the project")
    fd = os.open(path, _OPEN_FLAGS)
    try:
        opened = os.fstat(fd)
        _require_regular(opened, limit)
        if (opened.st_dev, opened.st_ino) != (first.st_dev, first.st_ino):
            raise RefusedFile("not read: the file was replaced while it was opened")
        chunks: list[bytes] = []
        remaining = limit + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise RefusedFile(_too_large(limit))
    return data


def contains(path: str, marker: bytes) -> bool:
    """Whether the regular file ``path``, of any size, holds ``marker``: read in chunks, so a
    file over its cap costs time, not memory. True when it cannot be read (or is not a
    regular file): the caller then reads it with ``read_regular`` and reports why."""
    try:
        first = os.stat(path)
        _require_regular(first, first.st_size)
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return True
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return True
        tail = b""
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return False
            if marker in tail + chunk:
                return True
            tail = chunk[-(len(marker) - 1) :] if len(marker) > 1 else b""
    except OSError:
        return True
    finally:
        os.close(fd)


def refusal(path: str, limit: int) -> Optional[str]:
    """Why ``read_regular`` would refuse ``path`` (without opening it), or None when it would
    try: for a front end that reports what it skips before others read the files."""
    try:
        _require_regular(os.stat(path), limit)
    except RefusedFile as refused:
        return refused.message
    except OSError:
        return None
    return None


def is_inside(path: str, folder: str) -> bool:
    """Whether ``path``, links followed, lies at or under ``folder`` (links followed too)."""
    target, top = os.path.realpath(path), os.path.realpath(folder)
    try:
        return os.path.commonpath([target, top]) == top
    except ValueError:  # different drives
        return False


def _require_regular(info: os.stat_result, limit: int) -> None:
    if stat.S_ISDIR(info.st_mode):  # reported as reading a folder always was
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    if not stat.S_ISREG(info.st_mode):
        raise RefusedFile(f"not read: it is {_kind(info.st_mode)}, not a regular file")
    if info.st_size > limit:
        raise RefusedFile(_too_large(limit))


def _too_large(limit: int) -> str:
    return f"not read: it is too large (over {_size(limit)})"


def _size(count: int) -> str:
    if count >= 1_000_000:
        return f"{count / 1_000_000:.0f} MB"
    return f"{count} bytes"


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"
