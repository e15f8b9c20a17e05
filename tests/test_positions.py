"""Positions located through one statement equal those of generating the whole module."""

from __future__ import annotations

import random
from pathlib import Path

import libcst as cst
import pytest
from smp_scripts import render

from smpfix.base.positions import Positions, statement_lines
from smpfix.base.walker import indexed, iter_nodes

ROOT = Path(__file__).resolve().parent.parent

ODD = {
    "decorators_and_comments.py": (
        "import os\n\n# a comment\n@decorator(\n    1)\n# between\n@other\nasync def f(x):\n   "
        " '''doc'''\n    if x: return 1\n    elif x > 2:\n        pass\n    else: y = 2\n    try:"
        " import z\n    except ImportError: z = None\n    finally:\n        pass\n    for a in b:"
        " pass\n    else:\n        # note\n        while c:\n            with d as e, f: g();"
        " h()\n\n\nclass K: x = 1\n"
    ),
    "crlf_and_tabs.py": "def f():\r\n\tif x:\r\n\t\treturn smp.dp_rank()\r\n\treturn 0\r\n",
    "match.py": "match x:\n    case 1:\n        y = 2\n    case _:\n        pass\nz = 3\n",
    "form_feed.py": "def f():\n    y = 0\n\x0c    if x:\n        pass\n    return 1\n",
    # The same statement in several places: located through a unique statement around it,
    # else (twice at the top level) through CPython's lines.
    "repeated.py": "if a:\n    for c in m:\n        smp.checkpoint(c)\nelse:\n    for c in m:\n    "
    "    smp.checkpoint(c)\nx = 1\nx = 1\ndef f():\n    x = 1\n    return None\ndef g():\n    "
    "x = 1\n    return None\n",
}


def _texts() -> list[tuple[str, str]]:
    rng = random.Random(3)
    texts = [(f"generated_{n}.py", render(rng).text) for n in range(6)]
    texts += [
        (str(p.relative_to(ROOT)), p.read_text(encoding="utf-8"))
        for p in sorted((ROOT / "tests" / "fixtures").glob("SMP[1-4]*/*.py"))[:40]
    ]
    return [*texts, *ODD.items()]


@pytest.mark.parametrize(
    ("name", "text"), _texts(), ids=lambda value: value if value.endswith(".py") else ""
)
def test_every_node_is_where_the_whole_module_puts_it(name: str, text: str) -> None:
    module = cst.parse_module(text)
    whole = Positions(module, text)
    with indexed(module) as index:
        local = Positions(module, text, index)
        nodes = list(iter_nodes(module))[1:]
        for node in nodes:
            if whole.mismatch is not None and whole.span(node)[1] > whole.mismatch:
                continue  # past a character LibCST drops, the whole module's offsets are off
            assert local.span(node) == whole.span(node), (
                name,
                type(node).__name__,
                whole.span(node),
            )
    if whole.mismatch is None:
        assert local.mismatch is None
    if name not in ("match.py", "form_feed.py"):
        assert local._whole is None, "every node was located through its statement"


@pytest.mark.parametrize(
    ("name", "text"), _texts(), ids=lambda value: value if value.endswith(".py") else ""
)
def test_comment_lines_are_found_in_their_located_statements(name: str, text: str) -> None:
    """The comment and blank lines above a statement, which the index leaves out (a fix
    deletes them with it), once the statement is located: without generating the module
    when the text is one LibCST reproduces."""
    module = cst.parse_module(text)
    whole = Positions(module, text)
    with indexed(module) as index:
        local = Positions(module, text, index)
        statements = [node for node in iter_nodes(module) if isinstance(node, cst.BaseStatement)]
        for statement in statements:
            local.span(statement)
        for statement in statements:
            for line in getattr(statement, "leading_lines", ()):
                assert local.span(line) == whole.span(line), (name, whole.span(line))
    if local._reproduced:
        assert local._whole is None


def test_statements_are_matched_with_the_lines_python_gives() -> None:
    module = cst.parse_module(ODD["decorators_and_comments.py"])
    lines = statement_lines(module, ODD["decorators_and_comments.py"])
    function = module.body[1]
    assert lines[id(module.body[0])] == 1 and lines[id(function)] == 4
    assert lines[id(module.body[-1])] == 25
    # A statement CPython does not parse like LibCST (or cannot parse) locates nothing.
    assert statement_lines(module, "x = (") == {}
