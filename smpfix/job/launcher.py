"""Reading SageMaker launchers: estimator calls and the configuration they pass.

A launcher builds ``PyTorch(entry_point="train.py", distribution={...}, instance_type=...)``,
often from names assembled over several statements (``smp_options = {...}``,
``smp_options["parameters"]["microbatches"] = 4``, ``distribution.update({...})``). This module
replays the launcher's top-level statements in order over literal values only, so every
value it reports is what the estimator receives, with the node that wrote it (a finding
points at the key, not the call). Anything it cannot see (a call, a variable from argparse)
is UNKNOWN: never guessed, never executed. ``parameters`` given as a path to a JSON file is
read when the file exists. Paths for ``source_dir`` and ``entry_point`` may be built from
``__file__``, ``os.getcwd()``, ``os.path`` and ``pathlib`` (``smpfix.job.launch_paths``).
Function bodies (a pytest test, a ``main()``) are replayed after the module, as they run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

import libcst as cst

from smpfix.base.imports import ImportTable
from smpfix.base.literals import UNKNOWN, literal_value
from smpfix.base.safe_read import JSON_LIMIT, RefusedFile, read_regular
from smpfix.base.walker import iter_nodes
from smpfix.job import branch_offers, launch_paths, launcher_files
from smpfix.job.project_root import project_folder, project_root

ESTIMATORS = frozenset(
    {
        "sagemaker.pytorch.PyTorch",
        "sagemaker.pytorch.estimator.PyTorch",
        "sagemaker.tensorflow.TensorFlow",
        "sagemaker.tensorflow.estimator.TensorFlow",
        "sagemaker.huggingface.HuggingFace",
        "sagemaker.huggingface.estimator.HuggingFace",
        "sagemaker.estimator.Estimator",
        "sagemaker.estimator.Framework",
        "sagemaker.PyTorch",
        "sagemaker.TensorFlow",
        "sagemaker.HuggingFace",
        "sagemaker.Estimator",
    }
)
_OLD_NAMES = {"train_instance_type": "instance_type", "train_instance_count": "instance_count"}
# Leading positional parameters of the estimators whose first parameter is the entry point
# (SageMaker Python SDK v2:
# ``PyTorch(entry_point, framework_version, py_version, source_dir, ...)``).
_POSITIONAL: Mapping[str, tuple[str, ...]] = {
    "PyTorch": (
        "entry_point",
        "framework_version",
        "py_version",
        "source_dir",
        "hyperparameters",
        "image_uri",
        "distribution",
    ),
    "HuggingFace": (
        "py_version",
        "entry_point",
        "transformers_version",
        "tensorflow_version",
        "pytorch_version",
        "source_dir",
        "hyperparameters",
        "image_uri",
        "distribution",
    ),
    "TensorFlow": ("py_version", "framework_version", "model_dir", "image_uri", "distribution"),
    "Framework": ("entry_point", "source_dir", "hyperparameters"),
}


@dataclass(frozen=True)
class Located:
    """A configuration value and the node that wrote it.

    ``value`` is a plain value, UNKNOWN, or for dicts a ``dict[str, Located]`` and for lists a
    ``list[Located]``. ``node`` is the value's expression (None when it came from a JSON
    file); ``entry`` is the dict element ``"key": value`` when it came from a dict display.
    ``pieces`` are, for a string built with ``+`` or ``+=`` from literals, the literals it was
    joined from, in order (a rule can then point at, or fix, one of them).
    """

    value: Any
    node: Optional[cst.CSTNode] = None
    entry: Optional[cst.CSTNode] = None
    source_file: Optional[str] = None
    pieces: tuple[Located, ...] = field(default=(), compare=False)

    @property
    def is_dict(self) -> bool:
        return isinstance(self.value, dict)

    def get(self, key: str) -> Optional[Located]:
        return self.value.get(key) if isinstance(self.value, dict) else None

    def path(self, *keys: str) -> Optional[Located]:
        current: Optional[Located] = self
        for key in keys:
            current = current.get(key) if current is not None else None
        return current

    def plain(self) -> Any:
        if isinstance(self.value, dict):
            return {k: v.plain() for k, v in self.value.items()}
        if isinstance(self.value, list):
            return [v.plain() for v in self.value]
        return self.value

    @property
    def display(self) -> Located:
        """The same value pointing at where it was written (for "this dict lacks a key")."""
        return Located(
            self.value, self.node, None if self.node is not None else self.entry, self.source_file
        )

    @property
    def anchor(self) -> Optional[cst.CSTNode]:
        """Where a finding about this value points: the dict entry, else the value."""
        return self.entry or self.node


@dataclass(frozen=True)
class Launcher:
    """One estimator construction with its resolved keyword arguments."""

    call: cst.Call
    estimator: str
    keywords: Mapping[str, Located] = field(default_factory=dict)
    path: str = ""
    # Why the JSON file ``parameters`` names was not read (``smpfix.base.safe_read``): a FIFO,
    # a device, a file outside the project or over the cap. None when it was read or is absent.
    parameters_refusal: Optional[str] = None
    # Which launch of a parametrized test this is (pytest's id of the values), else "".
    variant: str = ""
    # The branch a launcher sits in that the launcher file's own values do not take
    # (``elif mode == "smp":`` after ``mode = "ddp"``), else "": the code offers this job, it
    # does not run it.
    untaken: str = ""

    def keyword(self, name: str) -> Optional[Located]:
        return self.keywords.get(name)

    def files_read(self) -> frozenset[str]:
        """The files its values came from (a JSON configuration), on which a check of the
        launcher depends besides its own text."""
        found: set[str] = set()
        stack = list(self.keywords.values())
        while stack:
            located = stack.pop()
            if located.source_file is not None:
                found.add(located.source_file)
            if isinstance(located.value, dict):
                stack.extend(located.value.values())
            elif isinstance(located.value, list):
                stack.extend(located.value)
        return frozenset(found)

    def unread_files(self) -> tuple[str, ...]:
        """The configuration files its values come from that could not be read (missing,
        refused, not valid JSON or YAML): those values are unknown."""
        found: set[str] = set()
        stack = list(self.keywords.values())
        while stack:
            located = stack.pop()
            if located.value is UNKNOWN and located.source_file is not None:
                found.add(located.source_file)
            if isinstance(located.value, dict):
                stack.extend(located.value.values())
            elif isinstance(located.value, list):
                stack.extend(located.value)
        return tuple(sorted(found))

    @property
    def distribution(self) -> Optional[Located]:
        return self.keywords.get("distribution")

    @property
    def modelparallel(self) -> Optional[Located]:
        dist = self.distribution
        return dist.path("smdistributed", "modelparallel") if dist is not None else None

    @property
    def parameters(self) -> Optional[Located]:
        mp = self.modelparallel
        return mp.get("parameters") if mp is not None else None

    @property
    def parameters_file(self) -> Optional[str]:
        """The JSON file ``parameters`` names (read when it exists), or None when it is a dict."""
        parameters = self.parameters
        if parameters is None:
            return None
        if parameters.source_file is not None:
            return parameters.source_file
        if isinstance(parameters.value, str):
            return _json_path(parameters.value, self.path)
        return None

    @property
    def mpi(self) -> Optional[Located]:
        dist = self.distribution
        return dist.get("mpi") if dist is not None else None

    def literal(self, name: str) -> Any:
        located = self.keywords.get(name)
        return located.plain() if located is not None else None

    def script_candidates(self, root: Optional[str] = None) -> list[str]:
        """Where the launched script may be, most likely first; empty when ``entry_point`` or
        ``source_dir`` is unknown. ``root`` is the launcher's project root (by default found
        from its path, ``smpfix.job.project_root``).

        SageMaker resolves a relative ``source_dir`` or ``entry_point`` (and ``os.getcwd()``)
        against the folder the launcher runs in: a notebook's own folder, and for a script
        usually its folder or the project root. Both are tried, in that order.
        """
        entry = self.literal("entry_point")
        if not isinstance(entry, str):
            return []
        folder = os.path.dirname(os.path.abspath(self.path))
        root = project_folder(root if root is not None else project_root(self.path), self.path)
        working_dirs = [folder] if root == folder else [folder, root]
        return launch_paths.script_candidates(entry, self.literal("source_dir"), working_dirs)

    def missing_script(self) -> Optional[str]:
        """The script ``entry_point`` names when no candidate of it exists (the likeliest, as
        the launcher wrote it, relative to its folder), else None; also None when a notebook
        launcher writes it in a ``%%writefile`` cell before the job starts, and when the
        source comes from elsewhere: a Git repository (``git_config``) or an S3 archive."""
        source_dir = self.literal("source_dir")
        if "git_config" in self.keywords or (
            isinstance(source_dir, str) and source_dir.startswith("s3://")
        ):
            return None
        candidates = self.script_candidates()
        if not candidates or any(os.path.isfile(candidate) for candidate in candidates):
            return None
        if self.path.endswith(".ipynb") and set(candidates) & _notebook_writes(self.path):
            return None
        return os.path.relpath(candidates[0], os.path.dirname(os.path.abspath(self.path)))

    @property
    def script(self) -> Optional[str]:
        """The launched script's absolute path: the first candidate that exists, else the first."""
        candidates = self.script_candidates()
        return next(
            (c for c in candidates if os.path.isfile(c)), candidates[0] if candidates else None
        )


def _notebook_writes(path: str) -> set[str]:
    """The files a notebook's ``%%writefile`` cells write, as absolute paths (IPython resolves
    them against the notebook's folder); none when it cannot be read."""
    from smpfix.base import notebook
    from smpfix.base.safe_read import NOTEBOOK_LIMIT

    try:
        text = read_regular(path, NOTEBOOK_LIMIT).decode("utf-8")
        scripts = notebook.parse(text).scripts
    except (OSError, RefusedFile, ValueError, notebook.NotebookError):
        return set()
    folder = os.path.dirname(os.path.abspath(path))
    return {os.path.normpath(os.path.join(folder, script.filename)) for script in scripts}


# The value of an attribute (``args.config``) the replay cannot bind itself, or None.
Attribute = Callable[[cst.Attribute], Optional[Any]]


class _Names(dict[str, Located]):
    """The names a replay has bound so far, with the file's imports (which say whether
    ``os.path.join`` or ``Path`` is the standard library's)."""

    def __init__(
        self,
        imports: ImportTable,
        names: Optional[Mapping[str, Located]] = None,
        variant: str = "",
        untaken: str = "",
        origin: str = "",
        attribute: Optional[Attribute] = None,
    ) -> None:
        super().__init__(names or {})
        self.imports = imports
        # Which launch of a parametrized test the names are of (pytest's id), else "".
        self.variant = variant
        # The test of the branch not taken these names are replayed in, else "".
        self.untaken = untaken
        # The launcher's path: the files it opens are found from its folder.
        self.origin = origin
        # What ``args.config`` is, for a script whose command-line values are known.
        self.attribute = attribute

    def child(self, variant: str = "", untaken: str = "") -> _Names:
        """A function's scope: the module's names as they are now, shadowed by its own."""
        return _Names(
            self.imports,
            self,
            variant or self.variant,
            untaken or self.untaken,
            self.origin,
            self.attribute,
        )


# Expressions that may build a path (``os.path.join(...)``, ``Path(...) / "x"``, ``f"{ROOT}/x"``).
_PATH_FORMS = (cst.Call, cst.FormattedString, cst.BinaryOperation, cst.Attribute, cst.Subscript)

# Node types are tested exactly throughout (``type(node) is cst.Name``): LibCST's node classes
# have no subclasses, and ``isinstance`` against them goes through ``ABCMeta``, a large part
# of a replay's time.


def _is_parents(node: cst.Subscript) -> bool:
    return type(node.value) is cst.Attribute and node.value.attr.value == "parents"


def _located(node: cst.BaseExpression, env: _Names, entry: Optional[cst.CSTNode] = None) -> Located:
    """Evaluate a literal expression, reading names from ``env``: a display, a name bound
    earlier, a subscript or an operation over those (``_FORMS``), else a path, else a literal."""
    form = _FORMS.get(type(node))
    found = form(node, env, entry) if form is not None else None
    if found is not None:
        return found
    if type(node) is cst.Attribute and env.attribute is not None:
        value = env.attribute(node)
        if value is not None:
            return Located(value, node, entry)
    if type(node) in _PATH_FORMS:
        path = launch_paths.path_value(
            node, lambda inner: _located(inner, env).plain(), env.imports
        )
        if path is not None:
            return Located(path, node, entry)
    if type(node) is cst.Name and node.value not in ("True", "False", "None"):
        return Located(UNKNOWN, node, entry)
    return Located(literal_value(node), node, entry)


def _rebound(found: Located, entry: Optional[cst.CSTNode]) -> Located:
    """A value read from elsewhere (a name, a subscript), pointing at ``entry`` when given."""
    return Located(
        found.value,
        found.node,
        found.entry if entry is None else entry,
        found.source_file,
        found.pieces,
    )


def _name(node: cst.Name, env: _Names, entry: Optional[cst.CSTNode]) -> Optional[Located]:
    return _rebound(env[node.value], entry) if node.value in env else None


def _dict_display(node: cst.Dict, env: _Names, entry: Optional[cst.CSTNode]) -> Located:
    items: dict[str, Located] = {}
    for element in node.elements:
        if type(element) is cst.StarredDictElement:
            merged = _located(element.value, env)
            if not isinstance(merged.value, dict):
                return Located(UNKNOWN, node, entry)
            items.update(merged.value)
            continue
        assert type(element) is cst.DictElement
        key = literal_value(element.key)
        if not isinstance(key, str):
            return Located(UNKNOWN, node, entry)
        items[key] = _located(element.value, env, element)
    return Located(items, node, entry)


def _dict_call(node: cst.Call, env: _Names, entry: Optional[cst.CSTNode]) -> Optional[Located]:
    """``dict(a=1, **other)``, when ``dict`` is the builtin; None for any other call."""
    func = node.func
    if type(func) is not cst.Name or func.value != "dict" or func.value in env:
        return None
    items: dict[str, Located] = {}
    for arg in node.args:
        if arg.keyword is not None:
            items[arg.keyword.value] = _located(arg.value, env, arg)
        elif arg.star in ("", "**"):
            merged = _located(arg.value, env)
            if not isinstance(merged.value, dict):
                return Located(UNKNOWN, node, entry)
            items.update(merged.value)
        else:
            return Located(UNKNOWN, node, entry)
    return Located(items, node, entry)


def _dict_get(node: cst.Call, env: _Names, entry: Optional[cst.CSTNode]) -> Optional[Located]:
    """``hyperparameters.get("smp")`` or ``.get("smp", False)`` on a dict the replay knows: the
    value, the default, or None for a missing key (launchers branch on it: ``if
    hyperparameters.get("model_parallel"):``); None (not evaluated) for any other call."""
    func = node.func
    if type(func) is not cst.Attribute or func.attr.value != "get" or not 1 <= len(node.args) <= 2:
        return None
    if any(arg.keyword is not None or arg.star for arg in node.args):
        return None
    mapping = _located(func.value, env)
    if not isinstance(mapping.value, dict):
        return None
    key = _located(node.args[0].value, env).plain()
    if not isinstance(key, str):
        return Located(UNKNOWN, node, entry)
    if key in mapping.value:
        return _rebound(mapping.value[key], entry)
    if len(node.args) == 2:
        return _located(node.args[1].value, env, entry)
    return Located(None, node, entry)


def _loaded_json(node: cst.Call, env: _Names, entry: Optional[cst.CSTNode]) -> Optional[Located]:
    """``json.load(open("config.json"))`` and its kin (``smpfix.job.launcher_files``): the
    file's values, each pointing at this call; UNKNOWN when the file cannot be read."""
    qualified = env.imports.qualified_name(node.func) or ""
    handle = launcher_files.loaded_file(node, qualified, lambda inner: _located(inner, env).plain())
    if handle is None:
        return None
    path = launcher_files.json_path(handle, env.origin)
    data = launcher_files.read_json(handle, env.origin)
    if data is None:
        # Unknown, but still read from there: a check depends on the file, and ``-v`` says
        # it could not be read (``Launcher.unread_files``).
        return Located(UNKNOWN, node, entry, path)
    return _from_json(data, node, entry, path)


def _from_json(data: Any, node: cst.CSTNode, entry: Optional[cst.CSTNode], source: str) -> Located:
    """A JSON value as the replay's values: dicts and lists of ``Located``, all pointing at
    the call that loaded the file (``source`` names the file)."""
    if isinstance(data, dict):
        items = {
            key: _from_json(value, node, entry, source)
            for key, value in data.items()
            if isinstance(key, str)
        }
        return Located(items, node, entry, source)
    if isinstance(data, list):
        return Located([_from_json(value, node, entry, source) for value in data], node, entry)
    return Located(data, node, entry, source)


def _call(node: cst.Call, env: _Names, entry: Optional[cst.CSTNode]) -> Optional[Located]:
    for form in (_dict_call, _dict_get, _loaded_json):
        found = form(node, env, entry)
        if found is not None:
            return found
    return None


def _sequence(
    node: Union[cst.List, cst.Tuple], env: _Names, entry: Optional[cst.CSTNode]
) -> Located:
    values = []
    for item in node.elements:
        if type(item) is cst.StarredElement:
            return Located(UNKNOWN, node, entry)
        values.append(_located(item.value, env))
    return Located(values, node, entry)


def _joined(
    node: cst.BinaryOperation, env: _Names, entry: Optional[cst.CSTNode]
) -> Optional[Located]:
    """``a + b`` over two known strings, with the literals joined; None for other operators."""
    if type(node.operator) is not cst.Add:
        return None
    left_located, right_located = _located(node.left, env), _located(node.right, env)
    left, right = left_located.plain(), right_located.plain()
    if isinstance(left, str) and isinstance(right, str):
        return Located(
            left + right,
            node,
            entry,
            pieces=_string_pieces(left_located) + _string_pieces(right_located),
        )
    return Located(UNKNOWN, node, entry)


def _subscript(node: cst.Subscript, env: _Names, entry: Optional[cst.CSTNode]) -> Optional[Located]:
    """``config["parameters"]`` of a known dict; None for ``path.parents[1]``, a path."""
    if _is_parents(node):
        return None
    found = _subscript_value(node, env)
    if found.value is UNKNOWN:
        return Located(UNKNOWN, node, entry, found.source_file)
    return _rebound(found, entry)


# ``hp["fp16"] > 0``, ``not flag``, ``a and b``, ``x if c else y`` over known values: launcher
# notebooks build the parameters from a hyperparameters dict this way
# (``"prescaled_batch": hp["prescaled_batch"] > 0``); anything not known stays UNKNOWN.


def _conditional(node: cst.IfExp, env: _Names, entry: Optional[cst.CSTNode]) -> Located:
    test = _truth(_located(node.test, env))
    if test is None:
        return Located(UNKNOWN, node, entry)
    return _located(node.body if test else node.orelse, env, entry)


def _negation(
    node: cst.UnaryOperation, env: _Names, entry: Optional[cst.CSTNode]
) -> Optional[Located]:
    """``not x``; None for ``-1``, left to ``literal_value``."""
    if type(node.operator) is not cst.Not:
        return None
    inner = _truth(_located(node.expression, env))
    return Located(UNKNOWN if inner is None else not inner, node, entry)


def _boolean(node: cst.BooleanOperation, env: _Names, entry: Optional[cst.CSTNode]) -> Located:
    left = _located(node.left, env)
    truth = _truth(left)
    if truth is None:
        return Located(UNKNOWN, node, entry)
    is_and = type(node.operator) is cst.And
    chosen = _located(node.right, env) if truth == is_and else left
    return Located(chosen.value, node, entry)


def _comparison(node: cst.Comparison, env: _Names, entry: Optional[cst.CSTNode]) -> Located:
    left_value = _located(node.left, env).plain()
    result = True
    for target in node.comparisons:
        right_value = _located(target.comparator, env).plain()
        if _unknowable(left_value) or _unknowable(right_value):
            return Located(UNKNOWN, node, entry)
        compared = _compare(target.operator, left_value, right_value)
        if compared is None:
            return Located(UNKNOWN, node, entry)
        result = result and compared
        left_value = right_value
    return Located(result, node, entry)


_FORMS: Mapping[type, Callable[[Any, _Names, Optional[cst.CSTNode]], Optional[Located]]] = {
    cst.Name: _name,
    cst.Dict: _dict_display,
    cst.Call: _call,
    cst.List: _sequence,
    cst.Tuple: _sequence,
    cst.BinaryOperation: _joined,
    cst.Subscript: _subscript,
    cst.Comparison: _comparison,
    cst.UnaryOperation: _negation,
    cst.BooleanOperation: _boolean,
    cst.IfExp: _conditional,
}


def _unknowable(value: Any) -> bool:
    return value is UNKNOWN or (isinstance(value, (dict, list)) and _contains_unknown(value))


def _contains_unknown(value: Any) -> bool:
    items = value.values() if isinstance(value, dict) else value
    return any(
        item is UNKNOWN or (isinstance(item, (dict, list)) and _contains_unknown(item))
        for item in items
    )


_COMPARE: Mapping[type, Callable[[Any, Any], bool]] = {
    cst.Equal: lambda a, b: bool(a == b),
    cst.NotEqual: lambda a, b: bool(a != b),
    cst.LessThan: lambda a, b: bool(a < b),
    cst.LessThanEqual: lambda a, b: bool(a <= b),
    cst.GreaterThan: lambda a, b: bool(a > b),
    cst.GreaterThanEqual: lambda a, b: bool(a >= b),
    cst.Is: lambda a, b: a is b if b is None or a is None else bool(a == b),
    cst.IsNot: lambda a, b: a is not b if b is None or a is None else bool(a != b),
    cst.In: lambda a, b: bool(a in b),
    cst.NotIn: lambda a, b: bool(a not in b),
}


def _compare(operator: cst.BaseCompOp, left: Any, right: Any) -> Optional[bool]:
    compare = _COMPARE.get(type(operator))
    if compare is None:
        return None
    try:
        return compare(left, right)
    except TypeError:
        return None


def _truth(located: Located) -> Optional[bool]:
    """Whether a known value is true; None when smpfix cannot know."""
    value = located.plain()
    if _unknowable(value):
        return None
    return bool(value)


def _string_pieces(located: Located) -> tuple[Located, ...]:
    """The literals a string value was joined from (itself, when it is one literal)."""
    return located.pieces or (located,)


def _assign_path(env: _Names, target: cst.BaseExpression, value: Located) -> None:
    """``name = v``, ``name["a"]["b"] = v``: update ``env`` (copy-on-write, values are frozen)."""
    if type(target) is cst.Name:
        env[target.value] = value
        return
    keys: list[Any] = []
    current: cst.BaseExpression = target
    while (
        type(current) is cst.Subscript
        and len(current.slice) == 1
        and type(current.slice[0].slice) is cst.Index
    ):
        keys.append(_located(current.slice[0].slice.value, env).plain())
        current = current.value
    if type(current) is not cst.Name or current.value not in env:
        return
    keys.reverse()
    if any(not isinstance(key, str) for key in keys):
        env[current.value] = Located(UNKNOWN, env[current.value].node)
        return
    env[current.value] = _set_in(env[current.value], keys, value)


def _set_in(container: Located, keys: list[str], value: Located) -> Located:
    if not isinstance(container.value, dict):
        return container
    items = dict(container.value)
    if len(keys) == 1:
        items[keys[0]] = value
    else:
        inner = items.get(keys[0])
        if inner is None:
            return container
        items[keys[0]] = _set_in(inner, keys[1:], value)
    return Located(items, container.node, container.entry, container.source_file)


def _update(env: _Names, call: cst.Call) -> None:
    """``name.update({...})`` / ``name["k"].update(...)`` before use."""
    func = call.func
    if type(func) is not cst.Attribute or func.attr.value != "update":
        return
    target = func.value
    current = _located(target, env) if type(target) is not cst.Subscript else None
    if type(target) is cst.Subscript:
        base: cst.BaseExpression = target
        keys = []
        while (
            type(base) is cst.Subscript
            and len(base.slice) == 1
            and type(base.slice[0].slice) is cst.Index
        ):
            keys.append(_located(base.slice[0].slice.value, env).plain())
            base = base.value
        if type(base) is not cst.Name or base.value not in env:
            return
        keys.reverse()
        current = env[base.value].path(*keys) if all(isinstance(k, str) for k in keys) else None
        if current is None:
            return
        merged = _merge_update(current, call, env)
        env[base.value] = _set_in(env[base.value], keys, merged)
        return
    if type(target) is cst.Name and target.value in env and current is not None:
        env[target.value] = _merge_update(current, call, env)


def _merge_update(current: Located, call: cst.Call, env: _Names) -> Located:
    if not isinstance(current.value, dict):
        return current
    items = dict(current.value)
    for arg in call.args:
        if arg.keyword is not None:
            items[arg.keyword.value] = _located(arg.value, env, arg)
        else:
            added = _located(arg.value, env)
            if not isinstance(added.value, dict):
                return Located(UNKNOWN, current.node, current.entry)
            items.update(added.value)
    return Located(items, current.node, current.entry, current.source_file)


@dataclass(frozen=True)
class _Bind:
    """A loop variable's value in one unrolled iteration of ``for k, v in known.items():``."""

    name: str
    value: Located


def _block(statement: Any) -> Any:
    block = statement.body
    return block.body if type(block) is cst.IndentedBlock else block.body


def _statements(
    body: Any, env: _Names, functions: list[Union[cst.FunctionDef, _Untaken]]
) -> Iterator[Any]:
    """Simple statements in execution order, entering ``if``/``with``/``try``; the functions
    defined (also as methods of a class) are added to ``functions``, to be replayed later.

    Lazy, so each test is read with the names as bound when it runs: an ``if`` (or ``elif``)
    whose test is known runs only its taken branch (launcher notebooks pick a model preset
    with ``if model_config == "gpt2-small":``); with an unknown test both the body and a
    plain ``else`` are replayed, in order. ``for k, v in d.items():`` over a dict whose keys
    are known is unrolled, yielding a ``_Bind`` for ``k`` and ``v`` before each iteration.
    A branch not taken that launches a job, itself or through the code after the ``if``, is
    added to ``functions`` as an offer (``_Untaken``).
    """
    statements = list(body)
    for index, statement in enumerate(statements):
        if type(statement) is cst.SimpleStatementLine:
            yield from statement.body
        elif type(statement) is cst.If:
            yield from _branch(statement, env, functions, tuple(statements[index + 1 :]))
        elif type(statement) is cst.For and (iterations := _items_loop(statement, env)) is not None:
            for bindings in iterations:
                yield from bindings
                yield from _statements(_block(statement), env, functions)
        elif type(statement) is cst.With:
            yield from _opened_files(statement, env)
            yield from _statements(_block(statement), env, functions)
        elif type(statement) in (cst.Try, cst.For, cst.While):
            yield from _statements(_block(statement), env, functions)
        elif type(statement) is cst.FunctionDef:
            functions.append(statement)
        elif type(statement) is cst.ClassDef:
            functions.extend(item for item in _block(statement) if type(item) is cst.FunctionDef)


def _opened_files(statement: cst.With, env: _Names) -> Iterator[_Bind]:
    """``with open("config.json") as f:``: ``f`` is that file, for ``json.load(f)``."""
    for item in statement.items:
        target = item.asname.name if item.asname is not None else None
        if type(target) is not cst.Name:
            continue
        handle = launcher_files.opened(item.item, lambda inner: _located(inner, env).plain())
        if handle is not None:
            yield _Bind(target.value, Located(handle, item.item))


@dataclass(frozen=True)
class _Untaken:
    """A branch the launcher's own values do not take, replayed after the code around it in
    a scope of its own: an estimator there is a job the code offers (``Launcher.untaken``).

    When the branch only prepares values (``distribution = {...}``) for an estimator built
    after the ``if``, ``continuation`` is the code after it and ``launches`` the ids of the
    estimator calls there that read what the branch wrote: the offer replays both, and only
    those calls are its launches (``smpfix.job.branch_offers``)."""

    block: Any
    test: str
    continuation: tuple[Any, ...] = ()
    launches: frozenset[int] = frozenset()


# The estimator classes by their last name, to tell a branch that may launch a job.
_ESTIMATOR_NAMES = frozenset(name.rsplit(".", 1)[-1] for name in ESTIMATORS)


def _constructs_estimator(statements: Any) -> bool:
    for statement in statements:
        for node in iter_nodes(statement):
            func = node.func if type(node) is cst.Call else None
            last = (
                func.value
                if type(func) is cst.Name
                else func.attr.value
                if type(func) is cst.Attribute
                else None
            )
            if last in _ESTIMATOR_NAMES:
                return True
    return False


def _test_text(test: cst.BaseExpression, negated: bool) -> str:
    code = " ".join(cst.Module([]).code_for_node(test).split())
    return f"not ({code})" if negated else code


def _untaken(
    statements: Any, test: cst.BaseExpression, negated: bool, continuation: tuple[Any, ...]
) -> Optional[_Untaken]:
    """The branch ``statements`` as an offer, when it constructs an estimator itself or an
    estimator in ``continuation`` reads a name it writes."""
    if _constructs_estimator(statements):
        return _Untaken(statements, _test_text(test, negated))
    launches = branch_offers.reading_estimators(statements, continuation, _ESTIMATOR_NAMES)
    if not launches:
        return None
    return _Untaken(statements, _test_text(test, negated), continuation, launches)


def _offer(
    functions: list[Union[cst.FunctionDef, _Untaken]],
    statements: Any,
    test: cst.BaseExpression,
    negated: bool,
    continuation: tuple[Any, ...],
) -> None:
    offer = _untaken(statements, test, negated, continuation)
    if offer is not None:
        functions.append(offer)


def _branch(
    statement: cst.If,
    env: _Names,
    functions: list[Union[cst.FunctionDef, _Untaken]],
    continuation: tuple[Any, ...] = (),
) -> Iterator[Any]:
    taken = _truth(_located(statement.test, env))
    orelse = statement.orelse
    if taken is not False:
        yield from _statements(_block(statement), env, functions)
    else:
        _offer(functions, _block(statement), statement.test, False, continuation)
    if taken is True:
        # Every later branch of the chain is one the values do not take: each is its own
        # offer (``elif hyperparameters.get("model_parallel"):``), named by its own test.
        test = statement.test
        while orelse is not None:
            if isinstance(orelse, cst.Else):
                _offer(functions, _block(orelse), test, True, continuation)
                break
            _offer(functions, _block(orelse), orelse.test, False, continuation)
            test, orelse = orelse.test, orelse.orelse
        return
    if orelse is None:
        return
    if isinstance(orelse, cst.Else):
        yield from _statements(_block(orelse), env, functions)
    else:
        # ``elif mode == "smp":`` after an unknown test may run too (a launcher there counts).
        yield from _branch(orelse, env, functions, continuation)


def _items_loop(statement: cst.For, env: _Names) -> Optional[list[tuple[_Bind, _Bind]]]:
    """The bindings of each iteration of ``for k, v in d.items():`` when ``d`` is a known dict."""
    target, iterable = statement.target, statement.iter
    if not (type(target) is cst.Tuple and len(target.elements) == 2):
        return None
    names = [element.value for element in target.elements]
    if not all(type(name) is cst.Name for name in names):
        return None
    if not (
        type(iterable) is cst.Call
        and not iterable.args
        and type(iterable.func) is cst.Attribute
        and iterable.func.attr.value == "items"
    ):
        return None
    mapping = _located(iterable.func.value, env)
    if not isinstance(mapping.value, dict):
        return None
    key_name, value_name = (name.value for name in names)  # type: ignore[attr-defined]
    return [
        (_Bind(key_name, Located(key)), _Bind(value_name, value))
        for key, value in mapping.value.items()
    ]


def _replay(
    module: cst.Module,
    imports: ImportTable,
    path: str,
    on_call: Callable[[cst.Call, _Names], None],
    attribute: Optional[Attribute] = None,
) -> None:
    """Run the module's statements over literal values, calling ``on_call`` for every call
    with the names as they are bound just before it; ``.update()`` calls take effect.

    ``__file__`` is the file's absolute path (a notebook has none). A function body is
    replayed after the code around it, as it runs when called (``main()`` at the end, a test
    function once the module is loaded): in a scope of its own over the module's final
    names, with its parameters unknown.
    """
    env = _Names(imports, origin=path, attribute=attribute)
    if not path.endswith(".ipynb"):
        env["__file__"] = Located(os.path.abspath(path))
    _replay_body(module.body, env, on_call)


def _replay_offer(
    offer: _Untaken, env: _Names, on_call: Callable[[cst.Call, _Names], None]
) -> None:
    """Replay an untaken branch in a scope of its own; with a continuation, replay the code
    after the ``if`` too, reporting only the estimator calls that read the branch's values
    (the functions and branches found there are the main replay's, not replayed again)."""
    scope = env.child(untaken=offer.test)
    if not offer.continuation:
        _replay_body(offer.block, scope, on_call)
        return

    def launches(call: cst.Call, names: _Names) -> None:
        if id(call) in offer.launches:
            on_call(call, names)

    _replay_body(tuple(offer.block) + offer.continuation, scope, launches, nested=False)


def _replay_body(
    body: Any, env: _Names, on_call: Callable[[cst.Call, _Names], None], nested: bool = True
) -> None:
    """Replay ``body``, then (when ``nested``) the functions and offers it defined."""
    functions: list[Union[cst.FunctionDef, _Untaken]] = []
    for node in _statements(body, env, functions):
        if isinstance(node, _Bind):
            env[node.name] = node.value
            continue
        for call in _calls_in(node):
            on_call(call, env)
            if type(call.func) is cst.Attribute and call.func.attr.value == "update":
                _update(env, call)
        if type(node) is cst.Assign:
            value = _located(node.value, env)
            for target in node.targets:
                _assign_path(env, target.target, value)
        elif type(node) is cst.AnnAssign and node.value is not None:
            _assign_path(env, node.target, _located(node.value, env))
        elif type(node) is cst.AugAssign and type(node.operator) is cst.AddAssign:
            current = (
                _located(node.target, env)
                if type(node.target) is cst.Name
                else _subscript_value(node.target, env)
            )
            added_located = _located(node.value, env)
            added = added_located.plain()
            joined = isinstance(current.plain(), str) and isinstance(added, str)
            combined = current.plain() + added if joined else UNKNOWN
            pieces = _string_pieces(current) + _string_pieces(added_located) if joined else ()
            _assign_path(
                env, node.target, Located(combined, node.value, current.entry, pieces=pieces)
            )
    if not nested:
        return
    for function in functions:
        if isinstance(function, _Untaken):
            _replay_offer(function, env, on_call)
            continue
        for bound, variant in _parametrized(function, env):
            scope = env.child(variant)
            for param in _parameters(function.params):
                scope[param.name.value] = bound.get(param.name.value, Located(UNKNOWN, param))
            _replay_body(_block(function), scope, on_call)


# At most this many launches of one parametrized test are replayed (the first ones).
_MOST_VARIANTS = 32


def _parametrized(function: cst.FunctionDef, env: _Names) -> list[tuple[dict[str, Located], str]]:
    """The parameter values of each test ``@pytest.mark.parametrize`` makes of ``function``,
    with pytest's id for it; one unbound run for a function that is not parametrized (or whose
    values smpfix cannot read). Stacked decorators multiply, nearest the function first."""
    runs: list[tuple[dict[str, Located], list[str]]] = [({}, [])]
    for decorator in reversed(function.decorators):
        table = _parametrize_table(decorator.decorator, env)
        if table is None:
            continue
        runs = [({**bound, **more}, [*ids, id_]) for bound, ids in runs for more, id_ in table][
            :_MOST_VARIANTS
        ]
    return [(bound, "-".join(ids)) for bound, ids in runs]


def _parametrize_table(
    node: cst.BaseExpression, env: _Names
) -> Optional[list[tuple[dict[str, Located], str]]]:
    """``pytest.mark.parametrize("script, processes", [("a.py", 8), ...])``: each row's
    bindings and id; None for another decorator or values smpfix cannot read."""
    if type(node) is not cst.Call or len(node.args) < 2:
        return None
    qualified = env.imports.qualified_name(node.func) or ""
    if not qualified.endswith("mark.parametrize"):
        return None
    names = _located(node.args[0].value, env).plain()
    if isinstance(names, str):
        names = [name.strip() for name in names.split(",") if name.strip()]
    rows = _located(node.args[1].value, env)
    if not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        return None
    if not isinstance(rows.value, list):
        return None
    table = []
    for index, row in enumerate(rows.value):
        row = _pytest_param(row, env)
        values = [row] if len(names) == 1 else row.value
        if not isinstance(values, list) or len(values) != len(names):
            return None
        ids = [
            str(value.plain())
            if isinstance(value.plain(), (str, int, float, bool))
            else f"{name}{index}"
            for name, value in zip(names, values)
        ]
        table.append((dict(zip(names, values)), "-".join(ids)))
    return table


def _pytest_param(row: Located, env: _Names) -> Located:
    """``pytest.param(a, b, marks=...)`` as the row ``(a, b)``; any other row as it is."""
    call = row.node
    if type(call) is not cst.Call:
        return row
    qualified = env.imports.qualified_name(call.func) or ""
    if not qualified.endswith("pytest.param"):
        return row
    values = [_located(arg.value, env) for arg in call.args if arg.keyword is None and not arg.star]
    return Located(values if len(values) != 1 else values[0].value, call)


def _parameters(params: cst.Parameters) -> list[cst.Param]:
    found = [*params.posonly_params, *params.params, *params.kwonly_params]
    for star in (params.star_arg, params.star_kwarg):
        if type(star) is cst.Param:
            found.append(star)
    return found


def find_launchers(module: cst.Module, imports: ImportTable, path: str) -> list[Launcher]:
    """Every estimator construction in ``module``, with its keywords resolved in order."""
    found: list[Launcher] = []
    handed: set[tuple[int, str]] = set()

    def on_call(call: cst.Call, env: _Names) -> None:
        qualified = imports.qualified_name(call.func) or ""
        if qualified in ESTIMATORS:
            found.append(_launcher(call, qualified, env, path))
            return
        for given in _estimator_arguments(call, env):
            # One launch per dict and parametrized run, at the first call it is handed to.
            key = (id(given.node), env.variant)
            if key not in handed:
                handed.add(key)
                found.append(_launcher_of_dict(call, given, env, path))

    _replay(module, imports, path, on_call)
    return found


def replay_calls(
    module: cst.Module,
    imports: ImportTable,
    path: str,
    on_call: Callable[[cst.Call, Callable[[cst.BaseExpression], Located]], None],
) -> None:
    """Every call the launcher's replay runs, with the value of any expression as the file has
    built it just before the call (``smpfix.job.command_launches`` reads commands this way)."""
    _replay(
        module, imports, path, lambda call, env: on_call(call, lambda node: _located(node, env))
    )


def _estimator_arguments(call: cst.Call, env: _Names) -> Iterator[Located]:
    """The estimator keyword dicts handed to a helper that builds the estimator, as the
    SageMaker container tests do (``_test_smp(image, session, estimator_parameter)`` and
    ``PyTorch(..., **estimator_parameter)`` in another function or module): a dict display
    with an ``entry_point`` and a ``distribution``."""
    for arg in call.args:
        if arg.star or type(arg.value) not in (cst.Name, cst.Dict):
            continue
        given = _located(arg.value, env)
        if (
            isinstance(given.value, dict)
            and "entry_point" in given.value
            and "distribution" in given.value
        ):
            yield given


def _launcher_of_dict(call: cst.Call, given: Located, env: _Names, path: str) -> Launcher:
    """The launch a helper call makes from an estimator keyword dict: a TensorFlow estimator
    when the helper's name says so, else PyTorch (the script's flavour decides its job)."""
    name = env.imports.qualified_name(call.func) or ""
    estimator = (
        "sagemaker.tensorflow.TensorFlow"
        if "tensorflow" in name.lower()
        else "sagemaker.pytorch.PyTorch"
    )
    keywords = {_OLD_NAMES.get(key, key): value for key, value in given.value.items()}
    return _with_parameters_file(
        Launcher(call, estimator, keywords, path, variant=env.variant, untaken=env.untaken)
    )


def evaluate_argument(
    module: cst.Module,
    imports: ImportTable,
    target: cst.Call,
    path: str = "",
    attribute: Optional[Attribute] = None,
) -> Optional[Located]:
    """The first argument (or ``config=``) of ``target`` as the file has built it by then;
    ``attribute`` gives the values of attributes the file does not bind (``args.config``)."""
    found: list[Located] = []

    def on_call(call: cst.Call, env: _Names) -> None:
        if call is target:
            for arg in call.args:
                if (
                    arg.keyword is None
                    and not arg.star
                    or (arg.keyword is not None and arg.keyword.value == "config")
                ):
                    found.append(_located(arg.value, env))
                    return

    _replay(module, imports, path, on_call, attribute)
    return found[0] if found else None


def _subscript_value(target: cst.BaseExpression, env: _Names) -> Located:
    keys = []
    base = target
    while (
        type(base) is cst.Subscript
        and len(base.slice) == 1
        and type(base.slice[0].slice) is cst.Index
    ):
        keys.append(_located(base.slice[0].slice.value, env).plain())
        base = base.value
    if type(base) is cst.Name and base.value in env and all(isinstance(k, str) for k in keys):
        found = env[base.value].path(*reversed(keys))
        if found is not None:
            return found
        # A key of a file that could not be read is unknown, and still comes from that file.
        return Located(UNKNOWN, source_file=env[base.value].source_file)
    return Located(UNKNOWN)


def _calls_in(node: cst.CSTNode) -> list[cst.Call]:
    from smpfix.base.walker import nodes_of_type

    return nodes_of_type(node, cst.Call)


def _launcher(call: cst.Call, qualified: str, env: _Names, path: str) -> Launcher:
    keywords: dict[str, Located] = {}
    positional = _POSITIONAL.get(qualified.rsplit(".", 1)[-1], ())
    position = 0
    for arg in call.args:
        if arg.keyword is None:
            if arg.star == "**":
                merged = _located(arg.value, env)
                if isinstance(merged.value, dict):
                    keywords.update(
                        {
                            _OLD_NAMES.get(str(key), str(key)): value
                            for key, value in merged.value.items()
                        }
                    )
            elif not arg.star and position < len(positional):
                # `PyTorch("train.py", role=...)`: the entry point given by position.
                keywords[positional[position]] = _located(arg.value, env, arg)
                position += 1
            continue
        name = _OLD_NAMES.get(arg.keyword.value, arg.keyword.value)
        keywords[name] = _located(arg.value, env, arg)
    return _with_parameters_file(
        Launcher(call, qualified, keywords, path, variant=env.variant, untaken=env.untaken)
    )


def _with_parameters_file(launcher: Launcher) -> Launcher:
    """``launcher`` with the JSON file its ``parameters`` names read in (or why not)."""
    parameters = launcher.parameters
    if parameters is None or not isinstance(parameters.value, str):
        return launcher
    keywords = dict(launcher.keywords)
    refusal = None
    try:
        loaded = _json_parameters(parameters, launcher.path)
    except RefusedFile as refused:
        loaded, refusal = None, f"parameters file {parameters.value!r}: {refused.message}"
    if loaded is not None:
        keywords["distribution"] = _set_in(
            keywords["distribution"], ["smdistributed", "modelparallel", "parameters"], loaded
        )
    return Launcher(
        launcher.call,
        launcher.estimator,
        keywords,
        launcher.path,
        refusal,
        launcher.variant,
        launcher.untaken,
    )


def _json_parameters(written: Located, launcher_path: str) -> Optional[Located]:
    """``"parameters": "smp_config.json"``: the file's values, when it exists next to the launcher.

    Findings about a value from the file point at the ``"parameters"`` entry that names it.
    Only a regular file inside the launcher's project, of at most ``JSON_LIMIT`` bytes, is
    read (``RefusedFile`` otherwise): a launcher may name ``/dev/zero`` or a FIFO.
    """
    candidate = _json_path(str(written.value), launcher_path)
    try:
        raw = read_regular(
            candidate, JSON_LIMIT, inside=project_folder(project_root(launcher_path), launcher_path)
        )
    except RefusedFile:
        raise
    except OSError:
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    anchor = written.anchor
    values = {k: Located(v, None, anchor, candidate) for k, v in data.items() if isinstance(k, str)}
    return Located(values, written.node, written.entry, candidate)


def _json_path(value: str, launcher_path: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(launcher_path)), value)
