"""Which of its own branches a script takes in the job, and what its guards say about features.

A finding is wrong when the code itself only reaches it with the feature it is about off:
the ``elif`` after ``if args.shard_optimizer_state > 0:`` runs without optimizer state
sharding, the ``else`` of ``if args.smp > 0:`` runs without the library, the body of
``if args.smp_version < 110:`` never runs on 1.10. And a path behind an opt-in flag whose
argparse default is off (``if args.save_full_model:``) runs only if a launcher turns it on, and
one a launcher turns off still runs with the script's defaults: both are hints.

``Branches`` answers, for any node of one file:

- ``reach(node)``: does the code around it run in this job? ``NEVER`` when a condition on its
  path is false in every configuration of the script (the library switch and version range
  assumed for the question, the job's settings); ``OFF_BY_DEFAULT`` when one of the script's
  own switches keeps it off in this job (a flag's default, a launcher's hyperparameter, a
  model configuration's default), since another run can turn it on; ``RUNS`` otherwise.
- ``excludes(node, feature)``: the guard on its path that cannot hold with the feature on.

The path of a node is every ``if`` (and ``x if c else y``) around it in its function, with
the side it sits on, plus the early exits before it in each enclosing block
(``if not args.save: return``, ``if args.smp: ... else: raise``, a ``sys.exit()``), and
nothing runs after an unconditional ``return``, ``raise`` or ``sys.exit()`` of its block. A
function's body is on the paths of the places that use the function's name (a method's also
``self.<name>`` in its class): it is unreachable when all of them are (a helper called only in
the non-library branch), and reachable when any is or when the file never uses it.

The conditions of one path are also judged together, through the chain of calls that leads to
the node: ``main()`` raising ``if args.shard_optimizer_state > 0 and not
args.skip_full_optimizer:`` before it calls ``save()``, whose ``if not
args.skip_full_optimizer:`` branch then cannot run with optimizer state sharding on, though
each condition alone could hold.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Optional

import libcst as cst

from smpfix.base.parents import ParentIndex
from smpfix.base.walker import is_subclass, subtree
from smpfix.program.paths.conditions import (
    LIBRARY_ON,
    Conditions,
    Hypothesis,
    Known,
    expression_key,
    feature_hypotheses,
)

_MAX_CALLER_DEPTH = 4
# Paths judged together: past this many call chains to one node, each condition alone decides.
_MAX_CHAINS = 32
_JUMP_TYPES = frozenset({cst.Return, cst.Raise, cst.Continue, cst.Break})
_SMALL_STATEMENT = (cst.BaseSmallStatement,)
# Calls that end the process: nothing after them in their block runs.
_EXIT_FUNCTIONS = frozenset({"sys.exit", "os._exit"})
_EXIT_BUILTINS = frozenset({"exit", "quit"})


class Reach(enum.IntEnum):
    """How certainly a node's code does not run; ordered from "runs" to "never"."""

    RUNS = 0
    OFF_BY_DEFAULT = 1
    NEVER = 2


@dataclass(frozen=True)
class Requirement:
    """A condition that must have the value ``holds`` for the code to run."""

    test: cst.BaseExpression
    holds: bool


@dataclass(frozen=True)
class ReachVerdict:
    """A reach, with the requirement that decides it and what smpfix knew of its condition."""

    reach: Reach
    requirement: Optional[Requirement] = None
    known: Optional[Known] = None


_RUNS = ReachVerdict(Reach.RUNS)
# The requirement of code after an unconditional jump: a condition that never holds.
_DEAD = Requirement(cst.Name("False"), True)


class Branches:
    """Path questions about one module, answered with the job's ``Conditions``."""

    def __init__(self, module: cst.Module, conditions: Conditions, index: ParentIndex) -> None:
        self.module = module
        self.conditions = conditions
        self.index = index
        self._uses: Optional[dict[str, list[cst.Name]]] = None
        self._memo: dict[tuple[int, str], ReachVerdict] = {}
        self._requirements: dict[int, list[Requirement]] = {}
        self._certain: dict[int, bool] = {}
        # Per block: each statement's position, and the early exits with theirs (``_early_exits``).
        self._exits: dict[int, tuple[dict[int, int], list[tuple[int, Requirement]]]] = {}
        self._chains: dict[tuple[int, int], Optional[list[tuple[Requirement, ...]]]] = {}
        self._keys: dict[tuple[int, bool], tuple[dict[str, bool], frozenset[str]]] = {}

    # -- questions ------------------------------------------------------------------------
    def reach(self, node: cst.CSTNode, hypothesis: Hypothesis = LIBRARY_ON) -> ReachVerdict:
        """Whether the code at ``node`` runs, with the library on and ``hypothesis`` assumed."""
        if self._runs_whatever(node, 0):
            return _RUNS
        return self._verdict(node, hypothesis, 0)

    def excludes(self, node: cst.CSTNode, key: str) -> Optional[Requirement]:
        """The guard on ``node``'s path that is false whenever feature ``key`` is on, if any."""
        if self._runs_whatever(node, 0):
            return None
        found: Optional[Requirement] = None
        for hypothesis in feature_hypotheses(key):
            verdict = self._verdict(node, hypothesis, 0)
            if verdict.reach is not Reach.NEVER:
                return None
            found = found or verdict.requirement
        return found

    def requirements(self, node: cst.CSTNode) -> list[Requirement]:
        """The conditions on ``node``'s path inside its own function, outermost last."""
        known = self._requirements.get(id(node))
        if known is None:
            known = self._requirements[id(node)] = self._path_requirements(node)
        return known

    def _path_requirements(self, node: cst.CSTNode) -> list[Requirement]:
        found: list[Requirement] = []
        child: cst.CSTNode = node
        for parent in self.index.ancestors(node):
            if type(parent) is cst.If:
                if child is parent.body:
                    found.append(Requirement(parent.test, True))
                elif child is parent.orelse:
                    found.append(Requirement(parent.test, False))
            elif type(parent) is cst.IfExp:
                if child is parent.body:
                    found.append(Requirement(parent.test, True))
                elif child is parent.orelse:
                    found.append(Requirement(parent.test, False))
            elif isinstance(parent, (cst.IndentedBlock, cst.Module)):
                found.extend(self._early_exits(parent, child))
            if isinstance(parent, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                break
            child = parent
        return found

    def _early_exits(self, block: cst.CSTNode, child: cst.CSTNode) -> list[Requirement]:
        """``if test: return`` (or raise, continue, break, ``sys.exit()``) before ``child`` in
        ``block``: ``test`` is false after it; ``if test: ... else: raise``: true after it; a
        bare jump: nothing after it runs. The block's statements are looked at once, not once
        per child: a module of thousands of guarded blocks (a long notebook) stays linear."""
        known = self._exits.get(id(block))
        if known is None:
            body = block.body if isinstance(block, (cst.IndentedBlock, cst.Module)) else ()
            exits: list[tuple[int, Requirement]] = []
            for position, statement in enumerate(body):
                if type(statement) is cst.If:
                    exits.extend((position, found) for found in self._after_if(statement))
                elif self._jumps(statement):
                    exits.append((position, _DEAD))
            known = self._exits[id(block)] = (
                {id(statement): position for position, statement in enumerate(body)},
                exits,
            )
        positions, exits = known
        before = positions.get(id(child), len(positions))
        return [requirement for position, requirement in exits if position < before]

    def _after_if(self, statement: cst.If) -> list[Requirement]:
        """What holds after ``statement`` when one of its sides always jumps away."""
        body_jumps = self._ends_in_jump(statement.body)
        orelse = statement.orelse
        if type(orelse) is cst.Else and self._ends_in_jump(orelse.body):
            return [_DEAD] if body_jumps else [Requirement(statement.test, True)]
        if not body_jumps:
            return []
        found = [Requirement(statement.test, False)]
        if type(orelse) is cst.If:
            # ``if a: raise`` / ``elif b: raise``: past both, both are false.
            found.extend(self._after_if(orelse))
        return found

    def _ends_in_jump(self, block: cst.BaseSuite) -> bool:
        statements = block.body
        return bool(statements) and self._jumps(statements[-1])

    def _jumps(self, statement: cst.CSTNode) -> bool:
        """A statement after which its block never goes on: ``return``, ``raise``, ``continue``,
        ``break``, or a call that ends the process (``sys.exit()``, resolved through imports)."""
        if type(statement) is cst.SimpleStatementLine:
            last: cst.CSTNode = statement.body[-1]
        elif is_subclass(type(statement), _SMALL_STATEMENT):
            last = statement
        else:
            return False
        if type(last) in _JUMP_TYPES:
            return True
        if type(last) is not cst.Expr or type(last.value) is not cst.Call:
            return False
        func = last.value.func
        facts = self.conditions.facts
        qualified = facts.qualified_name(func)
        if qualified is not None:
            return qualified in _EXIT_FUNCTIONS
        return (
            type(func) is cst.Name
            and func.value in _EXIT_BUILTINS
            and func.value not in facts.assignments
            and func.value not in facts.functions
        )

    # -- evaluation -----------------------------------------------------------------------
    def _runs_whatever(self, node: cst.CSTNode, depth: int) -> bool:
        """No condition decides whether ``node`` runs: none on its path in its function, and
        the function is module code, never used by name, or used somewhere without one."""
        if self.requirements(node):
            return False
        function = self.index.scope_of(node)
        if type(function) is not cst.FunctionDef:
            return True
        known = self._certain.get(id(function))
        if known is None:
            self._certain[id(function)] = True  # a recursive function: decided by its other uses
            uses = self._uses_of(function)
            known = (
                not uses
                or depth >= _MAX_CALLER_DEPTH
                or any(self._runs_whatever(use, depth + 1) for use in uses)
            )
            self._certain[id(function)] = known
        return known

    def _verdict(self, node: cst.CSTNode, hypothesis: Hypothesis, depth: int) -> ReachVerdict:
        own = self._own_verdict(node, hypothesis)
        if own.reach is Reach.NEVER:
            return own
        function = self.index.scope_of(node)
        callers = (
            self._callers_verdict(function, hypothesis, depth)
            if type(function) is cst.FunctionDef
            else _RUNS
        )
        found = callers if callers.reach > own.reach else own
        if depth == 0 and found.reach is not Reach.NEVER:
            joint = self._joint_verdict(node, hypothesis)
            if joint.reach > found.reach:
                return joint
        return found

    # -- one path's conditions together ---------------------------------------------------
    def _joint_verdict(self, node: cst.CSTNode, hypothesis: Hypothesis) -> ReachVerdict:
        """The least certain verdict over the call chains that reach ``node``, each chain's
        conditions judged together (one may contradict what another requires)."""
        chains = self._path_chains(node, 0)
        if chains is None:
            return _RUNS
        verdict: Optional[ReachVerdict] = None
        for chain in chains:
            found = self._chain_verdict(chain, hypothesis)
            if verdict is None or found.reach < verdict.reach:
                verdict = found
            if verdict.reach is Reach.RUNS:
                break
        return verdict or _RUNS

    def _path_chains(
        self, node: cst.CSTNode, depth: int
    ) -> Optional[list[tuple[Requirement, ...]]]:
        """The requirements of every call chain from module code to ``node`` (None: too many)."""
        own = tuple(self.requirements(node))
        function = self.index.scope_of(node)
        if type(function) is not cst.FunctionDef or depth >= _MAX_CALLER_DEPTH:
            return [own]
        key = (id(function), depth)
        if key not in self._chains:
            self._chains[key] = None  # a recursive function: no chain through itself
            self._chains[key] = self._caller_chains(function, depth)
        callers = self._chains[key]
        if callers is None:
            return None
        return [own + chain for chain in callers] if callers else [own]

    def _caller_chains(
        self, function: cst.FunctionDef, depth: int
    ) -> Optional[list[tuple[Requirement, ...]]]:
        found: list[tuple[Requirement, ...]] = []
        for use in self._uses_of(function):
            chains = self._path_chains(use, depth + 1)
            if chains is None:
                return None
            found.extend(chains)
            if len(found) > _MAX_CHAINS:
                return None
        return found

    def _chain_verdict(
        self, chain: tuple[Requirement, ...], hypothesis: Hypothesis
    ) -> ReachVerdict:
        """Whether one requirement of ``chain`` fails when the others hold: NEVER when that
        rests on nothing but the path and the hypothesis, OFF_BY_DEFAULT when it also rests on
        a switch of the script (a flag's value in this job)."""
        if len(chain) < 2:
            return _RUNS
        worst = _RUNS
        for position, requirement in enumerate(chain):
            given: dict[str, bool] = {}
            for other, known in enumerate(chain):
                if other != position:
                    given.update(self._implied(known)[0])
            if not given.keys() & self._implied(requirement)[1]:
                continue  # nothing on the path says anything about this condition
            known_value = self.conditions.truth(requirement.test, replace(hypothesis, given=given))
            if not known_value.known or known_value.value is requirement.holds:
                continue
            reach = Reach.OFF_BY_DEFAULT if known_value.assumed else Reach.NEVER
            if reach > worst.reach:
                worst = ReachVerdict(reach, requirement, known_value)
                if reach is Reach.NEVER:
                    break
        return worst

    def _implied(self, requirement: Requirement) -> tuple[dict[str, bool], frozenset[str]]:
        """What a requirement says of the expressions in its test (``not a and b`` holding: ``a``
        false, ``b`` true), and the keys of every expression evaluating its test reads."""
        key = (id(requirement.test), requirement.holds)
        known = self._keys.get(key)
        if known is None:
            implied: dict[str, bool] = {}
            _imply(requirement.test, requirement.holds, implied)
            read: set[str] = set()
            _read_keys(requirement.test, read)
            known = self._keys[key] = (implied, frozenset(read))
        return known

    def _own_verdict(self, node: cst.CSTNode, hypothesis: Hypothesis) -> ReachVerdict:
        worst = _RUNS
        for requirement in self.requirements(node):
            known = self.conditions.truth(requirement.test, hypothesis)
            if not known.known or known.value is requirement.holds:
                continue
            reach = Reach.OFF_BY_DEFAULT if known.assumed else Reach.NEVER
            if reach > worst.reach:
                worst = ReachVerdict(reach, requirement, known)
                if reach is Reach.NEVER:
                    break
        return worst

    def _callers_verdict(
        self, function: cst.FunctionDef, hypothesis: Hypothesis, depth: int
    ) -> ReachVerdict:
        """The least certain verdict over the places that use ``function``'s name."""
        key = (id(function), repr(hypothesis))
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = _RUNS  # a recursive function: assume it runs while deciding
        uses = self._uses_of(function)
        verdict = _RUNS
        if uses and depth < _MAX_CALLER_DEPTH:
            verdicts = [self._verdict(use, hypothesis, depth + 1) for use in uses]
            verdict = min(verdicts, key=lambda found: found.reach)
        self._memo[key] = verdict
        return verdict

    def _uses_of(self, function: cst.FunctionDef) -> list[cst.Name]:
        """The names in the module that refer to ``function`` (calls and references), outside it."""
        if self._uses is None:
            self._uses = {}
            indexed = subtree(self.module)
            nodes = (
                indexed[0][indexed[2] : indexed[3]] if indexed is not None else self.index.nodes()
            )
            for node in nodes:
                if type(node) is cst.Name:
                    self._uses.setdefault(node.value, []).append(node)
        found = []
        owner = self._class_of(function)
        for use in self._uses.get(function.name.value, ()):
            parent = self.index.parent_of(use)
            if isinstance(parent, (cst.FunctionDef, cst.ClassDef)) and parent.name is use:
                continue
            if type(parent) is cst.Attribute and parent.attr is use:
                # ``self.checkpointed_forward(x)`` in a method of the class runs the method.
                is_self = type(parent.value) is cst.Name and parent.value.value == "self"
                if not (is_self and owner is not None and _inside(self.index, use, owner)):
                    continue
            if not _inside(self.index, use, function):
                found.append(use)
        return found

    def _class_of(self, function: cst.FunctionDef) -> Optional[cst.ClassDef]:
        """The class whose body defines ``function`` (a method), if any."""
        block = self.index.parent_of(function)
        owner = self.index.parent_of(block) if block is not None else None
        return owner if type(owner) is cst.ClassDef else None


def _inside(index: ParentIndex, node: cst.CSTNode, function: cst.CSTNode) -> bool:
    return any(ancestor is function for ancestor in index.ancestors(node))


def _imply(expr: cst.BaseExpression, holds: bool, found: dict[str, bool]) -> None:
    """Record what ``expr`` having the truth ``holds`` says of it and of its parts."""
    found[expression_key(expr)] = holds
    if type(expr) is cst.UnaryOperation and type(expr.operator) is cst.Not:
        _imply(expr.expression, not holds, found)
    elif type(expr) is cst.BooleanOperation and (type(expr.operator) is cst.And) is holds:
        # ``a and b`` true, or ``a or b`` false: each side has that truth too.
        _imply(expr.left, holds, found)
        _imply(expr.right, holds, found)


def _read_keys(expr: cst.BaseExpression, found: set[str]) -> None:
    """The keys of the expressions ``Conditions.evaluate`` reads while evaluating ``expr``."""
    found.add(expression_key(expr))
    if type(expr) is cst.UnaryOperation:
        _read_keys(expr.expression, found)
    elif type(expr) is cst.BooleanOperation:
        _read_keys(expr.left, found)
        _read_keys(expr.right, found)
    elif type(expr) is cst.Comparison:
        _read_keys(expr.left, found)
        for target in expr.comparisons:
            _read_keys(target.comparator, found)
