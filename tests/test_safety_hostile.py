"""Hostile inputs: smpfix never hangs on, floods itself with, or wanders into what a path names.

Each test reproduces one failure of an adversarial run (issue 23) in a temporary folder:
FIFOs are made with ``os.mkfifo`` and never written, so code that opened one would block
(the command is then ended by a timeout and the test fails); "large files" are sparse; the
real ``/dev/zero`` is only ever linked to, never written.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from smpfix.base.safe_read import JSON_LIMIT, RefusedFile, read_regular

HEADER = "import smdistributed.modelparallel.torch as smp\n"
SCRIPT = (
    HEADER + "import torch\n\n"
    "smp.init()\n"
    "model = smp.DistributedModel(build_model())\n\n\n"
    "def save(path):\n"
    "    if smp.dp_rank() == 0:\n"
    "        smp.save(model.local_state_dict(), path, partial=True)\n"
)
PARAMETERS = b'{"tensor_parallel_degree": 4, "pipeline_parallel_degree": 1}'


def launcher(parameters: object) -> str:
    return (
        "from sagemaker.pytorch import PyTorch\n"
        "estimator = PyTorch(entry_point='train.py', instance_type='ml.p4d.24xlarge',"
        " instance_count=1, distribution={'smdistributed': {'modelparallel': {'enabled': True,"
        f" 'parameters': {parameters!r}}}}}, 'mpi':"
        " {'enabled': True, 'processes_per_host': 8}})\n"
    )


# A run that used to hang on a FIFO is ended after this long (the test then fails); a run
# that does not hang takes a second or two.
HANG = 60


def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text("")
    (root / "train.py").write_text(SCRIPT)
    return root


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ": error: " in line]


# -- the one way smpfix reads a file it chose to open ------------------------------------------


def test_a_regular_file_within_the_cap_is_read(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_bytes(PARAMETERS)
    assert read_regular(str(tmp_path / "p.json"), JSON_LIMIT, inside=str(tmp_path)) == PARAMETERS


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "p.json")
    with pytest.raises(RefusedFile, match="it is a FIFO, not a regular file"):
        read_regular(str(tmp_path / "p.json"), JSON_LIMIT)


def test_a_character_device_is_refused(tmp_path: Path) -> None:
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    with pytest.raises(RefusedFile, match="it is a device"):
        read_regular(str(tmp_path / "zero.json"), JSON_LIMIT)


def test_a_file_over_the_cap_is_refused_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with open(big, "wb") as handle:
        handle.truncate(JSON_LIMIT + 1)  # sparse: costs nothing on disk
    with pytest.raises(RefusedFile, match="too large"):
        read_regular(str(big), JSON_LIMIT)


def test_a_link_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    inside = tmp_path / "inside"
    inside.mkdir()
    (tmp_path / "secret.json").write_bytes(PARAMETERS)
    (inside / "p.json").symlink_to(tmp_path / "secret.json")
    with pytest.raises(RefusedFile, match="outside the project"):
        read_regular(str(inside / "p.json"), JSON_LIMIT, inside=str(inside))


# -- a launcher's "parameters": "<path>" ---------------------------------------------------------


def test_a_launcher_naming_a_fifo_gets_one_line_and_the_run_goes_on(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "launch.py").write_text(launcher("smp.json"))
    os.mkfifo(root / "smp.json")
    result = run_cli("--no-cache", "--format", "concise", str(root), timeout=HANG)
    assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
    assert error_lines(result.stderr) == [
        f"{root / 'launch.py'}:2:13: error: parameters file 'smp.json': not read: it is a FIFO,"
        " not a regular file"
    ]
    assert f"{root / 'train.py'}:" in result.stdout  # the script is still checked


@pytest.mark.parametrize(
    ("named", "reason"),
    [
        ("/dev/zero", "it is a device, not a regular file"),
        ("../outside.json", "it is outside the project"),
        ("big.json", "it is too large (over 10 MB)"),
    ],
)
def test_a_launcher_naming_what_is_not_a_small_project_file(
    tmp_path: Path, named: str, reason: str
) -> None:
    root = project(tmp_path)
    (tmp_path / "outside.json").write_bytes(PARAMETERS)
    with open(root / "big.json", "wb") as handle:
        handle.write(PARAMETERS + b" " * JSON_LIMIT)
    (root / "launch.py").write_text(launcher(named))
    result = run_cli("--no-cache", "--format", "concise", str(root / "launch.py"))
    assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
    assert error_lines(result.stderr) == [
        f"{root / 'launch.py'}:2:13: error: parameters file {named!r}: not read: {reason}"
    ]


def test_checking_a_sibling_reads_no_named_device_and_says_so(tmp_path: Path) -> None:
    """The launcher search reads every launcher of the project even when one script is
    checked; a launcher naming a FIFO must not hang that run, and the one line about it is
    given at the launcher's estimator call, as when the launcher itself is checked."""
    root = project(tmp_path)
    (root / "launch.py").write_text(launcher("smp.json"))
    os.mkfifo(root / "smp.json")
    result = run_cli("--no-cache", "--format", "concise", str(root / "train.py"), timeout=HANG)
    assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
    assert "SMP301 [*] warning: " in result.stdout, result.stdout
    assert error_lines(result.stderr) == [
        f"{root / 'launch.py'}:2:13: error: parameters file 'smp.json': not read: it is a FIFO,"
        " not a regular file"
    ]


def test_a_refusal_is_said_once_when_the_launcher_and_its_script_are_checked(
    tmp_path: Path,
) -> None:
    root = project(tmp_path)
    (root / "launch.py").write_text(launcher("/dev/zero"))
    result = run_cli(
        "--no-cache", "--format", "concise", str(root / "launch.py"), str(root / "train.py")
    )
    assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
    assert error_lines(result.stderr) == [
        f"{root / 'launch.py'}:2:13: error: parameters file '/dev/zero': not read: it is a"
        " device, not a regular file"
    ]


# -- the project root is never a folder too wide to walk -------------------------------------


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home folder of its own, with a project beside a loose script, and the working folder
    elsewhere (as a hook run from another repository has it)."""
    from smpfix.job import project_root as roots

    folder = tmp_path / "home"
    (folder / "repo").mkdir(parents=True)
    (folder / "repo" / ".git").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.chdir(tmp_path / "elsewhere")
    roots._too_wide.cache_clear()
    roots._root_of.cache_clear()
    yield folder
    roots._too_wide.cache_clear()
    roots._root_of.cache_clear()


def test_a_loose_file_in_the_home_folder_is_a_project_by_itself(home: Path) -> None:
    from smpfix.job.project_root import is_too_wide, project_folder, project_root

    assert is_too_wide(str(home)) and is_too_wide(os.sep)
    assert project_root(str(home / "train.py")) == str(home / "train.py")
    loose = str(home / "train.py")
    assert project_folder(project_root(loose), loose) == str(home)
    assert project_root(str(home / "repo" / "train.py")) == str(home / "repo")


def test_a_name_at_the_filesystem_root_is_a_project_by_itself(home: Path) -> None:
    from smpfix.job.project_root import project_root

    assert project_root(os.path.join(os.sep, "train.py")) == os.path.join(os.sep, "train.py")


def test_a_scratch_file_in_the_temporary_files_root_is_a_project_by_itself(home: Path) -> None:
    import tempfile

    from smpfix.job.project_root import is_too_wide, project_root

    scratch = os.path.join(tempfile.gettempdir(), "scratch.py")
    assert is_too_wide(tempfile.gettempdir())
    assert project_root(scratch) == scratch


def test_checking_a_script_in_home_walks_nothing_else_of_home(home: Path) -> None:
    """A launcher elsewhere in ``~`` that would configure ``~/train.py`` is not found: the
    home folder is not walked (with ``~`` walked, the launcher's degree makes SMP301 an error)."""
    (home / "train.py").write_text(SCRIPT)
    (home / "jobs").mkdir()
    (home / "jobs" / "launch.py").write_text(
        launcher("smp.json").replace("'train.py'", "'../train.py'")
    )
    (home / "jobs" / "smp.json").write_bytes(PARAMETERS)
    result = run_cli(
        "--no-cache", "--format", "concise", str(home / "train.py"), env={"HOME": str(home)}
    )
    assert result.code == 1 and "SMP301 [*] warning: " in result.stdout, result.stdout


# -- FIFOs and devices named on the command line ---------------------------------------------


def test_a_fifo_or_device_named_on_the_command_line_is_skipped_with_one_line(
    tmp_path: Path,
) -> None:
    """pre-commit names files; a FIFO among them used to hang the run before any report."""
    root = project(tmp_path)
    os.mkfifo(root / "fifo.py")
    (root / "zero.py").symlink_to("/dev/zero")
    named = [str(root / name) for name in ("fifo.py", "zero.py", "train.py")]
    result = run_cli("--no-cache", "--format", "concise", *named, timeout=HANG)
    assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
    assert error_lines(result.stderr) == [
        f"{root / 'fifo.py'}:1:1: error: not read: it is a FIFO, not a regular file",
        f"{root / 'zero.py'}:1:1: error: not read: it is a device, not a regular file",
    ]
    assert f"{root / 'train.py'}:9:8: SMP301" in result.stdout


def test_plan_skips_a_named_fifo_with_one_line(tmp_path: Path) -> None:
    root = project(tmp_path)
    os.mkfifo(root / "fifo.py")
    (root / "launch.py").write_text(launcher({"tensor_parallel_degree": 4}))
    result = run_cli("plan", str(root / "fifo.py"), str(root / "launch.py"), timeout=HANG)
    assert "Traceback" not in result.stderr, result.stderr
    assert error_lines(result.stderr) == [
        f"{root / 'fifo.py'}: error: not read: it is a FIFO, not a regular file"
    ]
    assert "launch.py" in result.stdout


def test_a_source_over_the_byte_cap_is_refused_unread(tmp_path: Path) -> None:
    from smpfix.base.safe_read import SOURCE_LIMIT

    big = tmp_path / "big.py"
    with open(big, "wb") as handle:
        handle.write(HEADER.encode())
        handle.truncate(SOURCE_LIMIT + 1)
    result = run_cli("--no-cache", "--format", "concise", str(big))
    assert result.code == 2 and error_lines(result.stderr) == [
        f"{big}:1:1: error: not read: it is too large (over 8 MB)"
    ]


# -- configuration errors are one line and exit 2 --------------------------------------------


def test_a_pyproject_that_is_not_utf8_is_a_configuration_error(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "pyproject.toml").write_bytes(b'[tool.smpfix]\nselect = ["SMP1"]  # caf\xe9\n')
    result = run_cli("--no-cache", str(root / "train.py"))
    assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip() == (
        f"smpfix: error: {root / 'pyproject.toml'}: cannot read: not UTF-8 (byte 39);"
        " TOML files are UTF-8"
    )


@pytest.mark.parametrize("value", ["1e400", "-inf", "nan", "1" + "0" * 5000])
@pytest.mark.parametrize("command", ["check", "plan"])
def test_a_job_number_out_of_range_is_a_usage_error(
    tmp_path: Path, command: str, value: str
) -> None:
    root = project(tmp_path)
    result = run_cli(command, "--job", f"model_parameters={value}", str(root / "train.py"))
    assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip() == (
        "smpfix: error: --job: job setting 'model_parameters' must be a finite number below 1e30"
    )


def test_a_job_number_out_of_range_in_pyproject(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "pyproject.toml").write_text("[tool.smpfix.job]\nmodel_parameters = inf\n")
    result = run_cli("--no-cache", str(root / "train.py"))
    assert result.code == 2 and "must be a finite number below 1e30" in result.stderr


# -- python -m smpfix imports nothing from the folder it is run in ----------------------------


@pytest.mark.parametrize("module", ["click", "libcst", "json"])
def test_python_m_smpfix_never_imports_from_the_current_folder(tmp_path: Path, module: str) -> None:
    import subprocess
    import sys

    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / f"{module}.py").write_text(
        "import pathlib\npathlib.Path('ran').write_text('ran')\nraise SystemExit(99)\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "smpfix", "check", "--no-cache", "--format", "concise", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert not (tmp_path / "ran").exists(), done.stderr
    assert done.returncode == 1 and "train.py:9:8: SMP301" in done.stdout, done.stderr


# -- -o never replaces what the path names ----------------------------------------------------


def device(path: Path, major: int, minor: int) -> Path:
    """A private copy of a character device (1,3 is null, 1,7 is full), made in the test's
    folder so that nothing can happen to the real /dev; skipped where mknod is not allowed."""
    import stat

    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    except (PermissionError, AttributeError):
        pytest.skip("making a device node needs root")
    return path


def test_a_report_to_a_character_device_is_written_into_it(tmp_path: Path) -> None:
    import stat

    root = project(tmp_path)
    null = device(tmp_path / "null", 1, 3)
    result = run_cli("--no-cache", "-o", str(null), str(root / "train.py"))
    assert result.code == 1, result.stderr
    assert stat.S_ISCHR(os.stat(null).st_mode)  # still the device, not a file with the report


def test_a_report_to_a_full_device_is_a_one_line_error(tmp_path: Path) -> None:
    root = project(tmp_path)
    full = device(tmp_path / "full", 1, 7)
    result = run_cli("--no-cache", "-o", str(full), str(root / "train.py"))
    assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
    assert f"smpfix: error: cannot write {full}: No space left on device" in result.stderr


def test_a_report_through_a_link_keeps_the_link(tmp_path: Path) -> None:
    root = project(tmp_path)
    (tmp_path / "report.txt").write_text("old")
    (tmp_path / "latest").symlink_to(tmp_path / "report.txt")
    result = run_cli("--no-cache", "-o", str(tmp_path / "latest"), str(root / "train.py"))
    assert result.code == 1, result.stderr
    assert (tmp_path / "latest").is_symlink()
    assert "SMP301" in (tmp_path / "report.txt").read_text()


def test_a_report_to_a_fifo_nobody_reads_is_an_error_not_a_wait(tmp_path: Path) -> None:
    import stat

    root = project(tmp_path)
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    result = run_cli("--no-cache", "-o", str(fifo), str(root / "train.py"), timeout=HANG)
    assert result.code == 2 and "cannot write" in result.stderr, result.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # not replaced by a file holding the report


def test_a_report_to_a_fifo_with_a_reader_is_written_into_it(tmp_path: Path) -> None:
    import threading

    root = project(tmp_path)
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    for _ in range(20):  # until the reader has opened its end (before: ENXIO, exit 2)
        result = run_cli("--no-cache", "-o", str(fifo), str(root / "train.py"), timeout=HANG)
        if result.code == 1:
            break
    reader.join(HANG)
    assert result.code == 1 and b"SMP301" in received[0], result.stderr


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_a_new_report_gets_the_mode_the_umask_gives(tmp_path: Path, umask: int, mode: int) -> None:
    """As Ruff's and the shell's ``>``: 0644 under the usual umask (a temporary file renamed
    into place used to keep its private 0600)."""
    root = project(tmp_path)
    report = tmp_path / "report.txt"
    before = os.umask(umask)  # the command inherits it
    try:
        result = run_cli("--no-cache", "-o", str(report), str(root / "train.py"))
    finally:
        os.umask(before)
    assert result.code == 1, result.stderr
    assert report.stat().st_mode & 0o777 == mode


def test_an_existing_report_keeps_its_mode(tmp_path: Path) -> None:
    root = project(tmp_path)
    report = tmp_path / "report.txt"
    report.write_text("old")
    report.chmod(0o640)
    assert run_cli("--no-cache", "-o", str(report), str(root / "train.py")).code == 1
    assert report.stat().st_mode & 0o777 == 0o640 and "SMP301" in report.read_text()


@pytest.mark.parametrize("named", ["train.py", "link_to_train.py"])
def test_a_report_never_replaces_a_checked_file(tmp_path: Path, named: str) -> None:
    root = project(tmp_path)
    (root / "link_to_train.py").symlink_to(root / "train.py")
    result = run_cli("--no-cache", "-o", str(root / named), str(root / "train.py"))
    assert result.code == 2, result.stderr
    assert result.stderr.strip() == (
        f"smpfix: error: cannot write {root / named}: it is one of the checked files; the report"
        " would replace it"
    )
    assert (root / "train.py").read_text() == SCRIPT


def test_a_report_never_replaces_a_file_found_in_a_checked_folder(tmp_path: Path) -> None:
    root = project(tmp_path)
    result = run_cli("--no-cache", "-o", str(root / "train.py"), str(root))
    assert result.code == 2 and "one of the checked files" in result.stderr
    assert (root / "train.py").read_text() == SCRIPT


# -- --apply never overwrites an edit saved while it writes -----------------------------------

EDIT = SCRIPT + "# saved in the editor meanwhile\n"


def save_in_place(path: Path) -> None:
    with open(path, "r+b") as handle:  # the same file, rewritten (same inode)
        handle.write(EDIT.encode())


def save_by_rename(path: Path) -> None:
    (path.parent / "editor.tmp").write_text(EDIT)  # what editors do: a new file renamed over
    os.replace(path.parent / "editor.tmp", path)


@pytest.mark.parametrize("save", [save_in_place, save_by_rename])
def test_an_edit_saved_just_before_the_rename_is_kept_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, save: object
) -> None:
    """The editor's save lands after every check smpfix makes before its rename (at the
    moment the rename starts): the old check, a comparison of bytes, could not see it."""
    from smpfix.api import fix_source
    from smpfix.base import source

    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    read = source.read(str(path))
    fixed_text = fix_source(SCRIPT, "train.py", job={"tensor_parallel_degree": 4}).text
    saved: list[bool] = []

    def renaming(real):  # type: ignore[no-untyped-def]
        def rename(*args, **kwargs):  # type: ignore[no-untyped-def]
            if not saved:
                saved.append(True)
                save(path)  # type: ignore[operator]
            return real(*args, **kwargs)

        return rename

    monkeypatch.setattr(os, "replace", renaming(os.replace))
    if hasattr(source, "_exchange"):
        monkeypatch.setattr(source, "_exchange", renaming(source._exchange))
    with pytest.raises(source.ConcurrentModification):
        source.write_atomic(read, fixed_text)
    assert saved and path.read_text() == EDIT
    assert [name for name in os.listdir(tmp_path) if name.startswith(".smpfix-")] == []


# -- notebooks: line endings kept per cell, work linear in cells ------------------------------


def notebook_of(cells: list[str], newline: str = "\n") -> str:
    import json

    book = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "metadata": {},
                "outputs": [],
                "source": source.splitlines(keepends=True),
            }
            for source in cells
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(book, indent=1).replace("\n", newline) + newline


GUARDED = "if smp.dp_rank() == 0:\n    smp.save(model.local_state_dict(), 'p{}', partial=True)\n"
NOTEBOOK_HEADER = HEADER + "smp.init()\nmodel = smp.DistributedModel(build_model())\n"


def test_a_crlf_notebook_keeps_crlf_in_the_edited_cell(tmp_path: Path) -> None:
    text = notebook_of([NOTEBOOK_HEADER, GUARDED.format(0), "x = 1\n"], newline="\r\n")
    path = tmp_path / "train.ipynb"
    path.write_bytes(text.encode())
    result = run_cli("--no-cache", "--apply", "--job", "tensor_parallel_degree=4", str(path))
    assert result.code == 0, result.stderr
    written = path.read_bytes()
    assert b"rdp_rank()" in written
    assert written.count(b"\n") == written.count(b"\r\n")  # no bare LF anywhere


def test_an_lf_notebook_stays_lf(tmp_path: Path) -> None:
    text = notebook_of([NOTEBOOK_HEADER, GUARDED.format(0)])
    path = tmp_path / "train.ipynb"
    path.write_text(text)
    result = run_cli("--no-cache", "--apply", "--job", "tensor_parallel_degree=4", str(path))
    assert result.code == 0 and b"\r" not in path.read_bytes(), result.stderr


def test_placing_findings_in_cells_is_linear_in_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted, not timed: the joined text of the cells is built a few times per notebook,
    not once per finding, and each statement is asked once whether it is an early exit."""
    from smpfix.engine import notebook_analysis
    from smpfix.engine.runner import RunOptions, check_text
    from smpfix.job.jobfacts import DeclaredJob
    from smpfix.program.paths import branches
    from smpfix.rules.registry import rule_names

    cells = 150
    text = notebook_of([NOTEBOOK_HEADER, *(GUARDED.format(i) for i in range(cells))])
    calls = {"joined": 0, "exit": 0}
    joined, ends_in_jump = notebook_analysis._Unit.joined, branches.Branches._ends_in_jump

    def counted_joined(self):  # type: ignore[no-untyped-def]
        calls["joined"] += 1
        return joined(self)

    def counted_exit(self, block):  # type: ignore[no-untyped-def]
        calls["exit"] += 1
        return ends_in_jump(self, block)

    monkeypatch.setattr(notebook_analysis._Unit, "joined", counted_joined)
    monkeypatch.setattr(branches.Branches, "_ends_in_jump", counted_exit)
    names = rule_names()
    options = RunOptions(
        select=frozenset(names),
        rule_names=names,
        declared_jobs=(DeclaredJob("test", {"tensor_parallel_degree": 4}),),
    )
    result = check_text(text, "train.ipynb", options)
    assert len([f for f in result.findings if f.code == "SMP301"]) == cells
    assert calls["joined"] < 10 and calls["exit"] <= 2 * cells, calls


# -- UTF-16 and UTF-32 sources are reported, never passed in silence --------------------------


@pytest.mark.parametrize(
    ("encoding", "name"),
    [("utf-16", "UTF-16"), ("utf-16-be", "UTF-16"), ("utf-32", "UTF-32"), ("utf-32-be", "UTF-32")],
)
def test_a_wide_source_with_a_bom_is_reported_not_checked(
    tmp_path: Path, encoding: str, name: str
) -> None:
    import codecs

    boms = {"utf-16-be": codecs.BOM_UTF16_BE, "utf-32-be": codecs.BOM_UTF32_BE}
    path = tmp_path / "train.py"
    path.write_bytes(boms.get(encoding, b"") + SCRIPT.encode(encoding))
    result = run_cli("--no-cache", "--format", "concise", str(path))
    assert result.code == 2 and "All checks passed" not in result.stdout, result.stdout
    assert error_lines(result.stderr) == [
        f"{path}:1:1: error: not checked: the file is {name} text (it starts with a {name} byte"
        " order mark); Python reads source as UTF-8 or an ASCII-compatible encoding"
    ]


def test_a_wide_file_without_the_library_is_skipped_like_any_other(tmp_path: Path) -> None:
    path = tmp_path / "notes.py"
    path.write_bytes("x = 1\n".encode("utf-16"))
    result = run_cli("--no-cache", "--format", "concise", str(path))
    assert result.code == 0, result.stderr


# -- memory: a bound on tokens, not characters -----------------------------------------------


def test_a_file_of_too_many_tokens_is_refused_before_parsing() -> None:
    """Under the character limit, but LibCST would hold about 2 KB for each of its tokens
    (a 2 MB one-line list took 4.3 GB); refused before the parser sees it."""
    from smpfix.base.nesting import MAX_CHARACTERS, MAX_TOKENS
    from smpfix.engine.analysis import AnalysisOptions, analyze

    text = HEADER + "x = [" + ",".join(["0"] * (MAX_TOKENS // 2 + 1)) + "]\n"
    assert len(text) < MAX_CHARACTERS
    result = analyze(text, "generated.py", AnalysisOptions(select=frozenset({"SMP301"})))
    assert [error.message for error in result.errors] == [
        f"file is too large to analyze ({MAX_TOKENS + 15:,} tokens; the limit is"
        f" {MAX_TOKENS:,}); exclude it if it is generated"
    ]


def test_tokens_are_counted_as_python_reads_them() -> None:
    from smpfix.base.nesting import token_count

    assert token_count("x = 'a long string, one token' + f(y)  # a comment\n") == 10


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    st.lists(
        st.sampled_from(
            [
                "x",
                "1",
                "1.5e-3",
                "0or",
                "rb'a'",
                'f"{x}"',
                "'''a\n'''",
                "#c",
                "\\\n",
                "\n",
                "\r",
                "(",
                ")",
                ",",
                ";",
                "**=",
                ".",
                "é",
                "  ",
                "\t",
                "b''",
                "_x1",
                "@",
                "'",
            ]
        ),
        max_size=60,
    )
)
def test_the_token_bound_is_never_below_the_token_count(pieces: list[str]) -> None:
    """``refusal`` counts tokens only when a cheaper bound says the count could pass the limit,
    so the bound must never be lower than the count, whatever the text."""
    from smpfix.base import nesting

    text = "".join(pieces)
    assert nesting._token_bound(text) >= nesting.token_count(text)
