"""Killing or interrupting ``smpfix --apply`` leaves every file whole.

``kill -9`` at random moments, to the whole process group or to the main process alone (its
workers must then die with it rather than go on writing, or wait forever), must leave every
file exactly as it was or exactly fixed; a temporary file it may leave is never taken for a
source and is removed by the next run, which finishes the work. Ctrl-C stops with exit code
130 and one line, without a traceback from the main process or from a worker.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import interruptible, smpfix_command
from smp_scripts import render

from smpfix.api import fix_source
from smpfix.base.source import TEMP_PREFIX
from smpfix.engine.discovery import Excluder, discover

JOB = {"tensor_parallel_degree": 4}
ARGS = ("--apply", "--workers", "2", "--job", "tensor_parallel_degree=4", ".")


def _tree(root: Path, count: int, seed: int, variants: int = 25) -> dict[Path, str]:
    """``count`` scripts drawn from ``variants`` generated ones (computing the expected fixed
    form of each distinct text in-process is the slow part of these tests)."""
    rng = random.Random(seed)
    texts = [render(rng, pitfalls={"SMP101": True, "SMP301": True}).text for _ in range(variants)]
    files: dict[Path, str] = {}
    for index in range(count):
        path = root / f"pkg{index % 8}" / f"train_{index:03d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = texts[index % variants]
        path.write_bytes(text.encode())
        files[path] = text
    return files


def _start(root: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.Popen(
        [*smpfix_command(), *ARGS],
        cwd=root,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=interruptible,
    )


def _wait_for_group_to_end(group: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.killpg(group, signal.SIGKILL)
    raise AssertionError("worker processes outlived their killed main process")


class _Forms:
    """Each file's original and fixed text; the fixed one computed when first needed."""

    def __init__(self, originals: dict[Path, str]) -> None:
        self.originals = originals
        self._fixed: dict[str, str] = {}

    def fixed(self, path: Path) -> str:
        original = self.originals[path]
        if original not in self._fixed:
            self._fixed[original] = fix_source(original, "train.py", job=JOB).text
            assert self._fixed[original] != original
        return self._fixed[original]

    def changed(self) -> int:
        return sum(
            path.read_bytes() != original.encode() for path, original in self.originals.items()
        )

    def check_whole(self) -> int:
        """Assert every file is its original or its fixed form; the number already fixed."""
        done = 0
        for path, original in self.originals.items():
            now = path.read_bytes().decode()
            if now != original:
                assert now == self.fixed(path), f"{path} is neither its original nor its fixed form"
                done += 1
        return done


def _temporaries(root: Path) -> list[Path]:
    return [path for path in root.rglob(f"{TEMP_PREFIX}*") if ".smpfix_cache" not in path.parts]


def test_sigkill_at_random_moments_leaves_each_file_original_or_fixed(tmp_path: Path) -> None:
    originals = _tree(tmp_path, 100, seed=20240611)
    forms = _Forms(originals)
    rng = random.Random(7)
    for trial in range(4):
        proc = _start(tmp_path)
        # Kill at a random moment: during start-up, or after a random number more files.
        started, before, more = time.monotonic(), forms.changed(), rng.randint(1, 25)
        patience = rng.uniform(0.2, 1.5) if trial == 0 else 30.0
        while (
            proc.poll() is None
            and time.monotonic() - started < patience
            and forms.changed() < before + more
        ):
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.2))
        if trial % 2:
            proc.kill()  # the main process alone: its workers must not go on
        else:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        _wait_for_group_to_end(proc.pid)
        proc.stderr.close()  # type: ignore[union-attr]
        done = forms.check_whole()
        print(
            f"trial {trial}: {done} of {len(originals)} files fixed, temporary files left:"
            f" {len(_temporaries(tmp_path))}"
        )
        discovered = {
            Path(found.path) for found in discover([str(tmp_path)], Excluder([], tmp_path))
        }
        assert discovered == set(originals), "a temporary file was taken for a source"
    final = subprocess.run(
        [*smpfix_command(), *ARGS],
        cwd=tmp_path,
        capture_output=True,
        timeout=300,
        env={**os.environ, "NO_COLOR": "1"},
    )
    stderr = final.stderr.decode()
    assert final.returncode in (0, 1), stderr
    assert ": error: " not in stderr and "Traceback" not in stderr, stderr
    assert all(path.read_bytes().decode() == forms.fixed(path) for path in originals)
    assert _temporaries(tmp_path) == []


def test_ctrl_c_stops_cleanly_with_exit_130(tmp_path: Path) -> None:
    originals = _tree(tmp_path, 120, seed=99)
    forms = _Forms(originals)
    proc = _start(tmp_path)
    deadline = time.monotonic() + 120
    while forms.changed() == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # interrupt once files are being written
    assert proc.poll() is None, "the run finished before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole group
    _, stderr_bytes = proc.communicate(timeout=120)
    _wait_for_group_to_end(proc.pid)
    stderr = stderr_bytes.decode()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert stderr.strip().splitlines()[-1] == "smpfix: interrupted"
    done = forms.check_whole()
    assert 0 < done < len(originals)
    assert _temporaries(tmp_path) == []


def test_ctrl_c_in_a_single_process_run(tmp_path: Path) -> None:
    """``--workers 1`` checks in the main process: the interrupt lands inside the analysis."""
    originals = _tree(tmp_path, 40, seed=5)
    forms = _Forms(originals)
    env = {**os.environ, "NO_COLOR": "1"}
    proc = subprocess.Popen(
        [*smpfix_command(), "--apply", "--workers", "1", "--job", "tensor_parallel_degree=4", "."],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=interruptible,
    )
    deadline = time.monotonic() + 120
    while forms.changed() == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr_bytes = proc.communicate(timeout=60)
    stderr = stderr_bytes.decode()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr, stderr
    forms.check_whole()
    assert _temporaries(tmp_path) == []


if sys.platform != "linux":  # pragma: no cover - the kill test relies on Linux process groups
    import pytest

    pytestmark = pytest.mark.skip(reason="process-group signals are tested on Linux")
