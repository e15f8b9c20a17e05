"""Every finding's title is one line a person reads at a glance, as Ruff's are.

A title says what is wrong here in at most 100 characters; the why, the evidence and the fix
go below it (``explanation``, ``evidence``). The analysis cuts a longer title (a quoted name can
be of any length) and keeps it whole in the explanation, but no rule may rely on that: on the
shipped examples, the realistic projects and every rule fixture, no title is cut.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

from smpfix.base.findings import TITLE_LIMIT

FIXTURES = ROOT / "tests" / "fixtures"
# The rule fixtures' folders, a few per run of the command (a run per folder would spend most
# of its time starting the command).
_FOLDERS = sorted(path.name for path in FIXTURES.glob("SMP*"))
TREES = [
    (ROOT / "examples", (".",)),
    (ROOT / "tests" / "realistic", (".",)),
    *((FIXTURES, tuple(_FOLDERS[i : i + 8])) for i in range(0, len(_FOLDERS), 8)),
]


def _findings(cwd: Path, paths: tuple[str, ...]) -> list[dict]:
    completed = run_cli(
        "check", *paths, "--format", "json", "--no-cache", "--exit-zero", "--select", "ALL", cwd=cwd
    )
    assert completed.code == 0, completed.stderr
    return json.loads(completed.stdout)


def _tree_id(tree: tuple[Path, tuple[str, ...]]) -> str:
    cwd, paths = tree
    where = cwd.relative_to(ROOT).as_posix()
    return where if paths == (".",) else f"{where}/{paths[0]}-{paths[-1]}"


@pytest.mark.parametrize("tree", TREES, ids=_tree_id)
def test_titles_fit_on_one_line_without_being_cut(tree: tuple[Path, tuple[str, ...]]) -> None:
    long = [
        f"{item['filename']}:{item['location']['row']}: {item['code']} {item['message']}"
        for item in _findings(*tree)
        if len(item["message"]) > TITLE_LIMIT
        or item["message"].endswith("…")
        or "\n" in item["message"]
    ]
    assert not long, "\n".join(long)


def test_a_finding_explains_itself_below_its_title() -> None:
    findings = _findings(ROOT / "examples", (".",))
    assert findings
    assert all(item["explanation"] for item in findings), [
        item["code"] for item in findings if not item["explanation"]
    ]
