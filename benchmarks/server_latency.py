"""How long ``smpfix server`` takes to re-check a script after an edit, as an editor sees it.

    python benchmarks/server_latency.py [--edits 40] [--lines 120]
    python benchmarks/server_latency.py --file train.py --at middle   # a large script of yours

Starts the installed server over stdio with pygls' own client, opens a generated training
script of about ``--lines`` lines (``tests/smp_scripts.py``) or ``--file``, and then edits it
``--edits`` times, pausing between edits as a person typing a word and stopping does: each
time, the time from sending ``textDocument/didChange`` to receiving the ``publishDiagnostics``
for that version. The edit types into a comment at the end of the file, or (``--at middle``)
at the end of the line in the middle of the file, where a person mostly edits a large script.
The first check (which imports LibCST and the rules) is reported apart.
Prints one JSON object; needs ``pygls`` (``pip install 'smpfix[server]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent


def script_of_about(lines: int, seed: int = 0) -> str:
    """A generated SMP script with about ``lines`` lines (the first one within 5 lines)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from smp_scripts import render

    rng = random.Random(seed)
    best = render(rng, newline="\n")
    for _ in range(500):
        if abs(best.text.count("\n") - lines) <= 5:
            break
        candidate = render(rng, newline="\n")
        if abs(candidate.text.count("\n") - lines) < abs(best.text.count("\n") - lines):
            best = candidate
    return best.text


def edited(text: str, number: int, at: str) -> str:
    """The text after the ``number``-th keystroke: into a comment at the end of the file, or
    at the end of its middle line."""
    if at == "end":
        return text + ("#" if number % 2 == 0 else "\n")
    lines = text.split("\n")
    middle = len(lines) // 2
    lines[middle] += "  # " + "x" * (number + 1)
    return "\n".join(lines)


async def measure(
    edits: int, lines: int, pause: float, file: Optional[Path] = None, at: str = "end"
) -> dict[str, Any]:
    from lsprotocol import types
    from pygls.lsp.client import BaseLanguageClient

    text = file.read_text(encoding="utf-8") if file is not None else script_of_about(lines)
    original = text
    folder = Path(tempfile.mkdtemp(prefix="smpfix-server-bench-"))
    # A project of its own (the launcher search stops at its root).
    (folder / "pyproject.toml").write_text(
        '[project]\nname = "training"\nversion = "0"\n', encoding="utf-8"
    )
    path = folder / "train.py"
    path.write_text(text, encoding="utf-8")
    uri = path.as_uri()
    client = BaseLanguageClient("smpfix-benchmark", "1")
    published: dict[int, float] = {}
    arrived = asyncio.Event()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_publish(params: types.PublishDiagnosticsParams) -> None:
        if params.uri == uri and params.version is not None:
            published[params.version] = time.perf_counter()
            arrived.set()

    @client.feature(types.WINDOW_LOG_MESSAGE)
    def on_log(params: types.LogMessageParams) -> None:
        """The server's log (problems with a file); nothing to measure."""

    async def published_for(version: int) -> float:
        while version not in published:
            arrived.clear()
            await asyncio.wait_for(arrived.wait(), 120)
        return published[version]

    await client.start_io(sys.executable, "-m", "smpfix", "server", cwd=str(folder))
    await client.initialize_async(
        types.InitializeParams(capabilities=types.ClientCapabilities(), root_uri=folder.as_uri())
    )
    client.initialized(types.InitializedParams())
    began = time.perf_counter()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="python", version=1, text=text
            )
        )
    )
    first = await published_for(1) - began
    latencies = []
    for number in range(edits):
        version = number + 2
        text = edited(text if at == "end" else original, number, at)
        await asyncio.sleep(pause)
        sent = time.perf_counter()
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
        latencies.append(await published_for(version) - sent)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return {
        "script_lines": text.count("\n"),
        "first_check_seconds": first,
        "edits": edits,
        "median_seconds": statistics.median(latencies),
        "p90_seconds": sorted(latencies)[int(0.9 * (len(latencies) - 1))],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--edits", type=int, default=40)
    parser.add_argument("--lines", type=int, default=120)
    parser.add_argument(
        "--pause", type=float, default=0.25, help="Seconds between edits (default 0.25)."
    )
    parser.add_argument("--file", type=Path, help="A script to open instead of a generated one.")
    parser.add_argument("--at", choices=("end", "middle"), default="end")
    options = parser.parse_args()
    result = measure(options.edits, options.lines, options.pause, options.file, options.at)
    print(json.dumps(asyncio.run(result)))


if __name__ == "__main__":
    main()
