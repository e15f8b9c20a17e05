"""Every command the README and ``docs/*.md`` show runs, and does what they promise (issue 24:
the README's ``python benchmarks/run.py --quick`` crashed after the examples moved).

A command is a line of a fenced ``bash``, ``sh`` or ``shell`` block (or a ``$ `` line of a
``console`` block), or a ``run:`` step of a ``yaml`` block. The lines of one block run in order,
with ``bash``, in one fresh folder holding what the examples need: the shipped ``examples/``,
a ``train.py`` and its ``launch.py`` (the PyTorch pitfalls pair) and ``src/`` (a copy of that
pair). Each must end without a traceback, with the exit code the README promises (0 or 1 for
``check`` and ``plan``, 0 for ``--exit-zero``, ``rules``, ``explain`` and ``server``), and print
what a quoted comment after it says (``# "All checks passed!"``, numbers aside).

What cannot run here is checked another real way, and the list is short (``NOT_RUN``):
installing (the extras named must exist, a pin from Git must be this version's tag) and the
test suite itself. A block without a language must hold no command, so none escapes.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import smpfix

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = ["README.md", *(f"docs/{path.name}" for path in sorted((ROOT / "docs").glob("*.md")))]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SHELL = {"bash", "sh", "shell", "console"}

# Commands that do not run in a test, and what is checked of them instead.
NOT_RUN = {
    "python -m pip install": "installs: the extras it names exist, a Git pin is this release",
    "python -m pytest": "the test suite itself (CI runs it)",
}
# Words of the documented commands that stand for a folder of the reader's.
PLACEHOLDERS = {"--peers-bin DIR": "--peers-bin peers", "--tree DIR": "--tree examples"}
# The benchmark's documented runs take minutes; here they run on tiny corpora, in the folder.
BENCHMARK_SIZES = (
    "--workdir bench --smp-count 3 --mixed-count 3 --project-files 3 --project-scripts 1"
    " --project-helpers 1 --repeat 1 --server-edits 1 --budget 1"
)


@dataclass(frozen=True)
class Block:
    document: str
    line: int
    language: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.document}:{self.line}"


_FENCE = re.compile(
    r"^(?P<fence>```+)(?P<language>[\w-]*)[^\n]*\n(?P<text>.*?)^(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)


def _blocks() -> list[Block]:
    found = []
    for document in DOCUMENTS:
        text = (ROOT / document).read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(Block(document, line, match.group("language"), match.group("text")))
    return found


BLOCKS = _blocks()


def commands(block: Block) -> list[str]:
    """The command lines of a block (continuation lines joined), comments kept for bash."""
    if block.language in SHELL:
        lines = block.text.replace("\\\n", " ").splitlines()
        if block.language == "console":
            return [line[2:] for line in lines if line.startswith("$ ")]
        return [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    if block.language == "yaml":
        return re.findall(r"^\s*(?:- )?run: (.+)$", block.text, re.MULTILINE)
    return []


def _promised_output(line: str) -> str | None:
    """A quoted comment after a command: what it prints (``# "All checks passed!"``)."""
    match = re.search(r"\s#\s+\"(?P<said>[^\"]+)\"\s*$", line)
    return match.group("said") if match else None


def _expected_codes(words: list[str]) -> set[int]:
    """The exit codes the README promises for one invocation (``smpfix ...`` or ``python ...``)."""
    if words[0] == "python":
        return {0}
    arguments = [word for word in words[1:] if not word.startswith("-")]
    command = arguments[0] if arguments else "check"
    if command in {"rules", "explain", "server", "clean"} or "--version" in words:
        return {0}
    if "--exit-zero" in words:
        return {0}
    return {0, 1}


def _check_install(words: list[str]) -> None:
    """``python -m pip install X``: what it would install exists (not installed here)."""
    extras = PYPROJECT["project"]["optional-dependencies"]
    homepage = PYPROJECT["project"]["urls"]["Homepage"]
    for requirement in words[4:]:
        if requirement.startswith("-"):
            continue
        git = re.fullmatch(r"smpfix @ git\+(?P<url>\S+)@(?P<rev>\S+)", requirement)
        if git:
            assert git.group("url") == homepage, requirement
            assert git.group("rev") == f"v{smpfix.__version__}", requirement
            continue
        named = re.fullmatch(r"(?P<what>\.|smpfix)(?:\[(?P<extras>[\w,-]+)\])?", requirement)
        assert named, f"an install of something else than smpfix: {requirement}"
        for extra in (named.group("extras") or "").split(","):
            assert not extra or extra in extras, f"no extra {extra!r} in pyproject.toml"


def _what_runs(line: str) -> tuple[str, list[list[str]]]:
    """The part of a command line that runs here (the ``&&``-joined parts not in ``NOT_RUN``
    checked and dropped) and the invocations it holds (their words)."""
    kept = []
    for part in re.split(r"\s&&\s", line):
        words = shlex.split(part, comments=True)
        skipped = next((prefix for prefix in NOT_RUN if " ".join(words).startswith(prefix)), None)
        if skipped == "python -m pip install":
            _check_install(words)
        elif skipped is None:
            kept.append(part)
    runs = " && ".join(kept)
    for placeholder, value in PLACEHOLDERS.items():
        runs = runs.replace(placeholder, value)
    if "benchmarks/run.py" in runs:
        runs = re.sub(r"(benchmarks/run\.py)", rf"\1 {BENCHMARK_SIZES}", runs)
    invocations = [
        shlex.split(piece, comments=True)
        for piece in re.split(r"\s(?:&&|\|)\s", runs)
        if piece.strip()
    ]
    return runs, [words for words in invocations if words and words[0] in {"smpfix", "python"}]


def _folder(tmp_path: Path, block: Block) -> Path:
    """A fresh folder with what the documented commands read."""
    work = tmp_path / "work"
    shutil.copytree(ROOT / "examples", work / "examples")
    pitfalls = ROOT / "examples" / "pytorch" / "pitfalls"
    shutil.copyfile(pitfalls / "train_gpt.py", work / "train.py")
    launcher = (pitfalls / "launch.py").read_text(encoding="utf-8")
    (work / "launch.py").write_text(launcher.replace('"train_gpt.py"', '"train.py"'), "utf-8")
    shutil.copytree(pitfalls, work / "src")
    if "benchmarks/" in block.text:
        shutil.copytree(ROOT / "benchmarks", work / "benchmarks")
        (work / "tests").mkdir()  # the benchmark's generator of SMP scripts
        shutil.copyfile(ROOT / "tests" / "smp_scripts.py", work / "tests" / "smp_scripts.py")
        (work / "peers").mkdir()
    return work


RUN_BLOCKS = [block for block in BLOCKS if commands(block)]
# A line that reads as a command: ``smpfix``, ``python`` or ``cat FILE |`` and words, perhaps a
# comment (not a table row such as ``smpfix check (cold)   3.77 s``).
_COMMAND_LIKE = re.compile(r"^\s*(?:\$ )?(?:smpfix|python|cat \S+ \|)(?: [^\s#()]+)*\s*(?:#.*)?$")


def test_the_documents_show_commands_and_none_escapes_this_test() -> None:
    shown = [line for block in RUN_BLOCKS for line in commands(block)]
    assert any(line.startswith("smpfix check") for line in shown)
    assert any("benchmarks/run.py --quick" in line for line in shown)
    for block in BLOCKS:
        if block.language in SHELL | {"yaml"}:
            continue
        for line in block.text.splitlines():
            assert not _COMMAND_LIKE.match(line), (
                f"{block.id}: a command in a block of language {block.language!r}: "
                "mark the block `bash` so this test runs it"
            )


@pytest.mark.parametrize("block", RUN_BLOCKS, ids=[block.id for block in RUN_BLOCKS])
def test_every_documented_command_runs_as_documented(block: Block, tmp_path: Path) -> None:
    work = _folder(tmp_path, block)
    environment = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "NO_COLOR": "1",
        "TMPDIR": str(tmp_path),
    }
    for line in commands(block):
        runs, invocations = _what_runs(line)
        if not runs:
            continue
        assert len(invocations) >= 1, f"{block.id}: {line!r} runs neither smpfix nor python"
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", runs],
            cwd=work,
            env=environment,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )
        said = f"{block.id}: {runs}\n--- out\n{done.stdout[-3000:]}\n--- err\n{done.stderr[-3000:]}"
        assert "Traceback" not in done.stdout + done.stderr, said
        assert done.returncode in _expected_codes(invocations[-1]), said
        promised = _promised_output(line)
        if promised is not None:
            pattern = re.sub(r"\d+", r"\\d+", re.escape(promised))
            assert re.search(pattern, done.stdout + done.stderr), said
        if "--output-file smpfix.sarif" in runs:
            assert json.loads((work / "smpfix.sarif").read_text(encoding="utf-8"))["runs"]


def test_the_pre_commit_snippet_names_this_repository_its_release_and_its_hooks() -> None:
    hooks = set(
        re.findall(r"^- id: (\S+)$", (ROOT / ".pre-commit-hooks.yaml").read_text("utf-8"), re.M)
    )
    snippets = [block for block in BLOCKS if block.language == "yaml" and "rev:" in block.text]
    assert snippets
    for block in snippets:
        assert re.findall(r"repo: (\S+)", block.text) == [PYPROJECT["project"]["urls"]["Homepage"]]
        assert re.findall(r"rev: (\S+)", block.text) == [f"v{smpfix.__version__}"]
        named = re.findall(r"^\s*(?:# )?- id: (\S+)", block.text, re.MULTILINE)
        assert named and set(named) <= hooks, block.id


def test_every_configuration_sample_is_accepted(tmp_path: Path) -> None:
    """The ``toml`` samples with ``[tool.smpfix`` tables, each as the configuration of a project
    (at the path its first line names, ``# services/trainer/pyproject.toml``, else
    ``pyproject.toml``), with an empty file where it names one to ``extend``."""
    samples = [
        block for block in BLOCKS if block.language == "toml" and "[tool.smpfix" in block.text
    ]
    assert samples
    for number, block in enumerate(samples):
        work = _folder(tmp_path / str(number), block)
        named = re.match(r"#\s*(\S+\.toml)\s*\n", block.text)
        configuration = work / (named.group(1) if named else "pyproject.toml")
        configuration.parent.mkdir(parents=True, exist_ok=True)
        configuration.write_text(block.text, encoding="utf-8")
        for extended in re.findall(r'^extend\s*=\s*"([^"]+)"', block.text, re.MULTILINE):
            (configuration.parent / extended).resolve().touch()
        checked = configuration.parent / "checked"
        shutil.copytree(ROOT / "examples" / "pytorch" / "pitfalls", checked)
        done = subprocess.run(
            [sys.executable, "-m", "smpfix", "check", "--no-cache", str(checked)],
            cwd=work,
            capture_output=True,
            text=True,
            env={**os.environ, "NO_COLOR": "1"},
            timeout=300,
        )
        assert done.returncode in {0, 1}, f"{block.id}:\n{done.stderr}"


def test_every_editor_set_up_starts_the_server() -> None:
    """The editors' set-ups cannot run here: each starts ``smpfix server``, and JSON parses."""
    set_ups = [
        block
        for block in BLOCKS
        if block.document == "docs/editor.md" and block.language in {"json", "lua", "elisp", "vim"}
    ]
    assert set_ups
    for block in set_ups:
        if block.language == "json":
            json.loads(block.text)
        if re.search(r"\bcmd\b|argv|command", block.text):
            assert '"smpfix"' in block.text and '"server"' in block.text, block.id


def test_the_readme_is_an_overview_of_at_most_20_kb() -> None:
    assert (ROOT / "README.md").stat().st_size <= 20_000
