"""smpfix against its floor and its peers, on corpora it builds itself or on a folder of real code.

    python benchmarks/run.py                 # a few minutes on 2 cores
    python benchmarks/run.py --quick         # fewer files and repetitions, for a smoke test
    python benchmarks/run.py --tree DIR      # only: smpfix against the parse floor on DIR, by phase

Corpora (rebuilt from scratch in ``--workdir`` on every run, so they are the same for the
same seed and the same installed packages):

- ``smp``: ``--smp-count`` generated SMP v1 training scripts (``tests/smp_scripts.py``, the
  generator of the property tests, seeded);
- ``mixed``: ``--mixed-count`` real Python files copied from this interpreter's
  site-packages (the test dependencies and their own dependencies; never smpfix itself nor
  a file that mentions the library), plus the same SMP scripts;
- ``library``: the mixed tree's library files alone (where no file passes the prefilter),
  for smpfix and Ruff only: what a tree without SMP code costs;
- ``shared helpers``: a generated project shaped like the official SMP examples
  (``benchmarks/project_tree.py``): ``--project-scripts`` training scripts of 1,000-1,500
  lines sharing ``--project-helpers`` helper modules, and their launchers, half of them
  notebooks. What real code costs: see "One process against the parse floor" below.

Besides the corpora: ``smpfix check`` on one file (``examples/pytorch/pitfalls/train_gpt.py``,
in a copy of its folder made a project of its own), as a pre-commit hook runs it, beside
``fixit lint`` on the same file; and ``smpfix server``'s
re-check of a 120-line script after an edit (``benchmarks/server_latency.py``; needs
``smpfix[server]``).

Every measurement is a whole process, as a user or a hook runs it, with its output thrown
away; the first command on each corpus runs once untimed (to warm the disk cache and write
bytecode), then every command runs up to ``--repeat`` times while it stays within
``--budget`` seconds, and the median is reported. A peer's run is stopped after 25 times
smpfix's cold time (at least 30 s, at most ``--timeout``) and reported as a lower bound
(``>=``): enough to show a 20x ratio without waiting minutes for a slow tool.

- ``smpfix check`` cold (``--no-cache``) and warm (a cache filled by an earlier run);
- the floor of any LibCST tool: ``libcst.parse_module`` of every file, one process;
- ``ast.parse`` of every file, one process (what CPython itself costs);
- the peers, when installed (``--peers-bin``, this interpreter's folder, or ``PATH``):
  ``fixit lint``, ``torchfix``, ``ruff check --isolated`` (Ruff's default rules).

Printed: the table of medians, the ratios smpfix/floor and peer/smpfix against the targets,
and smpfix's peak memory (largest resident set of the command or any of its worker processes).

One process against the parse floor (the ``shared helpers`` project, or ``--tree DIR``: any
existing folder, such as real public SMP code you assembled; nothing is written into it):
``smpfix check --no-cache --workers 1 .`` run from the folder, against the floor, LibCST's
parse of every file smpfix's discovery finds there (Python files, and each notebook's code
cells as smpfix parses them: joined, with magics masked), in one process with LibCST's
import, and ``ast.parse`` of the same; one untimed run each, then ``--repeat`` rounds in
which each runs once, in turn, and the medians of CPU time (user + system) and wall time.
Target: smpfix at most 1.5 times the floor's CPU time. Then smpfix's CPU time per phase
(``benchmarks/phases.py``: the same command, run in the same rounds with its functions
timed; the run with the median total is shown, so its phases add up to its total).

One file in a project (``--one-file-only`` runs just this): a project of ``--project-files``
library files that never mention the library, three generated SMP scripts and three launchers
(two ``.py`` files and a notebook) is checked one script at a time, as pre-commit and editors
do, with the launcher search and without it (``--no-launcher-search``, which is what a one-file
check did before the search existed): cold (``--no-cache``), with the launchers' entries
cached but a script never checked before (an edited file), and warm. Target: the search
costs at most 1.3x.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent
# The one-file example: a training script with mistakes, and its launcher.
EXAMPLE = ROOT / "examples" / "pytorch" / "pitfalls"
# Folders no tool checks by default (smpfix's and Ruff's default excludes), so that every
# tool sees the same files.
SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "build",
        "dist",
        "__pycache__",
        "node_modules",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".smpfix_cache",
        "site-packages",
        "_build",
        "buck-out",
        ".eggs",
        "__pypackages__",
        ".direnv",
        ".pytype",
        ".pants.d",
        ".ipynb_checkpoints",
    }
)

# The floor of any LibCST tool: every file the tool reads parsed once, in one process, LibCST's
# import included. A notebook is parsed as smpfix parses it: its code cells joined, with
# IPython magics and shell lines turned into no-op lines (smpfix.base.notebook, reimplemented
# here so that the floor never imports smpfix), and each ``%%writefile NAME.py`` cell apart.
PARSE_SCRIPT = r"""
import json, re, sys
files = open(sys.argv[2], encoding="utf-8").read().split("\n")
if sys.argv[1] == "libcst":
    import libcst
    parse, errors = libcst.parse_module, (libcst.ParserSyntaxError, RecursionError, ValueError)
else:
    import ast
    parse, errors = ast.parse, (SyntaxError, RecursionError, ValueError)
MAGIC = re.compile(r"^(\s*)([%!?]|\w+\s*=\s*!)")
PYTHON_CELL_MAGIC = re.compile(r"^%%(?:time|timeit|capture|prun)\b")
# One-line cells IPython runs as a magic without the %: "pip install x".
AUTOMAGIC = re.compile(r"^\s*(?:pip|conda|mamba|cd|ls|cat|cp|mv|rm|mkdir|pwd|env|set_env|store|load_ext|matplotlib|run|time|timeit)(?:\s|$)")

def automagic(source):
    if "\n" in source.strip() or not AUTOMAGIC.match(source):
        return False
    try:
        compile(source, "<cell>", "exec", 0x400)
    except SyntaxError:
        return True
    return False

def notebook_code(text):
    joined, scripts = [], []
    for cell in json.loads(text).get("cells", []):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        first, _, rest = source.partition("\n")
        if first.startswith("%%writefile"):
            if first.split()[-1].endswith(".py"):
                scripts.append(rest)
            continue
        lines = source.split("\n")
        if (first.startswith("%%") and not PYTHON_CELL_MAGIC.match(first)) or automagic(source):
            lines = ["pass  # " + line for line in lines]
        else:
            lines = [MAGIC.sub(r"\1pass  # \2", line, count=1) for line in lines]
        code = "\n".join(lines)
        joined.append(code if code.endswith("\n") else code + "\n")
    return ["".join(joined), *scripts]

for name in files:
    if not name:
        continue
    with open(name, "rb") as handle:
        data = handle.read()
    try:
        if name.endswith(".ipynb"):
            codes = notebook_code(data.decode("utf-8"))
        else:
            codes = [data.decode("utf-8") if sys.argv[1] == "libcst" else data]
    except (UnicodeDecodeError, ValueError, AttributeError):
        continue
    for code in codes:
        try:
            parse(code)
        except errors:
            pass
"""  # noqa: E501


@dataclass
class Measurement:
    """The timed runs of one command on one corpus."""

    name: str
    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)
    max_rss_kb: int = 0
    timed_out: bool = False
    skipped: Optional[str] = None

    @property
    def median(self) -> Optional[float]:
        return statistics.median(self.seconds) if self.seconds else None

    @property
    def median_cpu(self) -> Optional[float]:
        return statistics.median(self.cpu_seconds) if self.cpu_seconds else None

    def shown(self) -> str:
        if self.skipped:
            return "n/a"
        if self.median is None:
            return "-"
        return f"{'>=' if self.timed_out else ''}{self.median:.2f} s"

    def shown_cpu(self) -> str:
        if self.skipped or self.median_cpu is None:
            return "n/a" if self.skipped else "-"
        return f"{'>=' if self.timed_out else ''}{self.median_cpu:.2f} s"


# -- corpora --------------------------------------------------------------------------------------


def build_smp(folder: Path, count: int, seed: int) -> list[Path]:
    sys.path.insert(0, str(ROOT / "tests"))
    from smp_scripts import corpus

    folder.mkdir(parents=True)
    paths = []
    for number, script in enumerate(corpus(count, seed)):
        path = folder / f"train_{number:04d}.py"
        with open(path, "w", encoding="utf-8", newline="") as handle:
            handle.write(script.text)
        paths.append(path)
    return paths


def library_sources(count: int) -> list[Path]:
    """Up to ``count`` Python files of the installed packages, in a fixed order."""
    site = Path(sysconfig.get_paths()["purelib"])
    found: list[Path] = []
    for folder, dirs, files in os.walk(site):
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in SKIPPED_DIRS
            and not d.startswith((".", "smpfix"))
            and not d.endswith((".dist-info", ".egg-info"))
        )
        for name in sorted(files):
            if name.endswith(".py") and not name.startswith("_editable_impl_smpfix"):
                found.append(Path(folder, name))
    selected = []
    for path in found:
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if b"smdistributed" not in data and len(data) < 1_000_000:
            selected.append(path)
        if len(selected) == count:
            break
    return selected


def build_mixed(folder: Path, count: int, smp_paths: list[Path]) -> list[Path]:
    site = Path(sysconfig.get_paths()["purelib"])
    paths = []
    for source in library_sources(count):
        target = folder / "lib" / source.relative_to(site)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        paths.append(target)
    for source in smp_paths:
        target = folder / "scripts" / source.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        paths.append(target)
    return paths


_LAUNCHER = """from sagemaker.pytorch import PyTorch

SMP = {{"tensor_parallel_degree": {tp}, "microbatches": 4, "ddp": True}}
PyTorch(
    entry_point="{script}",
    source_dir="src",
    instance_type="ml.p4d.24xlarge",
    instance_count=2,
    distribution={{"smdistributed": {{"modelparallel": {{"enabled": True, "parameters": SMP}}}},
                  "mpi": {{"enabled": True, "processes_per_host": 8}}}},
).fit()
"""


def build_project(folder: Path, count: int, smp_paths: list[Path]) -> list[Path]:
    """A project: ``count`` library files, three SMP scripts in src/, their three launchers."""
    site = Path(sysconfig.get_paths()["purelib"])
    (folder / "src").mkdir(parents=True)
    (folder / "pyproject.toml").write_text(
        '[project]\nname = "bench"\nversion = "0"\n', encoding="utf-8"
    )
    for source in library_sources(count):
        target = folder / "lib" / source.relative_to(site)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    scripts = []
    for number, source in enumerate(smp_paths[:3]):
        scripts.append(folder / "src" / f"train_{number}.py")
        shutil.copyfile(source, scripts[-1])
    (folder / "jobs").mkdir()
    for number in (0, 1):
        (folder / "jobs" / f"launch_{number}.py").write_text(
            _LAUNCHER.format(tp=4, script=scripts[number].name), encoding="utf-8"
        )
    cells = [
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": text,
        }
        for text in ("%pip install -U sagemaker", _LAUNCHER.format(tp=2, script=scripts[2].name))
    ]
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (folder / "launch.ipynb").write_text(json.dumps(notebook, indent=1), encoding="utf-8")
    return scripts


def run_one_file(
    folder: Path, scripts: list[Path], work: Path, args: argparse.Namespace
) -> dict[str, Measurement]:
    """One script checked alone, with and without the launcher search (see the module docstring)."""
    print(f"one file in a project of {args.project_files} files", file=sys.stderr)
    results: dict[str, Measurement] = {}
    for label, extra in (("search", []), ("no_search", ["--no-launcher-search"])):
        smpfix = [sys.executable, "-m", "smpfix", "check", "--exit-zero", "--no-color", *extra]
        script = str(scripts[0].relative_to(folder))
        results[f"{label}_cold"] = measure(
            f"{label} cold", [*smpfix, "--no-cache", script], folder, args, warm_up=True
        )
        cache = work / f"one-file-{label}.cache"
        shutil.rmtree(cache, ignore_errors=True)
        # Fill the cache with the project's launchers (and the other scripts), then check
        # scripts it has never seen: the cost of a one-file check after an edit.
        run_once(
            [
                *smpfix,
                "--cache-dir",
                str(cache),
                *(str(p.relative_to(folder)) for p in scripts[1:]),
            ],
            folder,
            args.timeout,
        )
        edited = Measurement(f"{label} edited")
        for number in range(args.repeat):
            copy = scripts[0].with_name(f"edited_{label}_{number}.py")
            shutil.copyfile(scripts[0], copy)
            seconds, cpu, rss, _ = run_once(
                [*smpfix, "--cache-dir", str(cache), str(copy.relative_to(folder))],
                folder,
                args.timeout,
            )
            edited.seconds.append(seconds)
            edited.cpu_seconds.append(cpu)
            edited.max_rss_kb = max(edited.max_rss_kb, rss)
            copy.unlink()
        results[f"{label}_edited"] = edited
        results[f"{label}_warm"] = measure(
            f"{label} warm",
            [*smpfix, "--cache-dir", str(cache), script],
            folder,
            args,
            warm_up=True,
        )
    return results


def one_file_report(results: dict[str, Measurement], files: int) -> str:
    lines = [
        f"one script checked alone in a project of {files} files and 3 launchers:",
        f"  {'median wall time (CPU time)':<27} {'search':>18} {'--no-launcher-search':>22} "
        f"{'ratio':>8}",
    ]
    for mode, name in (
        ("cold", "cold (--no-cache)"),
        ("edited", "edited script, cache"),
        ("warm", "warm cache"),
    ):
        search, plain = results[f"search_{mode}"], results[f"no_search_{mode}"]
        cells = [f"{m.shown()} ({m.shown_cpu()})" for m in (search, plain)]
        lines.append(
            f"  {name:<27} {cells[0]:>18} {cells[1]:>22} "
            f"{verdict(ratio(search, plain), 1.3, at_most=True)}"
        )
    return "\n".join(lines)


# -- running ------------------------------------------------------------------------------------


def child_environment() -> dict[str, str]:
    env = {**os.environ, "NO_COLOR": "1"}
    # Bytecode is written as for any user (a sandbox may forbid it by default).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("SMPFIX_CACHE_DIR", None)
    return env


def run_once(command: list[str], cwd: Path, timeout: float) -> tuple[float, float, int, bool]:
    """Wall seconds, CPU seconds (user + system, with the children it waited for), peak
    resident set (KB, the process or any child it waited for), whether it timed out."""
    began = time.perf_counter()
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=child_environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    expired = threading.Event()

    def stop() -> None:
        expired.set()
        try:
            os.killpg(process.pid, 9)
        except OSError:
            pass

    timer = threading.Timer(timeout, stop)
    timer.start()
    try:
        _, _, usage = os.wait4(process.pid, 0)
    finally:
        timer.cancel()
    process.returncode = 0
    return (
        time.perf_counter() - began,
        usage.ru_utime + usage.ru_stime,
        usage.ru_maxrss,
        expired.is_set(),
    )


def measure(
    name: str,
    command: Optional[list[str]],
    cwd: Path,
    args: argparse.Namespace,
    warm_up: bool = False,
    timeout: Optional[float] = None,
) -> Measurement:
    result = Measurement(name)
    if command is None:
        result.skipped = "not installed"
        return result
    limit = timeout or args.timeout
    print(f"  {name} ...", end="", flush=True, file=sys.stderr)
    if warm_up:
        run_once(command, cwd, limit)
    spent = 0.0
    while len(result.seconds) < args.repeat and (not result.seconds or spent < args.budget):
        seconds, cpu, rss, timed_out = run_once(command, cwd, limit)
        result.seconds.append(min(seconds, limit))
        result.cpu_seconds.append(cpu)
        result.max_rss_kb = max(result.max_rss_kb, rss)
        spent += seconds
        if timed_out:
            result.timed_out = True
            break
    print(f" {result.shown()}", file=sys.stderr)
    return result


def measure_alternating(
    commands: dict[str, tuple[str, list[str]]], cwd: Path, args: argparse.Namespace
) -> dict[str, Measurement]:
    """Each command once untimed, then ``--repeat`` rounds in which every command runs once,
    in turn: load that comes and goes on a shared machine weighs on all of them alike."""
    results = {key: Measurement(name) for key, (name, _) in commands.items()}
    names = " / ".join(name for name, _ in commands.values())
    print(f"  {names}, {args.repeat} rounds ...", end="", flush=True, file=sys.stderr)
    for _, command in commands.values():
        run_once(command, cwd, args.timeout)
    for _ in range(args.repeat):
        for key, (_, command) in commands.items():
            seconds, cpu, rss, timed_out = run_once(command, cwd, args.timeout)
            result = results[key]
            result.seconds.append(min(seconds, args.timeout))
            result.cpu_seconds.append(cpu)
            result.max_rss_kb = max(result.max_rss_kb, rss)
            result.timed_out = result.timed_out or timed_out
    print(" " + ", ".join(f"{m.shown_cpu()} CPU" for m in results.values()), file=sys.stderr)
    return results


def peer(name: str, peers_bin: Optional[str]) -> Optional[str]:
    for folder in [peers_bin, os.path.dirname(sys.executable)]:
        if folder and os.access(os.path.join(folder, name), os.X_OK):
            return os.path.join(folder, name)
    return shutil.which(name)


def run_corpus(
    label: str, folder: Path, files: list[Path], work: Path, args: argparse.Namespace
) -> dict[str, Measurement]:
    print(f"{label}: {len(files)} files", file=sys.stderr)
    listing = work / f"{label}.files"
    listing.write_text("\n".join(str(p) for p in files), encoding="utf-8")
    cache = work / f"{label}.cache"
    smpfix = [sys.executable, "-m", "smpfix", "check", "--exit-zero", "--no-color"]
    results = {
        "smpfix_cold": measure(
            "smpfix check (cold)", [*smpfix, "--no-cache", str(folder)], work, args, warm_up=True
        ),
    }
    shutil.rmtree(cache, ignore_errors=True)
    results["smpfix_warm"] = measure(
        "smpfix check (warm cache)", [*smpfix, "--cache-dir", str(cache), str(folder)], work, args
    )
    results["libcst"] = measure(
        "LibCST parse, 1 process",
        [sys.executable, "-c", PARSE_SCRIPT, "libcst", str(listing)],
        work,
        args,
    )
    results["ast"] = measure(
        "ast.parse, 1 process",
        [sys.executable, "-c", PARSE_SCRIPT, "ast", str(listing)],
        work,
        args,
    )
    fixit, torchfix, ruff = (peer(name, args.peers_bin) for name in ("fixit", "torchfix", "ruff"))
    slow = min(args.timeout, max(30.0, 25 * (results["smpfix_cold"].median or 0.0)))
    results["fixit"] = measure(
        "fixit lint", [fixit, "lint", str(folder)] if fixit else None, work, args, timeout=slow
    )
    results["torchfix"] = measure(
        "torchfix", [torchfix, str(folder)] if torchfix else None, work, args, timeout=slow
    )
    results["ruff"] = measure(
        "ruff check (default rules)",
        [ruff, "check", "--isolated", "--no-cache", "--exit-zero", str(folder)] if ruff else None,
        work,
        args,
    )
    return results


def run_library(folder: Path, work: Path, args: argparse.Namespace) -> dict[str, Measurement]:
    print(f"library: {folder}", file=sys.stderr)
    results = {key: Measurement(name, skipped="not measured") for key, name in NAMES.items()}
    results["smpfix_cold"] = measure(
        NAMES["smpfix_cold"],
        [
            sys.executable,
            "-m",
            "smpfix",
            "check",
            "--exit-zero",
            "--no-color",
            "--no-cache",
            str(folder),
        ],
        work,
        args,
        warm_up=True,
    )
    ruff = peer("ruff", args.peers_bin)
    results["ruff"] = measure(
        NAMES["ruff"],
        [ruff, "check", "--isolated", "--no-cache", "--exit-zero", str(folder)] if ruff else None,
        work,
        args,
    )
    return results


NAMES = {
    "smpfix_cold": "smpfix check (cold)",
    "smpfix_warm": "smpfix check (warm cache)",
    "libcst": "LibCST parse, 1 process",
    "ast": "ast.parse, 1 process",
    "fixit": "fixit lint",
    "torchfix": "torchfix",
    "ruff": "ruff check (default rules)",
}


def run_cold_start(work: Path, args: argparse.Namespace) -> dict[str, Measurement]:
    """One example file, cold, as a pre-commit hook checks it: smpfix against Fixit.

    The example (``examples/pytorch/pitfalls``: the script and its launcher) is copied into a
    project of its own, as a user's training project holds it; checked in place it would be
    part of this repository, whose hundreds of test fixtures the launcher search would read."""
    project = work / "cold_start"
    shutil.copytree(EXAMPLE, project)
    (project / "pyproject.toml").write_text(
        '[project]\nname = "training"\nversion = "0"\n', encoding="utf-8"
    )
    example = project / "train_gpt.py"
    print(f"one file: {example.name}", file=sys.stderr)
    fixit = peer("fixit", args.peers_bin)
    return {
        "smpfix": measure(
            "smpfix check, one file",
            [
                sys.executable,
                "-m",
                "smpfix",
                "check",
                "--no-cache",
                "--no-color",
                "--exit-zero",
                str(example),
            ],
            project,
            args,
            warm_up=True,
        ),
        "fixit": measure(
            "fixit lint, one file",
            [fixit, "lint", str(example)] if fixit else None,
            project,
            args,
            warm_up=True,
        ),
    }


def source_files(folder: Path) -> list[Path]:
    """The files ``smpfix check`` reads in ``folder``, found by its own discovery (Python files
    and notebooks, without hidden, tool and git-ignored folders): the floor parses the same."""
    from smpfix.engine.discovery import Excluder, discover

    return [Path(found.path) for found in discover([str(folder)], Excluder([], folder))]


@dataclass
class TreeResult:
    """smpfix in one process against the LibCST parse of the same files, on one tree."""

    folder: Path
    files: dict[str, int]
    runs: dict[str, Measurement]
    profile: dict[str, Any]

    @property
    def ratio(self) -> Optional[float]:
        cpu, floor = self.runs["smpfix"].median_cpu, self.runs["libcst"].median_cpu
        return cpu / floor if cpu is not None and floor else None


def run_tree(folder: Path, work: Path, args: argparse.Namespace) -> TreeResult:
    """``smpfix check --workers 1`` on ``folder`` against the floor (LibCST's parse of every
    file smpfix reads, notebooks as smpfix parses them), ``ast.parse``, and the same check
    timed by phase (``benchmarks/phases.py``), in alternating runs."""
    from smpfix.engine.prefilter import may_involve_smp

    folder = folder.resolve()
    files = source_files(folder)
    listing = work / f"{folder.name}.files"
    listing.write_text("\n".join(str(p) for p in files), encoding="utf-8")
    raws = [path.read_bytes() for path in files]
    counts = {
        "python": sum(1 for path in files if path.suffix == ".py"),
        "notebooks": sum(1 for path in files if path.suffix == ".ipynb"),
        "lines": sum(raw.count(b"\n") for raw, path in zip(raws, files) if path.suffix == ".py"),
        "prefiltered": sum(1 for raw in raws if may_involve_smp(raw)),
    }
    print(
        f"{folder}: {counts['python']} Python files ({counts['lines']:,} lines), "
        f"{counts['notebooks']} notebooks",
        file=sys.stderr,
    )
    smpfix = [sys.executable, "-m", "smpfix", "check", "--exit-zero", "--no-color", "--no-cache"]
    profiles = work / f"{folder.name}.phases"
    profiles.unlink(missing_ok=True)
    runs = measure_alternating(
        {
            "smpfix": ("smpfix check, 1 process", [*smpfix, "--workers", "1", "."]),
            "libcst": (
                "LibCST parse, 1 process",
                [sys.executable, "-c", PARSE_SCRIPT, "libcst", str(listing)],
            ),
            "ast": (
                "ast.parse, 1 process",
                [sys.executable, "-c", PARSE_SCRIPT, "ast", str(listing)],
            ),
            "phases": (
                "smpfix, timed by phase",
                [sys.executable, str(ROOT / "benchmarks" / "phases.py"), ".", str(profiles)],
            ),
        },
        folder,
        args,
    )
    # One profile a run, the first from the untimed run: the timed run with the median
    # total is shown, so that its phases add up to its total.
    timed = [json.loads(line) for line in profiles.read_text(encoding="utf-8").splitlines()[1:]]
    timed.sort(key=lambda profile: profile["total"])
    return TreeResult(folder, counts, runs, timed[len(timed) // 2])


def server_latency(args: argparse.Namespace) -> Optional[dict[str, float]]:
    """``benchmarks/server_latency.py``'s figures; None when the server's packages are missing."""
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "server_latency.py"),
            "--edits",
            str(args.server_edits),
        ],
        env=child_environment(),
        capture_output=True,
        text=True,
        timeout=args.timeout * 4,
    )
    if done.returncode != 0:
        print(
            "  server latency not measured: "
            f"{done.stderr.strip().splitlines()[-1:] or done.returncode}",
            file=sys.stderr,
        )
        return None
    return json.loads(done.stdout)


# -- reporting ------------------------------------------------------------------------------------


def ratio(numerator: Measurement, denominator: Measurement) -> Optional[float]:
    if numerator.median is None or denominator.median is None or denominator.median == 0:
        return None
    return numerator.median / denominator.median


def verdict(value: Optional[float], bound: float, at_most: bool, lower_bound: bool = False) -> str:
    if value is None:
        return "n/a"
    shown = f"{'>=' if lower_bound else ''}{value:.2f}x"
    ok = value <= bound if at_most else value >= bound
    return (
        f"{shown:>9}  {'met' if ok else 'NOT MET'} (target {'<=' if at_most else '>='} {bound:g}x)"
    )


def report_startup(cold_start: dict[str, Measurement], server: Optional[dict[str, float]]) -> str:
    smpfix, fixit = cold_start["smpfix"], cold_start["fixit"]
    lines = ["", "", "start-up and editing:"]
    shown = f"{smpfix.median:.2f} s" if smpfix.median is not None else "-"
    ok = smpfix.median is not None and smpfix.median <= 0.7
    lines.append(
        f"  one file (train_gpt.py), wall   smpfix {shown} ({smpfix.shown_cpu()} CPU)  "
        f"{'met' if ok else 'NOT MET'} (target <= 0.7 s);  fixit {fixit.shown()}"
        + (f"  (fixit/smpfix {ratio(fixit, smpfix):.1f}x)" if ratio(fixit, smpfix) else "")
    )
    if server is None:
        lines.append("  server re-check                 n/a (pip install 'smpfix[server]')")
    else:
        median = server["median_seconds"] * 1000
        lines.append(
            f"  server re-check, {server['script_lines']}-line script  median {median:.0f} ms, p90 "
            f"{server['p90_seconds'] * 1000:.0f} ms "
            f"over {server['edits']} edits  {'met' if median <= 150 else 'NOT MET'} (target <= 150 "
            f"ms); first check {server['first_check_seconds']:.2f} s"
        )
    return "\n".join(lines)


def report(
    smp: dict[str, Measurement],
    mixed: dict[str, Measurement],
    library: dict[str, Measurement],
    machine: str,
) -> str:
    lines = [
        f"machine: {machine}",
        "",
        f"{'median wall time (CPU time)':<27} {'SMP corpus':>22} {'mixed tree':>22} "
        f"{'library only':>22}",
    ]
    for key, measurement in smp.items():
        cells = [
            f"{m.shown()} ({m.shown_cpu()})" if m.median is not None else m.shown()
            for m in (measurement, mixed[key], library[key])
        ]
        lines.append(f"{measurement.name:<27} {cells[0]:>22} {cells[1]:>22} {cells[2]:>22}")
    lines += ["", "ratios of wall times (medians of this run):"]
    lines.append(
        "  SMP cold / LibCST parse        "
        f"{verdict(ratio(smp['smpfix_cold'], smp['libcst']), 1.5, at_most=True)}"
    )
    lines.append(
        f"  SMP cold / ast.parse           {_plain(ratio(smp['smpfix_cold'], smp['ast']))}"
    )
    cpu = (smp["smpfix_cold"].median_cpu or 0) / (smp["libcst"].median_cpu or 1)
    lines.append(
        f"  SMP cold / LibCST parse, CPU   {cpu:.2f}x  (all processes' CPU time: the work, "
        "whatever else runs on the machine)"
    )
    for label, results in (("SMP", smp), ("mixed", mixed)):
        cold, warm = results["smpfix_cold"], results["smpfix_warm"]
        lines.append(
            f"  {label} warm speed-up (cold/warm) "
            f"{'':<{5 - len(label)}}{verdict(ratio(cold, warm), 10, at_most=False)}"
        )
        for key, name in (("fixit", "Fixit"), ("torchfix", "TorchFix"), ("ruff", "Ruff")):
            value = ratio(results[key], cold)
            bound = {
                "fixit": 20.0 if label == "mixed" else None,
                "ruff": 1.0 if label == "mixed" else None,
            }.get(key)
            text = (
                verdict(value, bound, at_most=False, lower_bound=results[key].timed_out)
                if bound
                else _plain(value, results[key].timed_out)
            )
            lines.append(f"  {label} {name}/smpfix {'':<{17 - len(label) - len(name)}}{text}")
    lines.append(
        "  library Ruff/smpfix         "
        f"{verdict(ratio(library['ruff'], library['smpfix_cold']), 1.0, at_most=False)}"
    )
    peak = max(mixed["smpfix_cold"].max_rss_kb, mixed["smpfix_warm"].max_rss_kb) / 1024
    lines += [
        "",
        f"smpfix peak memory on the mixed tree: {peak:.0f} MB (largest process; target < 300 MB: "
        f"{'met' if peak < 300 else 'NOT MET'})",
    ]
    return "\n".join(lines)


# What the phases did their work for (``within`` in ``benchmarks/phases.py``).
_ON_BEHALF = {
    "launchers": "launcher index",
    "modules": "modules for rules",
    "plan": "plan",
    "plan/modules": "modules for the plan",
    "launchers/modules": "modules for the launcher index",
}


def tree_report(result: TreeResult, title: str) -> str:
    """The tree's files, smpfix against the floor (CPU time, one process), and the phases."""
    runs, profile, files = result.runs, result.profile, result.files
    smpfix, floor, cpython, timed = runs["smpfix"], runs["libcst"], runs["ast"], runs["phases"]
    lines = [
        "",
        f"{title}: {files['python']} Python files ({files['lines']:,} lines) and "
        f"{files['notebooks']} notebooks; {files['prefiltered']} of these files mention "
        "smdistributed",
        f"  {'median of ' + str(len(smpfix.cpu_seconds)) + ' alternating runs':<34} "
        f"{'CPU (user+sys)':>14} {'wall':>9}",
    ]
    for measurement in (smpfix, floor, cpython, timed):
        lines.append(
            f"  {measurement.name:<34} {measurement.shown_cpu():>14} {measurement.shown():>9}"
        )
    lines.append(f"  smpfix / LibCST parse floor, CPU {verdict(result.ratio, 1.5, at_most=True)}")
    total = profile["total"] or 1.0
    lines += [
        "",
        "  smpfix's phases (the timed run with the median total; CPU seconds):",
        f"  {'phase':<11} {'CPU s':>7} {'share':>6}  of which on behalf of",
    ]
    for phase, seconds in profile["phases"].items():
        within = sorted(profile["within"].get(phase, {}).items(), key=lambda item: -item[1])
        shown = ", ".join(
            f"{_ON_BEHALF.get(context, context)} {value:.2f}"
            for context, value in within
            if value >= 0.005
        )
        lines.append(f"  {phase:<11} {seconds:7.3f} {seconds / total * 100:5.1f}%  {shown}")
    lines.append(
        f"  {'total':<11} {total:7.3f} 100.0%  (the command without timers: median "
        f"{smpfix.shown_cpu()}; LibCST parse floor {floor.shown_cpu()})"
    )
    return "\n".join(lines)


def _plain(value: Optional[float], lower_bound: bool = False) -> str:
    return "n/a" if value is None else f"{'>=' if lower_bound else ''}{value:.2f}x"


# The sizes of a full run and of --quick's; an option given on the command line wins over both
# (the test of the documented commands runs them on tiny corpora).
_SIZES: dict[str, tuple[float, float]] = {
    "smp_count": (200, 50),
    "mixed_count": (2000, 500),
    "repeat": (5, 3),
    "timeout": (300.0, 30.0),
    "server_edits": (40, 15),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "smpfix-bench",
        help="Where the corpora are built (emptied first).",
    )
    parser.add_argument(
        "--smp-count", type=int, help="Generated SMP scripts (default 200; --quick 50)."
    )
    parser.add_argument(
        "--mixed-count",
        type=int,
        help="Library files in the mixed tree (default 2000; --quick 500).",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--repeat", type=int, help="Timed runs per command at most (default 5; --quick 3)."
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=20.0,
        help="Stop repeating a command after this many seconds (default 20).",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        help="Stop any run after this many seconds; shown as a lower bound (default 300; "
        "--quick 30).",
    )
    parser.add_argument(
        "--peers-bin",
        help="Folder holding fixit, torchfix and ruff (else this interpreter's folder, then PATH).",
    )
    parser.add_argument(
        "--project-scripts",
        type=int,
        default=10,
        help="Training scripts in the project tree (default 10).",
    )
    parser.add_argument(
        "--project-helpers", type=int, default=8, help="Helper modules they share (default 8)."
    )
    parser.add_argument(
        "--server-edits",
        type=int,
        help="Edits timed for the server's re-check (default 40; --quick 15).",
    )
    parser.add_argument("--json", type=Path, help="Also write the raw measurements here.")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="50 scripts, 500 library files, 3 repetitions, 30 s timeout, 15 server edits (a "
        "smoke test); an option given beside it keeps its value.",
    )
    parser.add_argument(
        "--project-files",
        type=int,
        default=1000,
        help="Library files in the one-file project (default 1000).",
    )
    parser.add_argument(
        "--one-file-only", action="store_true", help="Only the one-file-in-a-project measurement."
    )
    parser.add_argument(
        "--tree",
        type=Path,
        metavar="DIR",
        help="Only measure DIR, an existing folder (real code you assembled): smpfix in one "
        "process against the LibCST parse of the same files, and smpfix's phases.",
    )
    args = parser.parse_args()
    for name, (full, quick) in _SIZES.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    random.seed(args.seed)
    machine = (
        f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
        f"{platform.system()}"
    )

    work = args.workdir.resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    if args.tree is not None:
        tree = run_tree(args.tree, work, args)
        print(f"machine: {machine}")
        print(tree_report(tree, str(tree.folder)))
        if args.json:
            args.json.write_text(json.dumps(_tree_json(tree, machine), indent=2), encoding="utf-8")
        return
    smp_files = build_smp(work / "smp", max(args.smp_count, 3), args.seed)
    project_scripts = build_project(work / "project", args.project_files, smp_files)
    one_file = run_one_file(work / "project", project_scripts, work, args)
    if args.one_file_only:
        print(one_file_report(one_file, args.project_files))
        return
    mixed_files = build_mixed(work / "mixed", args.mixed_count, smp_files)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from project_tree import build as build_shared_helpers

    build_shared_helpers(
        work / "shared_helpers", args.project_scripts, args.project_helpers, args.seed
    )

    smp = run_corpus("smp", work / "smp", smp_files, work, args)
    mixed = run_corpus("mixed", work / "mixed", mixed_files, work, args)
    library = run_library(work / "mixed" / "lib", work, args)
    cold_start = run_cold_start(work, args)
    shared = run_tree(work / "shared_helpers", work, args)
    server = server_latency(args)
    print(report(smp, mixed, library, machine) + report_startup(cold_start, server))
    print(
        tree_report(
            shared,
            f"a generated project ({args.project_scripts} scripts sharing {args.project_helpers} "
            f"helper modules, their launchers; seed {args.seed})",
        )
    )
    print()
    print(one_file_report(one_file, args.project_files))
    if args.json:
        corpora = (
            ("smp", smp),
            ("mixed", mixed),
            ("library", library),
            ("one_file", one_file),
            ("cold_start", cold_start),
        )
        raw = {label: {key: vars(m) for key, m in results.items()} for label, results in corpora}
        args.json.write_text(
            json.dumps(
                {
                    "machine": machine,
                    "results": raw,
                    "shared_helpers": _tree_json(shared, machine),
                    "server": server,
                },
                indent=2,
            ),
            encoding="utf-8",
        )


def _tree_json(tree: TreeResult, machine: str) -> dict[str, Any]:
    return {
        "machine": machine,
        "folder": str(tree.folder),
        "files": tree.files,
        "results": {key: vars(m) for key, m in tree.runs.items()},
        "ratio_cpu": tree.ratio,
        "phases": tree.profile,
    }


if __name__ == "__main__":
    main()
