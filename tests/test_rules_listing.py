"""``smpfix rules``: a table fitted to the terminal (100 columns in a pipe), with each rule's
flavours and versions as a reader expects them.

It used to be 233 columns whatever the terminal, to list SMP900 (a comment in any file) as
PyTorch-only, and SMP117's one release as ``1.3-1.3``.
"""

from __future__ import annotations

import pytest
from conftest import run_cli

from smpfix.report.rules_table import render_rules_table
from smpfix.rules.registry import rule_table


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def rows_of(text: str) -> dict[str, str]:
    """Each rule's row, its wrapped lines joined: code -> the row's words."""
    rows: dict[str, list[str]] = {}
    code = ""
    for line in text.splitlines()[2:]:
        if line.startswith("SMP"):
            code = line.split()[0]
        if code:
            rows.setdefault(code, []).append(line)
    return {code: " ".join(" ".join(rows[code]).split()) for code in rows}


def test_a_pipe_gets_100_columns_and_every_rule() -> None:
    result = run_cli("rules", env={"COLUMNS": ""})
    assert result.code == 0, result.stderr
    assert widest(result.stdout) <= 100
    header = result.stdout.splitlines()[0].split()
    assert header == ["code", "name", "fix", "versions", "scripts", "depends", "on"]
    listed = [line.split()[0] for line in result.stdout.splitlines() if line.startswith("SMP")]
    assert listed == [row["code"] for row in rule_table()]


@pytest.mark.parametrize("width", [60, 80, 100, 120, 160])
def test_the_table_fits_the_width_it_is_given(width: int) -> None:
    text = render_rules_table(rule_table(), width)
    assert widest(text) <= width
    assert len(rows_of(text)) == len(rule_table())


def test_a_wide_terminal_gets_a_line_per_rule_and_a_narrow_one_fewer_columns() -> None:
    wide = run_cli("rules", env={"COLUMNS": "250"}).stdout
    assert len(wide.splitlines()) == 2 + len(rule_table())
    narrow = run_cli("rules", env={"COLUMNS": "60"}).stdout
    assert widest(narrow) <= 60 and "depends on" not in narrow.splitlines()[0]
    assert narrow.splitlines()[-1] == "`smpfix rules --format json` has every column."


def test_smp900_checks_every_flavour() -> None:
    rows = {row["code"]: row for row in rule_table()}
    assert rows["SMP900"]["flavours"] == ["pytorch", "tensorflow"]
    listed = rows_of(render_rules_table(rule_table(), 250))
    assert "pytorch, tensorflow" in listed["SMP900"]


def test_a_rule_of_one_release_shows_that_release() -> None:
    rows = {row["code"]: row for row in rule_table()}
    assert rows["SMP117"]["versions"] == "1.3"
    assert all("-" not in row["versions"] or _a_range(row["versions"]) for row in rows.values())
    listed = rows_of(render_rules_table(rule_table(), 100))
    assert " 1.3 " in listed["SMP117"] and "1.3-1.3" not in listed["SMP117"]


def _a_range(versions: str) -> bool:
    """No ``X-X``: a range's two ends differ."""
    for part in versions.replace(";", " ").split():
        if "-" in part and part[0].isdigit():
            low, high = part.split("-", 1)
            if low == high:
                return False
    return True
