"""A soak test of ``smpfix server`` (issue 23): 500 documents of mixed sizes opened, edited and
closed while the server keeps answering within 200 ms (95 pings in 100).

Bounded in count (500 documents, at most 20 open at once) and in time (about 25 s of traffic;
the test fails after two minutes instead of hanging); the server is a local process on a pipe.
Some documents take seconds to check (a long one-line list, which LibCST parses slowly), and
most are edited or closed before their check ends, so the server keeps giving up stale checks
while the pings go on. The ping is a request for an unknown method, which the server answers
without any analysis: it measures how quickly the server reads and answers, which is what an
editor waits on.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from lsprotocol import types
from pygls.exceptions import JsonRpcMethodNotFound
from pytest_lsp import LanguageClient
from test_server import SCRIPT, TP, codes, diagnostics, open_file, replace_text, session

DOCUMENTS = 500
OPEN_AT_ONCE = 20
STEP_SECONDS = 0.05
PING_SECONDS = 0.025
LATENCY_SECONDS = 0.2
_LINE = "losses.append(float(loss.item()))  # a line of training code\n"


def document(number: int) -> str:
    """Mixed sizes: mostly short scripts, some of a few thousand lines, a few slow to parse."""
    if number % 50 == 25:
        return SCRIPT + "sizes = [" + "1, " * 30_000 + "]\n"
    if number % 10 == 5:
        return SCRIPT + _LINE * 3_000
    return SCRIPT + _LINE * (number % 40)


async def ping(client: LanguageClient) -> float:
    started = time.perf_counter()
    try:
        await client.protocol.send_request_async("smpfix/ping", None)
    except JsonRpcMethodNotFound:
        pass
    return time.perf_counter() - started


async def traffic(client: LanguageClient, folder: Path) -> None:
    """Open a document per step, edit one opened earlier, close the oldest."""
    opened: list[tuple[str, str]] = []
    for number in range(DOCUMENTS):
        text = document(number)
        opened.append((open_file(client, folder / f"train_{number}.py", text), text))
        if len(opened) > 1:
            uri, old = opened[len(opened) // 2]
            replace_text(client, uri, old.replace("lr=1e-4", "lr=3e-4"), version=2)
        if len(opened) > OPEN_AT_ONCE:
            uri, _ = opened.pop(0)
            client.text_document_did_close(
                types.DidCloseTextDocumentParams(
                    text_document=types.TextDocumentIdentifier(uri=uri)
                )
            )
        await asyncio.sleep(STEP_SECONDS)


async def test_the_server_answers_within_200_ms_through_500_documents(tmp_path: Path) -> None:
    async with session(tmp_path, {"job": TP}) as client:
        latencies: list[float] = []
        done = asyncio.Event()

        async def keep_pinging() -> None:
            # Stopped by ``done``, never cancelled: the answer to a cancelled request would
            # reach the client after its request was forgotten.
            while not done.is_set():
                latencies.append(await ping(client))
                await asyncio.sleep(PING_SECONDS)

        pinging = asyncio.ensure_future(keep_pinging())
        try:
            await asyncio.wait_for(traffic(client, tmp_path), 120)
            # Still checking: a document opened after all that gets its findings.
            uri = open_file(client, tmp_path / "last.py", SCRIPT)
            found = await diagnostics(client, uri, lambda found: bool(found), timeout=120)
            assert codes(found) == ["SMP301"]
        finally:
            done.set()
            await asyncio.wait_for(pinging, 60)
        assert len(latencies) > DOCUMENTS  # pinged all along
        # The 95th percentile, not the maximum: on a CI machine shared with other work one ping
        # can wait for the operating system; a server that stops reading waits on many.
        ordered = sorted(latencies)
        assert ordered[int(len(ordered) * 0.95)] < LATENCY_SECONDS, ordered[-5:]
