"""The severity is the contract of a CI gate: hints never fail a build unless asked to.

``--fail-on`` (``fail-on``) sets the least severity that exits 1, annotates a pull request and
fails a JUnit case (default ``warning``); ``full`` and ``concise`` leave hints out unless
``--show-hints`` (``show-hints``) asks for them, and say how many they left out; the machine
formats always carry every finding.

The tree: ``stale.py`` has only a hint (a suppression comment that suppresses nothing), and
``train.py`` has an optimizer built before the wrap, a warning while the job's tensor
parallelism is unknown and an error once ``pyproject.toml`` declares it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

SELECT = ("--select", "SMP101,SMP900", "--no-cache")

HINT_ONLY = """import smdistributed.modelparallel.torch as smp

smp.init()
model = smp.DistributedModel(GPT())  # smpfix: ignore[SMP101]
"""

WARNING = """import smdistributed.modelparallel.torch as smp
import torch

smp.init()
with smp.model_creation(tensor_parallelism=smp.tp_size() > 1):
    model = GPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
model = smp.DistributedModel(model)
"""


def _tree(folder: Path, warning: bool = False, config: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "stale.py").write_text(HINT_ONLY, encoding="utf-8")
    if warning:
        (folder / "train.py").write_text(WARNING, encoding="utf-8")
    if config:
        (folder / "pyproject.toml").write_text(config, encoding="utf-8")
    return folder


def test_a_project_whose_only_findings_are_hints_passes_ci_by_default(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    # The README's CI step: annotations that fail the job on errors and warnings.
    github = run_cli("check", *SELECT, "--format", "github", ".", cwd=tree)
    assert (github.code, github.stdout) == (0, "")
    full = run_cli("check", *SELECT, ".", cwd=tree)
    assert full.code == 0
    assert full.stdout == "All checks passed! 1 hint not shown: --show-hints.\n"


@pytest.mark.parametrize("fmt", ["full", "concise"])
def test_show_hints_shows_them_and_fail_on_hint_fails_on_them(tmp_path: Path, fmt: str) -> None:
    tree = _tree(tmp_path)
    shown = run_cli("check", *SELECT, "--format", fmt, "--show-hints", ".", cwd=tree)
    assert shown.code == 0 and "stale.py:4:38: SMP900 [*] hint: " in shown.stdout
    assert "not shown" not in shown.stdout
    failing = run_cli("check", *SELECT, "--format", fmt, "--fail-on", "hint", ".", cwd=tree)
    assert failing.code == 1 and "SMP900" in failing.stdout, "a finding that fails is shown"


def test_fail_on_error_lets_warnings_pass_and_warning_is_the_default(tmp_path: Path) -> None:
    tree = _tree(tmp_path, warning=True)
    default = run_cli("check", *SELECT, "--format", "concise", ".", cwd=tree)
    assert default.code == 1 and "SMP101 [*] warning" in default.stdout
    assert default.stdout.endswith(
        "Found 1 problem (1 fixable with --apply). 1 hint not shown: --show-hints.\n"
    )
    assert run_cli("check", *SELECT, "--fail-on", "error", ".", cwd=tree).code == 0
    declared = tree / "pyproject.toml"
    declared.write_text("[tool.smpfix.job]\ntensor_parallel_degree = 4\n", encoding="utf-8")
    assert run_cli("check", *SELECT, "--fail-on", "error", ".", cwd=tree).code == 1


def test_the_configuration_sets_both_and_the_command_line_overrides_it(tmp_path: Path) -> None:
    tree = _tree(tmp_path, config='[tool.smpfix]\nfail-on = "hint"\nshow-hints = true\n')
    configured = run_cli("check", *SELECT, "--format", "concise", ".", cwd=tree)
    assert configured.code == 1 and "SMP900" in configured.stdout
    overridden = run_cli(
        "check",
        *SELECT,
        "--format",
        "concise",
        "--fail-on",
        "warning",
        "--hide-hints",
        ".",
        cwd=tree,
    )
    assert overridden.code == 0 and "SMP900" not in overridden.stdout
    (tree / "pyproject.toml").write_text('[tool.smpfix]\nfail-on = "info"\n', encoding="utf-8")
    refused = run_cli("check", *SELECT, ".", cwd=tree)
    assert refused.code == 2 and "fail-on must be one of" in refused.stderr


def test_machine_formats_always_carry_hints(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    found = json.loads(run_cli("check", *SELECT, "--format", "json", ".", cwd=tree).stdout)
    assert [(item["code"], item["severity"]) for item in found] == [("SMP900", "hint")]
    lines = run_cli("check", *SELECT, "--format", "json-lines", ".", cwd=tree).stdout
    assert [json.loads(line)["code"] for line in lines.splitlines()] == ["SMP900"]
    sarif = json.loads(run_cli("check", *SELECT, "--format", "sarif", ".", cwd=tree).stdout)
    assert [r["level"] for r in sarif["runs"][0]["results"]] == ["note"]


def test_the_full_format_explains_below_the_code_frame(tmp_path: Path) -> None:
    tree = _tree(tmp_path, warning=True)
    full = run_cli("check", *SELECT, ".", cwd=tree).stdout
    title, *rest = full.split("\n")
    assert title.startswith("train.py:7:13: SMP101 [*] warning: ")
    assert len(title.split("warning: ", 1)[1]) <= 100
    notes = [line.split(" = ", 1)[1] for line in rest if line.lstrip().startswith("= ")]
    kinds = [note.split(": ", 1)[0] for note in notes]
    assert kinds == ["note", "evidence", "help"], full
    evidence = notes[1].split(": ", 1)[1]
    assert evidence == "tensor parallelism: unknown (not set in any known source)"
    found = json.loads(run_cli("check", *SELECT, "--format", "json", ".", cwd=tree).stdout)
    warning = next(item for item in found if item["code"] == "SMP101")
    assert warning["explanation"] and warning["evidence"] == [evidence]


def test_add_noqa_leaves_hints_alone_unless_they_are_shown(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    (tree / "advice.py").write_text(
        HINT_ONLY.replace("  # smpfix: ignore[SMP101]", ""), encoding="utf-8"
    )
    before = (tree / "stale.py").read_text(encoding="utf-8")
    added = run_cli("check", *SELECT, "--add-noqa", ".", cwd=tree)
    assert added.code == 0 and (tree / "stale.py").read_text(encoding="utf-8") == before
    assert "Added 0 suppressions" in added.stderr
