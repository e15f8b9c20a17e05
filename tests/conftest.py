"""Shared test helpers: running the installed command, reading fixture annotations."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest

from smpfix.program.project.parsed_file import ParsedFile, parse_file

# tests/projects/ holds whole projects to check (one has its own pytest integration tests).
collect_ignore = ["projects"]

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
EXAMPLES = ROOT / "examples"

_EXPECT = re.compile(r"#\s*expect:\s*(?P<items>[^#\n]+)")
_JOB = re.compile(r"^#\s*smpfix-job:(?P<settings>.*)$", re.MULTILINE)
_FIX = re.compile(r"^#\s*smpfix-fix:\s*(?P<mode>\w+)", re.MULTILINE)
_SELECT = re.compile(r"^#\s*smpfix-select:(?P<codes>.*)$", re.MULTILINE)
_ROOT = re.compile(r"^#\s*smpfix-root:\s*(?P<folder>\S+)", re.MULTILINE)


def smpfix_command() -> list[str]:
    """The installed console script, as a user runs it (falls back to ``python -m smpfix``)."""
    found = shutil.which("smpfix", path=os.path.dirname(sys.executable)) or shutil.which("smpfix")
    return [found] if found else [sys.executable, "-m", "smpfix"]


@dataclass
class Completed:
    code: int
    stdout: str
    stderr: str


def interruptible() -> None:
    """For ``subprocess.Popen(preexec_fn=...)``: the child gets Ctrl-C as it would from a
    terminal, even when the suite itself runs in the background of a non-interactive shell,
    which starts its children with SIGINT ignored (and Python keeps an ignored SIGINT)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(
    *args: str,
    cwd: Optional[Path] = None,
    stdin: Optional[str] = None,
    env: Optional[dict] = None,
    timeout: float = 300,
) -> Completed:
    """The installed command's exit code and output; ``timeout`` ends a run that hangs (a test
    of something that used to hang fails instead of blocking the suite)."""
    environment = {**os.environ, "NO_COLOR": "1", **(env or {})}
    proc = subprocess.run(
        [*smpfix_command(), *args],
        cwd=cwd,
        input=stdin.encode("utf-8") if stdin is not None else None,
        capture_output=True,
        env=environment,
        timeout=timeout,
    )
    return Completed(
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
    )


@dataclass(frozen=True)
class Expected:
    line: int
    code: str
    severity: Optional[str]


def expected_findings(text: str) -> list[Expected]:
    """``# expect: SMP101 error; SMP301`` markers: a finding must start on that line."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = _EXPECT.search(line)
        if not match:
            continue
        for item in match.group("items").split(";"):
            parts = item.split()
            if parts:
                found.append(Expected(number, parts[0], parts[1] if len(parts) > 1 else None))
    return found


def fixture_job(text: str) -> dict:
    """``# smpfix-job: tensor_parallel_degree=4 microbatches=2`` -> the job the fixture runs
    under."""
    from smpfix.job.jobfacts import parse_value

    match = _JOB.search(text)
    if not match:
        return {}
    return {
        key: parse_value(value)
        for key, _, value in (item.partition("=") for item in match.group("settings").split())
    }


def fixture_select(text: str) -> list[str]:
    """``# smpfix-select: SMP301 SMP101`` -> rules enabled beside the fixture's own (SMP900 needs
    them)."""
    match = _SELECT.search(text)
    return match.group("codes").split() if match else []


def fixture_roots(path: Path, text: str) -> tuple[str, ...]:
    """``# smpfix-root: .`` -> the fixture is checked inside a project rooted at that folder
    (relative to the fixture's), so a launcher's ``entry_point`` may name a script beside it."""
    match = _ROOT.search(text)
    return (str((path.parent / match.group("folder")).resolve()),) if match else ()


def fixture_unsafe(text: str) -> bool:
    match = _FIX.search(text)
    return bool(match and match.group("mode") == "unsafe")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


def parsed(source: str, path: str = "train.py") -> ParsedFile:
    """``source`` as the analysis holds a file: parsed, indexed, with its facts."""
    file = parse_file(path, source)
    assert file is not None, "the source does not parse"
    return file


def finding_text(finding: Any) -> str:
    """All a finding says (its title, explanation and evidence), from a ``Finding`` or its JSON
    object: tests of what a finding tells its reader read this, not the title alone."""
    if isinstance(finding, dict):
        parts = [finding["message"], finding.get("explanation", ""), *finding.get("evidence", [])]
    else:
        parts = [finding.message, finding.explanation, *finding.evidence]
    return " ".join(part for part in parts if part)
