"""The file-level suppression ``# smpfix: ignore-file[CODES]`` (as Ruff's ``# ruff: noqa:
CODES``), and every comment that only looks like one (issue 24).

The form is strict because it silences a whole file: on a line of its own, codes or prefixes
in brackets right after ``ignore-file``. Anything else suppresses nothing and is an SMP900
warning without a fix, and ``--apply`` leaves such a comment byte for byte as it was. A code
or prefix that silences nothing is an SMP900 hint whose safe fix removes it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli

from smpfix.api import check_source, fix_source
from smpfix.base.findings import Severity

TP = {"tensor_parallel_degree": 4}
# Line 5: SMP101 (the optimizer is built before the wrap); line 8: SMP301 (a dp_rank guard).
TRAIN = """import smdistributed.modelparallel.torch as smp
import torch

smp.init()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
model = smp.DistributedModel(model)
optimizer = smp.DistributedOptimizer(optimizer)
if smp.dp_rank() == 0:
    smp.save(model.local_state_dict(), "m.pt", partial=True)
"""
SELECT = ["SMP101", "SMP301", "SMP900"]


def _codes(text: str) -> list[tuple[int, str]]:
    return [(f.start.line, f.code) for f in check_source(text, select=SELECT, job=TP)]


def _with(comment: str, at_end: bool = False) -> str:
    return f"{TRAIN}{comment}\n" if at_end else f"{comment}\n{TRAIN}"


def test_the_baseline_reports_both_findings() -> None:
    assert _codes(TRAIN) == [(5, "SMP101"), (8, "SMP301")]


@pytest.mark.parametrize(
    "comment",
    [
        "# smpfix: ignore-file[SMP101]",
        "# smpfix: ignore-file[SMP1]",
        "# smpfix: ignore-file[smp10]",
        "#smpfix:ignore-file[SMP101]",
        "# smpfix: ignore-file[SMP101]  -- built before the wrap on purpose",
    ],
)
def test_codes_and_prefixes_silence_their_rules_in_the_whole_file(comment: str) -> None:
    assert _codes(_with(comment)) == [(9, "SMP301")]
    assert _codes(_with(comment, at_end=True)) == [(8, "SMP301")], "anywhere in the file"


def test_several_codes_and_several_comments() -> None:
    assert _codes(_with("# smpfix: ignore-file[SMP101, SMP3]")) == []
    assert _codes(_with("# smpfix: ignore-file[SMP101]\n# smpfix: ignore-file[SMP301]")) == []


@pytest.mark.parametrize(
    ("comment", "reason"),
    [
        pytest.param("# smpfix: ignore-file", "no file-wide suppression of every rule", id="bare"),
        pytest.param("# smpfix: ignore-file [SMP101]", "no space is allowed", id="space"),
        pytest.param("# smpfix: ignore-file[]", "names no code", id="empty"),
        pytest.param("# smpfix: ignore-file[ , ]", "names no code", id="only-commas"),
        pytest.param(
            "# smpfix: ignore-file[SMP101, SMP999]", "SMP999: no smpfix rule", id="unknown"
        ),
        pytest.param("# smpfix: ignore-file[SMP]", "SMP: not a rule code", id="no-digit"),
        pytest.param("# smpfix: ignore-file[ALL]", "ALL: not a rule code", id="all"),
        pytest.param("# smpfix: ignore-file[E501]", "E501: not a rule code", id="other-tool"),
        pytest.param("# smpfix: ignore-files[SMP101]", "is not a directive", id="longer-word"),
    ],
)
def test_a_malformed_file_level_comment_suppresses_nothing_and_is_a_warning(
    comment: str, reason: str
) -> None:
    text = _with(comment)
    findings = check_source(text, select=SELECT, job=TP)
    assert [(f.start.line, f.code) for f in findings] == [
        (1, "SMP900"),
        (6, "SMP101"),
        (9, "SMP301"),
    ]
    problem = findings[0]
    assert problem.severity is Severity.WARNING
    assert problem.message == "malformed file-level suppression; it suppresses nothing"
    assert reason in problem.explanation
    assert problem.fix is None, "what was meant is unknown, so nothing is rewritten"


def test_a_file_level_comment_after_code_is_not_one() -> None:
    text = TRAIN.replace("lr=1e-4)\n", "lr=1e-4)  # smpfix: ignore-file[SMP101]\n")
    findings = check_source(text, select=SELECT, job=TP)
    assert [(f.start.line, f.code) for f in findings] == [
        (5, "SMP101"),
        (5, "SMP900"),
        (8, "SMP301"),
    ]
    assert "on a line of its own" in findings[1].explanation


def test_an_unused_file_level_code_is_a_hint_whose_fix_removes_only_that_code() -> None:
    text = _with("# smpfix: ignore-file[SMP101, SMP205]")
    findings = check_source(text, select=[*SELECT, "SMP205"], job=TP)
    unused = [f for f in findings if f.code == "SMP900"]
    assert len(unused) == 1 and unused[0].severity is Severity.HINT
    assert unused[0].message == "unused file-level suppression of SMP205"
    fixed = fix_source(text, select=[*SELECT, "SMP205"], job=TP).text
    assert fixed.startswith("# smpfix: ignore-file[SMP101]\n")


def test_a_wholly_unused_file_level_comment_is_removed_with_its_line() -> None:
    text = _with("# smpfix: ignore-file[SMP2]")
    fixed = fix_source(text, select=[*SELECT, "SMP2"], job=TP).text
    assert fixed.startswith("import smdistributed")


def test_a_prefix_is_not_judged_while_some_of_its_rules_are_deselected() -> None:
    text = _with("# smpfix: ignore-file[SMP2]")
    assert _codes(text) == [(6, "SMP101"), (9, "SMP301")], "SMP2 rules were not selected"
    findings = check_source(text, select=[*SELECT, "SMP201"], job=TP)
    assert [f.code for f in findings] == ["SMP101", "SMP301"], "SMP202-SMP206 were not"


def test_naming_smp900_in_the_file_level_form_stops_the_judging_of_comments() -> None:
    text = _with("# smpfix: ignore-file[SMP900]\n# smpfix: ignore-file")
    assert _codes(text) == [(7, "SMP101"), (10, "SMP301")]


COMMENTS_NOT_UNDERSTOOD = [
    "# smpfix: ignore-file",
    "# smpfix: ignore-file [SMP101]",
    "# smpfix: ignore-file[]",
    "# smpfix: ignore-file[SMP999]",
    "# smpfix: ignore-files[SMP101]",
    "# smpfix: ignored",
]


def test_apply_leaves_every_comment_it_does_not_understand_byte_for_byte(tmp_path: Path) -> None:
    lines = TRAIN.splitlines(keepends=True)
    text = "".join(COMMENTS_NOT_UNDERSTOOD[:1]) + "\n" + "".join(lines[:5])
    text += "".join(f"x = 1  {comment}\n" for comment in COMMENTS_NOT_UNDERSTOOD)
    text += "".join(f"{comment}\n" for comment in COMMENTS_NOT_UNDERSTOOD) + "".join(lines[5:])
    script = tmp_path / "train.py"
    script.write_text(text, encoding="utf-8")
    run_cli(
        "check",
        "--apply",
        "--unsafe-fixes",
        "--show-hints",
        "--no-cache",
        "--job",
        "tensor_parallel_degree=4",
        "train.py",
        cwd=tmp_path,
    )
    new = script.read_text(encoding="utf-8")
    assert "smp.rdp_rank() == 0" in new, "the other fixes were applied"
    for comment in COMMENTS_NOT_UNDERSTOOD:
        assert new.count(f"x = 1  {comment}\n") == 1
        assert new.count(f"\n{comment}\n") >= 1
