"""``smpfix server`` driven over stdio by a real LSP client (pytest-lsp), as an editor drives it.

Each test starts the installed command in a fresh workspace folder, initializes a session
with Visual Studio Code's capabilities, and talks to it only through the protocol.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Optional

from conftest import smpfix_command
from lsprotocol import types
from pygls.uris import from_fs_path
from pytest_lsp import LanguageClient, client_capabilities, make_test_lsp_client

from smpfix.api import check_source, fix_source

SCRIPT = """import smdistributed.modelparallel.torch as smp
import torch

smp.init()
model = smp.DistributedModel(build_model())
optimizer = smp.DistributedOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-4))


def save(path, epoch):
    if smp.dp_rank() == 0:
        smp.save({"model": model.local_state_dict(), "epoch": epoch}, path, partial=True)
    smp.barrier()
"""
GUARD_LINE = 9  # 0-based line of `if smp.dp_rank() == 0:`
TP = {"tensor_parallel_degree": 4}

LAUNCHER = """from sagemaker.pytorch import PyTorch

smp_options = {{"enabled": True, "parameters": {{"microbatches": 4, "ddp": True, "tensor_parallel_degree": {tp}}}}}
estimator = PyTorch(
    entry_point="train.py",
    role="arn:aws:iam::123456789012:role/sm",
    instance_type="ml.p4d.24xlarge",
    instance_count=2,
    framework_version="1.12.1",
    distribution={{"smdistributed": {{"modelparallel": smp_options}}, "mpi": {{"enabled": True, "processes_per_host": 8}}}},
)
estimator.fit()
"""  # noqa: E501
ESTIMATOR_LINE = 4  # 1-based line of `estimator = PyTorch(`

_NOTEBOOK_CAPABILITIES = types.NotebookDocumentClientCapabilities(
    synchronization=types.NotebookDocumentSyncClientCapabilities(
        dynamic_registration=False, execution_summary_support=False
    )
)

# Rule SMP101 broken (in every process the server starts: the analysis runs in one of its
# own), to see that a crashing rule costs only its own findings.
_CRASHING_RULE = """
from smpfix.rules.wiring import smp101_optimizer_before_distributed_model as rule


def crash(self, node):
    raise RuntimeError("boom")


rule.OptimizerBeforeDistributedModel.visit_Call = crash
"""


# Every analysis a server's processes run, one line each in the file the variable names.
_COUNTED_ANALYSES = """
import os

from smpfix.engine import analysis

_analyze = analysis.analyze


def analyze(text, path, options, *parsed):
    with open(os.environ["SMPFIX_TEST_ANALYSES"], "a") as counted:
        counted.write(path + "\\n")
    return _analyze(text, path, options, *parsed)


analysis.analyze = analyze
"""


def patched(tmp_path: Path, patch: str) -> dict[str, str]:
    """The environment of a server whose processes all run ``patch`` first (a
    ``sitecustomize`` module on ``PYTHONPATH``)."""
    folder = tmp_path / "patch"
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(patch)
    paths = [str(folder), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {"PYTHONPATH": os.pathsep.join(paths)}


def uri_of(path: Path) -> str:
    uri = from_fs_path(str(path))
    assert uri is not None
    return uri


@asynccontextmanager
async def session(
    root: Path,
    options: Optional[dict[str, Any]] = None,
    command: Optional[Sequence[str]] = None,
    notebooks: bool = False,
    env: Optional[dict[str, str]] = None,
    editor: str = "visual-studio-code",
) -> AsyncIterator[LanguageClient]:
    """A client connected to a fresh server for the workspace ``root`` (``env``: variables to
    add to the server's environment), declaring the capabilities of ``editor`` (a client
    pytest-lsp knows, such as ``neovim@v0.11.0``)."""
    client = make_test_lsp_client()

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:
        client.registrations = [*getattr(client, "registrations", []), *params.registrations]

    await client.start_io(
        *(command or [*smpfix_command(), "server"]), env={**os.environ, **(env or {})}
    )
    capabilities = client_capabilities(editor)
    if notebooks:
        capabilities.notebook_document = _NOTEBOOK_CAPABILITIES
    await client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities,
            root_uri=uri_of(root),
            initialization_options=options,
            workspace_folders=[types.WorkspaceFolder(uri=uri_of(root), name="workspace")],
        )
    )
    try:
        yield client
    finally:
        await end(client)


async def end(client: LanguageClient) -> None:
    """Shut the server down as an editor does; a server that does not end in time is killed
    (so that a failing test fails instead of hanging)."""
    try:
        if client._server is not None and client._server.returncode is None:
            await asyncio.wait_for(client.shutdown_session(), 60)
    finally:
        if client._server is not None and client._server.returncode is None:
            client._server.kill()
        await client.stop()


def open_file(
    client: LanguageClient, path: Path, text: Optional[str] = None, version: int = 1
) -> str:
    uri = uri_of(path)
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri,
                language_id="python",
                version=version,
                text=text if text is not None else path.read_text(),
            )
        )
    )
    return uri


def replace_text(client: LanguageClient, uri: str, text: str, version: int) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


async def diagnostics(
    client: LanguageClient,
    uri: str,
    wanted: Callable[[Sequence[types.Diagnostic]], bool] = lambda found: True,
    timeout: float = 60,
) -> list[types.Diagnostic]:
    """The diagnostics published for ``uri`` once they satisfy ``wanted``."""

    async def wait() -> list[types.Diagnostic]:
        while True:
            if uri in client.diagnostics and wanted(client.diagnostics[uri]):
                return list(client.diagnostics[uri])
            await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)

    return await asyncio.wait_for(wait(), timeout)


def codes(found: Sequence[types.Diagnostic]) -> list[str]:
    return sorted(str(item.code) for item in found)


def apply_edits(text: str, edits: Sequence[types.TextEdit]) -> str:
    """What the editor does with ``edits`` (ASCII text: columns are characters)."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(position: types.Position) -> int:
        return starts[position.line] + position.character

    for edit in sorted(
        edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True
    ):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
    return text


async def code_actions(
    client: LanguageClient, uri: str, line: int, only: Optional[list[str]] = None
) -> list[types.CodeAction]:
    here = types.Range(
        start=types.Position(line=line, character=4), end=types.Position(line=line, character=4)
    )
    found = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=here,
            context=types.CodeActionContext(diagnostics=[], only=only),
        )
    )
    return [action for action in found or [] if isinstance(action, types.CodeAction)]


async def test_diagnostics_on_open_change_and_save(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    async with session(tmp_path, {"job": TP}) as client:
        uri = open_file(client, script)
        found = await diagnostics(client, uri, lambda found: bool(found))
        assert codes(found) == ["SMP301"]
        item = found[0]
        assert item.source == "smpfix" and item.severity == types.DiagnosticSeverity.Error
        assert item.code_description is not None
        assert item.code_description.href == "https://smpfix.github.io/smpfix/rules/SMP301/"
        assert item.range.start == types.Position(line=GUARD_LINE, character=7)
        assert "dp_rank" in item.message and "tensor parallelism" in item.message
        # The user fixes the guard: the finding goes away without saving.
        replace_text(client, uri, SCRIPT.replace("smp.dp_rank()", "smp.rdp_rank()"), version=2)
        assert await diagnostics(client, uri, lambda found: not found) == []
        # ... brings it back, and saves.
        replace_text(client, uri, SCRIPT, version=3)
        client.text_document_did_save(
            types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        assert codes(await diagnostics(client, uri, lambda found: bool(found))) == ["SMP301"]


async def test_quick_fix_suppression_and_fix_all(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    fixed = fix_source(SCRIPT, job=TP).text
    assert fixed != SCRIPT
    async with session(tmp_path, {"job": TP}) as client:
        uri = open_file(client, script)
        await diagnostics(client, uri, lambda found: bool(found))
        actions = await code_actions(client, uri, GUARD_LINE)
        quick = [
            a
            for a in actions
            if a.kind == types.CodeActionKind.QuickFix and a.title.startswith("SMP301")
        ]
        assert (
            len(quick) == 1
            and quick[0].is_preferred
            and quick[0].diagnostics
            and quick[0].diagnostics[0].code == "SMP301"
        )
        assert quick[0].edit is not None and quick[0].edit.changes is not None
        assert apply_edits(SCRIPT, quick[0].edit.changes[uri]) == fixed
        suppress = [a for a in actions if a.title == f"Suppress SMP301 on line {GUARD_LINE + 1}"]
        assert (
            len(suppress) == 1
            and suppress[0].edit is not None
            and suppress[0].edit.changes is not None
        )
        silenced = apply_edits(SCRIPT, suppress[0].edit.changes[uri])
        assert (
            silenced.splitlines()[GUARD_LINE]
            == "    if smp.dp_rank() == 0:  # smpfix: ignore[SMP301]"
        )
        # "Fix all" is offered for the whole file, resolved when chosen (as VS Code does).
        for only in (None, ["source.fixAll"], ["source.fixAll.smpfix"]):
            fix_all = [
                a
                for a in await code_actions(client, uri, 0, only)
                if a.kind == "source.fixAll.smpfix"
            ]
            assert len(fix_all) == 1, only
        resolved = await client.code_action_resolve_async(fix_all[0])
        assert resolved.edit is not None and resolved.edit.changes is not None
        assert apply_edits(SCRIPT, resolved.edit.changes[uri]) == fixed
        # The suppressed text is quiet, and offers no fix at all.
        replace_text(client, uri, silenced, version=2)
        assert await diagnostics(client, uri, lambda found: not found) == []
        assert [a for a in await code_actions(client, uri, 0, ["source.fixAll"])] == []


async def test_code_actions_are_answered_from_the_last_analysis(tmp_path: Path) -> None:
    """Quick fixes come from the check that showed the diagnostics, and "fix all" starts from
    it: asking for code actions again and again analyzes the unchanged text no more (the
    fixed text is analyzed once, as ``--apply`` does to see that the fixes hold)."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    counted = tmp_path / "analyses.txt"
    env = {**patched(tmp_path, _COUNTED_ANALYSES), "SMPFIX_TEST_ANALYSES": str(counted)}

    def analyses() -> int:
        return len(counted.read_text().splitlines()) if counted.exists() else 0

    for editor in ("visual-studio-code", "neovim@v0.11.0"):  # resolves the edit, or not
        counted.unlink(missing_ok=True)
        async with session(tmp_path, {"job": TP}, env=env, editor=editor) as client:
            uri = open_file(client, script)
            await diagnostics(client, uri, lambda found: bool(found))
            assert analyses() == 1
            for _ in range(3):
                actions = await code_actions(client, uri, GUARD_LINE)
                assert any(a.title.startswith("SMP301") for a in actions)
            assert analyses() == 1
            for _ in range(3):
                (fix_all,) = await code_actions(client, uri, 0, ["source.fixAll.smpfix"])
                if fix_all.edit is None:
                    fix_all = await client.code_action_resolve_async(fix_all)
                assert fix_all.edit is not None and fix_all.edit.changes is not None
                fixed = apply_edits(SCRIPT, fix_all.edit.changes[uri])
                assert fixed == fix_source(SCRIPT, job=TP).text
            assert analyses() == 2, editor  # the check, and the fixed text once
            # A code action asked for right after an edit waits for the check the edit
            # started, and is answered from it.
            replace_text(client, uri, SCRIPT + "#\n", 2)
            await code_actions(client, uri, GUARD_LINE)
            assert analyses() == 3


async def test_settings_from_pyproject_and_from_the_editor(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.smpfix]\nselect = ["SMP1"]\n\n[tool.smpfix.job]\ntensor_parallel_degree = 4\n'
    )
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    async with session(tmp_path) as client:
        uri = open_file(client, script)
        assert await diagnostics(client, uri) == []
    # The editor's `select` replaces the configured one, as `--select` does.
    async with session(tmp_path, {"smpfix": {"select": ["SMP301"]}}) as client:
        uri = open_file(client, script)
        found = await diagnostics(client, uri, lambda found: bool(found))
        assert codes(found) == ["SMP301"] and found[0].severity == types.DiagnosticSeverity.Error
        # The job came from pyproject.toml, and the diagnostic says where, after its explanation.
        related = [r for r in found[0].related_information or [] if r.location.uri != uri]
        assert [r.location.uri for r in related] == [uri_of(tmp_path / "pyproject.toml")]
        assert related[0].location.range.start.line == 3
    # A bad editor setting is reported, and the document is still checked with the rest.
    async with session(
        tmp_path, {"select": ["SMP301"], "job": {"tensor_parallel_degre": 4}}
    ) as client:
        uri = open_file(client, script)
        assert codes(await diagnostics(client, uri, lambda found: bool(found))) == ["SMP301"]
        assert any("tensor_parallel_degre" in message.message for message in client.messages)


def shown(client: LanguageClient, text: str) -> list[str]:
    """The messages the server showed the user (``window/showMessage``) that contain ``text``."""
    return [message.message for message in client.messages if text in message.message]


async def test_settings_problems_are_shown_to_the_user_once_each(tmp_path: Path) -> None:
    """As Ruff's server does: settings that do not resolve are shown to the user and left
    out, and the rest applies (here `[tool.smpfix] select`)."""
    (tmp_path / "pyproject.toml").write_text('[tool.smpfix]\nselect = ["SMP3"]\n')
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    async with session(
        tmp_path, {"select": ["SMP3O1"], "job": TP}, editor="neovim@v0.7.0"
    ) as client:
        uri = open_file(client, script)
        assert codes(await diagnostics(client, uri, lambda found: bool(found))) == ["SMP301"]
        for version in range(2, 5):  # edits check again, and tell nothing new
            replace_text(client, uri, SCRIPT + "#" * version + "\n", version)
            await diagnostics(client, uri, lambda found: bool(found))
        assert len(shown(client, "'SMP3O1'")) == 1
        assert "in the editor settings" in shown(client, "'SMP3O1'")[0]
        # The same mistake in settings the editor sends later is told again.
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"smpfix": {"ignore": ["SMP3O1"]}})
        )
        found = await diagnostics(  # no job: SMP301 warns that tensor parallelism may be on
            client,
            uri,
            lambda found: bool(found) and found[0].severity == types.DiagnosticSeverity.Warning,
        )
        assert codes(found) == ["SMP301"]
        assert len(shown(client, "'SMP3O1'")) == 2
    # A broken `[tool.smpfix]` table is shown too, once.
    (tmp_path / "pyproject.toml").write_text('[tool.smpfix]\nselect = "SMP3"\n')
    async with session(tmp_path, {"job": TP}, editor="neovim@v0.11.0") as client:
        uri = open_file(client, script)
        await diagnostics(client, uri, lambda found: bool(found))
        replace_text(client, uri, SCRIPT + "#\n", 2)
        await diagnostics(client, uri, lambda found: bool(found))
        assert len(shown(client, "pyproject.toml")) == 1, client.messages


async def test_job_facts_from_the_launchers_in_the_workspace(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    launcher = tmp_path / "launch.py"
    launcher.write_text(LAUNCHER.format(tp=4))
    async with session(tmp_path) as client:
        uri = open_file(client, script)
        found = await diagnostics(client, uri, lambda found: bool(found))
        assert codes(found) == ["SMP301"] and found[0].severity == types.DiagnosticSeverity.Error
        related = [r for r in found[0].related_information or [] if r.location.uri != uri]
        assert related and related[0].location.uri == uri_of(launcher)
        assert related[0].location.range.start.line == ESTIMATOR_LINE - 1
        assert "tensor parallelism" in related[0].message
        # Editing the launcher (unsaved) re-checks the script it launches.
        launcher_uri = open_file(client, launcher)
        replace_text(client, launcher_uri, LAUNCHER.format(tp=1), version=2)
        assert await diagnostics(client, uri, lambda found: not found) == []
        # Closing it unsaved: the file on disk counts again.
        client.text_document_did_close(
            types.DidCloseTextDocumentParams(
                text_document=types.TextDocumentIdentifier(uri=launcher_uri)
            )
        )
        assert codes(await diagnostics(client, uri, lambda found: bool(found))) == ["SMP301"]
        # A launcher changed on disk (another tool wrote it) is read again.
        launcher.write_text(LAUNCHER.format(tp=1))
        client.workspace_did_change_watched_files(
            types.DidChangeWatchedFilesParams(
                changes=[types.FileEvent(uri=uri_of(launcher), type=types.FileChangeType.Changed)]
            )
        )
        assert await diagnostics(client, uri, lambda found: not found) == []


async def test_a_launcher_changed_on_disk_is_seen_by_a_client_that_watches_no_files(
    tmp_path: Path,
) -> None:
    """Neovim declares no dynamic registration of watched files: the server looks at the
    launchers itself, and the open script follows its launcher with no event from the editor."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    launcher = tmp_path / "launch.py"
    launcher.write_text(LAUNCHER.format(tp=4))
    async with session(tmp_path, editor="neovim@v0.11.0") as client:
        assert not getattr(client, "registrations", [])
        uri = open_file(client, script)
        assert codes(await diagnostics(client, uri, lambda found: bool(found))) == ["SMP301"]
        launcher.write_text(LAUNCHER.format(tp=1))  # tensor parallelism off
        assert await diagnostics(client, uri, lambda found: not found, timeout=20) == []
        launcher.write_text(LAUNCHER.format(tp=2))  # and on again
        found = await diagnostics(client, uri, lambda found: bool(found), timeout=20)
        assert codes(found) == ["SMP301"]


SHELL_LAUNCHER = """set -ex
export SM_HP_MP_PARAMETERS='{{"ddp": true, "microbatches": 4, "partitions": 2, "tensor_parallel_degree": {tp}}}'
mpirun --allow-run-as-root -np 8 python train.py
"""  # noqa: E501


async def test_a_shell_launcher_changed_on_disk_is_read_again(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    launcher = tmp_path / "run_smp.sh"
    launcher.write_text(SHELL_LAUNCHER.format(tp=4))
    async with session(tmp_path) as client:
        uri = open_file(client, script)
        found = await diagnostics(client, uri, lambda found: bool(found))
        assert codes(found) == ["SMP301"] and found[0].severity == types.DiagnosticSeverity.Error
        launcher.write_text(SHELL_LAUNCHER.format(tp=1))
        client.workspace_did_change_watched_files(
            types.DidChangeWatchedFilesParams(
                changes=[types.FileEvent(uri=uri_of(launcher), type=types.FileChangeType.Changed)]
            )
        )
        assert await diagnostics(client, uri, lambda found: not found) == []


async def test_bad_documents_never_stop_the_server(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    wrong_order = (
        SCRIPT.replace(
            "optimizer = smp.DistributedOptimizer(torch.optim.AdamW(model.parameters(),"
            " lr=1e-4))\n",
            "",
        )
        + "opt = torch.optim.AdamW(net.parameters())\nnet = smp.DistributedModel(net)\n"
    )
    async with session(tmp_path, {"job": TP}, env=patched(tmp_path, _CRASHING_RULE)) as client:
        broken = open_file(client, tmp_path / "broken.py", SCRIPT + "def oops(:\n")
        huge = open_file(client, tmp_path / "huge.py", SCRIPT + "x = 1\n" * 400_000)
        uri = open_file(client, script, wrong_order)
        # A crashed rule is logged; the other rules' findings are shown.
        assert "SMP101" in [finding.code for finding in check_source(wrong_order, job=TP)]
        shown = codes(await diagnostics(client, uri, lambda found: bool(found)))
        assert "SMP301" in shown and "SMP101" not in shown
        assert await diagnostics(client, broken) == []
        assert await diagnostics(client, huge) == []
        logged = "\n".join(message.message for message in client.log_messages)
        assert "broken.py:13:" in logged and "syntax error" in logged
        assert "huge.py" in logged and "too large" in logged
        assert "internal error in rule SMP101" in logged and "RuntimeError: boom" in logged
        # Still serving: the broken file is repaired.
        replace_text(client, broken, SCRIPT, version=2)
        assert codes(await diagnostics(client, broken, lambda found: bool(found))) == ["SMP301"]


async def test_notebook_cells_get_their_own_diagnostics(tmp_path: Path) -> None:
    notebook = tmp_path / "train.ipynb"
    cells = [
        "%pip install torch\nimport smdistributed.modelparallel.torch as smp\nsmp.init()\n",
        "# Saving",
        SCRIPT.split("\n\n\n")[1],
    ]
    notebook.write_text(
        json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    )
    uris = [f"{uri_of(notebook)}#cell{index}" for index in range(3)]
    async with session(tmp_path, {"job": TP}, notebooks=True) as client:
        client.notebook_document_did_open(
            types.DidOpenNotebookDocumentParams(
                notebook_document=types.NotebookDocument(
                    uri=uri_of(notebook),
                    notebook_type="jupyter-notebook",
                    version=1,
                    cells=[
                        types.NotebookCell(
                            kind=(
                                types.NotebookCellKind.Markup
                                if index == 1
                                else types.NotebookCellKind.Code
                            ),
                            document=uri,
                        )
                        for index, uri in enumerate(uris)
                    ],
                ),
                cell_text_documents=[
                    types.TextDocumentItem(
                        uri=uri,
                        language_id="markdown" if index == 1 else "python",
                        version=1,
                        text=text,
                    )
                    for index, (uri, text) in enumerate(zip(uris, cells))
                ],
            )
        )
        found = await diagnostics(client, uris[2], lambda found: bool(found))
        assert codes(found) == ["SMP301"] and found[0].range.start == types.Position(
            line=1, character=7
        )
        assert await diagnostics(client, uris[0]) == []
        actions = await code_actions(client, uris[2], 1)
        quick = [a for a in actions if a.title.startswith("SMP301")]
        assert quick and quick[0].edit is not None and quick[0].edit.changes is not None
        assert "rdp_rank" in apply_edits(cells[2], quick[0].edit.changes[uris[2]])


async def test_a_notebook_sent_as_python_text_is_checked_as_python(tmp_path: Path) -> None:
    """jupyterlab-lsp sends a notebook's cells joined into one Python text document, under the
    notebook's own name (``.virtual_documents/train.ipynb``)."""
    virtual = tmp_path / ".virtual_documents" / "train.ipynb"
    virtual.parent.mkdir()
    async with session(tmp_path, {"job": TP}) as client:
        uri = open_file(client, virtual, SCRIPT)
        assert codes(await diagnostics(client, uri, lambda found: bool(found))) == ["SMP301"]
        other = open_file(client, tmp_path / "notes.ipynb", SCRIPT)
        other_item = types.TextDocumentItem(
            uri=uri_of(tmp_path / "README.md"),
            language_id="markdown",
            version=1,
            text="smp.dp_rank()",
        )
        client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=other_item))
        assert codes(await diagnostics(client, other, lambda found: bool(found))) == ["SMP301"]
        assert other_item.uri not in client.diagnostics


async def test_shutdown_and_exit_end_the_process(tmp_path: Path) -> None:
    client = make_test_lsp_client()
    await client.start_io(*smpfix_command(), "server")
    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("neovim"), root_uri=uri_of(tmp_path)
        )
    )
    await client.shutdown_session()  # shutdown, then exit, then waits for the process
    assert client._server is not None and client._server.returncode == 0
    await client.stop()


def test_without_the_extra_the_command_says_what_to_install() -> None:
    hide = (
        "import sys; sys.modules['pygls'] = None; from smpfix.cli import main; sys.argv ="
        " ['smpfix', 'server']; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", hide],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == "smpfix: error: the language server needs extra packages: pip install 'smpfix[server]'"
    )
