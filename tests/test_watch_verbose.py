"""``--watch`` and ``-v``/``--verbose`` with Ruff's meaning (issue 24).

``--watch`` checks, then checks again whenever a checked file, a launcher or the
configuration changes (a standard-library polling watcher, ``smpfix.engine.watch``), until
Ctrl-C, which exits 0 without a traceback. ``-v`` writes debug lines on stderr: the
configuration file, the files found and those the prefilter skipped, cache hits and misses,
the launcher that gives each script its job, and timings.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import interruptible, run_cli, smpfix_command

from smpfix.engine.watch import WatchedSet, changed, states

HEADER = "import smdistributed.modelparallel.torch as smp\n\nsmp.init()\n"
GUARD = 'if smp.dp_rank() == 0:\n    smp.save(model.local_state_dict(), "m.pt", partial=True)\n'
LAUNCHER = """from sagemaker.pytorch import PyTorch

PyTorch(
    entry_point="train.py",
    source_dir="src",
    distribution={
        "smdistributed": {
            "modelparallel": {"enabled": True, "parameters": {"tensor_parallel_degree": 4}}
        },
        "mpi": {"enabled": True, "processes_per_host": 8},
    },
).fit()
"""


def _project(root: Path) -> Path:
    (root / "pyproject.toml").write_text("[tool.smpfix]\n", encoding="utf-8")
    (root / "launch.py").write_text(LAUNCHER, encoding="utf-8")
    (root / "src").mkdir()
    script = root / "src" / "train.py"
    script.write_text(HEADER, encoding="utf-8")
    (root / "src" / "util.py").write_text("def helper():\n    return 1\n", encoding="utf-8")
    return script


def _wait_for(path: Path, text: str, count: int, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = path.read_text(encoding="utf-8", errors="replace")
        if content.count(text) >= count:
            return content
        time.sleep(0.1)
    raise AssertionError(f"{text!r} not seen {count} times in {path}:\n{content}")


def test_watch_checks_again_after_a_change_and_ctrl_c_exits_0(tmp_path: Path) -> None:
    script = _project(tmp_path)
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            [*smpfix_command(), "check", "--watch", "src"],
            cwd=tmp_path,
            stdout=stdout,
            stderr=stderr,
            env={**os.environ, "NO_COLOR": "1"},
            preexec_fn=interruptible,
        )
        try:
            _wait_for(err, "Watching for file changes.", 1)
            assert "SMP301" not in out.read_text(encoding="utf-8")
            script.write_text(HEADER + GUARD, encoding="utf-8")
            _wait_for(err, "Watching for file changes.", 2)
            # The launcher (outside the checked folder) is watched too: tensor parallelism off.
            (tmp_path / "launch.py").write_text(
                LAUNCHER.replace('"tensor_parallel_degree": 4', '"tensor_parallel_degree": 1'),
                encoding="utf-8",
            )
            _wait_for(err, "Watching for file changes.", 3)
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=60) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    report, messages = out.read_text(encoding="utf-8"), err.read_text(encoding="utf-8")
    assert "Traceback" not in messages and "interrupted" not in messages
    assert "Starting smpfix in watch mode..." in messages
    assert "File change detected: src/train.py" in messages
    assert "File change detected: launch.py" in messages
    # The first check finds nothing, the second SMP301, the third (no tensor parallelism) nothing.
    first, rest = report.split("All checks passed!\n", 1)
    second, third = rest.split("Found 1 problem (1 fixable with --apply).\n")
    assert first == ""
    assert second.startswith("src/train.py:4:4: SMP301 [*] error:")
    assert third.strip() == "All checks passed!"


def test_the_watched_set_holds_scripts_launchers_and_configuration(tmp_path: Path) -> None:
    _project(tmp_path)
    (tmp_path / "run.sh").write_text("python train.py\n", encoding="utf-8")
    watched = WatchedSet(paths=(str(tmp_path / "src"),), exclude=(), root=tmp_path)
    files = watched.files()
    for name in ("src/train.py", "src/util.py", "launch.py", "run.sh", "pyproject.toml"):
        assert str(tmp_path / name) in files, name
    assert str(tmp_path / "src" / "smpfix.toml") in files, "a configuration that appears counts"
    before = states(files)
    (tmp_path / "src" / "smpfix.toml").write_text("", encoding="utf-8")
    assert changed(before, states(watched.files())) == [str(tmp_path / "src" / "smpfix.toml")]
    searchless = WatchedSet(
        paths=(str(tmp_path / "src"),), exclude=(), root=tmp_path, search_launchers=False
    )
    assert str(tmp_path / "launch.py") not in searchless.files()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["-"], "cannot read from stdin", id="stdin"),
        pytest.param(["--add-noqa", "."], "--add-noqa", id="add-noqa"),
        pytest.param(["--show-files", "."], "--show-files", id="show-files"),
    ],
)
def test_watch_refuses_what_it_cannot_repeat(tmp_path: Path, args: list, message: str) -> None:
    done = run_cli("check", "--watch", *args, cwd=tmp_path, stdin="")
    assert done.code == 2
    assert message in done.stderr


def test_verbose_says_what_the_run_decided(tmp_path: Path) -> None:
    script = _project(tmp_path)
    script.write_text(HEADER + GUARD, encoding="utf-8")
    first = run_cli("check", "-v", ".", cwd=tmp_path)
    assert first.code == 1
    lines = first.stderr.splitlines()
    assert all(line.startswith("[") and "[DEBUG] " in line for line in lines[:5]), lines
    debug = first.stderr
    assert (
        f"[smpfix::config][DEBUG] using the configuration in {tmp_path / 'pyproject.toml'}" in debug
    )
    assert "[smpfix::discovery][DEBUG] found src/train.py" in debug
    assert "[smpfix::prefilter][DEBUG] skipped src/util.py: it never mentions the library" in debug
    assert "[smpfix::launchers][DEBUG] src/train.py: its job comes from " in debug
    assert f"{tmp_path / 'launch.py'}:3" in debug
    assert "[smpfix::cache][DEBUG] miss: src/train.py" in debug
    assert "[smpfix::analysis][DEBUG] checking src/train.py took " in debug
    assert "[smpfix::check][DEBUG] the check took " in debug
    again = run_cli("check", "--verbose", ".", cwd=tmp_path)
    assert "[smpfix::cache][DEBUG] hit: src/train.py" in again.stderr
    assert again.stdout == first.stdout, "verbose output goes to stderr only"
    quiet = run_cli("check", ".", cwd=tmp_path)
    assert "[DEBUG]" not in quiet.stderr
    assert quiet.stdout == first.stdout


def test_watch_with_apply_fixes_each_change_then_settles(tmp_path: Path) -> None:
    script = _project(tmp_path)
    err = tmp_path / "err.txt"
    with err.open("wb") as stderr:
        process = subprocess.Popen(
            [*smpfix_command(), "check", "--watch", "--apply", "src"],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            preexec_fn=interruptible,
        )
        try:
            _wait_for(err, "Watching for file changes.", 1)
            script.write_text(HEADER + GUARD, encoding="utf-8")
            # The change, then the fix smpfix wrote: a second check finds nothing to write.
            _wait_for(err, "Watching for file changes.", 3)
            time.sleep(2)
            assert err.read_text(encoding="utf-8").count("Watching for file changes.") == 3
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=60) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert "smp.rdp_rank() == 0" in script.read_text(encoding="utf-8")
