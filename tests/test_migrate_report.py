"""The migration report and the ``TODO`` comments, read as a person reads them."""

from __future__ import annotations

from dataclasses import replace

from smpfix.base.findings import FileError
from smpfix.migrate.items import FileMigration, MigrationItem, Outcome
from smpfix.migrate.run import JobMigration, MigrationRun
from smpfix.migrate.text_edits import apply_edits, todo_edits
from smpfix.report.migration import render_migration_text

LINK = "https://docs.aws.amazon.com/sagemaker/latest/dg/x.html"


def item(line: int, outcome: Outcome, blocking: bool = False) -> MigrationItem:
    return MigrationItem("train.py", line, outcome, "topic", f"said at {line}", LINK, blocking)


CODE = """import torch

def train(model):
    for batch in loader:
        loss = model(
            batch
        )
"""


def test_a_todo_sits_above_the_innermost_statement_with_its_indentation() -> None:
    edits = todo_edits(CODE, [item(6, Outcome.SCAFFOLD)])
    assert apply_edits(CODE, edits) == CODE.replace(
        "        loss = model(",
        f"        # smpfix-migrate: TODO(topic): said at 6 <{LINK}>\n        loss = model(",
    )


def test_a_todo_already_there_is_not_written_again() -> None:
    said = item(4, Outcome.REPORT)
    once = apply_edits(CODE, todo_edits(CODE, [said]))
    # A second run finds the same thing one line lower, under its comment.
    assert todo_edits(once, [replace(said, line=5)]) == []


def test_two_items_on_one_statement_get_one_comment_each() -> None:
    after = apply_edits(
        CODE, todo_edits(CODE, [item(1, Outcome.REPORT), item(1, Outcome.SCAFFOLD)])
    )
    assert after.splitlines()[:2] == [
        f"# smpfix-migrate: TODO(topic): said at 1 <{LINK}>",
        "import torch",
    ]


def test_the_text_report_gives_the_share_moved_the_container_and_every_item() -> None:
    job = JobMigration(
        "launch.py:12",
        ("launch.py", "train.py"),
        (
            item(3, Outcome.MOVED),
            item(4, Outcome.MOVED),
            item(5, Outcome.MOVED),
            item(6, Outcome.SCAFFOLD),
        ),
        "PyTorch 2.4.1, py311 (SMP 2.7.0)",
    )
    text = render_migration_text(MigrationRun((job,), ()), color=False, width=200)
    assert "Job launch.py:12: launch.py, train.py" in text
    assert "3 of 4 changes moved mechanically (75%); 3 moved, 1 scaffold, 0 report" in text
    assert "proposed container: PyTorch 2.4.1, py311 (SMP 2.7.0)" in text
    assert f"train.py:6: scaffold topic: said at 6 <{LINK}>" in text
    assert text.endswith(
        "1 job(s): 3 of 4 changes moved mechanically (75%); 1 job(s) need a person;"
        " 0 file(s) change\n"
    )


def test_a_blocked_job_says_it_stays_on_v1_and_what_would_move() -> None:
    job = JobMigration(
        "launch.py:3",
        ("launch.py",),
        (item(3, Outcome.REPORT, blocking=True), item(4, Outcome.MOVED)),
    )
    change = FileMigration("launch.py", "a = 1\n", "# x\na = 1\n", ())
    run = MigrationRun((job,), (change,), (FileError("broken.py", "syntax error", 2, 7),))
    text = render_migration_text(run, color=False, width=200)
    assert "kept on SMP v1: 1 blocking item(s) to resolve first (TODO comments added)" in text
    assert "0 of 2 changes moved mechanically (0%)" in text
    assert "train.py:3: report (blocking) topic" in text
    assert "train.py:4: would move topic" in text
