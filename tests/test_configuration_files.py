"""Configuration as Ruff's: each file takes the closest configuration file, ``extend``,
``per-file-ignores`` relative to the file that says them, per-path job overrides, "did you
mean" everywhere, ``--show-settings FILE`` with where each value came from, and the language
server resolving a document's settings as ``smpfix check`` does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from smpfix.cli import main

# With tensor parallelism on, SMP101 (the optimizer is built before the model is wrapped); with
# or without it, SMP301 (a checkpoint saved under a `dp_rank()` guard).
SCRIPT = """import smdistributed.modelparallel.torch as smp
import torch

smp.init()
with smp.model_creation(tensor_parallelism=smp.tp_size() > 1): model = GPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
model = smp.DistributedModel(model)
if smp.dp_rank() == 0:
    smp.save(model.local_state_dict(), "m.pt", partial=True)
optimizer = smp.DistributedOptimizer(optimizer)
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def smpfix(folder: Path, *args: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``smpfix check ARGS`` run in ``folder``, in this process."""
    monkeypatch.chdir(folder)
    return CliRunner().invoke(main, ["check", "--no-cache", *args])


def found(result: Any) -> set[tuple[str, str]]:
    """(file name, code) of each finding of a JSON report."""
    return {(Path(f["filename"]).name, f["code"]) for f in json.loads(result.stdout)}


def two_projects(root: Path) -> None:
    """A root project that ignores SMP3, and a subfolder project with its own pyproject.toml
    that declares tensor parallelism."""
    write(root, "pyproject.toml", '[tool.smpfix]\nignore = ["SMP3"]\n')
    write(root, "top.py", SCRIPT)
    write(root, "sub/pyproject.toml", "[tool.smpfix.job]\ntensor_parallel_degree = 4\n")
    write(root, "sub/train.py", SCRIPT)


def test_a_subfolder_pyproject_applies_when_checking_from_the_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    two_projects(tmp_path)
    from_root = smpfix(tmp_path, "--format", "json", ".", monkeypatch=monkeypatch)
    from_sub = smpfix(tmp_path / "sub", "--format", "json", ".", monkeypatch=monkeypatch)
    in_sub = {item for item in found(from_root) if item[0] in ("train.py", "pyproject.toml")}
    # The subfolder's own configuration: tensor parallelism (SMP101), and SMP3 not ignored.
    assert in_sub == found(from_sub)
    assert {("train.py", "SMP101"), ("train.py", "SMP301")} <= in_sub
    # The root's file keeps the root's configuration.
    assert ("top.py", "SMP301") not in found(from_root)


def test_smpfix_toml_beats_pyproject_toml_in_the_same_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "pyproject.toml", '[tool.smpfix]\nselect = ["SMP3"]\n')
    write(tmp_path, "smpfix.toml", 'select = ["SMP1"]\n[job]\ntensor_parallel_degree = 4\n')
    write(tmp_path, "train.py", SCRIPT)
    result = smpfix(tmp_path, "--format", "json", ".", monkeypatch=monkeypatch)
    assert found(result) == {("train.py", "SMP101")}
    write(tmp_path, ".smpfix.toml", 'select = ["SMP3"]\n')
    assert found(smpfix(tmp_path, "--format", "json", ".", monkeypatch=monkeypatch)) == {
        ("train.py", "SMP301")
    }


def test_extend_inherits_then_overrides_and_a_cycle_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(
        tmp_path,
        "shared/base.toml",
        'select = ["SMP1", "SMP3"]\nignore = ["SMP301"]\n[job]\ntensor_parallel_degree = 4\n',
    )
    write(tmp_path, "pyproject.toml", '[tool.smpfix]\nextend = "shared/base.toml"\nignore = []\n')
    write(tmp_path, "train.py", SCRIPT)
    result = smpfix(tmp_path, "--format", "json", "train.py", monkeypatch=monkeypatch)
    # select and the job come from base.toml; this file's `ignore = []` replaces base's.
    assert found(result) == {("train.py", "SMP101"), ("train.py", "SMP301")}
    write(tmp_path, "shared/base.toml", 'extend = "../pyproject.toml"\n')
    cycle = smpfix(tmp_path, "train.py", monkeypatch=monkeypatch)
    assert cycle.exit_code == 2
    assert "extend forms a cycle" in cycle.stderr and "base.toml" in cycle.stderr


def test_per_file_ignores_are_relative_to_the_configuration_that_says_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "pyproject.toml", "[tool.smpfix]\n")
    write(
        tmp_path,
        "sub/pyproject.toml",
        '[tool.smpfix.lint]\nper-file-ignores = { "legacy/*.py" = ["SMP301"] }\n',
    )
    write(tmp_path, "sub/legacy/old.py", SCRIPT)
    write(tmp_path, "sub/new.py", SCRIPT)
    result = smpfix(tmp_path, "--format", "json", ".", monkeypatch=monkeypatch)
    assert ("new.py", "SMP301") in found(result)
    assert ("old.py", "SMP301") not in found(result)


def test_a_subfolder_exclude_applies_when_checking_from_the_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "pyproject.toml", "[tool.smpfix]\n")
    write(tmp_path, "sub/smpfix.toml", 'exclude = ["generated/"]\n')
    write(tmp_path, "sub/generated/gen.py", SCRIPT)
    write(tmp_path, "sub/train.py", SCRIPT)
    files = smpfix(tmp_path, "--show-files", ".", monkeypatch=monkeypatch)
    assert files.stdout.split() == ["sub/train.py"]


def test_job_overrides_apply_to_matching_files_and_say_so_in_the_job_facts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(
        tmp_path,
        "pyproject.toml",
        "[tool.smpfix.job]\ntensor_parallel_degree = 1\n\n"
        '[[tool.smpfix.job.overrides]]\npaths = ["tp/*.py"]\ntensor_parallel_degree = 4\n',
    )
    write(tmp_path, "tp/train.py", SCRIPT)
    write(tmp_path, "plain/train.py", SCRIPT)
    result = smpfix(tmp_path, "--format", "json", "--show-job", ".", monkeypatch=monkeypatch)
    report = json.loads(result.stdout)
    codes = {(Path(f["filename"]).parent.name, f["code"]) for f in report}
    assert ("tp", "SMP101") in codes and ("plain", "SMP101") not in codes
    smp101 = next(f for f in report if f["code"] == "SMP101")
    assert smp101["evidence"] == [
        "tensor parallelism: on (pyproject.toml [[tool.smpfix.job.overrides]] #1)"
    ]
    assert (
        "  tensor_parallel_degree = 4  (pyproject.toml [[tool.smpfix.job.overrides]] #1)"
        in result.stderr.splitlines()
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[tool.smpfix]\nselct = []\n", "selct (did you mean select?)"),
        ("[tool.smpfix.lint]\nignor = []\n", "[tool.smpfix.lint]: ignor (did you mean ignore?)"),
        (
            "[tool.smpfix.job]\ntensor_paralel_degree = 4\n",
            "did you mean 'tensor_parallel_degree'?",
        ),
        (
            '[[tool.smpfix.job.overrides]]\npaths = ["a/*"]\nmicrobatchs = 4\n',
            "[[tool.smpfix.job.overrides]] #1: unknown job setting 'microbatchs'"
            " (did you mean 'microbatches'?)",
        ),
        (
            '[[tool.smpfix.job.overrides]]\npath = ["a/*"]\nmicrobatches = 4\n',
            "('path': did you mean 'paths'?)",
        ),
    ],
)
def test_an_unknown_key_in_a_configuration_file_gets_a_suggestion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, expected: str
) -> None:
    write(tmp_path, "pyproject.toml", text)
    write(tmp_path, "train.py", SCRIPT)
    result = smpfix(tmp_path, ".", monkeypatch=monkeypatch)
    assert result.exit_code == 2 and expected in result.stderr


def test_an_unknown_selector_on_the_command_line_gets_a_suggestion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "train.py", SCRIPT)
    typed = smpfix(tmp_path, "--select", "SMP1O1", ".", monkeypatch=monkeypatch)
    assert typed.exit_code == 2 and "did you mean 'SMP101'?" in typed.stderr
    named = smpfix(
        tmp_path, "--ignore", "optimiser-before-distributed-model", ".", monkeypatch=monkeypatch
    )
    assert "did you mean 'optimizer-before-distributed-model'?" in named.stderr
    job = smpfix(tmp_path, "--job", "microbatchs=2", ".", monkeypatch=monkeypatch)
    assert job.exit_code == 2 and "did you mean 'microbatches'?" in job.stderr


def test_the_api_refuses_any_unknown_keyword_selector_or_setting_with_a_suggestion() -> None:
    from smpfix.api import check_source, fix_source

    with pytest.raises(ValueError, match="'selct' \\(did you mean 'select'\\?\\)"):
        check_source(SCRIPT, selct=["SMP1"])
    with pytest.raises(ValueError, match="'unsafe_fixes' \\(did you mean 'unsafe'\\?\\)"):
        fix_source(SCRIPT, unsafe_fixes=True)
    with pytest.raises(ValueError, match="did you mean 'SMP101'"):
        check_source(SCRIPT, select=["SMP1O1"])
    with pytest.raises(ValueError, match="did you mean 'microbatches'"):
        check_source(SCRIPT, job={"microbatchs": 2})
    # Still a TypeError too, as Python's own unknown keyword is.
    with pytest.raises(TypeError):
        check_source(SCRIPT, selct=["SMP1"])


def test_show_settings_for_a_file_says_where_each_value_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = write(tmp_path, "base.toml", 'ignore = ["SMP3"]\nfail-on = "error"\n')
    config = write(
        tmp_path,
        "sub/pyproject.toml",
        '[tool.smpfix]\nextend = "../base.toml"\n\n[tool.smpfix.lint]\nselect = ["SMP1", "SMP3"]\n'
        '\n[[tool.smpfix.job.overrides]]\npaths = ["train.py"]\ntensor_parallel_degree = 4\n',
    )
    write(tmp_path, "sub/train.py", SCRIPT)
    result = smpfix(
        tmp_path,
        "--show-settings",
        "--extend-select",
        "SMP201",
        "--job",
        "microbatches=2",
        "sub/train.py",
        monkeypatch=monkeypatch,
    )
    lines = result.stdout.splitlines()
    assert result.exit_code == 0 and lines[:3] == [
        "settings for: sub/train.py",
        f"configuration: {config}",
        f"extends: {base}",
    ]
    assert f"select: SMP1, SMP3  ({config} [tool.smpfix.lint])" in lines
    assert f"ignore: SMP3  ({base}, extended by {config})" in lines
    assert "extend-select: (none)  (default)" in lines
    assert "--extend-select: SMP201  (command line)" in lines
    assert (
        "job: tensor_parallel_degree = 4  (pyproject.toml [[tool.smpfix.job.overrides]] #1)"
        in lines
    )
    assert "job: microbatches = 2  (command line --job)" in lines
    rules = next(line for line in lines if line.startswith("rules: "))
    assert "SMP101" in rules and "SMP201" in rules and "SMP301" not in rules
    # fail-on is a setting of the run: from the configuration closest to the checked paths.
    assert "fail-on: error  (" in "\n".join(lines)
    # Without a file, as before: the run's settings.
    plain = smpfix(tmp_path / "sub", "--show-settings", ".", monkeypatch=monkeypatch)
    assert plain.stdout.splitlines()[0] == f"configuration: {config}"


def test_a_cached_result_depends_on_the_files_own_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    two_projects(tmp_path)
    monkeypatch.chdir(tmp_path)

    def codes() -> set[tuple[str, str]]:
        result = CliRunner().invoke(main, ["check", "--format", "json", "sub/train.py", "top.py"])
        return found(result)

    assert ("train.py", "SMP101") in codes()
    write(tmp_path, "sub/pyproject.toml", "[tool.smpfix.job]\ntensor_parallel_degree = 1\n")
    assert ("train.py", "SMP101") not in codes()


def test_the_language_server_resolves_a_document_as_the_command_line_does(
    tmp_path: Path,
) -> None:
    pytest.importorskip("pygls")
    from smpfix.engine.config_tree import ConfigTree, Overlay, file_options
    from smpfix.job.project import Project
    from smpfix.rules.registry import rule_names
    from smpfix.server.settings import ClientSettings, Configurations, resolve

    two_projects(tmp_path)
    write(
        tmp_path,
        "sub/pyproject.toml",
        '[tool.smpfix]\nextend = "../base.toml"\n[[tool.smpfix.job.overrides]]\n'
        'paths = ["train.py"]\ntensor_parallel_degree = 4\n',
    )
    write(tmp_path, "base.toml", 'ignore = ["SMP1"]\n')
    script = str(tmp_path / "sub" / "train.py")
    document = resolve(script, ClientSettings(), Configurations(), lambda config: Project())
    command_line = file_options(script, ConfigTree().for_path(script), Overlay(), rule_names())
    assert document.problems == ()
    assert document.options.select == command_line.select
    assert document.options.declared_jobs == command_line.declared_jobs
    assert document.options.root == command_line.root
    assert "SMP101" not in document.options.select
    assert document.options.declared_jobs[0].source.startswith(
        "pyproject.toml [[tool.smpfix.job.overrides]] #1"
    )


def test_an_smpfix_toml_job_table_is_checked_at_its_own_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(
        tmp_path,
        "sub/smpfix.toml",
        'select = ["SMP8"]\n\n[job]\nmicrobatches = 2\ntensor_parallel_degree = 4\n',
    )
    write(tmp_path, "sub/train.py", SCRIPT)
    result = smpfix(tmp_path, "--format", "concise", ".", monkeypatch=monkeypatch)
    assert f"{tmp_path / 'sub' / 'smpfix.toml'}:5:1: SMP814 error" in result.stdout


def test_sarif_points_a_job_fact_at_the_configuration_the_file_took(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    two_projects(tmp_path)
    result = smpfix(tmp_path, "--format", "sarif", ".", monkeypatch=monkeypatch)
    results = json.loads(result.stdout)["runs"][0]["results"]
    smp101 = next(r for r in results if r["ruleId"] == "SMP101")
    related = [r["physicalLocation"]["artifactLocation"]["uri"] for r in smp101["relatedLocations"]]
    assert related == ["sub/pyproject.toml"]


def test_the_server_points_job_findings_at_the_job_table_of_either_file(tmp_path: Path) -> None:
    """A finding about a job setting opens the table that sets it: ``[job]`` in an
    ``smpfix.toml``, ``[tool.smpfix.job]`` in a ``pyproject.toml``."""
    from smpfix.server.worker import _table_line

    (tmp_path / "smpfix.toml").write_text('select = ["SMP1"]\n\n[job]\nmicrobatches = 4\n')
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n[tool.smpfix.job]\n")
    assert _table_line(str(tmp_path / "smpfix.toml")) == 3
    assert _table_line(str(tmp_path / "pyproject.toml")) == 3
