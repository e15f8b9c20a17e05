"""The pre-commit hooks, run by the real ``pre-commit`` against scratch repositories.

The hooks come from a committed copy of this project, named by path and revision in each
scratch repository's ``.pre-commit-config.yaml``, as a user's configuration names the
published repository. pre-commit installs the hook environment once per revision and reuses it for
every later run (``try-repo`` would build a new one per call).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

BAD = """import smdistributed.modelparallel.torch as smp

smp.init()
model = smp.DistributedModel(build())
if smp.dp_rank() == 0:
    smp.save(model.local_state_dict(), "m.pt", partial=True)
"""

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is needed for pre-commit")


def _pre_commit() -> list[str]:
    found = shutil.which("pre-commit", path=os.path.dirname(sys.executable)) or shutil.which(
        "pre-commit"
    )
    return [found] if found else [sys.executable, "-m", "pre_commit"]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.invalid",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.invalid",
        },
    )


def _source_repo(tmp: Path) -> Path:
    """A committed copy of this project: pre-commit installs hooks from a git repository."""
    copy = tmp / "smpfix-src"
    shutil.copytree(
        ROOT,
        copy,
        ignore=shutil.ignore_patterns(
            ".git",
            ".ci-venv",
            "*.egg-info",
            "__pycache__",
            ".pytest_cache",
            ".hypothesis",
            ".mypy_cache",
            ".ruff_cache",
            "build",
            "dist",
            ".helpers",
        ),
    )
    _git(copy, "init", "-q")
    _git(copy, "add", "-A")
    _git(copy, "commit", "-q", "-m", "snapshot")
    return copy


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    tmp = tmp_path_factory.mktemp("precommit")
    source = _source_repo(tmp)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp / "cache"), "NO_COLOR": "1"}
    return tmp, source, env


def _config(source: Path) -> str:
    revision = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=source, check=True, capture_output=True, text=True
    ).stdout.strip()
    return (
        f"repos:\n  - repo: {source}\n    rev: {revision}\n    hooks:\n"
        "      - id: smpfix\n      - id: smpfix-fix\n"
    )


def _scratch(tmp: Path, source: Path, name: str) -> Path:
    repo = tmp / name
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / ".pre-commit-config.yaml").write_text(_config(source))
    (repo / "train.py").write_text(BAD)
    _git(repo, "add", ".pre-commit-config.yaml", "train.py")
    return repo


def _run(repo: Path, env: dict, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_pre_commit(), "run", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )


def test_check_hook_fails_a_bad_script(setup: tuple[Path, Path, dict]) -> None:
    tmp, source, env = setup
    repo = _scratch(tmp, source, "check")
    proc = _run(repo, env, "smpfix", "--all-files")
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "SMP301" in proc.stdout
    assert (repo / "train.py").read_text() == BAD


def test_fix_hook_fixes_the_script(setup: tuple[Path, Path, dict]) -> None:
    tmp, source, env = setup
    repo = _scratch(tmp, source, "fix")
    proc = _run(repo, env, "smpfix-fix", "--all-files")
    assert proc.returncode != 0, "pre-commit reports a hook that modified files as failed"
    assert (repo / "train.py").read_text() == BAD.replace("smp.dp_rank()", "smp.rdp_rank()")
    _git(repo, "add", "train.py")
    again = _run(repo, env, "smpfix", "--all-files")
    assert again.returncode == 0, again.stdout + again.stderr


LAUNCHER = """from sagemaker.pytorch import PyTorch

PyTorch(
    entry_point="train.py",
    source_dir=".",
    instance_type="ml.p4d.24xlarge",
    distribution={
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": {"tensor_parallel_degree": 4, "ddp": True}}},
        "mpi": {"enabled": True, "processes_per_host": 8},
    },
).fit()
"""  # noqa: E501


def test_check_hook_on_one_script_finds_its_launcher(setup: tuple[Path, Path, dict]) -> None:
    """pre-commit names only the changed script; its launcher in jobs/ still sets its job."""
    tmp, source, env = setup
    repo = _scratch(tmp, source, "launcher")
    (repo / "jobs").mkdir()
    (repo / "jobs" / "launch.py").write_text(LAUNCHER)
    _git(repo, "add", "jobs/launch.py")
    proc = _run(repo, env, "smpfix", "--files", "train.py")
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "train.py:5:4: SMP301 [*] error: " in proc.stdout, proc.stdout
    assert "tensor parallelism: on (launcher jobs/launch.py:3)" in proc.stdout
