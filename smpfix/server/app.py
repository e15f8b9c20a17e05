"""``smpfix server``: the language server, over stdin and stdout.

Every check and fix runs in the analysis process (``analysis``, ``worker``), one at a time, on
a snapshot of the document; the analysis keeps LibCST, the rules and what the workspace knows
(configurations, the launchers of each project, parsed helper modules) warm between checks,
so a re-check after an edit costs the analysis alone. The server's own process only reads
messages, keeps the open documents and answers: nothing a document costs can stop it from
taking the next edit, answering a request, or ending at ``exit``. An edit that arrives while
a document is being checked marks it for one more check, whose result replaces the older one
(older results are never published over newer text); a check whose document changed or
closed meanwhile is given up if it is slow.

Nothing the user's code or the client sends can stop the server: a file that does not parse,
a rule that crashes, a file too large or too slow to analyze, an analysis process that dies
is logged to the editor and shows no diagnostics (or, for a crashed rule, those of the other
rules); a frame that is not LSP or a request with impossible parameters is answered with an
error (``frames``).
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Optional, Union

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from smpfix import __version__
from smpfix.base.findings import Finding
from smpfix.engine.config import CONFIG_FILE_NAMES
from smpfix.server.actions import FIX_ALL, finding_actions, fix_all_action, has_safe_fix, wanted
from smpfix.server.analysis import Analysis, AnalysisFailed, Stale
from smpfix.server.documents import Checked, FixedText, Snapshot, affected, changed_span
from smpfix.server.frames import Descriptor, Frame, Malformed, Stream, frames
from smpfix.server.launchers import Stamp, stamp_of
from smpfix.server.protocol import (
    Lines,
    diagnostic,
    explanation_information,
    line_location,
    related_information,
)
from smpfix.server.settings import ClientSettings
from smpfix.server.worker import CheckJob, FileChangedJob, FixAllJob, is_launcher_text

# Edits arriving within this many seconds of each other are checked once.
DEBOUNCE_SECONDS = 0.02
# JSON-RPC's error codes for a message that is not JSON, or not a request.
_PARSE_ERROR = -32700
_INVALID_REQUEST = -32600
_WATCHED = (
    "**/*.py",
    "**/*.ipynb",
    "**/*.sh",
    *(f"**/{name}" for name in CONFIG_FILE_NAMES),
)
# How often the files a check read its job from are looked at, when the client watches none.
POLL_SECONDS = 0.5
# How long to wait for the client to answer a request before going on without its answer.
_CLIENT_ANSWER_SECONDS = 10.0


@dataclass
class _Document:
    """An open document (a file, or a notebook with its cells) and its checking state."""

    uri: str
    path: str
    notebook: bool = False
    dirty: bool = False
    task: Optional[asyncio.Task[None]] = None
    checked: Optional[Checked] = None
    # The snapshot whose check failed (too slow, the analysis process died): not tried again
    # for a code action until the text changes.
    failed: Optional[Snapshot] = None
    # Whether its text may declare a job: its edits are then told to the analysis.
    launcher: bool = False
    # The "fix all" edit of the snapshot last checked, once a code action asked for it.
    fixed: Optional[tuple[Snapshot, types.WorkspaceEdit]] = None
    # Cell URIs that were last shown diagnostics (to clear them when a cell goes away).
    shown: set[str] = field(default_factory=set)


class SmpfixServer(LanguageServer):
    """The pygls server with smpfix's state: settings, launchers, open documents."""

    def __init__(self) -> None:
        super().__init__(
            "smpfix",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=types.NotebookDocumentSyncOptions(
                notebook_selector=[
                    types.NotebookDocumentFilterWithCells(
                        notebook="*", cells=[types.NotebookCellLanguage(language="python")]
                    )
                ],
                save=True,
            ),
        )
        self.settings = ClientSettings()
        self.documents: dict[str, _Document] = {}
        # The unsaved text of open launchers (by absolute path), which the analysis counts
        # over their files on disk.
        self.buffers: dict[str, str] = {}
        self.analysis = Analysis(lambda: self.buffers)
        self.exit_code = 0
        self.shut_down = False
        # Set once the editor's settings are known: no document is checked before.
        self.ready: Optional[asyncio.Event] = None
        self._writer: Optional[StdoutWriter] = None
        # The launchers and configurations the open documents' checks read, as last seen on
        # disk; looked at every ``POLL_SECONDS`` by ``_poller`` when the client watches no files.
        self.stamps: dict[str, Stamp] = {}
        self.poller: Optional[asyncio.Task[None]] = None
        # Settings problems already shown to the user (each is shown once, not at every check;
        # again after the settings change).
        self.told: set[str] = set()

    # -- reading and answering messages ------------------------------------------------------------

    def start_io(self, stdin: Optional[BinaryIO] = None, stdout: Optional[BinaryIO] = None) -> None:
        """Serve until ``exit`` or the end of the input; the analysis process ends with it."""
        self._writer = StdoutWriter(stdout or sys.stdout.buffer)
        self.protocol.set_writer(self._writer)
        try:
            asyncio.run(self._serve(stdin or Descriptor(sys.stdin.fileno())))
        except BrokenPipeError:
            logging.getLogger(__name__).error("the client closed the connection")
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.analysis.stop()

    async def _serve(self, stream: Stream) -> None:
        """Take frames from a reading thread (a daemon: a read blocked on a silent client
        never keeps the process alive) and handle them one by one on the loop."""
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[Optional[Union[Frame, Malformed]]] = asyncio.Queue()

        def read() -> None:
            try:
                for item in frames(stream):
                    loop.call_soon_threadsafe(inbox.put_nowait, item)
                loop.call_soon_threadsafe(inbox.put_nowait, None)
            except (OSError, ValueError, RuntimeError):  # the stream or the loop is closed
                pass

        threading.Thread(target=read, name="smpfix-input", daemon=True).start()
        while True:
            item = await inbox.get()
            if item is None:
                return
            self.receive(item)

    def receive(self, item: Union[Frame, Malformed]) -> None:
        """One frame: handled by pygls, or answered with an error when it is not a message
        (an error to a request names its id; to anything else, the id null)."""
        if isinstance(item, Malformed):
            self._reply_error(None, _PARSE_ERROR, f"smpfix: {item.reason}")
            return
        try:
            data = json.loads(item.body)
        except ValueError as exc:
            self._reply_error(None, _PARSE_ERROR, f"smpfix: the message is not JSON: {exc}")
            return
        if not isinstance(data, dict) or "jsonrpc" not in data:
            self._reply_error(_id_of(data), _INVALID_REQUEST, "smpfix: not a JSON-RPC message")
            return
        try:
            message = self.protocol.structure_message(data)
        except JsonRpcException as error:
            if "method" in data and _id_of(data) is not None:
                self._reply_error(_id_of(data), error.code, f"smpfix: {error.message or error}")
            return
        self.protocol.handle_message(message)

    def _reply_error(self, request_id: Union[int, str, None], code: int, message: str) -> None:
        if self._writer is None:
            return
        body = json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
        ).encode("utf-8")
        self._writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    # -- documents ---------------------------------------------------------------------------------

    def open_document(
        self, uri: str, notebook: bool = False, language: str = "python"
    ) -> Optional[_Document]:
        path = _path_of(uri, notebook)
        if not notebook and not path.endswith(".py"):
            if language != "python":
                return None
            # A text document the client says is Python: jupyterlab-lsp sends a notebook's
            # cells joined as one (``.virtual_documents/train.ipynb``), not notebook JSON.
            path += ".py"
        document = self.documents.get(uri) or _Document(uri, path, notebook)
        self.documents[uri] = document
        return document

    def snapshot(self, document: _Document) -> Optional[Snapshot]:
        if document.notebook:
            book = self.workspace.get_notebook_document(notebook_uri=document.uri)
            if book is None:
                return None
            cells = []
            for cell in book.cells:
                text = self.workspace.get_text_document(cell.document).source
                cells.append((cell.document, cell.kind == types.NotebookCellKind.Code, text))
            return Snapshot(document.uri, document.path, book.version, "", tuple(cells))
        text_document = self.workspace.get_text_document(document.uri)
        return Snapshot(document.uri, document.path, text_document.version, text_document.source)

    def schedule(self, uri: str, delay: float = DEBOUNCE_SECONDS) -> None:
        document = self.documents.get(uri)
        if document is None:
            return
        document.dirty = True
        if document.task is None or document.task.done():
            document.task = asyncio.ensure_future(self._check_until_current(document, delay))

    def schedule_all(self) -> None:
        for uri in list(self.documents):
            self.schedule(uri)

    async def _check_until_current(self, document: _Document, delay: float) -> None:
        await asyncio.sleep(delay)
        if self.ready is not None:
            await self.ready.wait()

        def current() -> bool:
            return self.documents.get(document.uri) is document and not document.dirty

        while document.dirty and self.documents.get(document.uri) is document:
            document.dirty = False
            snapshot = self.snapshot(document)
            if snapshot is None:
                return
            try:
                checked = await self.analysis.run(CheckJob(snapshot, self.settings), current)
            except Stale:
                continue  # edited or closed meanwhile
            except AnalysisFailed as failure:
                if current():
                    self.failed(document, snapshot, str(failure))
                continue
            if not current():
                continue  # edited meanwhile: check the newer text before showing anything
            previous, document.checked = document.checked, checked
            document.fixed = None
            self.publish(document, checked, previous)

    def failed(self, document: _Document, snapshot: Snapshot, reason: str) -> None:
        """The check of ``snapshot`` did not finish: say why, and show no findings."""
        document.failed = snapshot
        document.checked = None
        self.window_log_message(
            types.LogMessageParams(
                type=types.MessageType.Warning,
                message=f"smpfix: {snapshot.path}: {reason} (not checked)",
            )
        )
        for uri in (document.shown | {c for c, _, _ in snapshot.cells}) or {snapshot.uri}:
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=[])
            )
        document.shown = set()

    def publish(
        self, document: _Document, checked: Checked, previous: Optional[Checked] = None
    ) -> None:
        """Show ``checked``; its problems are logged when they differ from the last check's
        (a syntax error is not logged again at every keystroke)."""
        if previous is None or previous.problems != checked.problems:
            for problem in checked.problems:
                self.window_log_message(
                    types.LogMessageParams(type=types.MessageType.Warning, message=problem)
                )
        for problem in checked.settings_problems:
            self.tell(problem)
        encoding = self.workspace.position_encoding
        known = self._known_locations(checked)
        snapshot = checked.snapshot
        if not document.notebook:
            lines = Lines(snapshot.text, encoding)
            diagnostics = [
                diagnostic(
                    f,
                    lines,
                    self._related(f, known, snapshot.uri, lines, True),
                    not self._shows_related(),
                )
                for f in checked.findings
            ]
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(
                    uri=snapshot.uri, diagnostics=diagnostics, version=snapshot.version
                )
            )
            return
        texts = {uri: text for uri, _, text in snapshot.cells}
        by_cell = checked.cell_findings()
        for uri in document.shown - set(by_cell):
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=[])
            )
        for uri, findings in by_cell.items():
            lines = Lines(texts[uri], encoding)
            diagnostics = [
                diagnostic(
                    f, lines, self._related(f, known, uri, lines, False), not self._shows_related()
                )
                for f in findings
            ]
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics)
            )
        document.shown = set(by_cell)

    def tell(self, problem: str) -> None:
        """Show a settings problem to the user (``window/showMessage``), once: findings
        checked with settings left out must not pass for findings of the settings written."""
        message = problem if problem.startswith("smpfix: ") else f"smpfix: {problem}"
        if message not in self.told:
            self.told.add(message)
            self.window_show_message(
                types.ShowMessageParams(type=types.MessageType.Error, message=message)
            )

    def _related(
        self, finding: Finding, known: dict[str, types.Location], uri: str, lines: Lines, here: bool
    ) -> list[types.DiagnosticRelatedInformation]:
        """The finding's explanation and evidence, then where its job settings were read.
        ``here``: lines the job sources name are lines of this text (not so in a notebook,
        whose lines are counted over all its cells)."""
        if not self._shows_related():
            return []
        return [
            *explanation_information(finding, uri, lines),
            *related_information(finding, known, uri if here else None, lines),
        ]

    def _shows_related(self) -> bool:
        """Whether the client shows a diagnostic's related information."""
        capabilities = self.client_capabilities.text_document
        publish = capabilities.publish_diagnostics if capabilities is not None else None
        return publish is not None and bool(publish.related_information)

    def _known_locations(self, checked: Checked) -> dict[str, types.Location]:
        """Where the job sources of this document are: its launchers, ``[tool.smpfix.job]``."""
        return {
            source: line_location(from_fs_path(path) or path, line)
            for source, (path, line) in checked.job_locations.items()
        }

    def close_document(self, uri: str) -> None:
        document = self.documents.pop(uri, None)
        if document is None:
            return
        if document.task is not None:
            document.task.cancel()
        for cell in document.shown if document.notebook else {uri}:
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=cell, diagnostics=[])
            )

    async def current(self, uri: str) -> Optional[tuple[_Document, Checked]]:
        """The document holding ``uri`` (a file, or a notebook cell) checked at its current
        version, checking it now if it changed since."""
        document = self.documents.get(uri)
        if document is None:
            book = self.workspace.get_notebook_document(cell_uri=uri)
            document = self.documents.get(book.uri) if book is not None else None
        if document is None:
            return None
        snapshot = self.snapshot(document)
        if snapshot is None or snapshot == document.failed:
            return None
        checked = document.checked
        task = document.task
        if (checked is None or checked.snapshot != snapshot) and task and not task.done():
            # The check the last edit started answers: the text is not analyzed twice.
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise
            checked = document.checked
        if checked is None or checked.snapshot != snapshot:
            try:
                checked = await self.analysis.run(CheckJob(snapshot, self.settings))
            except AnalysisFailed:
                return None
        return document, checked

    # -- launchers and files on disk ----------------------------------------------------------

    async def file_changed(self, path: str, text: Optional[str] = None) -> frozenset[str]:
        """A file's text changed (``text``: unsaved in the editor; None: on disk). Returns the
        changed paths to re-check the dependents of ("*": every open document)."""
        key = os.path.abspath(path)
        if os.path.basename(key) in CONFIG_FILE_NAMES:
            self.told.clear()  # a problem that remains is told again
        if text is None:
            self.buffers.pop(key, None)
        else:
            self.buffers[key] = text
        try:
            changed: frozenset[str] = await self.analysis.run(FileChangedJob(path, text))
        except AnalysisFailed:
            return frozenset({"*"})
        return changed

    def watch_files(self) -> None:
        """Look at the files the open documents' job came from every ``POLL_SECONDS``: a
        client that watches no files (Neovim on Linux) tells nothing of a launcher another
        program changed, and the scripts it launches must not keep its old job."""
        if self.poller is None:
            self.poller = asyncio.ensure_future(self._poll_forever())

    async def _poll_forever(self) -> None:
        while True:
            await asyncio.sleep(POLL_SECONDS)
            await self.poll_files()

    async def poll_files(self) -> None:
        """Tell the analysis of each watched file that changed on disk, then check again the
        documents it may affect (an open document's unsaved text is the editor's to tell)."""
        watched: dict[str, Stamp] = {}
        for document in list(self.documents.values()):
            if document.checked is not None:
                watched.update(document.checked.watched)
        for path in [path for path in self.stamps if path not in watched]:
            del self.stamps[path]
        changed: frozenset[str] = frozenset()
        for path, stamp in watched.items():
            known = self.stamps.setdefault(path, stamp)
            now = stamp_of(path)
            if now != known and os.path.abspath(path) not in self.buffers:
                self.stamps[path] = now
                changed |= await self.file_changed(path)
        if changed:
            self.recheck_after(changed)

    def recheck_after(self, changed: frozenset[str], except_uri: Optional[str] = None) -> None:
        """Check again the open documents that what changed may affect."""
        if "*" in changed:
            self.schedule_all()
            return
        checked = [
            document.checked for document in self.documents.values() if document.checked is not None
        ]
        for path in changed:
            for uri in affected(checked, path):
                if uri != except_uri:
                    self.schedule(uri)


def _path_of(uri: str, notebook: bool) -> str:
    path = to_fs_path(uri) if uri.startswith("file:") else None
    path = path or uri.replace(":", "_").replace("/", "_")
    if notebook and not path.endswith(".ipynb"):
        path += ".ipynb"
    return path


def _id_of(data: Any) -> Union[int, str, None]:
    found = data.get("id") if isinstance(data, dict) else None
    return found if isinstance(found, (int, str)) and not isinstance(found, bool) else None


def create() -> SmpfixServer:
    """The server with its handlers."""
    server = SmpfixServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: SmpfixServer, params: types.InitializeParams) -> None:
        ls.settings = _settings(ls, params.initialization_options)
        ls.ready = asyncio.Event()
        ls.analysis.start()  # LibCST and the rules load while the client sets up

    @server.feature(types.INITIALIZED)
    async def initialized(ls: SmpfixServer, params: types.InitializedParams) -> None:
        await _pull_configuration(ls)
        capabilities = ls.client_capabilities.workspace
        watched = capabilities.did_change_watched_files if capabilities is not None else None
        if watched is None or not watched.dynamic_registration:
            ls.watch_files()
        else:
            options = types.DidChangeWatchedFilesRegistrationOptions(
                watchers=[types.FileSystemWatcher(glob_pattern=glob) for glob in _WATCHED]
            )
            try:
                await asyncio.wait_for(
                    ls.client_register_capability_async(
                        types.RegistrationParams(
                            registrations=[
                                types.Registration(
                                    id="smpfix-watched-files",
                                    method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                                    register_options=options,
                                )
                            ]
                        )
                    ),
                    _CLIENT_ANSWER_SECONDS,
                )
            except Exception as exc:
                # The client said it could, and then could not: the server watches them itself.
                ls.window_log_message(
                    types.LogMessageParams(
                        type=types.MessageType.Warning, message=f"smpfix: cannot watch files: {exc}"
                    )
                )
                ls.watch_files()
        ls.window_log_message(
            types.LogMessageParams(
                type=types.MessageType.Info, message=f"smpfix {__version__} ready"
            )
        )
        if ls.ready is not None:
            ls.ready.set()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def configuration_changed(
        ls: SmpfixServer, params: types.DidChangeConfigurationParams
    ) -> None:
        ls.told.clear()
        if not await _pull_configuration(ls) and params.settings is not None:
            ls.settings = _settings(ls, params.settings)
        ls.schedule_all()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: SmpfixServer, params: types.DidOpenTextDocumentParams) -> None:
        item = params.text_document
        document = ls.open_document(item.uri, language=item.language_id)
        if document is not None:
            document.launcher = document.launcher or is_launcher_text(item.text)
            ls.schedule(item.uri, delay=0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: SmpfixServer, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        document = ls.documents.get(uri)
        if document is None:
            return
        ls.schedule(uri)
        text = ls.workspace.get_text_document(uri).source
        if document.launcher or is_launcher_text(text):
            document.launcher = True
            ls.recheck_after(await ls.file_changed(document.path, text), except_uri=uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: SmpfixServer, params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.schedule(uri, delay=0)
        path = to_fs_path(uri) if uri.startswith("file:") else None
        if path is not None:
            ls.recheck_after(await ls.file_changed(path), except_uri=uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    async def did_close(ls: SmpfixServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        document = ls.documents.get(uri)
        ls.close_document(uri)
        if document is not None and document.launcher:
            # Its unsaved text no longer counts: the file on disk does.
            ls.recheck_after(await ls.file_changed(document.path))

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_open(ls: SmpfixServer, params: types.DidOpenNotebookDocumentParams) -> None:
        ls.open_document(params.notebook_document.uri, notebook=True)
        ls.schedule(params.notebook_document.uri, delay=0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_change(ls: SmpfixServer, params: types.DidChangeNotebookDocumentParams) -> None:
        ls.schedule(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    async def notebook_save(ls: SmpfixServer, params: types.DidSaveNotebookDocumentParams) -> None:
        uri = params.notebook_document.uri
        ls.schedule(uri, delay=0)
        path = to_fs_path(uri) if uri.startswith("file:") else None
        if path:  # a launcher notebook configures the scripts it starts
            ls.recheck_after(await ls.file_changed(path), except_uri=uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_close(ls: SmpfixServer, params: types.DidCloseNotebookDocumentParams) -> None:
        ls.close_document(params.notebook_document.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    async def watched_files(ls: SmpfixServer, params: types.DidChangeWatchedFilesParams) -> None:
        changed: frozenset[str] = frozenset()
        for change in params.changes:
            path = to_fs_path(change.uri) if change.uri.startswith("file:") else None
            if path is not None:
                changed |= await ls.file_changed(path)
        ls.recheck_after(changed)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[
                types.CodeActionKind.QuickFix,
                types.CodeActionKind.SourceFixAll,
                FIX_ALL,
            ],
            resolve_provider=True,
        ),
    )
    async def code_action(
        ls: SmpfixServer, params: types.CodeActionParams
    ) -> Optional[list[types.CodeAction]]:
        found = await ls.current(params.text_document.uri)
        if found is None:
            return None
        document, checked = found
        only = params.context.only
        uri = params.text_document.uri
        snapshot = checked.snapshot
        if document.notebook:
            texts = {cell: text for cell, _, text in snapshot.cells}
            findings = checked.cell_findings().get(uri, [])
            text = texts.get(uri, "")
        else:
            findings, text = list(checked.findings), snapshot.text
        lines = Lines(text, ls.workspace.position_encoding)
        actions = finding_actions(uri, text, findings, params.range, lines, only)
        if wanted(FIX_ALL, only) and has_safe_fix(checked.findings):
            data = {"uri": document.uri, "version": snapshot.version}
            actions.append(
                fix_all_action(
                    data,
                    None if _resolves_edits(ls) else await _fix_all_edit(ls, document, checked),
                )
            )
        return actions

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def resolve_action(ls: SmpfixServer, action: types.CodeAction) -> types.CodeAction:
        data = action.data if isinstance(action.data, dict) else {}
        if action.kind != FIX_ALL or "uri" not in data:
            return action
        found = await ls.current(data["uri"])
        if found is not None:
            action.edit = await _fix_all_edit(ls, *found)
        return action

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: SmpfixServer, params: None) -> None:
        ls.shut_down = True
        if ls.poller is not None:
            ls.poller.cancel()
        for uri in list(ls.documents):
            task = ls.documents[uri].task
            if task is not None:
                task.cancel()
        ls.documents.clear()
        ls.analysis.stop()

    @server.feature(types.EXIT)
    def exit_(ls: SmpfixServer, params: None) -> None:
        ls.analysis.stop()
        ls.exit_code = 0 if ls.shut_down else 1  # LSP: exit without shutdown is an error

    return server


def _settings(ls: SmpfixServer, data: Any) -> ClientSettings:
    settings, problems = ClientSettings.parse(data)
    for problem in problems:
        ls.tell(problem)
    return settings


async def _pull_configuration(ls: SmpfixServer) -> bool:
    """The ``smpfix`` section of the client's configuration, when it offers one."""
    capabilities = ls.client_capabilities.workspace
    if capabilities is None or not capabilities.configuration:
        return False
    try:
        values = await asyncio.wait_for(
            ls.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section="smpfix")])
            ),
            _CLIENT_ANSWER_SECONDS,
        )
    except Exception:  # a client that says it answers but does not (or not in time)
        return False
    if not values or values[0] is None:
        return False
    ls.settings = _settings(ls, values[0])
    return True


def _resolves_edits(ls: SmpfixServer) -> bool:
    document = ls.client_capabilities.text_document
    action = document.code_action if document is not None else None
    support = action.resolve_support if action is not None else None
    return support is not None and "edit" in support.properties


async def _fix_all_edit(
    ls: SmpfixServer, document: _Document, checked: Checked
) -> types.WorkspaceEdit:
    """The "fix all" edit of ``checked``'s text, computed once per check (the analysis
    process starts it from the check's analysis)."""
    snapshot = checked.snapshot
    if document.fixed is not None and document.fixed[0] == snapshot:
        return document.fixed[1]
    try:
        fixed: FixedText = await ls.analysis.run(FixAllJob(snapshot, ls.settings))
    except AnalysisFailed:
        fixed = FixedText()
    changes: dict[str, list[types.TextEdit]] = {}
    originals = (
        {uri: text for uri, _, text in snapshot.cells}
        if snapshot.cells
        else {snapshot.uri: snapshot.text}
    )
    news = (
        dict(fixed.cells)
        if snapshot.cells
        else ({snapshot.uri: fixed.text} if fixed.text is not None else {})
    )
    for uri, new in news.items():
        old = originals[uri]
        start, end, replacement = changed_span(old, new)
        changes[uri] = [
            types.TextEdit(
                range=Lines(old, ls.workspace.position_encoding).offset_range(old, start, end),
                new_text=replacement,
            )
        ]
    edit = types.WorkspaceEdit(changes=changes)
    if document.checked is checked:
        document.fixed = (snapshot, edit)
    return edit


def serve(arguments: Sequence[str] = ()) -> int:
    """Run the server on stdin/stdout until the client says ``exit``; the exit code LSP asks for."""
    logging.basicConfig(level=logging.WARNING, format="smpfix server: %(levelname)s %(message)s")
    server = create()
    # Everything imported so far lives as long as the server: a full collection need not walk
    # it again (one took 155 ms, a pause every request would wait out).
    gc.collect()
    gc.freeze()
    server.start_io()
    return server.exit_code
