"""The language server parses an edited document again from its last tree: the tree it gets
is, node for node, the one a parse of the whole text gives."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import libcst as cst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smpfix.base.walker import NodeIndex
from smpfix.server.reparse import Reparser

REALISTIC = sorted((Path(__file__).parent / "realistic").rglob("*.py"))
SCRIPT = Path(__file__).parent / "realistic" / "gpt_tensor_parallel" / "code" / "train_gpt.py"

# Lines an edit inserts: statements at each depth, comments, blank lines, broken code.
INSERTED = [
    "x = 1",
    "    y = compute(x)",
    "        z += 1",
    "# a comment",
    "    # an indented comment",
    "",
    "def helper():",
    "    return 1",
    "class Model:",
    "@decorator",
    "if rank == 0:",
    "else:",
    "print(",
    ")",
    "\t\tmixed = True",
]


def edited(text: str, line: int, operation: int, inserted: str) -> str:
    lines = text.split("\n")
    line %= len(lines)
    if operation == 0:
        lines.insert(line, inserted)
    elif operation == 1:
        del lines[line]
    elif operation == 2:
        lines[line] = lines[line] + "  # note"
    else:
        lines[line] = lines[line].replace("1", "2", 1).replace("=", "= -", 1)
    return "\n".join(lines)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(REALISTIC),
    st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(0, 3), st.sampled_from(INSERTED)),
        min_size=1,
        max_size=4,
    ),
)
def test_the_tree_of_an_edited_text_is_its_whole_parse(path: Path, edits: list) -> None:
    text = path.read_text()
    reparser = Reparser()
    reparser.remember("doc.py", text, cst.parse_module(text))
    assert reparser.index("doc.py", cst.parse_module(text)) is None  # another tree
    for line, operation, inserted in edits:
        text = edited(text, line, operation, inserted)
        try:
            whole = cst.parse_module(text)
        except cst.ParserSyntaxError:
            whole = None
        module = reparser.parse("doc.py", text)
        if module is None:  # parsed whole, as the server then does
            if whole is not None:
                reparser.remember("doc.py", text, whole)
            continue
        assert whole is not None, "a text that does not parse was given a tree"
        assert module.code == text
        assert module.deep_equals(whole)
        assert_same_index(reparser.index("doc.py", module), NodeIndex(module))


def assert_same_index(reused: Optional[NodeIndex], fresh: NodeIndex) -> None:
    """The index built from the last tree's is the one a walk of the whole tree builds."""
    assert reused is not None
    assert reused.root is fresh.root
    assert len(reused.order) == len(fresh.order)
    assert all(a is b for a, b in zip(reused.order, fresh.order))
    assert reused.ends == fresh.ends
    assert reused.parents == fresh.parents
    assert reused.positions == fresh.positions
    assert reused.by_type() == fresh.by_type()


def test_edits_inside_the_functions_of_a_script_parse_only_their_statement() -> None:
    """Renaming each function of the realistic scripts (but their first) in turn: the
    edited text is parsed piece by piece, and its tree is the whole parse's."""
    spliced = tried = 0
    for path in REALISTIC:
        text = path.read_text()
        old = cst.parse_module(text)
        reparser = Reparser()
        reparser.remember("train.py", text, old)
        start = 0
        while (found := text.find("\ndef ", start)) >= 0:
            start = found + 1
            edited_text = text[: found + 5] + "renamed_" + text[found + 5 :]
            module = reparser.parse("train.py", edited_text)
            tried += 1
            if module is not None:
                spliced += 1
                assert module.deep_equals(cst.parse_module(edited_text)), (path, found)
                # The statements before the change are the old tree's own nodes.
                assert module.body[0] is old.body[0]
            reparser.remember("train.py", text, old)
    assert spliced > tried * 0.7, (spliced, tried)


def test_a_text_that_does_not_parse_keeps_the_last_tree_for_the_next_one() -> None:
    """Typing passes through texts that do not parse: the one after is parsed from the last
    tree that did, not whole."""
    text = SCRIPT.read_text()
    reparser = Reparser()
    reparser.remember("train.py", text, cst.parse_module(text))
    middle = text.index("\ndef ", len(text) // 2) + 1
    broken = text[:middle] + "def (" + text[middle + 4 :]
    assert reparser.parse("train.py", broken) is None
    typed = text[:middle] + "def typed_" + text[middle + 4 :]
    module = reparser.parse("train.py", typed)
    assert module is not None and module.deep_equals(cst.parse_module(typed))


def _naive_prefix(old: str, new: str) -> int:
    same = 0
    while same < min(len(old), len(new)) and old[same] == new[same]:
        same += 1
    return same


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.integers(min_value=0, max_value=9000),
    st.integers(min_value=0, max_value=9000),
    st.text(alphabet="ab\n", max_size=3),
)
def test_texts_are_compared_a_chunk_at_a_time_to_the_same_answer(
    at: int, length: int, inserted: str
) -> None:
    """The common prefix and suffix an edit leaves are found in chunks, and equal the answer of
    a character loop, also where the change sits on a chunk's edge."""
    from smpfix.server.reparse import _common_prefix, _common_suffix

    old = ("abcdefgh\n" * 1100)[:length]
    at = min(at, len(old))
    new = old[:at] + inserted + old[at + 1 :]
    limit = min(len(old), len(new))
    prefix = _common_prefix(old, new, limit)
    assert prefix == _naive_prefix(old, new)
    assert _common_suffix(old, new, limit - prefix) == min(
        _naive_prefix(old[::-1], new[::-1]), limit - prefix
    )
