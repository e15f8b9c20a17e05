"""Fixes follow the layout of the code they edit, as a reviewer expects (issue 24).

A new dict entry or argument goes where a person would have typed it; a line the fix would make
too long is wrapped as a formatter would; removing a statement keeps the blank lines around it; a
fix that rewrites code a comment speaks about is never safe (``smpfix.fixes.comments``).
The rules' own fixtures (tests/fixtures) show the same on real findings.
"""

from __future__ import annotations

import ast
import difflib
import io
import re
import shutil
import tempfile
import tokenize
from pathlib import Path

import libcst as cst
import pytest
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

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


def _replaced(source: str, code: str, text: str, limit: int) -> str:
    """``source`` after replacing the first node written ``code`` with ``text``."""
    from smpfix.base.edits import ReplaceNode
    from smpfix.base.walker import indexed

    module = cst.parse_module(source)
    with indexed(module, None) as index:
        node = next(n for n in index.order if module.code_for_node(n) == code)
        edit = ReplaceNode(node, text).resolve(Positions(module, source, index, limit))
    return apply_edits(source, [edit])


def test_a_replacement_too_long_for_its_line_wraps_the_outermost_call_of_the_line() -> None:
    source = "if ok:\n    smp.save(state, path, partial=False)  # the last one\n"
    assert _replaced(source, "False", "True if args.sharded else False", 50) == (
        "if ok:\n"
        "    smp.save(\n"
        "        state,\n"
        "        path,\n"
        "        partial=True if args.sharded else False,\n"
        "    )  # the last one\n"
    )
    assert _replaced(source, "False", "True", 50) == source.replace("False", "True")


def test_a_replaced_function_name_too_long_for_its_line_is_kept_when_the_call_wraps() -> None:
    source = "scaler = GradScaler(enabled=True)\n"
    assert _replaced(source, "GradScaler", "smp.amp.GradScaler", 36) == (
        "scaler = smp.amp.GradScaler(\n    enabled=True,\n)\n"
    )


def test_a_call_written_in_place_of_a_name_is_wrapped_when_too_long() -> None:
    source = "model = net\n"
    assert _replaced(source, "net", "smp.DistributedModel(net, trace_device='cpu')", 40) == (
        "model = smp.DistributedModel(\n    net,\n    trace_device='cpu',\n)\n"
    )
    nested = "p = {'m': f(net)}\n"
    assert _replaced(nested, "net", "g(net, trace_device='cpu')", 20) == (
        "p = {'m': f(g(net, trace_device='cpu'))}\n"
    ), "a formatter would break the dict first, which is not this edit's to rewrite"


# -- Properties over the realistic projects ---------------------------------------------------

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9][0-9._]*")
_DIRECTIVE = re.compile(r"#\s*(?:noqa|smpfix:|type:|expect:|pragma|fmt:)", re.IGNORECASE)


def _comments_and_words(text: str) -> tuple[dict[int, str], dict[int, set[str]]]:
    """Per line (from 1): its comment, and the names and numbers of its code."""
    comments: dict[int, str] = {}
    words: dict[int, set[str]] = {}
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        line = token.start[0]
        if token.type == tokenize.COMMENT:
            comments[line] = token.string
        elif token.type in (tokenize.NAME, tokenize.NUMBER):
            words.setdefault(line, set()).add(token.string)
    return comments, words


def stale_comments(old: str, new: str) -> list[str]:
    """Comments a change leaves stale, checkably: a comment on a changed line, or on the comment
    lines directly above it, that is still there after the change and names as a whole word a
    name or value the change removed from those lines (``# partial=False: one file per rank``
    above ``partial=False`` rewritten to ``partial=True``). Directives (``noqa``,
    ``smpfix:``, ``type:``, the fixtures' ``expect:``) are not prose."""
    before, after = old.splitlines(), new.splitlines()
    _, old_words = _comments_and_words(old)
    new_comments, new_words = _comments_and_words(new)
    stale = []
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for tag, b1, b2, a1, a2 in matcher.get_opcodes():
        if tag != "replace":
            continue  # an insertion removes nothing; a deleted statement takes its comments
        removed = set().union(*(old_words.get(n, set()) for n in range(b1 + 1, b2 + 1)))
        removed -= set().union(*(new_words.get(n, set()) for n in range(a1 + 1, a2 + 1)))
        kept = [new_comments[n] for n in range(a1 + 1, a2 + 1) if n in new_comments]
        above = b1
        while above >= 1 and before[above - 1].lstrip().startswith("#"):
            kept.append(before[above - 1].strip())
            above -= 1
        for comment in kept:
            if _DIRECTIVE.match(comment):
                continue
            named = [word for word in removed if re.search(rf"\b{re.escape(word)}\b", comment)]
            if named:
                stale.append(f"{comment!r} names {', '.join(sorted(named))}")
    return stale


def test_a_comment_naming_the_replaced_value_is_stale_and_others_are_not() -> None:
    old = "# partial=False: one file with the whole model\nsmp.save(m, p, partial=False)\n"
    assert stale_comments(old, old.replace("partial=False)", "partial=True)")) == [
        "'# partial=False: one file with the whole model' names False"
    ]
    assert stale_comments(old, "# one file per rank\nsmp.save(m, p, partial=True)\n") == []
    quiet = "# save the weights\nsmp.save(m, p, partial=False)  # expect: SMP303\n"
    assert stale_comments(quiet, quiet.replace("False", "True")) == []


def _configured_copy(project: Path, folder: Path, line_length: int) -> Path:
    copy = folder / project.name
    shutil.copytree(project, copy)
    (copy / "pyproject.toml").write_text(
        f"[tool.smpfix]\nline-length = {line_length}\n", encoding="utf-8"
    )
    return copy


FAMILIES = ("SMP0", "SMP1", "SMP2", "SMP3", "SMP4", "SMP5", "SMP6", "SMP7", "SMP8", "SMP9")


@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    project=st.sampled_from(PROJECTS),
    line_length=st.sampled_from([60, 79, 88, 100, 120]),
    families=st.sets(st.sampled_from(FAMILIES), min_size=1),
)
def test_any_subset_of_fixes_keeps_lines_within_the_configured_length(
    project: Path, line_length: int, families: set
) -> None:
    """Every fix of some rule families (unsafe ones and hints included) in a realistic project
    under some ``line-length``: no line longer than the longest already in its file or that
    length, and code that parses."""
    with tempfile.TemporaryDirectory() as folder:
        copy = _configured_copy(project, Path(folder), line_length)
        before = {path: path.read_text(encoding="utf-8") for path in copy.rglob("*.py")}
        run_cli(
            "check", "--apply", "--unsafe-fixes", "--show-hints", "--no-cache",
            "--select", ",".join(sorted(families)), ".", cwd=copy,
        )  # fmt: skip
        for path, old in before.items():
            new = path.read_text(encoding="utf-8")
            if new == old:
                continue
            limit = max([line_length, *(len(line) for line in old.splitlines())])
            long_lines = [line for line in new.splitlines() if len(line) > limit]
            assert long_lines == [], f"{path.relative_to(copy)}: lines over {limit} characters"
            ast.parse(new, str(path))


def _with_planted_comments(old: str, new: str) -> str:
    """``old`` with a comment above the first line of each change from ``old`` to ``new`` that
    names what the change removes (``# uses dp_rank``), as a person explaining the code might."""
    before, after = old.splitlines(keepends=True), new.splitlines()
    _, old_words = _comments_and_words(old)
    _, new_words = _comments_and_words(new)
    planted: dict[int, str] = {}
    matcher = difflib.SequenceMatcher(None, old.splitlines(), after, autojunk=False)
    for tag, b1, b2, a1, a2 in matcher.get_opcodes():
        if tag != "replace":
            continue
        removed = set().union(*(old_words.get(n, set()) for n in range(b1 + 1, b2 + 1)))
        removed -= set().union(*(new_words.get(n, set()) for n in range(a1 + 1, a2 + 1)))
        if removed:
            line = before[b1]
            indent = line[: len(line) - len(line.lstrip(" \t"))]
            planted[b1] = f"{indent}# uses {' '.join(sorted(removed))}\n"
    return "".join(planted.get(n, "") + line for n, line in enumerate(before))


@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: p.name)
def test_no_safe_fix_leaves_a_stale_comment(project: Path, tmp_path: Path) -> None:
    """``--apply --show-hints`` (every safe fix, hints included) over a realistic project leaves
    no comment naming what a fix removed from the line it is on or above: a fix tied to such a
    comment is unsafe, so it is not applied. Checked on the project as it is, and again with a
    comment planted above every line a safe fix rewrites, naming what the fix removes."""
    copy = _configured_copy(project, tmp_path / "as-is", 100)
    before = {path: path.read_text(encoding="utf-8") for path in copy.rglob("*.py")}
    run_cli("check", "--apply", "--show-hints", "--no-cache", ".", cwd=copy)
    planted = _configured_copy(project, tmp_path / "planted", 100)
    planted_before = {}
    for path, old in before.items():
        new = path.read_text(encoding="utf-8")
        assert stale_comments(old, new) == [], path
        twin = planted / path.relative_to(copy)
        twin.write_text(_with_planted_comments(old, new), encoding="utf-8")
        planted_before[twin] = twin.read_text(encoding="utf-8")
    run_cli("check", "--apply", "--show-hints", "--no-cache", ".", cwd=planted)
    for path, old in planted_before.items():
        assert stale_comments(old, path.read_text(encoding="utf-8")) == [], path
