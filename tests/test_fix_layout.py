"""Fixes follow the layout of the code they edit, as a reviewer expects (issue 24).

A new dict entry or argument goes where a person would have typed it; a line the fix would make
too long is wrapped as a formatter would; removing a statement keeps the blank lines around it.
The rules' own fixtures (tests/fixtures) show the same on real findings.
"""

from __future__ import annotations

import libcst as cst
import pytest

from smpfix.base.edits import AppendElement, DeleteStatementLines, ReplaceArgument
from smpfix.base.positions import Positions
from smpfix.engine.fixing import apply_edits


def appended(source: str, *texts: str, limit: int = 100) -> str:
    """``source`` after appending ``texts`` to the first dict display or call it assigns."""
    module = cst.parse_module(source)
    statement = module.body[0]
    assert type(statement) is cst.SimpleStatementLine
    small = statement.body[0]
    assert type(small) is cst.Assign
    edit = AppendElement(small.value, texts, limit).resolve(Positions(module, source))
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
    edit = AppendElement(call, ("drop_last=True",), 60).resolve(Positions(module, source))
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
    edit = ReplaceArgument(call, call.args[0].value, text, 60).resolve(Positions(module, source))
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
    edit = AppendElement(inner, ('"ddp": True',), 10).resolve(Positions(module, source))
    assert "\n" not in edit.content


def test_removing_a_statement_keeps_blank_lines_and_unrelated_comments() -> None:
    source = "a = 1\n# section\n\n# about b\nb = 2\n\nc = 3\n"
    module = cst.parse_module(source)
    edit = DeleteStatementLines(module.body[1]).resolve(Positions(module, source))
    assert apply_edits(source, [edit]) == "a = 1\n# section\n\n\nc = 3\n"
