"""Bad input never crashes smpfix, never stops the run, and never loses a byte.

One tree holds every kind of bad file next to a good script that needs a fix; one run of the
installed command with ``--apply`` must report each bad file on one line
(``path:line:col: error: reason``), exit 2, still fix the good script, and leave every bad
file byte for byte as it was. Deep nesting runs in that subprocess because LibCST's native
parser does not raise on it: it overflows the stack and kills the process. The text-level
cases (encodings, newlines, BOM, tabs) are also checked through the API, where the exact
bytes written back can be compared.
"""

from __future__ import annotations

import codecs
import json
import os
import re
from pathlib import Path

import pytest
from conftest import run_cli

from smpfix.api import check_source, fix_source
from smpfix.base import source
from smpfix.engine.discovery import DiscoveredFile
from smpfix.engine.runner import RunOptions, check_file
from smpfix.rules.registry import rule_names

JOB = {"tensor_parallel_degree": 4}
HEADER = "import smdistributed.modelparallel.torch as smp\n"
SCRIPT = (
    HEADER + "import torch\n\n"
    "smp.init()\n"
    "model = smp.DistributedModel(build_model())\n\n\n"
    "def save(path):\n"
    "    if smp.dp_rank() == 0:\n"
    "        smp.save(model.local_state_dict(), path, partial=True)\n"
)
ERROR_LINE = re.compile(
    r"^(?P<path>[^\n]+?):(?P<line>\d+):(?P<column>\d+): error: (?P<message>.+)$"
)


def fixed(text: str) -> str:
    result = fix_source(text, "train.py", job=JOB)
    assert not result.errors and result.text != text, "the sample script must have a safe fix"
    return result.text


def _bad_files() -> dict[str, bytes]:
    """name -> bytes of every file that cannot be analyzed; each names the library, so the
    byte-level prefilter lets it through to the parser."""
    marker = HEADER.encode()
    deep_parens = "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n"
    deep_ifs = "".join(" " * i + "if x:\n" for i in range(300)) + " " * 300 + "pass\n"
    deep_chain = "x = " + " + ".join(["a"] * 5000) + "\n"
    deep_conditional = "x = " + " if c else ".join(["1"] * 3000) + "\n"
    deep_attributes = "x = a" + ".b" * 5000 + "\n"
    binary = bytes(range(256)) * 64
    return {
        "python2_print.py": marker + b'print "hello"\n',
        "python2_exec.py": marker + b'exec "x = 1"\n',
        "python2_backticks.py": marker + b"x = `1`\n",
        # Python 3.14 allows template strings to be concatenated; LibCST 1.x cannot build it.
        "newer_python_template_strings.py": marker + b'x = t"{a}" t"{b}"\n',
        "undecodable.py": marker + b"name = '\xff\xfe caf\xe9'\n",
        "wrong_declared_encoding.py": (
            b"# -*- coding: ascii -*-\n" + marker + "x = 'café'\n".encode()
        ),
        "unknown_encoding.py": b"# -*- coding: klingon -*-\n" + marker,
        "nul_bytes.py": marker + b"x = 1\x00\n",
        "binary.py": binary[:1000] + b"smdistributed" + binary[1000:],
        "deep_parens.py": marker + deep_parens.encode(),
        "deep_ifs.py": marker + deep_ifs.encode(),
        "deep_operator_chain.py": marker + deep_chain.encode(),
        "deep_conditional_chain.py": marker + deep_conditional.encode(),
        "deep_attribute_chain.py": marker + deep_attributes.encode(),
        "inconsistent_tabs.py": marker + b"if x:\n\tif y:\n        pass\n",
        # LibCST drops these characters, so its offsets would be off and a fix would land on
        # the wrong characters (``smp.dp_rank()`` became ``smprdp_rankk()``).
        "form_feed_in_indentation.py": (
            SCRIPT.replace("    if smp", "    y = 0\n\x0c    if smp").encode()
        ),
        "generated_10mb.py": (
            marker + b"".join(b"value_%07d = %d\n" % (i, i) for i in range(10 * 1024 * 1024 // 22))
        ),
        "malformed.ipynb": b'{"cells": [{"cell_type": "code", "source": "import smdistributed"',
        "not_a_notebook.ipynb": b'["smdistributed"]',
        "deep.ipynb": b'{"smdistributed": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    }


def _odd_but_fine() -> dict[str, bytes]:
    """Files that look odd but are valid and analyzable: checked quietly, never an error."""
    return {
        "empty.py": b"",
        "only_marker_comment.py": b"# smdistributed\n",
        "long_line.py": HEADER.encode() + b"x = '" + b"a" * 300_000 + b"'\n",
        "generated_10mb_unrelated.py": b"".join(
            b"value_%07d = %d\n" % (i, i) for i in range(10 * 1024 * 1024 // 22)
        ),
        "odd_cells.ipynb": (
            json.dumps(
                {
                    "cells": [
                        {"cell_type": "code", "source": 42},
                        {"cell_type": 7, "source": "import smdistributed"},
                        "not a cell",
                        {
                            "cell_type": "code",
                            "source": ["import smdistributed.modelparallel.torch as smp\n", None],
                        },
                        {"cell_type": "markdown", "source": "smdistributed"},
                    ],
                    "metadata": {},
                    "nbformat": 4,
                    "nbformat_minor": 5,
                }
            ).encode()
        ),
    }


def _good_files() -> dict[str, bytes]:
    """Files that need the fix, in every encoding and newline convention: name -> bytes."""
    latin1 = "# -*- coding: latin-1 -*-\n# Modèle entraîné à Zürich\n" + SCRIPT
    return {
        "good.py": SCRIPT.encode(),
        "latin1.py": latin1.encode("latin-1"),
        "bom.py": codecs.BOM_UTF8 + SCRIPT.encode(),
        "crlf.py": SCRIPT.replace("\n", "\r\n").encode(),
        "mixed_newlines.py": (
            "".join(
                line + ("\r\n" if i % 2 else "\n") for i, line in enumerate(SCRIPT.splitlines())
            ).encode()
        ),
        "tabs.py": SCRIPT.replace("        ", "\t\t").replace("    ", "\t").encode(),
        # LibCST drops the continuation line, but the statement the fix edits is generated on
        # its own and matched with the text, so the fix lands on the right characters.
        "continuation_in_indentation.py": (
            SCRIPT.replace("    if smp", "    x = 1\n\\\n    if smp").encode()
        ),
    }


@pytest.fixture(scope="module")
def bad_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    root = tmp_path_factory.mktemp("bad_input")
    for name, data in {**_bad_files(), **_odd_but_fine(), **_good_files()}.items():
        (root / name).write_bytes(data)
    os.mkfifo(root / "fifo.py")  # reading a FIFO would block the run forever
    result = run_cli(
        "--apply", "--no-cache", "--job", "tensor_parallel_degree=4", "--workers", "2", str(root)
    )
    return root, result


def test_each_bad_file_is_one_clear_line_and_exit_2(bad_tree: tuple[Path, object]) -> None:
    root, result = bad_tree
    assert result.code == 2, result.stderr
    assert "Traceback" not in result.stderr
    errors = [ERROR_LINE.match(line) for line in result.stderr.splitlines() if ": error: " in line]
    assert all(errors), result.stderr
    by_file: dict[str, list[str]] = {}
    for match in errors:
        assert match is not None
        by_file.setdefault(Path(match.group("path")).name, []).append(match.group("message"))
    assert set(by_file) == set(_bad_files()), result.stderr
    for name, messages in by_file.items():
        assert len(messages) == 1, (name, messages)
        assert "internal error" not in messages[0], (name, messages)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("python2_print.py", "syntax error"),
        ("newer_python_template_strings.py", "newer Python"),
        ("undecodable.py", "cannot decode as utf-8"),
        ("wrong_declared_encoding.py", "cannot decode as ascii"),
        ("unknown_encoding.py", "encoding"),
        ("nul_bytes.py", "NUL bytes"),
        ("binary.py", "NUL bytes"),
        ("deep_parens.py", "too many nested parentheses"),
        ("deep_ifs.py", "too many levels of indentation"),
        ("deep_operator_chain.py", "nested too deeply"),
        ("deep_attribute_chain.py", "nested too deeply"),
        ("inconsistent_tabs.py", "tabs and spaces"),
        ("generated_10mb.py", "too large"),
        ("malformed.ipynb", "malformed notebook JSON"),
        ("form_feed_in_indentation.py", "does not reproduce this file exactly"),
    ],
)
def test_the_reason_is_named(bad_tree: tuple[Path, object], name: str, reason: str) -> None:
    root, result = bad_tree
    lines = [line for line in result.stderr.splitlines() if line.startswith(f"{root / name}:")]
    assert len(lines) == 1 and reason in lines[0], result.stderr


def test_bad_and_odd_files_are_untouched(bad_tree: tuple[Path, object]) -> None:
    root, _ = bad_tree
    for name, data in {**_bad_files(), **_odd_but_fine()}.items():
        assert (root / name).read_bytes() == data, name


def test_good_files_are_still_fixed_in_their_own_encoding_and_newlines(
    bad_tree: tuple[Path, object],
) -> None:
    root, result = bad_tree
    for name, data in _good_files().items():
        src = source.decode(name, data)
        expected = src.encode(fixed(src.text))
        assert (root / name).read_bytes() == expected, (name, result.stderr)


def test_latin1_is_read_and_written_back_as_latin1(bad_tree: tuple[Path, object]) -> None:
    root, _ = bad_tree
    written = (root / "latin1.py").read_bytes()
    assert "Modèle entraîné à Zürich".encode("latin-1") in written
    assert b"smp.rdp_rank()" in written
    with pytest.raises(UnicodeDecodeError):
        written.decode("utf-8")


def test_bom_and_newlines_are_kept(bad_tree: tuple[Path, object]) -> None:
    root, _ = bad_tree
    assert (root / "bom.py").read_bytes().startswith(codecs.BOM_UTF8)
    crlf = (root / "crlf.py").read_bytes()
    assert crlf.count(b"\n") == crlf.count(b"\r\n")
    mixed_before = _good_files()["mixed_newlines.py"]
    mixed_after = (root / "mixed_newlines.py").read_bytes()
    assert mixed_after.count(b"\r\n") == mixed_before.count(b"\r\n")
    assert mixed_after.count(b"\n") == mixed_before.count(b"\n")
    assert b"\t\tsmp.save" in (root / "tabs.py").read_bytes()


def test_odd_files_are_not_errors(bad_tree: tuple[Path, object]) -> None:
    root, result = bad_tree
    for name in [*_odd_but_fine(), "fifo.py"]:
        assert f"{root / name}:" not in result.stderr, result.stderr


def test_empty_source_through_the_api() -> None:
    assert check_source("", "empty.py") == []
    assert fix_source("", "empty.py", job=JOB).text == ""


def test_deep_nesting_is_refused_before_the_parser_sees_it() -> None:
    """In this process: were LibCST to see these, pytest itself would die of a stack overflow."""
    for text in (
        HEADER + "x = " + "[" * 5000 + "]" * 5000 + "\n",
        HEADER + "x = " + "-" * 20000 + "1\n",
        HEADER + "x = " + "lambda: " * 5000 + "1\n",
        HEADER + "x = " + " and ".join(["a"] * 20000) + "\n",
        HEADER + "if a:\n    pass\n" + "elif a:\n    pass\n" * 20000,
        HEADER + "x = " + 'f"{' * 2000 + "1" + '}"' * 2000 + "\n",
    ):
        with pytest.raises(ValueError, match="nested"):
            check_source(text, "deep.py")


@pytest.mark.parametrize(
    "statement",
    [
        "x = " + "(" * 199 + "1" + ")" * 199,  # CPython's own limit is 200 brackets
        "y = " + " + ".join(["a"] * 900),
        "z = a" + ".b" * 900,
        "w = " + "not " * 900 + "x",
    ],
)
def test_deep_code_within_the_bound_is_still_analyzed_and_fixed(statement: str) -> None:
    """The walk is iterative and LibCST's recursive code generation gets the stack it needs,
    so nesting up to the bound is analyzed, in this process, not refused."""
    text = SCRIPT.replace("smp.init()\n", f"smp.init()\n{statement}\n")
    assert fixed(text) != text


def test_a_file_that_disappears_or_becomes_unreadable_after_discovery(tmp_path: Path) -> None:
    options = RunOptions(select=frozenset(rule_names()), rule_names=rule_names(), apply=True)
    gone = tmp_path / "gone.py"
    became_folder = tmp_path / "folder.py"
    became_folder.mkdir()
    looping = tmp_path / "loop.py"
    looping.symlink_to(looping)
    for path, reason in (
        (gone, "No such file"),
        (became_folder, "Is a directory"),
        (looping, "symbolic links"),
    ):
        result = check_file(DiscoveredFile(str(path), explicit=False), options)
        assert (
            len(result.errors) == 1
            and reason in result.errors[0].message
            and "cannot read" in result.errors[0].message
        )


@pytest.mark.skipif(
    os.geteuid() == 0,
    reason="root reads a file whatever its mode; the root-proof cases are in the test above",
)
def test_an_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "secret.py"
    path.write_text(SCRIPT)
    path.chmod(0)
    options = RunOptions(select=frozenset(rule_names()), rule_names=rule_names())
    result = check_file(DiscoveredFile(str(path), explicit=False), options)
    assert "cannot read" in result.errors[0].message


def test_deep_launchers_do_not_stop_the_run(tmp_path: Path) -> None:
    """Launchers are read before any script is checked (their job settings reach the scripts
    they start); one the linker cannot read is checked, and reported, like any other file."""
    launch = (
        "from sagemaker.pytorch import PyTorch\n{deep}\nestimator = PyTorch(entry_point='train.py',"
        " distribution={{'smdistributed': {{'modelparallel': {{'enabled': True, 'parameters':"
        " {{'tensor_parallel_degree': 4}}}}}}, 'mpi': {{'enabled': True}}}})\n"
    )
    (tmp_path / "launch_deep.py").write_text(launch.format(deep="y = " + " + ".join(["a"] * 900)))
    (tmp_path / "launch_too_deep.py").write_text(
        launch.format(deep="y = " + "(" * 5000 + ")" * 5000)
    )
    (tmp_path / "train.py").write_text(SCRIPT)
    result = run_cli("--no-cache", "--format", "concise", str(tmp_path))
    assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
    assert [line for line in result.stderr.splitlines() if ": error: " in line] == [
        f"{tmp_path / 'launch_too_deep.py'}:2:205: error: too many nested parentheses (more than"
        " 200; Python itself refuses this)"
    ]
    assert f"{tmp_path / 'train.py'}:" in result.stdout


def test_warnings_about_the_users_code_are_not_printed(tmp_path: Path) -> None:
    """CPython warns about an invalid escape while parsing (a SyntaxWarning from 3.12); those
    warnings are the user's tools' business, never smpfix's output."""
    script = tmp_path / "train.py"
    script.write_text(
        'import smdistributed.modelparallel.torch as smp\nsmp.init()\npath = "C:\\models"\nx = (\n'
    )
    result = run_cli("check", "--no-cache", str(script), env={"PYTHONWARNINGS": "always"})
    assert "Warning" not in result.stderr, result.stderr
    script.write_text(
        'import smdistributed.modelparallel.torch as smp\nsmp.init()\npath = "C:\\models"\n'
    )
    result = run_cli("check", "--no-cache", str(script), env={"PYTHONWARNINGS": "always"})
    assert "Warning" not in result.stderr, result.stderr
