"""What ``smp.DistributedModel(...)`` wraps: the call that built the model, and its class.

Rules that look inside the user's model (its ``forward``, its Hugging Face config) start
from a ``Wrap`` in the facts and need the construction behind it, which scripts write in a
few ways: ``smp.DistributedModel(GPT(cfg))``; ``model = GPT(cfg)`` (often inside
``with smp.model_creation(...):``) then ``smp.DistributedModel(model)``;
``GPT(cfg).to(device)``; or a builder in the same file, ``def build(): return GPT(cfg)`` (each
of its returns), also
one that returns the model with other objects (``model, size = build()`` where ``build``
ends in ``return net, 224``: the element the name unpacks is followed).
The class itself may live in the script or, imported with ``from model import GPT``, in
another file of the checked paths (resolved through ``LocalModules``; nothing outside the
checked paths is read). Anything else (a factory from another library, a value passed in
from elsewhere) resolves to None: callers then stay quiet rather than guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.calls import target_path
from smpfix.base.parents import CodeScope
from smpfix.program.facts import FileFacts, Wrap
from smpfix.program.names import Assignment
from smpfix.program.project.local_modules import LocalModules
from smpfix.program.project.parsed_file import ParsedFile
from smpfix.program.steps import own_nodes

# Methods that return the module they are called on: `GPT(cfg).cuda()` is still a GPT.
_SAME_MODULE_METHODS = frozenset(
    {"to", "cuda", "cpu", "half", "float", "double", "bfloat16", "train", "requires_grad_"}
)
# Class methods that build an instance of the class they are called on (Hugging Face style).
_ALTERNATE_CONSTRUCTORS = frozenset({"from_pretrained", "from_config", "_from_config"})
_MAX_DEPTH = 6


@dataclass(frozen=True)
class Construction:
    """The call that built the wrapped model, and the function (or module) it runs in."""

    call: cst.Call
    scope: CodeScope


@dataclass(frozen=True)
class ModelClass:
    """A class definition, in the checked file (``linked`` None) or in another project file."""

    name: str
    node: cst.ClassDef
    module: cst.Module
    facts: FileFacts
    linked: Optional[ParsedFile] = None

    def code_for(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)


def reaching_assignments(facts: FileFacts, use: cst.Name) -> tuple[Assignment, ...]:
    """The plain assignments whose value the name ``use`` may hold where it stands, last first
    (``Names.reaching``: both sides of a branch reach, a later assignment replaces an earlier
    one, a function that never binds the name sees the module's)."""
    return tuple(reversed(facts.names.reaching(use.value, use).assignments))


def latest_assignment(facts: FileFacts, use: cst.Name) -> Optional[Assignment]:
    """The last plain assignment whose value the name ``use`` may hold where it stands."""
    found = reaching_assignments(facts, use)
    return found[0] if found else None


def wrapped_constructions(facts: FileFacts, wrap: Wrap) -> tuple[Construction, ...]:
    """The constructions behind ``smp.DistributedModel(<argument>)`` the file shows (maybe
    several)."""
    if wrap.argument is None or wrap.where is None:
        return ()
    return constructions(facts, wrap.argument, wrap.where.scope)


def constructions(
    facts: FileFacts,
    expr: cst.BaseExpression,
    scope: CodeScope,
    depth: int = 0,
    element: tuple[int, ...] = (),
) -> tuple[Construction, ...]:
    """Follow names, ``.to(...)``-like calls and local builder functions to constructor calls;
    ``element``: the position, in the tuple ``expr`` gives, of the value wanted (``(0,)`` for
    ``model`` in ``model, opt = build()``)."""
    if depth > _MAX_DEPTH:
        return ()
    if element and (type(expr) is cst.Tuple or type(expr) is cst.List):
        if element[0] >= len(expr.elements):
            return ()
        item = expr.elements[element[0]]
        if type(item) is cst.StarredElement or any(
            type(before) is cst.StarredElement for before in expr.elements[: element[0]]
        ):
            return ()
        return constructions(facts, item.value, scope, depth + 1, element[1:])
    if type(expr) is cst.Call:
        func = expr.func
        if (
            type(func) is cst.Name
            and func.value in facts.functions
            and func.value not in facts.classes
        ):
            return _built_by(facts, facts.functions[func.value], depth + 1, element)
        if element:
            # A builder smpfix does not read here (one imported from another project file):
            # its call built the model, as a single value's would.
            return (Construction(expr, scope),)
        if type(func) is cst.Attribute and func.attr.value in _SAME_MODULE_METHODS:
            return constructions(facts, func.value, scope, depth + 1)
        return (Construction(expr, scope),)
    found: list[Construction] = []
    if type(expr) is cst.Name:
        reaching = facts.names.reaching(expr.value, expr)
        sources: list[tuple[cst.BaseExpression, CodeScope, tuple[int, ...]]] = [
            (assignment.value, assignment.where.scope, element)
            for assignment in reversed(reaching.assignments)
            if assignment.where is not None
        ]
        sources.extend(_unpacked(facts, reaching.others, expr, element))
        for value, where, position in sources:
            for built in constructions(facts, value, where, depth + 1, position):
                if all(built.call is not seen.call for seen in found):
                    found.append(built)
    return tuple(found)


def _unpacked(
    facts: FileFacts, others: Sequence[cst.CSTNode], use: cst.Name, element: tuple[int, ...]
) -> list[tuple[cst.BaseExpression, CodeScope, tuple[int, ...]]]:
    """The unpacking assignments among ``others`` that bind ``use``'s name by position
    (``model, size = build()``), as the value and the position in it the name takes."""
    found = []
    for other in others:
        if type(other) is not cst.Assign:
            continue
        for target in other.targets:
            path = target_path(target.target, use.value)
            if path:
                found.append((other.value, facts.names.scope_of(other), path + element))
                break
    return found


def _built_by(
    facts: FileFacts, function: cst.FunctionDef, depth: int, element: tuple[int, ...] = ()
) -> tuple[Construction, ...]:
    """A builder function's model: what each of its ``return`` values builds, followed like
    any expression (``if args.arch == "resnet": return build_resnet(n)`` ... ``return
    build_vit(n)`` builds either)."""
    found: list[Construction] = []
    for node in own_nodes(function):
        if type(node) is not cst.Return or node.value is None:
            continue
        for built in constructions(facts, node.value, function, depth, element):
            if all(built.call is not seen.call for seen in found):
                found.append(built)
    return tuple(found)


def model_class(
    file: ParsedFile, call: cst.Call, modules: Optional[LocalModules]
) -> Optional[ModelClass]:
    """The class ``call`` instantiates: defined in this file, or in a project file it imports.

    ``GPT.from_pretrained(...)`` and ``GPT.from_config(...)`` build a ``GPT`` too.
    """
    facts = file.facts
    func = call.func
    if type(func) is cst.Attribute and func.attr.value in _ALTERNATE_CONSTRUCTORS:
        func = func.value
    if (
        type(func) is cst.Name
        and func.value in facts.classes
        and func.value not in facts.imports.bindings
    ):
        return ModelClass(func.value, facts.classes[func.value], file.module, facts)
    return _imported_class(facts, func, modules)


def _imported_class(
    facts: FileFacts, expr: cst.BaseExpression, modules: Optional[LocalModules]
) -> Optional[ModelClass]:
    qualified = facts.qualified_name(expr)
    if qualified is None or modules is None:
        return None
    found = modules.definition(qualified)
    if found is None:
        return None
    linked, name = found
    node = linked.facts.classes.get(name)
    if node is None:
        return None
    return ModelClass(name, node, linked.module, linked.facts, linked)


def find_method(
    cls: ModelClass, name: str, modules: Optional[LocalModules], depth: int = 0
) -> Optional[tuple[ModelClass, cst.FunctionDef]]:
    """The method ``name`` of ``cls``, or of a base class defined in the project.

    Bases from other libraries (``nn.Module``, ``PreTrainedModel``) end the search: what they
    define is not the user's code.
    """
    for statement in cls.node.body.body:
        if type(statement) is cst.FunctionDef and statement.name.value == name:
            return cls, statement
    if depth >= _MAX_DEPTH:
        return None
    for base in cls.node.bases:
        parent = _base_class(cls, base.value, modules)
        if parent is not None and parent.node is not cls.node:
            found = find_method(parent, name, modules, depth + 1)
            if found is not None:
                return found
    return None


def _base_class(
    cls: ModelClass, expr: cst.BaseExpression, modules: Optional[LocalModules]
) -> Optional[ModelClass]:
    if (
        type(expr) is cst.Name
        and expr.value in cls.facts.classes
        and expr.value not in cls.facts.imports.bindings
    ):
        return ModelClass(
            expr.value, cls.facts.classes[expr.value], cls.module, cls.facts, cls.linked
        )
    if modules is None:
        return None
    if cls.linked is not None:
        # The base's import is written relative to the file that holds the class.
        modules = modules.for_importer(cls.linked.path)
    return _imported_class(cls.facts, expr, modules)
