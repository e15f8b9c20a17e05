"""The ``if`` statements a finding's code sits under, in words for its evidence.

A finding about code behind a switch (apex under ``if args.fp16:``) states the whole condition:
the tests of the enclosing ``if`` statements in its function, and for a test that reads a
command-line flag (``args.fp16``), every option that sets it (``--fp16``, and an alias such as
``--amp`` given to the same ``add_argument``). Without the aliases a reader who launches with
``--amp`` would not recognise the condition as theirs.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.walker import iter_nodes
from smpfix.program.flow.command_line import command_line_arguments
from smpfix.program.model import Program
from smpfix.program.project.parsed_file import ParsedFile


def enclosing_tests(program: Program, node: cst.CSTNode) -> list[cst.If]:
    """The ``if`` statements (innermost last) whose body holds ``node``, up to its function."""
    found: list[cst.If] = []
    child: cst.CSTNode = node
    for ancestor in program.parents.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
            break
        if type(ancestor) is cst.If and child is ancestor.body:
            found.append(ancestor)
        child = ancestor
    return list(reversed(found))


def condition_title(program: Program, node: cst.CSTNode) -> str:
    """ " under `if args.fp16:`" for the innermost enclosing ``if``, or "" outside any."""
    tests = enclosing_tests(program, node)
    if not tests:
        return ""
    test = " ".join(program.code_for(tests[-1].test).split())
    return f" under `if {test}:`" if len(test) <= 30 else " under an `if`"


def condition_evidence(program: Program, node: cst.CSTNode) -> tuple[str, ...]:
    """One line per enclosing ``if``: its test and the flags that set what it reads."""
    lines: list[str] = []
    for statement in enclosing_tests(program, node):
        test = " ".join(program.code_for(statement.test).split())
        line = f"runs under `if {test}:`"
        flags = _flags(program, statement.test)
        lines.append(f"{line}; {flags}" if flags else line)
    return tuple(lines)


def _flags(program: Program, test: cst.BaseExpression) -> str:
    """ "`args.fp16` is set by `--fp16` or `--amp`" for the ``args.<name>`` attributes a test
    reads that the script's ``add_argument`` calls define."""
    files: list[ParsedFile] = [program.file]
    if program.modules is not None:
        files += program.modules.imported_modules(program.facts)
    arguments = command_line_arguments(files)
    words: list[str] = []
    for node in iter_nodes(test):
        name = _argument_name(node)
        if name is None or name not in arguments:
            continue
        # In the order the script spells them: `--fp16` first, then its alias `--amp`.
        options = dict.fromkeys(option for found in arguments[name] for option in found.options)
        shown = " or ".join(f"`{option}`" for option in options)
        code = " ".join(program.code_for(node).split())
        words.append(f"`{code}` is set by {shown}")
    return "; ".join(dict.fromkeys(words))


def _argument_name(node: cst.CSTNode) -> Optional[str]:
    """``name`` for ``<something>.name`` where ``<something>`` is a plain name (``args``)."""
    if type(node) is cst.Attribute and type(node.value) is cst.Name:
        return node.attr.value
    return None
