"""Writing the report to ``--output-file`` without replacing what the path names.

A report is written to a temporary file and renamed over the target, so a reader never sees
half a report. Renaming over a device or a link replaces the device or the link: as root,
``-o /dev/null`` made ``/dev/null`` a regular file holding the report, and ``-o /dev/stdout``
swallowed the output. So the target decides:

- a regular file, or a link to one: the file the link leads to is replaced atomically, and
  keeps its mode; a new file gets the mode the umask gives (as the shell's ``>`` does);
- a character device or a FIFO (``/dev/null``, ``/dev/stdout`` of a pipe): written in place,
  as ``> /dev/null`` writes; a FIFO without a reader is an error, not a wait;
- anything else (a folder, a socket, a block device): refused.

That the target is not one of the checked files is the command line's to check: it knows
them.
"""

from __future__ import annotations

import os
import stat
import tempfile

from smpfix.base.safe_read import RefusedFile


def write_report(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` as described above; ``OSError`` (``RefusedFile`` for a
    target that is refused) says why not."""
    target = os.path.realpath(path)
    try:
        info = os.stat(target)
    except FileNotFoundError:
        _replace(target, data, _new_file_mode())
        return
    if stat.S_ISREG(info.st_mode):
        _replace(target, data, stat.S_IMODE(info.st_mode))
    elif stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode):
        _write_in_place(target, data)
    else:
        raise RefusedFile("it is not a regular file, a FIFO or a character device")


def _replace(target: str, data: bytes, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".smpfix-", suffix=".tmp", dir=os.path.dirname(target))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write_in_place(target: str, data: bytes) -> None:
    # Non-blocking to open (a FIFO nobody reads is ENXIO, not a hang), blocking to write.
    fd = os.open(target, os.O_WRONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _new_file_mode() -> int:
    """0666 minus the umask: what ``open(path, "w")`` and the shell's ``>`` create."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask
