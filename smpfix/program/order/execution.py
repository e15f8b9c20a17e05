"""The order a training script's calls run in, from the top of the file: "does this run before
that, on one path?", "can both run in one process?".

Several rules are about order across functions: ``smp.tensor_parallelism()`` at module level
with ``smp.init()`` inside ``main()``, ``smp.DistributedOptimizer`` in a helper called before
the one that builds the ``smp.DistributedModel``, two ``smp.DistributedModel`` calls in the
``train()`` and ``evaluate()`` that ``main()`` calls. Source order within one function does not
answer these; this module replays the file as Python runs it:

- the module's statements in order (a ``def`` runs nothing), with calls in evaluation order
  (arguments before the call they are passed to);
- a call of a function defined in the file (at module level, or nested in the function being
  followed), of a local class (its ``__init__``), or of a step function's name, is followed
  into its body, up to ``MAX_DEPTH`` calls deep and never recursively; a call that is not
  followed is recorded with the function it would run (``Run.opaque``);
- each call carries the sides of the branches it sits on (``if``/``else`` arms, ``elif``,
  conditional expressions, ``try`` bodies and handlers, ``match`` cases), including the code
  after ``if cond: return`` (the ``else`` side of that ``if``), and whether a loop repeats it.

A function of the module that nothing in the file calls (``main`` run by another script, by
``fire.Fire(main)`` or a test harness) is an *entry point*: it is replayed once after the
module's code, each entry point on its own side of one branch, so that rules counting what
one run does (two ``smp.DistributedModel`` calls in a GAN's ``main``) see it.

Two runs are *exclusive* when they sit on different sides of one branch: both cannot happen in
one run of the script. Everything else is an over-approximation that keeps rules quiet rather
than guessing: calls through attributes (``self.build()``), functions of other modules and
functions passed around are not followed where they are passed, and code that neither the top
of the file nor an entry point reaches (a method nothing in the file calls) is not in the order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Optional, Union

import libcst as cst

from smpfix.base.parents import ParentIndex
from smpfix.base.walker import NodeIndex
from smpfix.program.order.sides import JUMP_TYPES, Side, branch_sides, exclusive, exit_side, jumps
from smpfix.program.project.parsed_file import ParsedFile
from smpfix.program.steps import StepFunctions

MAX_DEPTH = 4
# Calls recorded per file at most: a script whose helpers call each other in many places
# would otherwise be replayed once per path; past this the order ends (rules see less).
_BUDGET = 20_000
# Code inside these does not run where it is written.
_NOT_RUN = frozenset({cst.Lambda, cst.FunctionDef, cst.ClassDef})
_COMPREHENSIONS = frozenset({cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp})


@dataclass(frozen=True)
class Run:
    """One call as the script runs it.

    ``sides`` are the branch sides around it, outermost first, through every followed call;
    ``repeated`` says a loop around it (or around a call leading to it) runs it again;
    ``through`` are the calls of local functions that led here, outermost first; ``opaque``
    is the local function this call would run when it was not followed (too deep, recursive).
    """

    call: cst.Call
    order: int
    sides: tuple[Side, ...]
    repeated: bool
    through: tuple[cst.Call, ...] = ()
    opaque: Optional[cst.FunctionDef] = None

    def exclusive_with(self, other: Run) -> bool:
        """Whether the two sit on different sides of one branch (never both in one run)."""
        return exclusive(self.sides, other.sides)


class ExecutionOrder:
    """The order of one file's calls: every call the top of the file reaches, in the order it
    runs (``Run.order``, followed lazily on the first question about runs), and for any two
    calls of the file whether one can run before the other."""

    def __init__(
        self,
        module: cst.Module,
        index: NodeIndex,
        aliases: Optional[Mapping[str, cst.FunctionDef]] = None,
    ) -> None:
        """``aliases`` names functions that run under another name (``train_step =
        smp.step(f)``: ``train_step`` runs ``f``)."""
        self.module = module
        self.index = index
        self.parents = ParentIndex(module, index)
        self.aliases = aliases or {}

    @classmethod
    def of_file(cls, file: ParsedFile) -> ExecutionOrder:
        """The order of a checked file, with step functions followed under the names callers use."""
        steps = file.answer(StepFunctions)
        aliases = {step.name: step.function for step in steps if step.function is not None}
        return cls(file.module, file.index, aliases)

    @cached_property
    def _traced(self) -> tuple[tuple[Run, ...], bool, dict[int, tuple[Run, ...]]]:
        tracer = _Tracer(self.module, self.aliases, self.index)
        entry_points = self.entry_points
        if entry_points:
            tracer.script_side = Side(self.module, len(entry_points))
        tracer.block(self.module.body, (), False, (), tracer.module_functions)
        tracer.script_side = None
        for number, function in enumerate(entry_points):
            if tracer.exhausted:
                break
            tracer.entry(function, Side(self.module, number))
        grouped: dict[int, list[Run]] = {}
        for run in tracer.runs:
            grouped.setdefault(id(run.call), []).append(run)
        by_call = {key: tuple(value) for key, value in grouped.items()}
        return tuple(tracer.runs), not tracer.exhausted, by_call

    @cached_property
    def entry_points(self) -> tuple[cst.FunctionDef, ...]:
        """The module's functions that nothing in the file calls by name: another script
        imports them, ``fire.Fire(main)`` or a test harness runs them. Each is replayed once,
        after the module's own code (importing runs it first), on its own side of one branch
        (the module): a run runs one of them, so two are never counted as one process, and
        none together with what the module's code calls when the file runs as a script
        (``main()`` under ``if __name__ == "__main__":``)."""
        positions = self.index.by_type().get(cst.Call, ())
        called = {
            node.func.value
            for node in (self.index.order[position] for position in positions)
            if type(node) is cst.Call and type(node.func) is cst.Name
        }
        aliased = {id(function) for function in self.aliases.values()}
        return tuple(
            statement
            for statement in self.module.body
            if type(statement) is cst.FunctionDef
            and statement.name.value not in called
            and id(statement) not in aliased
        )

    @property
    def runs(self) -> tuple[Run, ...]:
        return self._traced[0]

    @property
    def complete(self) -> bool:
        """False when the file's calls were too many to follow to the end."""
        return self._traced[1]

    def exclusive(self, first: cst.CSTNode, second: cst.CSTNode) -> bool:
        """Whether the two sit on different sides of one branch of their function (never both
        in one run of it): ``smpfix.program.order.sides``."""
        return exclusive(branch_sides(self.parents, first), branch_sides(self.parents, second))

    def runs_before(self, first: cst.CSTNode, second: cst.CSTNode) -> bool:
        """Whether ``first`` can run before ``second``: it is written first and, in one
        function, the two are not on exclusive sides of a branch. Across functions the answer
        is the file's order, without following calls (``runs`` follows them from the top)."""
        positions = self.index.positions
        if positions.get(id(first), -1) >= positions.get(id(second), -1):
            return False
        if self.parents.scope_of(first) is not self.parents.scope_of(second):
            return True
        return not self.exclusive(first, second)

    def same_function(self, first: cst.CSTNode, second: cst.CSTNode) -> bool:
        """Whether one run of one function body runs both (module code counts as one)."""
        return self.parents.scope_of(first) is self.parents.scope_of(second)

    def runs_of(self, call: cst.Call) -> tuple[Run, ...]:
        """Each time ``call`` runs (none when the top of the file never reaches it)."""
        return self._traced[2].get(id(call), ())

    def matching(self, predicate: Callable[[Run], bool]) -> list[Run]:
        return [run for run in self.runs if predicate(run)]

    def before(self, run: Run, predicate: Callable[[Run], bool]) -> list[Run]:
        """Runs that satisfy ``predicate``, happen earlier than ``run`` and can share a run with
        it."""
        return [
            other
            for other in self.runs[: run.order]
            if predicate(other) and not other.exclusive_with(run)
        ]

    def after(self, run: Run, predicate: Callable[[Run], bool]) -> list[Run]:
        """Runs that satisfy ``predicate``, happen later than ``run`` and can share a run with
        it."""
        return [
            other
            for other in self.runs[run.order + 1 :]
            if predicate(other) and not other.exclusive_with(run)
        ]


def execution_order(
    module: cst.Module, aliases: Optional[Mapping[str, cst.FunctionDef]] = None
) -> ExecutionOrder:
    """The order of a tree that no analysis holds (one indexed for the question)."""
    return ExecutionOrder(module, NodeIndex(module), aliases)


def functions_calling(
    module: cst.Module, predicate: Callable[[cst.Call], bool]
) -> frozenset[cst.FunctionDef]:
    """Module-level functions (and their nested ones) that make a call matching ``predicate``,
    directly or through other functions of the file called by name: what an opaque run may do."""
    functions = _all_functions(module)
    calls = {function: _own_calls(function) for function in functions.values()}
    direct = {function for function, own in calls.items() if any(predicate(c) for c in own)}
    callers: dict[cst.FunctionDef, set[str]] = {
        function: {call.func.value for call in own if type(call.func) is cst.Name}
        for function, own in calls.items()
    }
    found = set(direct)
    changed = True
    while changed:
        changed = False
        for function, names in callers.items():
            if function not in found and any(functions.get(name) in found for name in names):
                found.add(function)
                changed = True
    return frozenset(found)


def _all_functions(module: cst.Module) -> dict[str, cst.FunctionDef]:
    from smpfix.base.walker import iter_nodes

    found: dict[str, cst.FunctionDef] = {}
    for node in iter_nodes(module):
        if type(node) is cst.FunctionDef:
            found.setdefault(node.name.value, node)
    return found


def _own_calls(function: cst.FunctionDef) -> list[cst.Call]:
    """The calls in ``function``'s body, its nested functions' included, not those of the
    classes and lambdas it defines; read from the tree's node index."""
    from smpfix.base.walker import known_subtree

    known = known_subtree(function.body)
    if known is None:  # a tree no analysis holds an index of
        index = NodeIndex(function.body)
        known = index.order, index.ends, 0, len(index.order)
    order, ends, position, end = known
    found: list[cst.Call] = []
    while position < end:
        node = order[position]
        kind = type(node)
        if kind is cst.ClassDef or kind is cst.Lambda:
            position = ends[position]
            continue
        if kind is cst.Call:
            found.append(node)  # type: ignore[arg-type]
        position += 1
    return found


class _Tracer:
    def __init__(
        self, module: cst.Module, aliases: Mapping[str, cst.FunctionDef], index: NodeIndex
    ) -> None:
        self.index = index
        self.runs: list[Run] = []
        self.exhausted = False
        self.module_functions: dict[str, cst.FunctionDef] = {
            s.name.value: s for s in module.body if type(s) is cst.FunctionDef
        }
        self.module_functions.update(
            {name: f for name, f in aliases.items() if name not in self.module_functions}
        )
        self.classes: dict[str, cst.ClassDef] = {
            s.name.value: s for s in module.body if type(s) is cst.ClassDef
        }
        self.active: list[cst.FunctionDef] = []
        # While the module's own code is replayed with entry points beside it: the side of
        # what the functions it calls do (the file run as a script, not imported).
        self.script_side: Optional[Side] = None
        # By ``id`` of an expression of the module (alive as long as the tracer): its calls.
        self._planned: dict[int, tuple[_PlannedCall, ...]] = {}

    # -- statements -------------------------------------------------------------------------
    def block(
        self,
        statements: Sequence[cst.CSTNode],
        sides: tuple[Side, ...],
        repeated: bool,
        through: tuple[cst.Call, ...],
        functions: Mapping[str, cst.FunctionDef],
    ) -> bool:
        """Replay ``statements``; True when the block certainly jumps out (return, raise, ...)."""
        local = dict(functions)
        for statement in statements:
            if type(statement) is cst.FunctionDef:
                local[statement.name.value] = statement
                continue
            if type(statement) is cst.ClassDef:
                continue
            outcome = self.statement(statement, sides, repeated, through, local)
            if outcome is True:
                return True
            if isinstance(outcome, Side):
                # `if cond: return` — the rest of the block runs on the other side of that `if`.
                sides = (*sides, outcome)
        return False

    def statement(
        self,
        statement: cst.CSTNode,
        sides: tuple[Side, ...],
        repeated: bool,
        through: tuple[cst.Call, ...],
        functions: Mapping[str, cst.FunctionDef],
    ) -> Union[bool, Side]:
        args = (repeated, through, functions)
        if type(statement) is cst.SimpleStatementLine:
            for small in statement.body:
                self.expression(small, sides, *args)
                if type(small) in JUMP_TYPES:
                    return True
            return False
        if isinstance(statement, cst.If):
            return self.if_statement(statement, sides, *args)
        if isinstance(statement, (cst.For, cst.While)):
            head = statement.iter if isinstance(statement, cst.For) else statement.test
            self.expression(
                head,
                sides,
                True if type(statement) is cst.While else repeated,
                through,
                functions,
            )
            self.suite(statement.body, sides, True, through, functions)
            if statement.orelse is not None:
                self.suite(statement.orelse.body, sides, *args)
            return False
        if type(statement) is cst.With:
            for item in statement.items:
                self.expression(item.item, sides, *args)
            return self.suite(statement.body, sides, *args)
        if type(statement) is cst.Try:
            return self.try_statement(statement, sides, *args)
        if type(statement) is cst.Match:
            self.expression(statement.subject, sides, *args)
            for number, case in enumerate(statement.cases):
                self.suite(case.body, (*sides, Side(statement, number)), *args)
            return False
        return False

    def suite(
        self,
        body: cst.BaseSuite,
        sides: tuple[Side, ...],
        repeated: bool,
        through: tuple[cst.Call, ...],
        functions: Mapping[str, cst.FunctionDef],
    ) -> bool:
        return self.block(_statements(body), sides, repeated, through, functions)

    def if_statement(
        self,
        node: cst.If,
        sides: tuple[Side, ...],
        repeated: bool,
        through: tuple[cst.Call, ...],
        functions: Mapping[str, cst.FunctionDef],
    ) -> Union[bool, Side]:
        """Replay both arms; True when both always jump out, else the side the code after the
        ``if`` runs on when one arm does (``smpfix.program.order.sides``)."""
        self.expression(node.test, sides, repeated, through, functions)
        self.suite(node.body, (*sides, Side(node, 0)), repeated, through, functions)
        other = (*sides, Side(node, 1))
        if type(node.orelse) is cst.If:
            self.if_statement(node.orelse, other, repeated, through, functions)
        elif node.orelse is not None:
            self.suite(node.orelse.body, other, repeated, through, functions)
        if jumps([node]):
            return True
        return exit_side(node) or False

    def try_statement(
        self,
        node: cst.Try,
        sides: tuple[Side, ...],
        repeated: bool,
        through: tuple[cst.Call, ...],
        functions: Mapping[str, cst.FunctionDef],
    ) -> bool:
        body = (*sides, Side(node, 0))
        jumps = self.suite(node.body, body, repeated, through, functions)
        if node.orelse is not None and not jumps:
            self.suite(node.orelse.body, body, repeated, through, functions)
        for number, handler in enumerate(node.handlers, start=1):
            self.suite(handler.body, (*sides, Side(node, number)), repeated, through, functions)
        if node.finalbody is not None:
            return self.suite(node.finalbody.body, sides, repeated, through, functions)
        return False

    # -- expressions ------------------------------------------------------------------------
    def expression(
        self,
        node: cst.CSTNode,
        sides: tuple[Side, ...],
        repeated: bool,
        through: tuple[cst.Call, ...],
        functions: Mapping[str, cst.FunctionDef],
    ) -> None:
        """Record the calls in ``node`` in evaluation order (arguments before their call)."""
        for call, inner, in_comprehension in self._calls_of(node):
            if self.exhausted:
                return
            self.call(
                call,
                (*sides, *inner) if inner else sides,
                repeated or in_comprehension,
                through,
                functions,
            )

    def _calls_of(self, node: cst.CSTNode) -> tuple[_PlannedCall, ...]:
        """``_calls_in(node)``, worked out once per expression: a function's body is replayed
        once for every path that calls it."""
        found = self._planned.get(id(node))
        if found is None:
            calls: list[_PlannedCall] = []
            extent = self.index.extent(node)
            if extent is None:  # a node of another tree (an alias's function elsewhere)
                index = NodeIndex(node)
                order, ends, start, end = index.order, index.ends, 0, len(index.order)
            else:
                order, ends = self.index.order, self.index.ends
                start, end = extent
            _calls_in(order, ends, start, end, (), False, calls)
            found = self._planned[id(node)] = tuple(calls)
        return found

    def call(
        self,
        node: cst.Call,
        sides: tuple[Side, ...],
        repeated: bool,
        through: tuple[cst.Call, ...],
        functions: Mapping[str, cst.FunctionDef],
    ) -> None:
        if len(self.runs) >= _BUDGET:
            self.exhausted = True
            return
        target = self.target(node, functions)
        follow = target is not None and len(through) < MAX_DEPTH and target not in self.active
        self.runs.append(
            Run(
                node,
                len(self.runs),
                sides,
                repeated,
                through,
                None if follow or target is None else target,
            )
        )
        if not follow:
            return
        assert target is not None
        self.active.append(target)
        try:
            body = _statements(target.body)
            nested = {
                **self.module_functions,
                **{s.name.value: s for s in body if type(s) is cst.FunctionDef},
            }
            if not through and self.script_side is not None:
                sides = (*sides, self.script_side)
            self.block(body, sides, repeated, (*through, node), nested)
        finally:
            self.active.pop()

    def entry(self, function: cst.FunctionDef, side: Side) -> None:
        """Replay ``function`` as a run of its own, called from outside the file."""
        self.active.append(function)
        try:
            body = _statements(function.body)
            nested = {
                **self.module_functions,
                **{s.name.value: s for s in body if type(s) is cst.FunctionDef},
            }
            self.block(body, (side,), False, (), nested)
        finally:
            self.active.pop()

    def target(
        self, node: cst.Call, functions: Mapping[str, cst.FunctionDef]
    ) -> Optional[cst.FunctionDef]:
        """The local function a call runs: a function by name, or a local class's ``__init__``."""
        if type(node.func) is not cst.Name:
            return None
        name = node.func.value
        if name in functions:
            return functions[name]
        cls = self.classes.get(name)
        if cls is not None:
            for statement in cls.body.body:
                if type(statement) is cst.FunctionDef and statement.name.value == "__init__":
                    return statement
        return None


# A call in an expression: the sides of the conditional expressions around it (within the
# expression) and whether a comprehension around it repeats it.
_PlannedCall = tuple[cst.Call, tuple[Side, ...], bool]


def _calls_in(
    order: list[cst.CSTNode],
    ends: list[int],
    start: int,
    end: int,
    sides: tuple[Side, ...],
    repeated: bool,
    found: list[_PlannedCall],
) -> None:
    """The calls in the subtree at ``order[start:end]`` of a tree's pre-order index, in
    evaluation order, into ``found``; code that does not run where it is written (a lambda, a
    nested ``def``) is skipped. Read from the index rather than by asking every node for its
    children: a call is recorded once its subtree (its arguments) has been passed, and a
    conditional expression's three parts are read in evaluation order (test, body, orelse),
    which is not their order in the text."""
    pending: list[
        tuple[int, cst.Call, bool]
    ] = []  # calls whose subtree is not yet passed: end, call, repeated
    comprehensions: list[int] = []  # where the comprehensions around the position end
    position = start
    while position < end:
        while pending and pending[-1][0] <= position:
            _, call, call_repeated = pending.pop()
            found.append((call, sides, call_repeated))
        while comprehensions and comprehensions[-1] <= position:
            comprehensions.pop()
        node = order[position]
        kind = type(node)
        if kind is cst.Call:
            pending.append((ends[position], node, repeated or bool(comprehensions)))  # type: ignore[arg-type]
        elif kind in _NOT_RUN:
            position = ends[position]
            continue
        elif kind is cst.IfExp:
            assert type(node) is cst.IfExp
            inner = repeated or bool(comprehensions)
            for part, side in (
                (node.test, sides),
                (node.body, (*sides, Side(node, 0))),
                (node.orelse, (*sides, Side(node, 1))),
            ):
                begin = _position_below(order, ends, position, part)
                _calls_in(order, ends, begin, ends[begin], side, inner, found)
            position = ends[position]
            continue
        elif kind in _COMPREHENSIONS:
            comprehensions.append(ends[position])
        position += 1
    while pending:
        _, call, call_repeated = pending.pop()
        found.append((call, sides, call_repeated))


def _position_below(
    order: list[cst.CSTNode], ends: list[int], parent: int, child: cst.CSTNode
) -> int:
    """Where ``child``, a child of the node at ``parent``, lies in the index."""
    position = parent + 1
    while order[position] is not child:
        position = ends[position]
    return position


def _statements(suite: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    """A suite's statements; a one-line suite (``if c: return``) as one simple statement line."""
    if type(suite) is cst.SimpleStatementSuite:
        return [cst.SimpleStatementLine(body=suite.body)]
    return suite.body  # type: ignore[no-any-return]


def happens(module: cst.Module, predicate: Callable[[cst.Call], bool]) -> Callable[[Run], bool]:
    """A test of runs: the call matches ``predicate``, or it runs a local function that was not
    followed (``Run.opaque``) and may make such a call."""
    opaque: Optional[frozenset[cst.FunctionDef]] = None

    def test(run: Run) -> bool:
        nonlocal opaque
        if predicate(run.call):
            return True
        if run.opaque is None:
            return False
        if opaque is None:
            opaque = functions_calling(module, predicate)
        return run.opaque in opaque

    return test
