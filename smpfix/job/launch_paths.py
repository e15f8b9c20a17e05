"""Paths a launcher builds for ``source_dir`` and ``entry_point``, evaluated without running it.

Real launchers rarely write a plain ``"code"``: notebooks pass ``source_dir=os.getcwd()``,
integration tests build ``os.path.join(os.path.dirname(__file__), "..", "resources")`` or
``Path(__file__).parent / "code"``, others use f-strings over module constants. These forms
are folded into strings here. The working directory the launcher will run in is not known
statically, so ``os.getcwd()`` (and anything relative) stays symbolic: a path starting with
``CWD``, resolved later against each folder the launcher may run in (``resolve``).
``__file__`` is the launcher's own absolute path, as Python sets it for a script or a test
module. Anything else (an environment variable, a call smpfix does not know) is UNKNOWN.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Callable, Optional

import libcst as cst

from smpfix.base.imports import ImportTable
from smpfix.base.literals import UNKNOWN

# The first component of a path relative to the launcher's working directory. NUL cannot
# occur in a real path, so it never collides with one.
CWD = "\x00cwd"

_CWD_CALLS = frozenset(
    {"os.getcwd", "pathlib.Path.cwd", "pathlib.PosixPath.cwd", "pathlib.WindowsPath.cwd"}
)
_JOIN_CALLS = frozenset({"os.path.join", "posixpath.join", "ntpath.join"})
_PATH_TYPES = frozenset(
    {
        "pathlib.Path",
        "pathlib.PurePath",
        "pathlib.PosixPath",
        "pathlib.PurePosixPath",
        "pathlib.WindowsPath",
        "pathlib.PureWindowsPath",
    }
)
_ABSOLUTE_CALLS = frozenset(
    {"os.path.abspath", "os.path.realpath", "posixpath.abspath", "posixpath.realpath"}
)
_SAME_CALLS = frozenset({"os.fspath", "os.path.normpath", "posixpath.normpath"})
_PATH_METHODS_ABSOLUTE = frozenset({"resolve", "absolute"})
_PATH_METHODS_SAME = frozenset({"as_posix", "__fspath__", "__str__"})

Evaluate = Callable[[cst.BaseExpression], Any]


def join(*parts: str) -> str:
    return os.path.join(*parts) if parts else "."


def dirname(path: str) -> str:
    """``os.path.dirname``, where the parent of the symbolic working directory stays symbolic."""
    if path == CWD:
        return os.path.join(CWD, os.pardir)
    parent = os.path.dirname(path)
    return parent if parent or not path else "."


def absolute(path: str) -> str:
    return (
        path if os.path.isabs(path) or path.split(os.sep, 1)[0] == CWD else os.path.join(CWD, path)
    )


def resolve(path: str, cwd: str) -> str:
    """``path`` as an absolute path when the launcher runs in ``cwd``."""
    head, _, rest = path.partition(os.sep)
    if head == CWD:
        path = os.path.join(cwd, rest)
    elif not os.path.isabs(path):
        path = os.path.join(cwd, path)
    return os.path.normpath(path)


def script_candidates(entry: str, source_dir: Any, working_dirs: Sequence[str]) -> list[str]:
    """Where the script ``entry_point`` names may be, for each folder the launcher may run in.

    With a local ``source_dir`` the entry point is relative to it, as SageMaker uploads that
    folder; without one (``None``, or an S3 URI) it is relative to the working directory. A
    ``source_dir`` smpfix cannot read could be anywhere: no candidate.
    """
    if source_dir is UNKNOWN or not (source_dir is None or isinstance(source_dir, str)):
        return []
    local_dir = (
        source_dir if isinstance(source_dir, str) and not source_dir.startswith("s3://") else None
    )
    found: list[str] = []
    for cwd in working_dirs:
        folder = resolve(local_dir, cwd) if local_dir is not None else cwd
        candidate = resolve(entry, folder)
        if candidate not in found:
            found.append(candidate)
    return found


def path_value(node: cst.BaseExpression, evaluate: Evaluate, imports: ImportTable) -> Optional[Any]:
    """The string a path expression builds, UNKNOWN when a part is unknown, None when ``node``
    is not one of the path forms (the caller then evaluates it otherwise)."""
    # Exact node types (LibCST's have no subclasses): isinstance goes through ABCMeta, and
    # a launcher's replay asks this about every call it evaluates.
    if type(node) is cst.Call:
        return _call(node, evaluate, imports)
    if type(node) is cst.FormattedString:
        return _formatted(node, evaluate)
    if type(node) is cst.BinaryOperation and type(node.operator) is cst.Divide:
        left, right = evaluate(node.left), evaluate(node.right)
        if isinstance(left, str) and isinstance(right, str):
            return join(left, right)
        return None if _numbers(left, right) else UNKNOWN
    if type(node) is cst.Attribute and node.attr.value in ("parent", "name"):
        inner = _inner(node.value, evaluate, imports)
        if inner is None:
            return None
        if not isinstance(inner, str):
            return UNKNOWN
        return dirname(inner) if node.attr.value == "parent" else os.path.basename(inner)
    if (
        type(node) is cst.Subscript
        and type(node.value) is cst.Attribute
        and node.value.attr.value == "parents"
    ):
        return _parents(node, evaluate, imports)
    return None


def _numbers(*values: Any) -> bool:
    return all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in values)


def _inner(node: cst.BaseExpression, evaluate: Evaluate, imports: ImportTable) -> Optional[Any]:
    """The value of a path expression's operand, or None when it is not a path form at all."""
    value = path_value(node, evaluate, imports)
    if value is not None:
        return value
    value = evaluate(node)
    return value if isinstance(value, str) else None


def _parents(node: cst.Subscript, evaluate: Evaluate, imports: ImportTable) -> Optional[Any]:
    assert isinstance(node.value, cst.Attribute)
    inner = _inner(node.value.value, evaluate, imports)
    if inner is None:
        return None
    index = (
        evaluate(node.slice[0].slice.value)
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index)
        else None
    )
    if (
        not isinstance(inner, str)
        or not isinstance(index, int)
        or isinstance(index, bool)
        or index < 0
    ):
        return UNKNOWN
    for _ in range(index + 1):
        inner = dirname(inner)
    return inner


def _call(node: cst.Call, evaluate: Evaluate, imports: ImportTable) -> Optional[Any]:
    qualified = imports.qualified_name(node.func)
    if qualified is None and type(node.func) is cst.Name and node.func.value == "str":
        qualified = "str"
    if qualified is None and type(node.func) is cst.Attribute:
        return _method(node, evaluate, imports)
    if qualified in _CWD_CALLS:
        return CWD if not node.args else UNKNOWN
    known = (
        qualified in _JOIN_CALLS
        or qualified in _PATH_TYPES
        or qualified in _ABSOLUTE_CALLS
        or qualified in _SAME_CALLS
    )
    if not known and qualified not in ("os.path.dirname", "os.path.basename", "str"):
        return None
    if any(arg.keyword is not None or arg.star for arg in node.args):
        return UNKNOWN
    found = [_inner(arg.value, evaluate, imports) for arg in node.args]
    values = [value for value in found if isinstance(value, str)]
    if len(values) != len(found):
        return None if qualified == "str" else UNKNOWN
    if qualified in _JOIN_CALLS or qualified in _PATH_TYPES:
        return join(*values)
    if len(values) != 1:
        return UNKNOWN
    (value,) = values
    if qualified in _ABSOLUTE_CALLS:
        return absolute(value)
    if qualified == "os.path.dirname":
        return dirname(value)
    if qualified == "os.path.basename":
        return os.path.basename(value)
    return value


def _method(node: cst.Call, evaluate: Evaluate, imports: ImportTable) -> Optional[Any]:
    """``Path(...).resolve()``, ``.absolute()``, ``.as_posix()``, ``.joinpath(...)`` on a known
    path."""
    assert isinstance(node.func, cst.Attribute)
    name = node.func.attr.value
    if name not in _PATH_METHODS_ABSOLUTE and name not in _PATH_METHODS_SAME and name != "joinpath":
        return None
    inner = _inner(node.func.value, evaluate, imports)
    if inner is None:
        return None
    if not isinstance(inner, str):
        return UNKNOWN
    if name == "joinpath":
        parts = [evaluate(arg.value) for arg in node.args]
        return join(inner, *parts) if all(isinstance(part, str) for part in parts) else UNKNOWN
    return absolute(inner) if name in _PATH_METHODS_ABSOLUTE else inner


def _formatted(node: cst.FormattedString, evaluate: Evaluate) -> Any:
    """``f"{ROOT}/code"`` over known strings and numbers (no format spec or conversion)."""
    pieces: list[str] = []
    raw = "r" in node.prefix.lower()
    for part in node.parts:
        if isinstance(part, cst.FormattedStringText):
            if "\\" in part.value and not raw:
                return UNKNOWN  # an escape sequence: not a path worth decoding
            pieces.append(part.value.replace("{{", "{").replace("}}", "}"))
            continue
        assert isinstance(part, cst.FormattedStringExpression)
        if part.format_spec is not None or part.conversion is not None:
            return UNKNOWN
        value = evaluate(part.expression)
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            return UNKNOWN
        pieces.append(str(value))
    return "".join(pieces)
