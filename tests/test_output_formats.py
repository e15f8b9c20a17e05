"""CI-facing output, through the installed command: SARIF, GitHub annotations, JSON lines,
JUnit, ``--output-file``, ``--statistics`` and the progress bar.

The tree has findings from several rules: SMP101 and SMP301 in ``train.py`` (both with safe
fixes when tensor parallelism is declared in ``pyproject.toml``), a stale suppression
(SMP900) in ``stale.py``, and a clean file. Without the declaration, SMP101 has no fix.
"""

from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from conftest import ROOT, run_cli

SCHEMA = json.loads(
    (ROOT / "tests" / "schemas" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8")
)
SELECT = ("--select", "SMP101,SMP301,SMP900", "--no-cache")

TRAIN = """import smdistributed.modelparallel.torch as smp
import torch

smp.init()
with smp.model_creation(tensor_parallelism=smp.tp_size() > 1): model = GPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
model = smp.DistributedModel(model)
optimizer = smp.DistributedOptimizer(optimizer)
if smp.dp_rank() == 0:
    smp.save(model.local_state_dict(), "m.pt", partial=True)
"""

STALE = """import smdistributed.modelparallel.torch as smp

smp.init()
model = smp.DistributedModel(GPT())
if smp.rdp_rank() == 0:  # smpfix: ignore[SMP301]
    smp.save(model.local_state_dict(), "m.pt", partial=True)
"""

CLEAN = 'print("no model parallelism here")\n'

# The scheduler holds the optimizer before the wrap, so SMP101 offers no fix here.
SCHEDULED = """import smdistributed.modelparallel.torch as smp
import torch
from torch.optim.lr_scheduler import StepLR

smp.init()
with smp.model_creation(tensor_parallelism=smp.tp_size() > 1): model = GPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
scheduler = StepLR(optimizer, step_size=1)
model = smp.DistributedModel(model)
"""


def make_tree(folder: Path, tensor_parallel: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if tensor_parallel:
        (folder / "pyproject.toml").write_text(
            "[tool.smpfix.job]\ntensor_parallel_degree = 4\n", encoding="utf-8"
        )
    (folder / "train.py").write_text(TRAIN, encoding="utf-8")
    (folder / "stale.py").write_text(STALE, encoding="utf-8")
    (folder / "clean.py").write_text(CLEAN, encoding="utf-8")
    return folder


def json_findings(folder: Path) -> list[dict]:
    return json.loads(run_cli("check", *SELECT, "--format", "json", ".", cwd=folder).stdout)


def validate_sarif(log: dict) -> None:
    validator = jsonschema.Draft4Validator(
        SCHEMA, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER
    )
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])


def offset(lines: list[str], line: int, column: int) -> int:
    return sum(len(text) for text in lines[: line - 1]) + column - 1


def apply_sarif_fixes(text: str, result: dict) -> str:
    lines = text.splitlines(keepends=True)
    spans = []
    for fix in result["fixes"]:
        for change in fix["artifactChanges"]:
            for replacement in change["replacements"]:
                region = replacement["deletedRegion"]
                start = offset(lines, region["startLine"], region["startColumn"])
                end = offset(lines, region["endLine"], region["endColumn"])
                spans.append((start, end, replacement["insertedContent"]["text"]))
    for start, end, content in sorted(spans, reverse=True):
        text = text[:start] + content + text[end:]
    return text


def test_sarif_is_valid_and_describes_rules_results_fixes_and_related_files(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    completed = run_cli("check", *SELECT, "--format", "sarif", ".", cwd=tree)
    assert completed.code == 1, completed.stderr
    log = json.loads(completed.stdout)
    validate_sarif(log)
    assert log["version"] == "2.1.0" and len(log["runs"]) == 1
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "smpfix" and driver["informationUri"].startswith("https://")
    assert driver["version"] == run_cli("--version").stdout.split()[-1]

    rules = {rule["id"]: rule for rule in driver["rules"]}
    assert list(rules) == ["SMP101", "SMP301", "SMP900"]  # the rules with results, as Ruff
    for code in ("SMP101", "SMP301", "SMP900"):
        rule = rules[code]
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
        assert rule["helpUri"] == f"https://smpfix.github.io/smpfix/rules/{code}/"
        assert rule["helpUri"] in rule["help"]["markdown"]
    assert rules["SMP101"]["defaultConfiguration"]["level"] == "error"
    assert rules["SMP900"]["defaultConfiguration"]["level"] == "note"

    results = {result["ruleId"]: result for result in run["results"]}
    assert set(results) == {"SMP101", "SMP301", "SMP900"}
    assert [results[c]["level"] for c in ("SMP101", "SMP301", "SMP900")] == [
        "error",
        "error",
        "note",
    ]
    for result in results.values():
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]

    expected = {f["code"]: f for f in json_findings(tree)}
    for code, result in results.items():
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"] == {
            "uri": expected[code]["filename"].removeprefix("./"),
            "uriBaseId": "%SRCROOT%",
        }
        region = location["region"]
        assert (region["startLine"], region["startColumn"]) == (
            expected[code]["location"]["row"],
            expected[code]["location"]["column"],
        )
        assert (region["endLine"], region["endColumn"]) == (
            expected[code]["end_location"]["row"],
            expected[code]["end_location"]["column"],
        )
        assert result["fixes"][0]["artifactChanges"][0]["replacements"]

    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tree.resolve().as_uri() + "/"
    related = results["SMP101"]["relatedLocations"][0]
    assert related["physicalLocation"]["artifactLocation"]["uri"] == "pyproject.toml"
    assert related["physicalLocation"]["region"]["startLine"] == 1
    assert "tensor parallelism" in related["message"]["text"]
    assert "relatedLocations" not in results["SMP900"]

    fixed_by_sarif = apply_sarif_fixes(TRAIN, results["SMP101"])
    fixed_by_sarif = apply_sarif_fixes(fixed_by_sarif, results["SMP301"])
    assert run_cli("check", *SELECT, "--apply", ".", cwd=tree).code == 0
    assert (tree / "train.py").read_text(encoding="utf-8") == fixed_by_sarif


def test_sarif_describes_each_rule_in_a_line_and_links_its_page_instead_of_embedding_it() -> None:
    """The shipped examples have about 25 findings from about 20 rules: with every rule's
    page embedded twice, their log was about 1 MB."""
    completed = run_cli("check", "--no-cache", "--format", "sarif", "examples", cwd=ROOT)
    assert completed.code == 1, completed.stderr
    log = json.loads(completed.stdout)
    validate_sarif(log)
    run = log["runs"][0]
    assert len(run["results"]) >= 20
    assert len(completed.stdout.encode("utf-8")) < 100_000
    for rule in run["tool"]["driver"]["rules"]:
        assert "\n" not in rule["shortDescription"]["text"]
        assert rule["helpUri"] == f"https://smpfix.github.io/smpfix/rules/{rule['id']}/"
        for text in (rule["fullDescription"]["text"], rule["help"]["text"]):
            assert "## " not in text and len(text) < 2_000  # no page, in any field


def test_sarif_without_fixes_or_job_file_is_valid(tmp_path: Path) -> None:
    tree = make_tree(tmp_path, tensor_parallel=False)
    (tree / "scheduled.py").write_text(SCHEDULED, encoding="utf-8")
    log = json.loads(run_cli("check", *SELECT, "--format", "sarif", ".", cwd=tree).stdout)
    validate_sarif(log)
    results = {
        (r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], r["ruleId"]): r
        for r in log["runs"][0]["results"]
    }
    no_fix = results[("scheduled.py", "SMP101")]
    assert no_fix["level"] == "warning"
    assert "fixes" not in no_fix and "relatedLocations" not in no_fix
    assert results[("train.py", "SMP101")]["fixes"][0]["properties"]["applicability"] in (
        "safe",
        "unsafe",
    )
    assert results[("train.py", "SMP301")]["fixes"][0]["properties"] == {"applicability": "safe"}


def test_sarif_reports_unanalyzable_files_and_stays_valid_when_clean(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text(
        "import smdistributed.modelparallel.torch as smp\nif (:\n", encoding="utf-8"
    )
    completed = run_cli("check", *SELECT, "--format", "sarif", ".", cwd=tmp_path)
    assert completed.code == 2
    log = json.loads(completed.stdout)
    validate_sarif(log)
    invocation = log["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False
    notification = invocation["toolExecutionNotifications"][0]
    assert notification["level"] == "error" and "syntax error" in notification["message"]["text"]
    assert log["runs"][0]["results"] == []


def test_sarif_uri_outside_the_working_directory_is_absolute(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "repo")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    log = json.loads(
        run_cli("check", *SELECT, "--format", "sarif", str(tree / "train.py"), cwd=elsewhere).stdout
    )
    validate_sarif(log)
    location = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": (tree / "train.py").resolve().as_uri()}


def test_github_annotations(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    completed = run_cli("check", *SELECT, "--format", "github", ".", cwd=tree)
    assert completed.code == 1
    lines = completed.stdout.splitlines()
    assert len(lines) == 2, completed.stdout
    by_code = {line.split("title=")[1].split()[0]: line for line in lines}
    smp101 = json_findings(tree)[1]
    assert smp101["code"] == "SMP101"
    start, end = smp101["location"], smp101["end_location"]
    assert (
        by_code["SMP101"] == "::error"
        f" file=train.py,line={start['row']},col={start['column']},"
        f"endLine={end['row']},endColumn={end['column']},title=SMP101"
        f" optimizer-before-distributed-model::{smp101['message']}"
    )
    assert by_code["SMP301"].startswith("::error file=train.py,line=9,col=4,")
    assert "Found" not in completed.stdout
    with_hints = run_cli("check", *SELECT, "--format", "github", "--fail-on", "hint", ".", cwd=tree)
    notice = [line for line in with_hints.stdout.splitlines() if "SMP900" in line]
    assert notice and notice[0].startswith("::notice file=stale.py,line=5,")


def test_github_escapes_properties_and_messages(tmp_path: Path) -> None:
    from smpfix.report.github import escape_data, escape_property

    assert escape_data("50% done\r\nnext: a,b") == "50%25 done%0D%0Anext: a,b"
    assert escape_property("dir,x/a:b%.py") == "dir%2Cx/a%3Ab%25.py"
    folder = tmp_path / "odd,name: dir"
    make_tree(folder)
    completed = run_cli(
        "check", *SELECT, "--format", "github", str(folder / "train.py"), cwd=tmp_path
    )
    assert completed.stdout.startswith("::error file=odd%2Cname%3A dir/train.py,line=6,")
    warning = run_cli(
        "check",
        *SELECT,
        "--format",
        "github",
        str(make_tree(tmp_path / "w", False) / "train.py"),
        cwd=tmp_path,
    )
    assert warning.stdout.startswith("::warning file=w/train.py,")


def test_json_lines_has_the_json_fields_one_object_per_line(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    completed = run_cli("check", *SELECT, "--format", "json-lines", ".", cwd=tree)
    assert completed.code == 1
    lines = completed.stdout.splitlines()
    assert [json.loads(line) for line in lines] == json_findings(tree)
    clean = tmp_path / "clean-only"
    clean.mkdir()
    (clean / "a.py").write_text(CLEAN, encoding="utf-8")
    assert run_cli("check", *SELECT, "--format", "json-lines", ".", cwd=clean).stdout == ""


def test_junit_has_a_test_case_per_file_and_a_failure_per_finding(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    (tree / "broken.py").write_text(
        "import smdistributed.modelparallel.torch as smp\nif (:\n", encoding="utf-8"
    )
    completed = run_cli("check", *SELECT, "--format", "junit", ".", cwd=tree)
    assert completed.code == 2
    assert completed.stdout.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    root = ET.fromstring(completed.stdout.split("\n", 1)[1])
    assert root.tag == "testsuites"
    cases = {case.get("name"): case for case in root.iter("testcase")}
    assert set(cases) == {"broken.py", "clean.py", "stale.py", "train.py"}
    assert root.get("tests") == "4" and root.get("failures") == "1" and root.get("errors") == "1"
    assert list(cases["clean.py"]) == []
    assert [f.get("type") for f in cases["train.py"].findall("failure")] == ["SMP101", "SMP301"]
    assert cases["train.py"].find("failure").text.startswith("train.py:6:13: SMP101 error:")
    # The stale suppression is a hint: below --fail-on, so its file passes.
    assert list(cases["stale.py"]) == []
    assert "syntax error" in cases["broken.py"].find("error").get("message")
    strict = run_cli("check", *SELECT, "--format", "junit", "--fail-on", "hint", ".", cwd=tree)
    root = ET.fromstring(strict.stdout.split("\n", 1)[1])
    cases = {case.get("name"): case for case in root.iter("testcase")}
    assert [f.get("type") for f in cases["stale.py"].findall("failure")] == ["SMP900"]


@pytest.mark.parametrize("fmt", ["sarif", "github", "json", "json-lines", "junit", "concise"])
def test_output_file_gets_the_report_and_the_terminal_the_summary(tmp_path: Path, fmt: str) -> None:
    tree = make_tree(tmp_path)
    direct = run_cli("check", *SELECT, "--format", fmt, "--quiet", ".", cwd=tree)
    target = tmp_path / "reports" / f"smpfix.{fmt}"
    target.parent.mkdir()
    completed = run_cli(
        "check",
        *SELECT,
        "--format",
        fmt,
        "--output-file",
        str(target),
        ".",
        cwd=tree,
        env={"FORCE_COLOR": "1"},
    )
    assert completed.code == 1
    assert completed.stdout.strip() == (
        "Found 2 problems (2 fixable with --apply). 1 hint not shown: --show-hints."
    )
    assert target.read_text(encoding="utf-8") == direct.stdout
    assert "\x1b[" not in target.read_text(encoding="utf-8")
    assert [p.name for p in target.parent.iterdir()] == [target.name]


def test_output_file_that_cannot_be_written_is_an_error(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    completed = run_cli(
        "check",
        *SELECT,
        "--format",
        "sarif",
        "-o",
        str(tmp_path / "missing" / "x.sarif"),
        ".",
        cwd=tree,
    )
    assert completed.code == 2 and "cannot write" in completed.stderr


def test_statistics_count_rules_and_fixable(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "tree")
    (tree / "train2.py").write_text(TRAIN, encoding="utf-8")
    completed = run_cli("check", *SELECT, "--statistics", ".", cwd=tree)
    assert completed.code == 1
    lines = completed.stdout.splitlines()
    assert lines[:2] == [
        "2\tSMP101\terror\t[*] optimizer-before-distributed-model (2 fixable)",
        "2\tSMP301\terror\t[*] checkpoint-guard-uses-dp-rank (2 fixable)",
    ]
    assert "train.py:" not in completed.stdout
    shown = run_cli("check", *SELECT, "--statistics", "--show-hints", ".", cwd=tree)
    assert shown.stdout.splitlines()[2] == "1\tSMP900\thint \t[*] unused-suppression (1 fixable)"
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "scheduled.py").write_text(SCHEDULED, encoding="utf-8")
    (mixed / "stale.py").write_text(STALE, encoding="utf-8")
    unfixable = run_cli(
        "check", *SELECT, "--statistics", "--show-hints", ".", cwd=mixed
    ).stdout.splitlines()
    assert unfixable[:2] == [
        "1\tSMP101\twarning\t[ ] optimizer-before-distributed-model",
        "1\tSMP900\thint   \t[*] unused-suppression (1 fixable)",
    ]
    (mixed / "stale.py").unlink()
    assert (
        run_cli("check", *SELECT, "--statistics", ".", cwd=mixed).stdout.splitlines()[0]
        == "1\tSMP101\twarning\toptimizer-before-distributed-model"
    )
    data = json.loads(
        run_cli("check", *SELECT, "--statistics", "--format", "json", ".", cwd=tree).stdout
    )
    assert data[0] == {
        "code": "SMP101",
        "name": "optimizer-before-distributed-model",
        "severity": "error",
        "count": 2,
        "fixable": True,
        "fixable_count": 2,
    }
    refused = run_cli("check", *SELECT, "--statistics", "--format", "sarif", ".", cwd=tree)
    assert refused.code == 2 and "--statistics" in refused.stderr


def _many_files(folder: Path, count: int) -> Path:
    for index in range(count):
        (folder / f"script_{index:03}.py").write_text(CLEAN, encoding="utf-8")
    (folder / "train.py").write_text(TRAIN, encoding="utf-8")
    return folder


def test_no_progress_bar_when_not_a_terminal(tmp_path: Path) -> None:
    tree = _many_files(tmp_path, 80)
    completed = run_cli("check", *SELECT, ".", cwd=tree)
    assert "smpfix checking" not in completed.stderr and "\x1b[" not in completed.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
@pytest.mark.parametrize(
    ("fmt", "shown"), [("full", True), ("concise", True), ("sarif", False), ("github", False)]
)
def test_progress_bar_on_a_terminal_only_for_human_formats(
    tmp_path: Path, fmt: str, shown: bool
) -> None:
    import pty
    import subprocess

    from conftest import smpfix_command

    tree = _many_files(tmp_path, 80)
    leader, follower = pty.openpty()
    env = {**os.environ, "NO_COLOR": "1", "TERM": "xterm", "COLUMNS": "100"}
    proc = subprocess.run(
        [*smpfix_command(), "check", *SELECT, "--format", fmt, "."],
        cwd=tree,
        stdout=subprocess.PIPE,
        stderr=follower,
        env=env,
        timeout=300,
    )
    os.close(follower)
    captured = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        captured += chunk
    os.close(leader)
    assert proc.returncode == 1
    assert (b"smpfix checking" in captured) is shown
    assert b"smpfix checking" not in proc.stdout


def test_notebook_findings_are_located_at_the_file_with_their_cell(tmp_path: Path) -> None:
    cells = [
        ["import smdistributed.modelparallel.torch as smp\n", "smp.init()\n"],
        STALE.splitlines(keepends=True)[2:],
    ]
    notebook = {
        "cells": [
            {
                "cell_type": "code",
                "metadata": {},
                "source": source,
                "outputs": [],
                "execution_count": None,
            }
            for source in cells
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (tmp_path / "launch.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    log = json.loads(run_cli("check", *SELECT, "--format", "sarif", ".", cwd=tmp_path).stdout)
    validate_sarif(log)
    result = log["runs"][0]["results"][0]
    assert result["ruleId"] == "SMP900"
    assert result["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "launch.ipynb", "uriBaseId": "%SRCROOT%"}
    }
    assert result["message"]["text"].startswith("cell 2, line 3, column 26: ")
    assert "fixes" not in result
    github = run_cli(
        "check", *SELECT, "--format", "github", "--fail-on", "hint", ".", cwd=tmp_path
    ).stdout
    assert github.startswith(
        "::notice file=launch.ipynb,title=SMP900 unused-suppression::cell 2, line 3, column 26: "
    )


LAUNCHER = """from sagemaker.pytorch import PyTorch

estimator = PyTorch(
    entry_point="train.py",
    instance_type="ml.p4d.24xlarge",
    instance_count=1,
    distribution={
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": {"tensor_parallel_degree": 4, "ddp": True}}},
        "mpi": {"enabled": True, "processes_per_host": 8},
    },
)
"""  # noqa: E501


def test_sarif_related_location_points_at_the_launcher_that_configures_the_script(
    tmp_path: Path,
) -> None:
    (tmp_path / "train.py").write_text(TRAIN, encoding="utf-8")
    (tmp_path / "launch.py").write_text(LAUNCHER, encoding="utf-8")
    log = json.loads(
        run_cli(
            "check",
            "--select",
            "SMP101,SMP301",
            "--no-cache",
            "--format",
            "sarif",
            ".",
            cwd=tmp_path,
        ).stdout
    )
    validate_sarif(log)
    results = log["runs"][0]["results"]
    assert {r["ruleId"] for r in results} == {"SMP101", "SMP301"}
    for result in results:
        assert result["level"] == "error"
        (related,) = result["relatedLocations"]
        assert related["physicalLocation"] == {
            "artifactLocation": {"uri": "launch.py", "uriBaseId": "%SRCROOT%"},
            "region": {"startLine": 3},
        }
        assert "launch.py" in related["message"]["text"]
