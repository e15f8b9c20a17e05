"""Which rank and size calls an expression reads: directly, through names, or through helpers.

Data rules ask which rank group a dataset shard or a data RNG seed follows
(``files[smp.rank()::smp.size()]``, ``random.seed(args.seed + get_rank())``); this finds the
calls behind an expression, also through a name assigned once and through the project's own
rank helpers (``utils.get_rank()``). Whether that group is right for the job is
``smpfix.job.groups``'s question; rewriting the calls is ``smpfix.fixes.rank_rewrites``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.walker import children, iter_nodes
from smpfix.job.groups import family_of
from smpfix.program.facts import RANK_FUNCTIONS, SIZE_FUNCTIONS, FileFacts
from smpfix.program.project.local_modules import LocalModules
from smpfix.program.steps import own_nodes

# torch.distributed is initialised by SMP over every rank (with ``ddp``), so these are the
# global rank and world size.
_TORCH_DISTRIBUTED = {
    "torch.distributed.get_rank": "rank",
    "torch.distributed.get_world_size": "size",
}


# The tests an ``if``/``elif`` chain needs for a branch to run, with the truth each must have.
Branch = tuple[tuple[cst.BaseExpression, bool], ...]


@dataclass(frozen=True)
class RankTerm:
    """One rank or size call an expression depends on.

    ``node`` is what stands for it in the expression: the call itself, or a variable
    assigned from it. ``exact`` says that ``node`` *is* the bare call (directly or through a
    variable holding just that call), so replacing ``node`` by another rank call is a
    faithful rewrite.
    """

    member: str
    node: cst.BaseExpression
    call: cst.Call
    exact: bool
    from_library: bool
    # Read through a helper of the project (``utils.get_rank()``), not a library call.
    helper: bool = False
    # For an attribute the project sets in branches (``if args.smp: args.rank = smp.rank()
    # elif args.hvd: args.rank = hvd.rank()``): the branches whose assignments hold this
    # term, each as the tests it needs and their truth; the term holds when one of them runs.
    # Empty: it holds on every path (``rank_terms(..., branches=True)`` only).
    branches: tuple[Branch, ...] = ()

    @property
    def family(self) -> str:
        return family_of(self.member)

    @property
    def is_rank(self) -> bool:
        return self.member in RANK_FUNCTIONS


def _rank_member(call: cst.Call, facts: FileFacts) -> Optional[tuple[str, bool]]:
    if call.args:
        return None
    member = facts.smp_member(call.func)
    if member in RANK_FUNCTIONS or member in SIZE_FUNCTIONS:
        return member, True
    qualified = facts.qualified_name(call.func)
    if qualified in _TORCH_DISTRIBUTED:
        return _TORCH_DISTRIBUTED[qualified], False
    return None


def rank_terms(
    expr: cst.CSTNode,
    facts: FileFacts,
    depth: int = 0,
    modules: Optional[LocalModules] = None,
    branches: bool = False,
) -> list[RankTerm]:
    """Every rank/size call ``expr`` reads, also through names assigned once in the file and
    through rank helpers (``utils.get_rank()``, see ``helper_member``) defined in the file or in
    a project module it imports (``modules``). With ``branches``, also an attribute set to a
    rank in one branch of an ``if`` and to something else in the others (``RankTerm.branches``
    says where; the caller decides which branch the job takes)."""
    found: list[RankTerm] = []
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        if type(node) is cst.Call:
            member = _rank_member(node, facts)
            if member is not None:
                found.append(RankTerm(member[0], node, node, True, member[1]))
                continue
            helper = helper_member(node, facts, modules) if depth < 3 else None
            if helper is not None:
                # Not exact: the helper may do more than call the library (a fallback off SMP).
                found.append(RankTerm(helper, node, node, False, False, helper=True))
                continue
        if type(node) is cst.Name and depth < 3:
            assignment = facts.names.assignment(node.value, node)
            if assignment is not None and assignment.value is not node:
                value = assignment.value
                for term in rank_terms(value, facts, depth + 1, modules, branches):
                    exact = term.exact and term.node is value
                    found.append(
                        RankTerm(
                            term.member,
                            node,
                            term.call,
                            exact,
                            term.from_library,
                            term.helper,
                            term.branches,
                        )
                    )
            continue
        if type(node) is cst.Attribute:
            held = attribute_terms(node, facts, depth, modules, branches) if depth < 3 else []
            if held:
                found.extend(held)
            else:
                stack.append(node.value)
            continue
        if type(node) is cst.Arg:
            stack.append(node.value)
            continue
        if type(node) is cst.Lambda or type(node) is cst.FunctionDef:
            continue
        stack.extend(children(node))
    return found


def _attribute_sources(
    node: cst.Attribute, facts: FileFacts, modules: Optional[LocalModules]
) -> Optional[tuple[tuple[str, str], list[tuple[FileFacts, Optional[LocalModules]]]]]:
    """``(owner, attribute)`` of ``args.rank``, and the files whose assignments to it count:
    this one and the project modules it imports (the owner matched by name); None for an
    attribute of anything but a name."""
    owner = node.value
    if type(owner) is not cst.Name:
        return None
    sources: list[tuple[FileFacts, Optional[LocalModules]]] = [(facts, modules)]
    if modules is not None:
        sources.extend(
            (linked.facts, modules.for_importer(linked.path))
            for linked in modules.imported_modules(facts)
        )
    return (owner.value, node.attr.value), sources


def attribute_terms(
    node: cst.Attribute,
    facts: FileFacts,
    depth: int,
    modules: Optional[LocalModules],
    branches: bool = False,
) -> list[RankTerm]:
    """``args.rank`` where every assignment of ``args.rank``, in this file or in the project
    modules it imports (``init_distributed(args)`` setting ``args.rank = smp.rank()``), holds
    calls of one rank or size function; not exact, so no rewrite reaches into the attribute.

    With ``branches``, assignments that read no rank may sit in other branches of the ``if``
    that holds the rank's (``elif args.hvd: args.rank = hvd.rank()``): the term then names the
    branches it holds in."""
    found_key = _attribute_sources(node, facts, modules)
    if found_key is None:
        return []
    key, sources = found_key
    terms: list[RankTerm] = []
    ranked: list[Branch] = []
    others: list[Branch] = []
    for home, resolver in sources:
        for value in home.owned_attribute_assignments.get(key, ()):
            if value is None:  # ``args.rank += 1``: not one plain value
                return []
            inner = rank_terms(value, home, depth + 1, resolver)
            if inner:
                terms.extend(inner)
                if branches:
                    ranked.append(_branch_of(value, home))
                continue
            if not branches:
                return []
            others.append(_branch_of(value, home))
    if not terms or len({term.member for term in terms}) != 1:
        return []
    held: tuple[Branch, ...] = ()
    if others:
        if not all(_exclusive(one, other) for one in ranked for other in others):
            return []
        held = tuple(ranked)
    first = terms[0]
    return [RankTerm(first.member, node, first.call, False, first.from_library, first.helper, held)]


def _branch_of(value: cst.BaseExpression, home: FileFacts) -> Branch:
    """The tests of the ``if``/``elif``/``else`` chains around ``value`` in its function,
    outermost first, with the truth each needs for ``value`` to be assigned."""
    found: list[tuple[cst.BaseExpression, bool]] = []
    child: cst.CSTNode = value
    for ancestor in home.names.index.ancestors(value):
        if type(ancestor) is cst.If:
            if child is ancestor.body:
                found.append((ancestor.test, True))
            elif child is ancestor.orelse:
                found.append((ancestor.test, False))
        elif type(ancestor) in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            break
        child = ancestor
    return tuple(reversed(found))


def _exclusive(one: Branch, other: Branch) -> bool:
    """Whether two branches never both run: they take opposite sides of one test."""
    return any(
        test is other_test and truth != other_truth
        for test, truth in one
        for other_test, other_truth in other
    )


def helper_member(
    call: cst.Call, facts: FileFacts, modules: Optional[LocalModules] = None, depth: int = 0
) -> Optional[str]:
    """``"rank"`` for ``get_rank()``, a helper of the project whose every return is one rank
    call (or size call) of one family, or a constant fallback for runs without SMP.

    Training code wraps the rank in helpers that also work without a process group (the BERT
    example's ``utils.get_rank()`` returns ``smp.rank()``, ``dist.get_rank()`` or ``0``); the
    helper is found in this file or, through ``modules``, in a project module it imports.
    """
    if call.args or depth > 2:
        return None
    found = helper_function(call, facts, modules)
    if found is None:
        return None
    function, home = found
    members: set[str] = set()
    for node in own_nodes(function):
        if type(node) is not cst.Return:  # exact type: isinstance against a LibCST class is slow
            continue
        value = node.value
        if value is None:
            return None
        if type(value) is cst.Integer:
            continue
        if type(value) is cst.Name:
            assignment = home.names.assignment(value.value, value)
            value = assignment.value if assignment is not None else value
        if type(value) is not cst.Call:
            return None
        member = _rank_member(value, home)
        inner = member[0] if member is not None else helper_member(value, home, modules, depth + 1)
        if inner is None:
            return None
        members.add(inner)
    if (
        len({family_of(m) for m in members}) != 1
        or len({m in RANK_FUNCTIONS for m in members}) != 1
    ):
        return None
    return sorted(members)[0]


def helper_function(
    call: cst.Call, facts: FileFacts, modules: Optional[LocalModules]
) -> Optional[tuple[cst.FunctionDef, FileFacts]]:
    """The project function ``call`` calls, with the facts of its file: defined in this file or,
    through ``modules``, imported from a project module (never the library's or torch's)."""
    func = call.func
    if type(func) is cst.Name and func.value not in facts.imports.bindings:
        function = facts.functions.get(func.value)
        return (function, facts) if function is not None else None
    qualified = facts.qualified_name(func)
    if qualified is None or modules is None or qualified.startswith(("smdistributed.", "torch.")):
        return None
    definition = modules.definition(qualified)
    if definition is None:
        return None
    linked, name = definition
    function = linked.facts.functions.get(name)
    return (function, linked.facts) if function is not None else None


def initialised_attribute_terms(
    node: cst.Attribute, facts: FileFacts, modules: Optional[LocalModules] = None
) -> list[RankTerm]:
    """``args.rank`` as the library's initialisation leaves it: the project assigns it one
    rank query in the statements that follow an ``smp.init(...)`` in that call's own block
    (``smp.init(config)`` then ``args.rank = smp.rank()``), in this file or a project module it
    imports (the owner matched by name, as ``attribute_terms`` does).

    Every run that initialises the library there runs those statements, so from then on the
    attribute holds that rank, whatever it held before (``args.rank = 0`` as a default) and
    whatever the branches that set up other back ends (Horovod, ``torchrun``) assign, since
    they do not initialise the library. Empty when a later statement of that block may assign
    the attribute something else. The caller checks that the read comes after the
    initialisation."""
    found_key = _attribute_sources(node, facts, modules)
    if found_key is None:
        return []
    key, sources = found_key
    found: list[RankTerm] = []
    for home, resolver in sources:
        for init in home.smp_init_calls:
            value = _assigned_after(init, key, home)
            if value is None:
                continue
            terms = [term for term in rank_terms(value, home, 1, resolver) if term.is_rank]
            if len({term.member for term in terms}) != 1:
                continue
            first = terms[0]
            found.append(
                RankTerm(first.member, node, first.call, False, first.from_library, first.helper)
            )
    return found


def _assigned_after(
    init: cst.Call, key: tuple[str, str], home: FileFacts
) -> Optional[cst.BaseExpression]:
    """The value the statements after ``init`` in its block last assign ``owner.attribute``
    (``key``), when that is one plain assignment at the block's own level and no nested
    statement after it assigns the attribute again; else None."""
    statement: Optional[cst.SimpleStatementLine] = None
    block: Optional[cst.CSTNode] = None
    for ancestor in home.names.index.ancestors(init):
        if statement is not None:
            block = ancestor
            break
        if isinstance(ancestor, cst.SimpleStatementLine):
            statement = ancestor
        elif type(ancestor) in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            return None
    if statement is None or not isinstance(block, (cst.IndentedBlock, cst.Module)):
        return None
    body: list[cst.CSTNode] = list(block.body)
    value: Optional[cst.BaseExpression] = None
    for later in body[body.index(statement) + 1 :]:
        if type(later) is cst.SimpleStatementLine:
            for small in later.body:
                assigned = _plain_assignment(small, key)
                if assigned is _OTHER:
                    return None
                if assigned is not None:
                    value = assigned  # type: ignore[assignment]
        elif any(_plain_assignment(inner, key) is not None for inner in iter_nodes(later)):
            # A nested statement may set it again on some paths.
            return None
    return value


# An assignment of the attribute that is not one plain value (``args.rank += 1``, a tuple).
_OTHER = object()


def _plain_assignment(node: cst.CSTNode, key: tuple[str, str]) -> object:
    """``node``'s value when it assigns ``owner.attribute`` alone, ``_OTHER`` when it assigns
    it some other way, None when it does not assign it."""
    if type(node) is cst.Assign:
        targets = [target.target for target in node.targets]
        value: Optional[cst.BaseExpression] = node.value
    elif type(node) in (cst.AugAssign, cst.AnnAssign):
        targets = [node.target]  # type: ignore[attr-defined]
        value = None
    else:
        return None
    parts = [
        part
        for target in targets
        for part in (
            [element.value for element in target.elements]
            if type(target) is cst.Tuple
            else [target]
        )
    ]
    if not any(_is_attribute(part, key) for part in parts):
        return None
    if len(targets) != 1 or type(targets[0]) is cst.Tuple or value is None:
        return _OTHER
    return value


def _is_attribute(node: cst.CSTNode, key: tuple[str, str]) -> bool:
    return (
        type(node) is cst.Attribute
        and type(node.value) is cst.Name
        and (node.value.value, node.attr.value) == key
    )
