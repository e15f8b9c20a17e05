"""The client's byte stream cut into LSP frames, whatever the client writes.

A frame is headers (``Content-Length: N``, maybe ``Content-Type``), a blank line, and N bytes
of JSON. pygls' own reader trusts the length (``Content-Length: 99999999999999`` asked for
100 TB and the server died of a ``MemoryError``) and reads header lines of any length. Here
a header line is at most ``MAX_HEADER_LINE`` bytes and a body at most ``MAX_BODY`` bytes, far
above any real message (a document is at most 2 M characters, 12 MB as escaped JSON).

A frame that breaks these rules comes out as ``Malformed``, for the server to answer with a
JSON-RPC error, and reading goes on. Its length cannot be trusted, so nothing is skipped on
its word: the next line naming a ``Content-Length`` starts the next frame, even when it
follows the bytes of a body the bad header announced (a body ends without a newline, so the
next frame's first header shares its line).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Optional, Protocol, Union

MAX_BODY = 64 * 1024 * 1024
MAX_HEADER_LINE = 8 * 1024
_LENGTH = b"content-length:"


class Stream(Protocol):
    """What frames are read from: a binary file, or ``Descriptor``."""

    def readline(self, limit: int = -1, /) -> bytes: ...

    def read(self, count: int = -1, /) -> bytes: ...


class Descriptor:
    """A file descriptor read with ``os.read`` and a buffer of its own.

    The server reads its input on a daemon thread that may be blocked in a read when the
    process ends; a buffered file (``sys.stdin.buffer``) holds a lock during that read, and
    the interpreter aborts at exit when it cannot take it.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()

    def readline(self, limit: int = -1, /) -> bytes:
        start = 0
        while True:
            end = self.buffer.find(b"\n", start)
            if end >= 0 and (limit < 0 or end < limit):
                return self._take(end + 1)
            if 0 <= limit <= len(self.buffer):
                return self._take(limit)
            start = len(self.buffer)
            if not self._fill():
                return self._take(len(self.buffer))

    def read(self, count: int = -1, /) -> bytes:
        while (count < 0 or len(self.buffer) < count) and self._fill():
            pass
        return self._take(len(self.buffer) if count < 0 else min(count, len(self.buffer)))

    def _fill(self) -> bool:
        chunk = os.read(self.fd, 1 << 16)
        self.buffer += chunk
        return bool(chunk)

    def _take(self, count: int) -> bytes:
        taken = bytes(self.buffer[:count])
        del self.buffer[:count]
        return taken


@dataclass(frozen=True)
class Frame:
    """One message's bytes, as the client framed them."""

    body: bytes


@dataclass(frozen=True)
class Malformed:
    """Bytes that were not a frame, and why (for the error sent back)."""

    reason: str


def frames(stream: Stream) -> Iterator[Union[Frame, Malformed]]:
    """The frames of ``stream`` until it ends (a body cut short by the end is dropped)."""
    length: Optional[int] = None
    problem: Optional[str] = None
    headers = False
    while True:
        line = stream.readline(MAX_HEADER_LINE)
        if not line:
            return
        if not line.endswith(b"\n"):
            problem = problem or f"a header line longer than {MAX_HEADER_LINE} bytes"
            headers = True
            continue
        if not line.strip():
            if problem is None and length is not None:
                body = stream.read(length)
                if len(body) < length:
                    return
                yield Frame(body)
            elif headers:
                yield Malformed(problem or "a frame without a Content-Length header")
            length, problem, headers = None, None, False
            continue
        found = line.lower().find(_LENGTH)
        if found > 0:  # a header after the body of a frame whose length was not believed
            if headers and (problem is not None or length is None):
                yield Malformed(problem or "a frame without a Content-Length header")
            line, length, problem = line[found:], None, None
        headers = True
        name, _, value = line.partition(b":")
        if name.strip().lower() == _LENGTH[:-1]:
            length, trouble = _length(value.strip())
            problem = problem or trouble


def _length(value: bytes) -> tuple[Optional[int], Optional[str]]:
    shown = value[:20].decode("ascii", "replace")
    if not value.isdigit():
        return None, f"Content-Length {shown!r} is not a number of bytes"
    if len(value) > len(str(MAX_BODY)) or int(value) > MAX_BODY:
        return None, f"Content-Length {shown} is over the limit of {MAX_BODY} bytes"
    return int(value), None
