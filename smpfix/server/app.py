"""``smpfix server``: the language server, over stdin and stdout.

The server keeps LibCST and the rules imported, so a re-check after an edit costs the
analysis alone. Every check and fix runs on one worker thread, one at a time, on a snapshot
of the document: the protocol thread stays free to take the next edit, and an edit that
arrives while a document is being checked only marks it for one more check, whose result
replaces the older one (older results are never published over newer text). Everything
the workspace knows (configurations, the launchers of each project, parsed helper modules)
is touched only on that worker thread.

Nothing the user's code does can stop the server: a file that does not parse, a rule that
crashes or a file too large to analyze is logged to the editor and shows no diagnostics
(or, for a crashed rule, those of the other rules).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Optional, TypeVar

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from smpfix import __version__
from smpfix.base.findings import Finding
from smpfix.engine.config import Config
from smpfix.job.linking import may_be_launcher
from smpfix.job.project import Project
from smpfix.server.actions import FIX_ALL, finding_actions, fix_all_action, has_safe_fix, wanted
from smpfix.server.documents import (
    Checked,
    FixedText,
    Snapshot,
    affected,
    changed_span,
    check,
    fix_all,
)
from smpfix.server.launchers import Launchers
from smpfix.server.protocol import Lines, diagnostic, line_location, related_information
from smpfix.server.settings import ClientSettings, Configurations, resolve

T = TypeVar("T")

# Edits arriving within this many seconds of each other are checked once.
DEBOUNCE_SECONDS = 0.02
# The worker thread's stack: LibCST recurses in native code once per nesting level
# (``base.nesting`` bounds the depth for an 8 MiB stack, a thread's default is often smaller).
_STACK_BYTES = 64 * 1024 * 1024
_WATCHED = ("**/*.py", "**/*.ipynb", "**/pyproject.toml")
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
        self.configurations = Configurations()
        self.launchers = Launchers()
        self.documents: dict[str, _Document] = {}
        self.exit_code = 0
        self.shut_down = False
        # Set once the editor's settings are known: no document is checked before.
        self.ready: Optional[asyncio.Event] = None
        self._worker: Optional[ThreadPoolExecutor] = None

    # -- running on the worker thread ------------------------------------------------------------

    async def on_worker(self, work: Callable[..., T], *args: Any) -> T:
        if self._worker is None:
            previous = threading.stack_size()
            threading.stack_size(_STACK_BYTES)
            try:
                self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="smpfix-check")
                self._worker.submit(lambda: None).result()  # start the thread with that stack now
            finally:
                threading.stack_size(previous)
        return await asyncio.get_running_loop().run_in_executor(self._worker, work, *args)

    def stop_worker(self) -> None:
        if self._worker is not None:
            self._worker.shutdown(wait=False, cancel_futures=True)

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
        while document.dirty and self.documents.get(document.uri) is document:
            document.dirty = False
            snapshot = self.snapshot(document)
            if snapshot is None:
                return
            checked = await self.on_worker(self._check, snapshot)
            if self.documents.get(document.uri) is not document:
                return
            if document.dirty:
                continue  # edited meanwhile: check the newer text before showing anything
            previous, document.checked = document.checked, checked
            self.publish(document, checked, previous)

    def _check(self, snapshot: Snapshot) -> Checked:
        """On the worker thread: the document's options and project, then the analysis."""

        def project_of(config: Config) -> Project:
            return self.launchers.project(snapshot.path, config)

        return check(
            snapshot, resolve(snapshot.path, self.settings, self.configurations, project_of)
        )

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
        encoding = self.workspace.position_encoding
        known = self._known_locations(checked)
        snapshot = checked.snapshot
        if not document.notebook:
            lines = Lines(snapshot.text, encoding)
            diagnostics = [
                diagnostic(f, lines, self._related(f, known, snapshot.uri, lines, True))
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
                diagnostic(f, lines, self._related(f, known, uri, lines, False)) for f in findings
            ]
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics)
            )
        document.shown = set(by_cell)

    def _related(
        self, finding: Finding, known: dict[str, types.Location], uri: str, lines: Lines, here: bool
    ) -> list[types.DiagnosticRelatedInformation]:
        """``here``: lines the job sources name are lines of this text (not so in a notebook,
        whose lines are counted over all its cells)."""
        capabilities = self.client_capabilities.text_document
        publish = capabilities.publish_diagnostics if capabilities is not None else None
        if publish is None or not publish.related_information:
            return []
        return related_information(finding, known, uri if here else None, lines)

    def _known_locations(self, checked: Checked) -> dict[str, types.Location]:
        """Where the job sources of this document are: its launchers, ``[tool.smpfix.job]``."""
        known: dict[str, types.Location] = {}
        resolved = checked.resolved
        if resolved is None:
            return known
        project = resolved.options.project
        for link in project.launchers_of(checked.snapshot.path) if project is not None else ():
            line = 1 if link.launcher.endswith(".ipynb") else link.line
            known[link.job.source] = line_location(
                from_fs_path(link.launcher) or link.launcher, line
            )
        config = resolved.config
        if config.path is not None and config.job:
            known[config.job_source] = line_location(
                from_fs_path(str(config.path)) or str(config.path), _table_line(str(config.path))
            )
        return known

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
        if snapshot is None:
            return None
        checked = document.checked
        if checked is None or checked.snapshot != snapshot:
            checked = await self.on_worker(self._check, snapshot)
        return document, checked

    # -- launchers and files on disk ------------------------------------------------------------------

    def file_changed(self, path: str, text: Optional[str] = None) -> set[str]:
        """On the worker thread: a file's text changed (in the editor, or on disk). Returns
        the changed paths to re-check the dependents of ("*": every open document)."""
        if os.path.basename(path) == "pyproject.toml":
            self.configurations.forget()
            self.launchers.forget()
            return {"*"}
        if path.endswith((".py", ".ipynb")) and self.launchers.update(path, text):
            return {"*"}
        return {path}

    def recheck_after(self, changed: set[str], except_uri: Optional[str] = None) -> None:
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


def _table_line(path: str) -> int:
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip().replace(" ", "") == "[tool.smpfix.job]":
                    return number
    except OSError:
        pass
    return 1


def create() -> SmpfixServer:
    """The server with its handlers."""
    server = SmpfixServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: SmpfixServer, params: types.InitializeParams) -> None:
        ls.settings = _settings(ls, params.initialization_options)
        ls.ready = asyncio.Event()

    @server.feature(types.INITIALIZED)
    async def initialized(ls: SmpfixServer, params: types.InitializedParams) -> None:
        await _pull_configuration(ls)
        capabilities = ls.client_capabilities.workspace
        watched = capabilities.did_change_watched_files if capabilities is not None else None
        if watched is not None and watched.dynamic_registration:
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
            except Exception as exc:  # the client said it could, and then could not: files on disk are read on save only
                ls.window_log_message(
                    types.LogMessageParams(
                        type=types.MessageType.Warning, message=f"smpfix: cannot watch files: {exc}"
                    )
                )
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
        if not await _pull_configuration(ls) and params.settings is not None:
            ls.settings = _settings(ls, params.settings)
        ls.schedule_all()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: SmpfixServer, params: types.DidOpenTextDocumentParams) -> None:
        if (
            ls.open_document(params.text_document.uri, language=params.text_document.language_id)
            is not None
        ):
            ls.schedule(params.text_document.uri, delay=0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: SmpfixServer, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        document = ls.documents.get(uri)
        if document is None:
            return
        ls.schedule(uri)
        text = ls.workspace.get_text_document(uri).source
        if ls.launchers.is_launcher(document.path) or may_be_launcher(
            text.encode("utf-8", "surrogatepass")
        ):
            ls.recheck_after(
                await ls.on_worker(ls.file_changed, document.path, text), except_uri=uri
            )

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: SmpfixServer, params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.schedule(uri, delay=0)
        path = to_fs_path(uri) if uri.startswith("file:") else None
        if path is not None:
            ls.recheck_after(await ls.on_worker(ls.file_changed, path, None), except_uri=uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    async def did_close(ls: SmpfixServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        document = ls.documents.get(uri)
        ls.close_document(uri)
        if document is not None and ls.launchers.is_launcher(document.path):
            # Its unsaved text no longer counts: the file on disk does.
            ls.recheck_after(await ls.on_worker(ls.file_changed, document.path, None))

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
            ls.recheck_after(await ls.on_worker(ls.file_changed, path, None), except_uri=uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_close(ls: SmpfixServer, params: types.DidCloseNotebookDocumentParams) -> None:
        ls.close_document(params.notebook_document.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    async def watched_files(ls: SmpfixServer, params: types.DidChangeWatchedFilesParams) -> None:
        changed: set[str] = set()
        for change in params.changes:
            path = to_fs_path(change.uri) if change.uri.startswith("file:") else None
            if path is not None:
                changed |= await ls.on_worker(ls.file_changed, path, None)
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
                    data, None if _resolves_edits(ls) else await _fix_all_edit(ls, checked)
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
            action.edit = await _fix_all_edit(ls, found[1])
        return action

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: SmpfixServer, params: None) -> None:
        ls.shut_down = True
        for uri in list(ls.documents):
            task = ls.documents[uri].task
            if task is not None:
                task.cancel()
        ls.documents.clear()
        ls.stop_worker()

    @server.feature(types.EXIT)
    def exit_(ls: SmpfixServer, params: None) -> None:
        ls.exit_code = 0 if ls.shut_down else 1  # LSP: exit without shutdown is an error

    return server


def _settings(ls: SmpfixServer, data: Any) -> ClientSettings:
    settings, problems = ClientSettings.parse(data)
    for problem in problems:
        ls.window_show_message(
            types.ShowMessageParams(type=types.MessageType.Error, message=f"smpfix: {problem}")
        )
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


async def _fix_all_edit(ls: SmpfixServer, checked: Checked) -> types.WorkspaceEdit:
    fixed: FixedText = await ls.on_worker(_fix_all_on_worker, ls, checked)
    snapshot = checked.snapshot
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
    return types.WorkspaceEdit(changes=changes)


def _fix_all_on_worker(ls: SmpfixServer, checked: Checked) -> FixedText:
    resolved = checked.resolved
    if resolved is None:
        return FixedText()
    return fix_all(checked.snapshot, resolved)


def serve(arguments: Sequence[str] = ()) -> int:
    """Run the server on stdin/stdout until the client says ``exit``; the exit code LSP asks for."""
    logging.basicConfig(level=logging.WARNING, format="smpfix server: %(levelname)s %(message)s")
    server = create()
    server.start_io()
    return server.exit_code
