"""Fixes follow the layout of the code they edit, as a reviewer expects (issue 24).

A new dict entry or argument goes where a person would have typed it; a line the fix would make
too long is wrapped as a formatter would; removing a statement keeps the blank lines around it; a
fix that rewrites code a comment speaks about is never safe (``smpfix.fixes.comments``).
The rules' own fixtures (tests/fixtures) show the same on real findings.
"""

from __future__ import annotations

import ast
import difflib
import shutil
from pathlib import Path

import libcst as cst
import pytest
from conftest import run_cli

from smpfix.api import check_source, fix_source
from smpfix.base.edits import AppendElement, DeleteStatementLines, ReplaceArgument
from smpfix.base.findings import Applicability
from smpfix.base.positions import Positions
from smpfix.engine.fixing import apply_edits
from smpfix.fixes.comments import tied_comments


def appended(source: str, *texts: str, limit: int = 100) -> str:
    """``source`` after appending ``texts`` to the first dict display or call it assigns."""
    module = cst.parse_module(source)
    statement = module.body[0]
    assert type(statement) is cst.SimpleStatementLine
    small = statement.body[0]
    assert type(small) is cst.Assign
    edit = AppendElement(small.value, texts).resolve(Positions(module, source, line_length=limit))
    return apply_edits(source, [edit])


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param(
            'p = {"a": 1, "b": 2}\n', 'p = {"a": 1, "b": 2, "ddp": True}\n', id="one-line"
        ),
        pytest.param(
            'p = {\n    "a": 1,\n    "b": 2,\n}\n',
            'p = {\n    "a": 1,\n    "b": 2,\n    "ddp": True,\n}\n',
            id="one-per-line-trailing-comma",
        ),
        pytest.param(
            'p = {\n    "a": 1,\n    "b": 2  # two\n}\n',
            'p = {\n    "a": 1,\n    "b": 2,\n    "ddp": True  # two\n}\n',
            id="one-per-line-no-trailing-comma",
        ),
        pytest.param(
            'p = {\n    "a": 1,\n    "b": 2,  # two\n}\n',
            'p = {\n    "a": 1,\n    "b": 2,  # two\n    "ddp": True,\n}\n',
            id="comment-stays-on-its-line",
        ),
        pytest.param(
            'p = {\n    "a": 1, "b": 2,\n}\n',
            'p = {\n    "a": 1, "b": 2,\n    "ddp": True,\n}\n',
            id="own-line-even-after-a-shared-line",
        ),
        pytest.param(
            'p = {"a": 1,\n     "b": 2}\n',
            'p = {"a": 1,\n     "b": 2,\n     "ddp": True}\n',
            id="hanging",
        ),
    ],
)
def test_a_new_dict_entry_follows_the_dict_layout(source: str, expected: str) -> None:
    assert appended(source, '"ddp": True') == expected


def test_a_call_too_long_for_its_line_is_wrapped_one_argument_per_line() -> None:
    source = "if True:\n    loader = DataLoader(dataset, batch_size=64, shuffle=True)\n"
    module = cst.parse_module(source)
    call = cst.ensure_type(
        cst.ensure_type(
            cst.ensure_type(cst.ensure_type(module.body[0], cst.If).body, cst.IndentedBlock).body[
                0
            ],
            cst.SimpleStatementLine,
        ).body[0],
        cst.Assign,
    ).value
    edit = AppendElement(call, ("drop_last=True",)).resolve(
        Positions(module, source, line_length=60)
    )
    assert apply_edits(source, [edit]) == (
        "if True:\n"
        "    loader = DataLoader(\n"
        "        dataset,\n"
        "        batch_size=64,\n"
        "        shuffle=True,\n"
        "        drop_last=True,\n"
        "    )\n"
    )


def test_an_argument_rewritten_too_long_for_its_line_wraps_the_call() -> None:
    source = "scheduler = StepLR(optimizer, step_size=1)\n"
    module = cst.parse_module(source)
    call = cst.ensure_type(
        cst.ensure_type(
            cst.ensure_type(module.body[0], cst.SimpleStatementLine).body[0], cst.Assign
        ).value,
        cst.Call,
    )
    text = "optimizer.optimizer if smp.state.cfg.fp16 else optimizer"
    edit = ReplaceArgument(call, call.args[0].value, text).resolve(
        Positions(module, source, line_length=60)
    )
    assert apply_edits(source, [edit]) == (
        f"scheduler = StepLR(\n    {text},\n    step_size=1,\n)\n"
    )
    short = ReplaceArgument(call, call.args[0].value, "opt").resolve(Positions(module, source))
    assert apply_edits(source, [short]) == "scheduler = StepLR(opt, step_size=1)\n"


def test_a_line_may_grow_up_to_the_longest_line_already_in_the_file() -> None:
    long_line = "# " + "x" * 118 + "\n"
    source = "p = f(a, b)\n" + long_line
    assert appended(source, "c=1") == "p = f(a, b, c=1)\n" + long_line


@pytest.mark.parametrize(
    "source",
    [
        pytest.param('p = f(x, {"a": 1, "b": 2})\n', id="inner-bracket"),
        pytest.param('p = {"a": 1, "b": (2  # two\n)}\n', id="comment-inside"),
    ],
)
def test_a_long_line_is_not_rewrapped_where_a_formatter_would_break_elsewhere(source: str) -> None:
    module = cst.parse_module(source)
    value = cst.ensure_type(
        cst.ensure_type(module.body[0], cst.SimpleStatementLine).body[0], cst.Assign
    ).value
    inner = cst.ensure_type(value, cst.Call).args[1].value if type(value) is cst.Call else value
    edit = AppendElement(inner, ('"ddp": True',)).resolve(Positions(module, source, line_length=10))
    assert "\n" not in edit.content


def test_removing_a_statement_keeps_blank_lines_and_unrelated_comments() -> None:
    source = "a = 1\n# section\n\n# about b\nb = 2\n\nc = 3\n"
    module = cst.parse_module(source)
    edit = DeleteStatementLines(module.body[1]).resolve(Positions(module, source))
    assert apply_edits(source, [edit]) == "a = 1\n# section\n\n\nc = 3\n"


SAVE_UNDER_A_COMMENT = """import smdistributed.modelparallel.torch as smp


def save_model(model, filename):
    state = model.local_state_dict()
    if smp.rdp_rank() == 0:
        # SMP: Save a single checkpoint containing entire model parameters
        smp.save({"model": state}, filename, partial=False)
"""


def test_a_fix_that_rewrites_code_under_a_comment_says_to_review_the_comment() -> None:
    findings = check_source(
        SAVE_UNDER_A_COMMENT, select=["SMP303"], job={"pipeline_parallel_degree": 2}
    )
    [fix] = [finding.fix for finding in findings if finding.fix is not None]
    assert fix.applicability is Applicability.UNSAFE
    assert "review the comment on line 7" in fix.description


def test_a_safe_fix_under_a_comment_becomes_unsafe_and_apply_leaves_the_code() -> None:
    source = (
        "import smdistributed.modelparallel.torch as smp\n"
        "smp.init()\n"
        "def save(model):\n"
        "    # Only the main process saves.\n"
        "    if smp.rank() == 0:\n"
        '        smp.save_checkpoint("/ckpt", tag="t", model=model)\n'
    )
    [finding] = check_source(source, select=["SMP302"])
    assert finding.fix is not None and finding.fix.applicability is Applicability.UNSAFE
    assert fix_source(source, select=["SMP302"]).text == source
    untied = source.replace("    # Only the main process saves.\n", "")
    assert "if smp.rank()" not in fix_source(untied, select=["SMP302"]).text


@pytest.mark.parametrize(
    ("lines", "tied"),
    [
        pytest.param(["y = 2", "x = 1  # one"], (2,), id="trailing"),
        pytest.param(["# about x", "x = 1"], (1,), id="above"),
        pytest.param(["# about x", "", "x = 1"], (), id="blank-line-between"),
        pytest.param(["x = 1  # noqa: E501"], (), id="directive"),
        pytest.param(["x = '#' + y"], (), id="hash-in-string"),
    ],
)
def test_comments_tied_to_a_changed_line(lines: list[str], tied: tuple[int, ...]) -> None:
    """The changed line is the last one."""
    last = len(lines)
    assert tied_comments(lines, last, last, (last, last)) == tied


def test_a_comment_above_a_long_statement_is_not_tied_to_its_inner_lines() -> None:
    lines = ["# the launcher", "f(", "  a,", "  b,", "  c,", "  d,", "  e=1,", ")"]
    assert tied_comments(lines, 7, 7, (2, 8)) == ()
    assert tied_comments(lines[:1] + ["f(", "  e=1,", ")"], 3, 3, (2, 4)) == (1,)


REALISTIC = Path(__file__).parent / "realistic"
PROJECTS = sorted(path for path in REALISTIC.iterdir() if path.is_dir())


def _blank_lines_removed(before: list[str], after: list[str]) -> list[int]:
    """Line numbers (in ``before``) of blank lines that a change removed without putting a
    blank line back in the same place."""
    removed = []
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for tag, b1, b2, a1, a2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        old_blank = [b1 + i + 1 for i, line in enumerate(before[b1:b2]) if not line.strip()]
        new_blank = sum(1 for line in after[a1:a2] if not line.strip())
        removed.extend(old_blank[new_blank:])
    return removed


@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: p.name)
def test_applying_every_fix_keeps_lines_short_blank_lines_and_valid_code(
    project: Path, tmp_path: Path
) -> None:
    """Every fix of a realistic project, unsafe ones and hints included: no line longer than the
    longest already in its file or 100 characters, no blank line removed, code that parses."""
    copy = tmp_path / project.name
    shutil.copytree(project, copy)
    before = {path: path.read_text(encoding="utf-8") for path in copy.rglob("*.py")}
    run_cli("check", "--apply", "--unsafe-fixes", "--show-hints", ".", cwd=copy)
    for path, old in before.items():
        new = path.read_text(encoding="utf-8")
        if new == old:
            continue
        name = path.relative_to(copy)
        limit = max([100, *(len(line) for line in old.splitlines())])
        long_lines = [line for line in new.splitlines() if len(line) > limit]
        assert long_lines == [], f"{name}: lines over {limit} characters"
        assert _blank_lines_removed(old.splitlines(), new.splitlines()) == [], name
        ast.parse(new, str(name))
