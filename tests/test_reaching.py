"""Reaching definitions (``smpfix.program.names``): the assignments that can give a use its
value."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import libcst as cst
import pytest
from conftest import parsed

from smpfix.base.walker import iter_nodes
from smpfix.program.names import Names

SOURCE = """\
limit = 8


def save(args, model, optimizer):
    if args.full:
        state = model.state_dict()
        write(state, "full")
    else:
        state = model.local_state_dict()
        write(state, "local")
    write(state, "either")
    for step in range(3):
        write(last, "loop")
        last = step
    try:
        handle = open_a()
    except OSError:
        handle = open_b()
    write(handle, "try")
    write(limit, "module")
    write(args, "parameter")
    a, b = pair()
    write(a, "tuple")
    if args.quick:
        return
    late = model.cpu()
    write(late, "after an early return")
"""


def _reaching(tag: str) -> tuple[list[str], bool]:
    file = parsed(SOURCE)
    module = file.module
    flow = file.facts.names
    for node in iter_nodes(module):
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Name)
            and node.func.value == "write"
            and module.code_for_node(node.args[1].value) == f'"{tag}"'
        ):
            used = node.args[0].value
            assert isinstance(used, cst.Name)
            found = flow.reaching(used.value, used)
            return [module.code_for_node(a.value) for a in found.assignments], found.opaque
    raise AssertionError(tag)


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("full", (["model.state_dict()"], False)),
        ("local", (["model.local_state_dict()"], False)),
        ("either", (["model.state_dict()", "model.local_state_dict()"], False)),
        ("loop", (["step"], False)),
        ("try", (["open_a()", "open_b()"], False)),
        ("module", (["8"], False)),
        ("parameter", ([], True)),
        ("tuple", ([], True)),
        ("after an early return", (["model.cpu()"], False)),
    ],
)
def test_reaching_definitions(tag: str, expected: tuple[list[str], bool]) -> None:
    assert _reaching(tag) == expected


def _every_answer(source: str) -> list[tuple[str, int, tuple[str, ...], bool, int]]:
    """The reaching definitions of every name used in ``source``, as text."""
    file = parsed(source)
    module, flow = file.module, file.facts.names
    answers = []
    for position, node in enumerate(iter_nodes(module)):
        if type(node) is cst.Name and node.value in flow.assignments:
            found = flow.reaching(node.value, node)
            values = tuple(module.code_for_node(a.value) for a in found.assignments)
            answers.append((node.value, position, values, found.opaque, len(found.others)))
    return answers


def test_statements_that_leave_a_name_alone_are_passed_over_with_the_same_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The walk passes over a statement that binds none of its name and ends no path; every
    answer over the test files is the one the walk gives when it enters every statement."""
    sources = [
        path.read_text(encoding="utf-8")
        for folder in ("realistic", "projects", "fixtures", "plan_projects")
        for path in sorted((Path(__file__).parent / folder).rglob("*.py"))
    ]
    quick = [_every_answer(source) for source in sources]
    monkeypatch.setattr(Names, "effects", lambda self, statement: (frozenset(), True))
    assert [_every_answer(source) for source in sources] == quick
    assert sum(len(answers) for answers in quick) > 8_000


def test_what_a_loop_body_assigns_is_worked_out_once_and_every_answer_is_a_fresh_walks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A loop's or a ``try``'s body is walked once per name and state, for every use below it;
    asked in any order, each use gets the answer a walk with nothing remembered gives."""
    sources = [
        path.read_text(encoding="utf-8")
        for folder in ("realistic", "projects", "fixtures")
        for path in sorted((Path(__file__).parent / folder).rglob("*.py"))
    ]
    asked = 0
    for source in sources:
        file = parsed(source)
        flow = file.facts.names
        uses = [
            node
            for node in iter_nodes(file.module)
            if type(node) is cst.Name and node.value in flow.assignments
        ]
        shared = Names(flow.module, flow.assignments, flow.index)
        in_reverse = {id(use): shared.reaching(use.value, use) for use in reversed(uses)}
        with monkeypatch.context() as walking_every_time:
            walking_every_time.setattr(Names, "body_pass", _walked_body)
            for use in uses:
                fresh = Names(flow.module, flow.assignments, flow.index).reaching(use.value, use)
                assert in_reverse[id(use)] == fresh, (use.value, file.module.code_for_node(use))
        asked += len(uses)
    assert asked > 8_000


def _walked_body(
    self: Names, name: str, owner: cst.CSTNode, body: Sequence[cst.CSTNode], state: Any
) -> Any:
    """``Names.body_pass`` without remembering: the body walked each time."""
    from smpfix.program.names import _NOWHERE, _Walk

    return _Walk(self, name, _NOWHERE).block(body, state)
