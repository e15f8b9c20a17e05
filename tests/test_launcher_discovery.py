"""Every file checked alone knows its job: a script's launchers are found from the script itself.

The projects in ``tests/projects/`` write their launchers the way real projects do: a launcher
in a sibling folder with a ``source_dir`` relative to the project root, a notebook passing
``os.path.join(os.getcwd(), "code")`` among automagic and cell-magic cells, a pytest integration
test building paths from ``__file__`` inside a test function with a ``**kwargs`` dict, and a
Hugging Face launcher named in ``[tool.smpfix] launchers`` that builds paths with ``pathlib``
and f-strings. Each script is checked as part of the whole project, alone from the project
root, alone from its own folder, and on stdin with ``--stdin-filename``: the findings (with
their severities and job-fact sources) and ``--show-job`` must be the same every time.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Optional

import pytest
from conftest import ROOT, run_cli

PROJECTS = ROOT / "tests" / "projects"

# layout -> (the script, how job-fact sources name its launcher)
LAYOUTS = {
    "sibling_folders": ("src/gpt/train.py", "launcher jobs/launch_gpt.py:13"),
    "notebook_getcwd": (
        "notebooks/gpt2/code/train_gpt2.py",
        "launcher notebooks/gpt2/launch_gpt2.ipynb",
    ),
    "container_tests": (
        "test/resources/mnist/smp_pt_mnist.py",
        "launcher test/integration/sagemaker/test_smmodelparallel.py:33[ml.p3.16xlarge]",
    ),
    "named_launchers": ("training/run_clm.py", "launcher ops/submit_clm.py:16"),
}


def _copy(layout: str, tmp_path: Path) -> Path:
    root = tmp_path / layout
    shutil.copytree(PROJECTS / layout, root)
    return root


def _check(cwd: Path, *args: str, stdin: Optional[str] = None) -> tuple[list[dict], str]:
    """The JSON findings (file names made absolute) and the ``--show-job`` text of one run."""
    found = run_cli("check", "--format", "json", *args, cwd=cwd, stdin=stdin)
    assert found.code in (0, 1), found.stderr
    findings = json.loads(found.stdout)
    for finding in findings:
        finding["filename"] = os.path.normpath(os.path.join(cwd, finding["filename"]))
    shown = run_cli(
        "check", "--show-job", "--format", "concise", *args, cwd=cwd, stdin=stdin
    ).stdout
    return findings, _job_block(shown)


def _job_block(output: str) -> str:
    """The ``--show-job`` lines after the ``path: job facts`` header (the path depends on cwd),
    or what follows it on a file's one line when nothing is known of its job."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if ": job facts" in line)
    block = [lines[start].partition(": job facts")[2]]
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        block.append(line)
    return "\n".join(block)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_script_gets_the_same_result_however_it_is_checked(layout: str, tmp_path: Path) -> None:
    root = _copy(layout, tmp_path)
    relative, launcher = LAYOUTS[layout]
    script = root / relative
    cache = ("--cache-dir", str(tmp_path / "cache"))

    whole, whole_job = _check(root, *cache, ".")
    whole = [f for f in whole if f["filename"] == str(script)]
    runs = {
        "alone from the project root": _check(root, *cache, relative),
        "alone from the script's folder": _check(script.parent, *cache, script.name),
        "on stdin": _check(
            root, *cache, "-", "--stdin-filename", relative, stdin=script.read_text()
        ),
        "alone, without a cache": _check(root, "--no-cache", relative),
    }
    for how, (findings, job) in runs.items():
        assert findings == whole, how
        assert job == whole_job, how

    # The launcher decided something: an error whose job facts come from it ...
    assert any(
        f["severity"] == "error"
        and any(fact["source"].startswith(launcher) for fact in f["job_facts"])
        for f in whole
    )
    assert f"({launcher})" in whole_job
    # ... which a run that looks only at the named file does not know.
    alone_without_search, _ = _check(root, "--no-cache", "--no-launcher-search", relative)
    assert alone_without_search != whole


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


SCRIPT = """import smdistributed.modelparallel.torch as smp

smp.init()
model = smp.DistributedModel(build())
if smp.dp_rank() == 0:
    smp.save(model.local_state_dict(), "m.pt", partial=True)
"""


def launcher(tp: int, source_dir: str = "code", microbatches: int = 2) -> str:
    return f"""from sagemaker.pytorch import PyTorch

PyTorch(
    entry_point="train.py",
    source_dir="{source_dir}",
    instance_type="ml.p4d.24xlarge",
    distribution={{"smdistributed": {{"modelparallel": {{"enabled": True, "parameters": {{
        "tensor_parallel_degree": {tp}, "microbatches": {microbatches}, "ddp": True}}}}}}}},
).fit()
"""


UNSET = "not set in any known source"


def _smp301(cwd: Path, *args: str) -> list[tuple[str, str]]:
    result = run_cli(
        "check", "--select", "SMP301", "--format", "json", "--no-cache", *args, cwd=cwd
    )
    return [
        (f["severity"], f["job_facts"][0]["source"] if f["job_facts"] else "")
        for f in json.loads(result.stdout)
    ]


def test_launchers_that_disagree_are_named_in_show_job(tmp_path: Path) -> None:
    root = _write(
        tmp_path,
        {
            "pyproject.toml": "",
            "code/train.py": SCRIPT,
            "jobs/small.py": launcher(4, "code", 2),
            "jobs/large.py": launcher(4, "code", 8),
        },
    )
    shown = run_cli("check", "--show-job", "--no-cache", "code/train.py", cwd=root).stdout
    assert (
        "microbatches unknown: launcher jobs/large.py:3, launcher jobs/small.py:3 set it to"
        " different values" in shown
    )
    assert (
        "tensor_parallel_degree = 4  (launcher jobs/large.py:3, launcher jobs/small.py:3)" in shown
    )
    assert _smp301(root, "code/train.py") == [
        ("error", "launcher jobs/large.py:3, launcher jobs/small.py:3")
    ]


def test_excluded_and_gitignored_launchers_configure_nothing_whichever_way_checked(
    tmp_path: Path,
) -> None:
    root = _write(
        tmp_path,
        {
            "pyproject.toml": '[tool.smpfix]\nexclude = ["old/"]\n',
            ".gitignore": "scratch/\n",
            "code/train.py": SCRIPT,
            "old/launch.py": launcher(4),
            "scratch/launch.py": launcher(2),
        },
    )
    assert _smp301(root, "code/train.py") == _smp301(root, ".") == [("warning", UNSET)]
    # The same launcher, neither excluded nor ignored, is found from the script alone.
    (root / "jobs").mkdir()
    shutil.copy(root / "old" / "launch.py", root / "jobs" / "launch.py")
    assert (
        _smp301(root, "code/train.py")
        == _smp301(root, ".")
        == [("error", "launcher jobs/launch.py:3")]
    )


def test_named_launchers_replace_the_search(tmp_path: Path) -> None:
    root = _write(
        tmp_path,
        {
            "pyproject.toml": '[tool.smpfix]\nlaunchers = ["jobs/*.py"]\n',
            "code/train.py": SCRIPT,
            "jobs/launch.py": launcher(1),
            "experiments/launch_tp.py": launcher(4),
        },
    )
    # Only the named launcher configures the script (tensor parallelism off), also when the
    # whole project is checked.
    assert _smp301(root, "code/train.py") == _smp301(root, ".") == []
    (root / "jobs" / "launch.py").write_text(launcher(2))
    assert (
        _smp301(root, "code/train.py")
        == _smp301(root, ".")
        == [("error", "launcher jobs/launch.py:3")]
    )


def test_a_named_launcher_glob_must_be_relative(tmp_path: Path) -> None:
    root = _write(
        tmp_path,
        {"pyproject.toml": '[tool.smpfix]\nlaunchers = ["/etc/*.py"]\n', "train.py": SCRIPT},
    )
    result = run_cli("check", "train.py", cwd=root)
    assert result.code == 2 and "launchers: '/etc/*.py' must be a glob relative to" in result.stderr


def test_stdin_without_a_name_has_no_project(tmp_path: Path) -> None:
    root = _write(
        tmp_path, {"pyproject.toml": "", "train.py": SCRIPT, "launch.py": launcher(4, ".")}
    )
    result = run_cli("check", "--select", "SMP301", "--format", "json", "-", cwd=root, stdin=SCRIPT)
    assert [f["severity"] for f in json.loads(result.stdout)] == ["warning"]
    named = run_cli(
        "check",
        "--select",
        "SMP301",
        "--format",
        "json",
        "-",
        "--stdin-filename",
        "train.py",
        cwd=root,
        stdin=SCRIPT,
    )
    assert [f["severity"] for f in json.loads(named.stdout)] == ["error"]


def test_a_changed_launcher_is_read_again(tmp_path: Path) -> None:
    """The index keeps what each launcher says in the cache, keyed on its bytes (and on the JSON
    file its ``parameters`` name)."""
    from_json = launcher(1).replace(
        '{\n        "tensor_parallel_degree": 1, "microbatches": 2, "ddp": True}', '"smp.json"'
    )
    assert '"parameters": "smp.json"' in from_json
    root = _write(
        tmp_path,
        {
            "pyproject.toml": "",
            "code/train.py": SCRIPT,
            "smp.json": '{"tensor_parallel_degree": 4}',
            "launch.py": from_json,
        },
    )
    cached = (
        "--select",
        "SMP301",
        "--format",
        "json",
        "--cache-dir",
        str(tmp_path / "cache"),
        "code/train.py",
    )

    def severities() -> list[str]:
        return [f["severity"] for f in json.loads(run_cli("check", *cached, cwd=root).stdout)]

    assert severities() == ["error"]
    (root / "smp.json").write_text('{"tensor_parallel_degree": 1}')
    assert severities() == []
    (root / "launch.py").write_text(launcher(8))
    assert severities() == ["error"]
    (root / "launch.py").write_text(launcher(1))
    assert severities() == []


def test_a_script_outside_any_project_is_still_checked_alone(tmp_path: Path) -> None:
    """Without a project marker the project is the folder the file is in (when it is not under
    the current folder): its launchers are found, and nothing above it is walked."""
    folder = _write(tmp_path / "job", {"train.py": SCRIPT, "launch.py": launcher(4, ".")})
    assert _smp301(ROOT, str(folder / "train.py")) == [("error", "launcher launch.py:3")]


def test_project_links_reads_only_what_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index a front end asks for one project; warm, it reads the launchers and nothing else."""
    from smpfix.engine import launcher_index
    from smpfix.engine.cache import ResultCache

    root = _write(
        tmp_path / "project",
        {
            "pyproject.toml": "",
            "code/train.py": SCRIPT,
            "jobs/launch.py": launcher(4),
            "lib/util.py": "x = 1\n",
        },
    )
    cache = ResultCache.open(tmp_path / "cache")
    first = launcher_index.project_links(str(root), cache=cache)
    assert [(link.script, link.job.settings["tensor_parallel_degree"]) for link in first] == [
        (str(root / "code" / "train.py"), 4)
    ]
    reads: list[str] = []

    def read(path: str) -> bytes:
        reads.append(os.path.relpath(path, root))
        return Path(path).read_bytes()

    monkeypatch.setattr(launcher_index.source, "read_bytes", read)
    assert launcher_index.project_links(str(root), cache=cache) == first
    assert reads == [os.path.join("jobs", "launch.py")]
    # A file that becomes a launcher is read again (its size and time changed) and found.
    reads.clear()
    (root / "lib" / "util.py").write_text(launcher(2))
    assert len(launcher_index.project_links(str(root), cache=cache)) == 2
    assert sorted(reads) == [os.path.join("jobs", "launch.py"), os.path.join("lib", "util.py")]
