"""``smpfix server`` against documents, launchers and frames that try to stop it (issue 23).

The server must keep answering whatever one document costs to check, honour ``exit`` at
once, give up checks nobody waits for, never read its protocol stream as a file, never search
a whole temporary folder, and survive frames that are not LSP. A check that "holds the
interpreter" is simulated by a hook (a ``sitecustomize`` on the server's ``PYTHONPATH``) that
makes the analysis of a marked document compute a huge power of 3, native arithmetic that
holds the GIL for minutes, as LibCST's native parser did on a 2 MB one-line document.

Timeouts here are bounds for a failing test to fail instead of hanging, far from what a
passing run takes: the stalled analysis would run for minutes.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Optional

from conftest import smpfix_command
from lsprotocol import types
from pygls.exceptions import JsonRpcMethodNotFound
from pytest_lsp import LanguageClient, client_capabilities, make_test_lsp_client
from test_server import (
    LAUNCHER,
    SCRIPT,
    TP,
    codes,
    diagnostics,
    end,
    open_file,
    patched,
    replace_text,
    session,
    uri_of,
)

STALL = "# STALL_THE_ANALYSIS\n"
DIE = "# END_THE_ANALYSIS_PROCESS\n"
_HOOK = """
import os
import pathlib

from smpfix.engine import analysis

_analyze = analysis.analyze


def analyze(text, path, options, *parsed):
    if "STALL_THE_ANALYSIS" in text:
        pathlib.Path(os.environ["SMPFIX_TEST_STALLED"]).touch()
        base = 3
        base ** (10**8)  # native arithmetic: holds the GIL for minutes
    if "END_THE_ANALYSIS_PROCESS" in text:
        os._exit(70)
    return _analyze(text, path, options, *parsed)


analysis.analyze = analyze
"""
BOUND = 30.0  # seconds: a bound for failing, never a latency that is asserted


def hooked(tmp_path: Path) -> dict[str, str]:
    """The environment of a server whose analysis stalls (or ends its process) on a marker."""
    return {**patched(tmp_path, _HOOK), "SMPFIX_TEST_STALLED": str(tmp_path / "stalled")}


async def until(condition: Callable[[], bool]) -> None:
    async def wait() -> None:
        while not condition():
            await asyncio.sleep(0.05)

    await asyncio.wait_for(wait(), BOUND)


async def ping(client: LanguageClient) -> None:
    """A request the server answers without any analysis (an unknown method)."""
    try:
        await client.protocol.send_request_async("smpfix/ping", None)
    except JsonRpcMethodNotFound:
        pass


async def bounded(work: Awaitable[Any]) -> Any:
    return await asyncio.wait_for(work, BOUND)


def logged(client: LanguageClient) -> str:
    return "\n".join(message.message for message in client.log_messages)


async def test_requests_are_answered_while_a_check_holds_the_interpreter(tmp_path: Path) -> None:
    async with session(tmp_path, {"job": TP}, env=hooked(tmp_path)) as client:
        open_file(client, tmp_path / "stall.py", SCRIPT + STALL)
        await until((tmp_path / "stalled").exists)
        await bounded(ping(client))
        await bounded(ping(client))


async def test_exit_ends_the_server_while_a_check_runs(tmp_path: Path) -> None:
    for shut_down_first in (True, False):
        client = make_test_lsp_client()
        await client.start_io(*smpfix_command(), "server", env={**os.environ, **hooked(tmp_path)})
        try:
            await client.initialize_session(
                types.InitializeParams(
                    capabilities=client_capabilities("neovim"), root_uri=uri_of(tmp_path)
                )
            )
            (tmp_path / "stalled").unlink(missing_ok=True)
            open_file(client, tmp_path / "stall.py", SCRIPT + STALL)
            await until((tmp_path / "stalled").exists)
            if shut_down_first:
                await bounded(client.shutdown_async(None))
            client.exit(None)
            assert client._server is not None
            # LSP: exit after shutdown is a success, exit alone is not.
            assert await bounded(client._server.wait()) == (0 if shut_down_first else 1)
        finally:
            await end(client)


async def test_an_edit_gives_up_the_stale_check(tmp_path: Path) -> None:
    async with session(tmp_path, {"job": TP}, env=hooked(tmp_path)) as client:
        uri = open_file(client, tmp_path / "train.py", SCRIPT + STALL)
        await until((tmp_path / "stalled").exists)
        replace_text(client, uri, SCRIPT, version=2)
        found = await diagnostics(client, uri, lambda found: bool(found), timeout=BOUND)
        assert codes(found) == ["SMP301"]


async def test_closing_a_document_gives_up_its_check(tmp_path: Path) -> None:
    async with session(tmp_path, {"job": TP}, env=hooked(tmp_path)) as client:
        stalled = open_file(client, tmp_path / "stall.py", SCRIPT + STALL)
        await until((tmp_path / "stalled").exists)
        other = open_file(client, tmp_path / "train.py", SCRIPT)
        client.text_document_did_close(
            types.DidCloseTextDocumentParams(
                text_document=types.TextDocumentIdentifier(uri=stalled)
            )
        )
        found = await diagnostics(client, other, lambda found: bool(found), timeout=BOUND)
        assert codes(found) == ["SMP301"]


async def test_a_check_that_never_ends_is_given_up(tmp_path: Path) -> None:
    limit = "\nfrom smpfix.server import analysis as limits\n\nlimits.CHECK_SECONDS = 2.0\n"
    env = {**patched(tmp_path, _HOOK + limit), "SMPFIX_TEST_STALLED": str(tmp_path / "stalled")}
    async with session(tmp_path, {"job": TP}, env=env) as client:
        stalled = open_file(client, tmp_path / "stall.py", SCRIPT + STALL)
        other = open_file(client, tmp_path / "train.py", SCRIPT)
        found = await diagnostics(client, other, lambda found: bool(found), timeout=BOUND)
        assert codes(found) == ["SMP301"]
        assert "stall.py: not analyzed within 2 s (not checked)" in logged(client)
        assert await diagnostics(client, stalled) == []


async def test_an_analysis_process_that_dies_is_reported_and_replaced(tmp_path: Path) -> None:
    async with session(tmp_path, {"job": TP}, env=hooked(tmp_path)) as client:
        uri = open_file(client, tmp_path / "train.py", SCRIPT + DIE)
        await until(lambda: "train.py" in logged(client) and "not checked" in logged(client))
        assert "analysis process ended" in logged(client)
        assert await diagnostics(client, uri) == []
        replace_text(client, uri, SCRIPT, version=2)
        found = await diagnostics(client, uri, lambda found: bool(found), timeout=BOUND)
        assert codes(found) == ["SMP301"]


async def test_a_launcher_naming_dev_stdin_reads_no_protocol_message(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    (tmp_path / "launch.py").write_text(
        LAUNCHER.format(tp=4).replace(
            '"parameters": {"microbatches": 4, "ddp": True, "tensor_parallel_degree": 4}',
            '"parameters": "/dev/stdin"',
        )
    )
    async with session(tmp_path) as client:
        uri = open_file(client, script)
        await diagnostics(client, uri, timeout=BOUND)
        await bounded(ping(client))


async def test_a_file_in_a_temporary_or_home_folder_searches_no_launcher(tmp_path: Path) -> None:
    for variable in ("TMPDIR", "HOME"):
        folder = tmp_path / variable.lower()
        folder.mkdir()
        script = folder / "train.py"
        script.write_text(SCRIPT)
        launcher = folder / "launch.py"
        launcher.write_text(LAUNCHER.format(tp=4))
        async with session(tmp_path, env={variable: str(folder)}) as client:
            uri = open_file(client, script)
            found = await diagnostics(client, uri, timeout=BOUND)
            assert not [
                related
                for item in found
                for related in item.related_information or []
                if related.location.uri == uri_of(launcher)
            ], variable
    # The file's own folder is searched when no folder above it marks a project.
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "train.py").write_text(SCRIPT)
    (scratch / "launch.py").write_text(LAUNCHER.format(tp=4))
    async with session(scratch) as client:
        uri = open_file(client, scratch / "train.py")
        found = await diagnostics(client, uri, lambda found: bool(found), timeout=BOUND)
        assert found[0].severity == types.DiagnosticSeverity.Error
        assert [
            r.location.uri for r in found[0].related_information or [] if r.location.uri != uri
        ] == [uri_of(scratch / "launch.py")]


# -- frames that are not LSP ---------------------------------------------------------------------


class RawClient:
    """The server over raw bytes: frames as a broken or hostile client writes them."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.received: list[dict[str, Any]] = []

    @classmethod
    async def start(cls, cwd: Path) -> RawClient:
        process = await asyncio.create_subprocess_exec(
            *smpfix_command(),
            "server",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            cwd=cwd,
        )
        return cls(process)

    async def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        await self.process.stdin.drain()

    async def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        await self.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    async def answer(self, request_id: Optional[int]) -> dict[str, Any]:
        """The next response to ``request_id`` (None: to a message with no id)."""

        async def read() -> dict[str, Any]:
            assert self.process.stdout is not None
            while True:
                length = 0
                while (line := await self.process.stdout.readline()) not in (b"\r\n", b""):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                assert line, "the server closed its output"
                message = json.loads(await self.process.stdout.readexactly(length))
                self.received.append(message)
                if "method" not in message and message.get("id") == request_id:
                    return dict(message)

        return await asyncio.wait_for(read(), BOUND)

    async def initialize(self, root: Path) -> None:
        await self.send(
            {
                "id": 1,
                "method": "initialize",
                "params": {"processId": None, "rootUri": uri_of(root), "capabilities": {}},
            }
        )
        assert "result" in await self.answer(1)
        await self.send({"method": "initialized", "params": {}})

    async def stop(self) -> int:
        await self.send({"id": 999, "method": "shutdown"})
        await self.answer(999)
        await self.send({"method": "exit"})
        code = await asyncio.wait_for(self.process.wait(), BOUND)
        return code


async def raw_server(tmp_path: Path) -> RawClient:
    return await RawClient.start(tmp_path)


async def test_a_frame_of_impossible_length_is_answered_and_the_server_goes_on(
    tmp_path: Path,
) -> None:
    client = await raw_server(tmp_path)
    try:
        await client.write(b"Content-Length: 99999999999999\r\n\r\n")
        await client.initialize(tmp_path)
        errors = [m for m in client.received if "error" in m]
        assert errors and errors[0]["id"] is None
        assert await client.stop() == 0
    finally:
        if client.process.returncode is None:
            client.process.kill()


async def test_malformed_frames_are_answered_or_dropped(tmp_path: Path) -> None:
    client = await raw_server(tmp_path)
    try:
        await client.write(b"Content-Length: 5\r\n\r\nhello")  # not JSON
        assert (await client.answer(None))["error"]["code"] == -32700
        await client.write(b"Content-Length: twelve\r\n\r\n")
        await client.write(b"Content-Length: -4\r\n\r\n")
        await client.write(b"Content-Type: application/json\r\n\r\n")  # no length
        await client.write(b"Content-Length: 2\r\n\r\n[]")  # JSON, not a message
        await client.send({"id": 7, "method": "initialize", "params": {"rootUri": 3}})
        assert (await client.answer(7))["error"]["code"] == -32602
        await client.initialize(tmp_path)
        assert await client.stop() == 0
    finally:
        if client.process.returncode is None:
            client.process.kill()


async def test_positions_out_of_range_get_invalid_params(tmp_path: Path) -> None:
    client = await raw_server(tmp_path)
    uri = uri_of(tmp_path / "train.py")
    try:
        await client.initialize(tmp_path)
        await client.send(
            {
                "method": "textDocument/didOpen",
                "params": {
                    "textDocument": {
                        "uri": uri,
                        "languageId": "python",
                        "version": 1,
                        "text": SCRIPT,
                    }
                },
            }
        )
        for request_id, line in ((2, -1), (3, 2**31), (4, 10**20)):
            await client.send(code_action_request(request_id, uri, line))
            assert (await client.answer(request_id))["error"]["code"] == -32602, line
        # Past the last line but a valid position: LSP reads it as the end of the document.
        await client.send(code_action_request(5, uri, 10**6))
        assert "result" in await client.answer(5)
        assert await client.stop() == 0
    finally:
        if client.process.returncode is None:
            client.process.kill()


def code_action_request(request_id: int, uri: str, line: int) -> dict[str, Any]:
    here = {"line": line, "character": 0}
    return {
        "id": request_id,
        "method": "textDocument/codeAction",
        "params": {
            "textDocument": {"uri": uri},
            "range": {"start": here, "end": here},
            "context": {"diagnostics": []},
        },
    }
