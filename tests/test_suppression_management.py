"""Managing suppressions: SMP900 (unused suppressions) and ``--add-noqa``.

The comment rewriting is specified on small texts; which comments SMP900 judges, and that
``--add-noqa`` followed by ``smpfix check`` reports nothing, through the API and the
installed command.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli

from smpfix.api import check_source, fix_source
from smpfix.engine.fixing import apply_edits
from smpfix.suppressions import comments as suppression
from smpfix.suppressions.edits import LineTable, addition, removal

TP = {"tensor_parallel_degree": 4}

TRAIN = """import smdistributed.modelparallel.torch as smp
import torch

smp.init()
model = GPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
model = smp.DistributedModel(model)
optimizer = smp.DistributedOptimizer(optimizer)
if smp.dp_rank() == 0:
    smp.save(model.local_state_dict(), "m.pt", partial=True)
"""


def _remove(text: str, codes: object = None) -> str:
    item = next(item for items in suppression.parse(text).values() for item in items)
    edit = removal(LineTable(text), item, codes)  # type: ignore[arg-type]
    assert edit is not None
    return apply_edits(text, [edit])


@pytest.mark.parametrize(
    ("before", "codes", "after"),
    [
        ("x = 1  # smpfix: ignore[SMP301]\ny = 2\n", None, "x = 1\ny = 2\n"),
        (
            "x = 1  # smpfix: ignore[SMP101, SMP301]\n",
            ["SMP301"],
            "x = 1  # smpfix: ignore[SMP101]\n",
        ),
        ("x = 1  #smpfix:ignore[SMP101,SMP301]\n", ["SMP101"], "x = 1  #smpfix:ignore[SMP301]\n"),
        ("x = 1  # noqa: E501, SMP301\n", ["SMP301"], "x = 1  # noqa: E501\n"),
        ("x = 1  # noqa: SMP301, E501, SMP101\n", ["SMP301", "SMP101"], "x = 1  # noqa: E501\n"),
        ("x = 1  # noqa: SMP301\r\ny = 2\r\n", ["SMP301"], "x = 1\r\ny = 2\r\n"),
        ("x = 1  # type: ignore  # smpfix: ignore[SMP101]\n", None, "x = 1  # type: ignore\n"),
        (
            "x = 1  # smpfix: ignore[SMP101]  # pragma: no cover\n",
            None,
            "x = 1  # pragma: no cover\n",
        ),
        ("x = 1  # smpfix: ignore[SMP101] legacy code\n", None, "x = 1  # legacy code\n"),
        ("a = 1\n    # smpfix: ignore\nb = 2\n", None, "a = 1\nb = 2\n"),
        ("x = 1  # smpfix: ignore", None, "x = 1"),
    ],
)
def test_removal_keeps_everything_else_on_the_line(before: str, codes: object, after: str) -> None:
    assert _remove(before, codes) == after


@pytest.mark.parametrize(
    ("before", "line", "codes", "after"),
    [
        ("x = 1\n", 1, {"SMP301"}, "x = 1  # smpfix: ignore[SMP301]\n"),
        ("x = 1   \n", 1, {"SMP301", "SMP101"}, "x = 1  # smpfix: ignore[SMP101, SMP301]\n"),
        ("x = 1  # noqa: E501\n", 1, {"SMP301"}, "x = 1  # noqa: E501  # smpfix: ignore[SMP301]\n"),
        (
            "x = 1  # smpfix: ignore[SMP101]  # why\n",
            1,
            {"SMP301", "SMP101"},
            "x = 1  # smpfix: ignore[SMP101, SMP301]  # why\n",
        ),
        (
            "x = 1  # noqa: SMP101\n",
            1,
            {"SMP301"},
            "x = 1  # noqa: SMP101  # smpfix: ignore[SMP301]\n",
        ),
    ],
)
def test_addition_merges_or_appends(before: str, line: int, codes: set, after: str) -> None:
    edit = addition(LineTable(before), line, suppression.parse(before).get(line, ()), codes)
    assert apply_edits(before, [edit]) == after


def _codes(findings: list) -> list[tuple[int, str]]:
    return [(f.start.line, f.code) for f in findings]


def test_blanket_suppression_is_judged_only_when_every_rule_ran() -> None:
    text = TRAIN.replace("model = GPT()\n", "model = GPT()  # smpfix: ignore\n")
    everything = [f for f in check_source(text, job=TP) if f.code == "SMP900"]
    assert _codes(everything) == [(5, "SMP900")]
    assert "blanket" in everything[0].message
    assert not [
        f
        for f in check_source(text, select=["SMP101", "SMP301", "SMP900"], job=TP)
        if f.code == "SMP900"
    ]


def test_codes_of_rules_that_did_not_run_are_not_judged() -> None:
    text = TRAIN.replace(
        "if smp.dp_rank() == 0:\n", "if smp.rdp_rank() == 0:  # smpfix: ignore[SMP301, SMP101]\n"
    )
    assert _codes(check_source(text, select=["SMP900"], job=TP)) == []
    judged = check_source(text, select=["SMP900", "SMP301"], job=TP)
    assert _codes(judged) == [(9, "SMP900")]
    assert judged[0].message == "unused suppression of SMP301 in a suppression comment"
    assert "SMP101" not in judged[0].explanation.split("suppresses nothing")[1]
    fixed = fix_source(text, select=["SMP900", "SMP301"], job=TP).text
    assert "if smp.rdp_rank() == 0:  # smpfix: ignore[SMP101]\n" in fixed


def test_a_used_suppression_is_not_reported_and_the_fix_converges() -> None:
    text = TRAIN.replace("lr=1e-4)\n", "lr=1e-4)  # smpfix: ignore[SMP101, SMP301]\n")
    findings = check_source(text, select=["SMP101", "SMP301", "SMP900"], job=TP)
    assert _codes(findings) == [(6, "SMP900"), (9, "SMP301")]
    result = fix_source(text, select=["SMP101", "SMP301", "SMP900"], job=TP)
    assert "lr=1e-4)  # smpfix: ignore[SMP101]\n" in result.text
    assert (
        fix_source(result.text, select=["SMP101", "SMP301", "SMP900"], job=TP).text == result.text
    )


def test_smp900_through_the_cli(tmp_path: Path) -> None:
    stale = TRAIN.replace("lr=1e-4)\n", "lr=1e-4)  # noqa: E501, SMP101\n").replace(
        "if smp.dp_rank() == 0:\n", "if smp.rdp_rank() == 0:  # smpfix: ignore[SMP301]\n"
    )
    (tmp_path / "train.py").write_text(stale, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        "[tool.smpfix.job]\ntensor_parallel_degree = 1\n", encoding="utf-8"
    )
    checked = run_cli(
        "check",
        "--no-cache",
        "--select",
        "SMP101,SMP301,SMP900",
        "--format",
        "concise",
        "--fail-on",
        "hint",
        ".",
        cwd=tmp_path,
    )
    assert checked.code == 1
    assert [line.split()[1] for line in checked.stdout.splitlines()[:2]] == ["SMP900", "SMP900"]
    assert run_cli("check", "--no-cache", "--select", "SMP101,SMP301", ".", cwd=tmp_path).code == 0
    assert (
        run_cli(
            "check",
            "--no-cache",
            "--select",
            "SMP101,SMP301,SMP900",
            "--ignore",
            "SMP900",
            ".",
            cwd=tmp_path,
        ).code
        == 0
    )
    (tmp_path / "pyproject.toml").write_text(
        '[tool.smpfix]\nper-file-ignores = { "train.py" = ["SMP101", "SMP301"]'
        " }\n[tool.smpfix.job]\ntensor_parallel_degree = 1\n",
        encoding="utf-8",
    )
    assert (
        run_cli("check", "--no-cache", "--select", "SMP101,SMP301,SMP900", ".", cwd=tmp_path).code
        == 0
    )
    (tmp_path / "pyproject.toml").write_text(
        "[tool.smpfix.job]\ntensor_parallel_degree = 1\n", encoding="utf-8"
    )
    hidden = run_cli(
        "check", "--no-cache", "--select", "SMP101,SMP301,SMP900", "--apply", ".", cwd=tmp_path
    )
    assert hidden.code == 0 and "# smpfix: ignore[SMP301]" in (tmp_path / "train.py").read_text(
        encoding="utf-8"
    ), "a hint nobody was shown is not fixed"
    applied = run_cli(
        "check",
        "--no-cache",
        "--select",
        "SMP101,SMP301,SMP900",
        "--apply",
        "--show-hints",
        ".",
        cwd=tmp_path,
    )
    assert applied.code == 0, applied.stdout
    text = (tmp_path / "train.py").read_text(encoding="utf-8")
    assert "lr=1e-4)  # noqa: E501\n" in text and "if smp.rdp_rank() == 0:\n" in text
    assert run_cli("explain", "SMP900").stdout.startswith("# SMP900 unused-suppression")
    assert "SMP900" in run_cli("rules").stdout


MULTILINE = '''import smdistributed.modelparallel.torch as smp
import torch

smp.init()
model = GPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)  # keep: tuned by hand
model = smp.DistributedModel(model)
optimizer = smp.DistributedOptimizer(optimizer)
if (
    smp.dp_rank() == 0 and note("""
checkpointing
""")
):
    smp.save(model.local_state_dict(), "m.pt", partial=True)
if smp.dp_rank() == 0:  # smpfix: ignore[SMP999]
    smp.save(model.local_state_dict(), "n.pt", partial=True)
'''


def test_add_noqa_suppresses_every_finding_and_check_then_passes(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.smpfix.job]\ntensor_parallel_degree = 4\n", encoding="utf-8"
    )
    (tmp_path / "train.py").write_text(TRAIN, encoding="utf-8")
    (tmp_path / "multi.py").write_text(MULTILINE, encoding="utf-8")
    (tmp_path / "clean.py").write_text("print('hello')\n", encoding="utf-8")
    select = ("--no-cache", "--select", "SMP101,SMP301")
    before = run_cli("check", *select, "--format", "json", ".", cwd=tmp_path)
    assert before.code == 1
    added = run_cli("check", *select, "--add-noqa", ".", cwd=tmp_path)
    assert added.code == 0, added.stdout + added.stderr
    assert "Added 5 suppressions to 2 files." in added.stderr
    train = (tmp_path / "train.py").read_text(encoding="utf-8")
    assert "lr=1e-4)  # smpfix: ignore[SMP101]\n" in train
    assert "if smp.dp_rank() == 0:  # smpfix: ignore[SMP301]\n" in train
    multi = (tmp_path / "multi.py").read_text(encoding="utf-8")
    assert "lr=1e-4)  # keep: tuned by hand  # smpfix: ignore[SMP101]\n" in multi
    assert "if (  # smpfix: ignore[SMP301]\n" in multi
    assert 'smp.dp_rank() == 0 and note("""\n' in multi
    assert "if smp.dp_rank() == 0:  # smpfix: ignore[SMP999, SMP301]\n" in multi
    assert (tmp_path / "clean.py").read_text(encoding="utf-8") == "print('hello')\n"
    after = run_cli("check", *select, ".", cwd=tmp_path)
    assert after.code == 0, after.stdout
    assert "All checks passed!" in after.stdout
    again = run_cli("check", *select, "--add-noqa", ".", cwd=tmp_path)
    assert again.code == 0 and "Added 0 suppressions" in again.stderr


def test_add_noqa_locates_a_notebook_finding_in_its_cell(tmp_path: Path) -> None:
    """It leaves notebooks alone and says so, at the finding's cell, line and column (as the
    findings themselves are shown: ``path:cell 2:3:4``), not at a line of no cell."""
    import json

    lines = TRAIN.splitlines(keepends=True)
    cells = [lines[:4], lines[4:]]  # the guard is line 5 of the second cell
    notebook = {
        "cells": [
            {
                "cell_type": "code",
                "metadata": {},
                "source": cell,
                "outputs": [],
                "execution_count": None,
            }
            for cell in cells
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (tmp_path / "train.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    select = ("--no-cache", "--select", "SMP301")
    shown = run_cli("check", *select, "--format", "concise", ".", cwd=tmp_path)
    assert "train.ipynb:cell 2:5:4: SMP301" in shown.stdout, shown.stdout
    added = run_cli("check", *select, "--add-noqa", ".", cwd=tmp_path)
    assert added.code == 1, added.stdout + added.stderr
    assert added.stdout == (
        "train.ipynb:cell 2:5:4: SMP301 not suppressed: notebooks are not edited by --add-noqa\n"
    )


def test_add_noqa_refuses_to_combine_with_fixes_or_stdin(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN, encoding="utf-8")
    assert run_cli("check", "--add-noqa", "--apply", ".", cwd=tmp_path).code == 2
    assert run_cli("check", "--add-noqa", "--diff", ".", cwd=tmp_path).code == 2
    assert run_cli("check", "--add-noqa", "-", stdin=TRAIN).code == 2
    assert (tmp_path / "train.py").read_text(encoding="utf-8") == TRAIN


def test_add_noqa_places_comments_where_the_analysis_reads_them() -> None:
    from smpfix.base.findings import Finding, Position, Severity
    from smpfix.engine.add_noqa import with_suppressions

    def finding(line: int, code: str = "SMP301") -> Finding:
        return Finding(
            code, "rule", "message", "t.py", Position(line, 1), Position(line, 2), Severity.ERROR
        )

    text = 'x = f(\n    a, g("""\ntext\n"""),\n)\ny = h("""\n""")\nz = a + \\\n    b\n'
    new, added, unreachable = with_suppressions(
        text, [finding(2), finding(6), finding(8), finding(1, "SMP101")]
    )
    assert new.splitlines()[0] == "x = f(  # smpfix: ignore[SMP101, SMP301]"
    assert added == 1
    assert [u.finding.start.line for u in unreachable] == [6, 8]


def test_a_space_before_the_codes_still_names_them_and_never_means_every_rule() -> None:
    text = TRAIN.replace("lr=1e-4)\n", "lr=1e-4)  # smpfix: ignore [SMP999]\n")
    findings = check_source(text, select=["SMP101", "SMP301", "SMP900"], job=TP)
    # SMP101 is still reported on that line: the comment names SMP999, not every rule.
    assert _codes(findings) == [(6, "SMP101"), (6, "SMP900"), (9, "SMP301")]
    named = TRAIN.replace("lr=1e-4)\n", "lr=1e-4)  # smpfix: ignore [SMP101]\n")
    assert _codes(check_source(named, select=["SMP101", "SMP900"], job=TP)) == []


def test_a_longer_word_after_ignore_is_no_directive() -> None:
    for comment, reported in (
        # A file-level form out of place is reported (test_file_suppressions), never rewritten.
        ("# smpfix: ignore-file", [(6, "SMP101"), (6, "SMP900")]),
        ("# smpfix: ignored", [(6, "SMP101")]),
    ):
        text = TRAIN.replace("lr=1e-4)\n", f"lr=1e-4)  {comment}\n")
        assert _codes(check_source(text, select=["SMP101", "SMP900"], job=TP)) == reported
        fixed = fix_source(text, select=["SMP900"], job=TP).text
        assert comment in fixed, "SMP900 never rewrites a comment that is no directive"
