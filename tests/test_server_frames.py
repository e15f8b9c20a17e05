"""How the server cuts its input into LSP frames (``smpfix.server.frames``): whatever the bytes,
reading never fails or asks for more than the caps, and frames after a bad one still arrive."""

from __future__ import annotations

import io
import os

from hypothesis import given
from hypothesis import strategies as st

from smpfix.server.frames import MAX_BODY, MAX_HEADER_LINE, Descriptor, Frame, Malformed, frames


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc\r\n\r\n%s" % (
        len(body),
        body,
    )


def read(data: bytes) -> list[Frame | Malformed]:
    return list(frames(io.BytesIO(data)))


def bodies(items: list[Frame | Malformed]) -> list[bytes]:
    return [item.body for item in items if isinstance(item, Frame)]


def test_frames_are_read_back_to_back() -> None:
    assert bodies(read(frame(b'{"a": 1}') + frame(b"{}") + frame(b""))) == [
        b'{"a": 1}',
        b"{}",
        b"",  # not JSON, which the server answers as such
    ]


def test_a_length_over_the_cap_is_malformed_and_never_read() -> None:
    items = read(b"Content-Length: 99999999999999\r\n\r\n" + frame(b'{"id": 1}'))
    assert isinstance(items[0], Malformed) and "over the limit" in items[0].reason
    assert bodies(items) == [b'{"id": 1}']
    assert isinstance(read(b"Content-Length: %d\r\n\r\n" % (MAX_BODY + 1))[0], Malformed)


def test_the_next_frame_is_found_after_the_body_of_a_bad_one() -> None:
    items = read(b"Content-Length: ten\r\n\r\n" + b'{"id": 1}' + frame(b'{"id": 2}'))
    assert isinstance(items[0], Malformed) and "not a number" in items[0].reason
    assert bodies(items) == [b'{"id": 2}']


def test_headers_without_a_length_and_endless_lines_are_malformed() -> None:
    assert isinstance(read(b"Content-Type: x\r\n\r\n")[0], Malformed)
    items = read(b"X" * (3 * MAX_HEADER_LINE) + b"\r\n\r\n" + frame(b"{}"))
    assert isinstance(items[0], Malformed) and bodies(items) == [b"{}"]


def test_a_body_cut_short_by_the_end_of_input_is_dropped() -> None:
    assert read(b"Content-Length: 10\r\n\r\n{}") == []


@given(st.binary(max_size=300))
def test_any_bytes_are_read_without_failing(data: bytes) -> None:
    for item in read(data):
        assert isinstance(item, (Frame, Malformed))


@given(st.binary(max_size=200).filter(lambda data: b"ength" not in data.lower()))
def test_a_frame_after_garbage_arrives(garbage: bytes) -> None:
    assert bodies(read(garbage + b"\r\n\r\n" + frame(b'{"id": 3}')))[-1:] == [b'{"id": 3}']


def test_a_descriptor_reads_lines_and_counts_like_a_file() -> None:
    readable, writable = os.pipe()
    data = frame(b'{"id": 1}') + b"X" * 100 + b"\n" + frame(b"{}")
    os.write(writable, data)
    os.close(writable)
    stream = Descriptor(readable)
    try:
        assert stream.readline(8) == b"Content-"
        assert stream.readline() == b"Length: 9\r\n"
        assert stream.readline(100) == b"Content-Type: application/vscode-jsonrpc\r\n"
        assert stream.readline() == b"\r\n"
        assert stream.read(9) == b'{"id": 1}'
        assert stream.readline(50) == b"X" * 50
        assert bodies(list(frames(stream))) == [b"{}"]
        assert stream.read(5) == b"" and stream.readline() == b""
    finally:
        os.close(readable)
