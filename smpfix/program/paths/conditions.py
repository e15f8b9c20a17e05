"""What a condition in a training script evaluates to in the job smpfix knows of.

Real scripts switch features with their own command-line flags and the library's state:
``if args.shard_optimizer_state > 0:``, ``if smp.tp_size() > 1:``, ``if args.smp > 0:``,
``if args.save_full_model:``, ``if args.smp_version < 110:``. A rule that reports code in one
of those branches must know whether the job takes it. This module folds such a condition
into a value, never by running code:

- ``args.<dest>`` is what argparse (or ``HfArgumentParser``, from a dataclass field) gives
  it: the launcher's hyperparameter, else the default. Such a value is *assumed*: it is the
  script's own switch, and another run may pass another value, so a path it keeps off is off
  in this job (a hint), never impossible.
- ``self.<switch>`` of model code is what its configuration or setter makes it
  (``smpfix.program.paths.object_switches``), assumed in the same way.
- ``smp.tp_size()``, ``smp.pp_size()``, ``smp.num_microbatches()`` and ``smp.state.cfg.<key>``
  are the job's settings when a configuration states them.
- literals, names bound once to literals, ``not``/``and``/``or`` and comparisons combine them.

Evaluation can also run under a *hypothesis*: values assumed for the question being asked.
"Is this branch possible with optimizer state sharding on?" assumes the setting, and every
expression the script ties to it (the ``smp.init`` dict entry
``"shard_optimizer_state": args.shard_optimizer_state > 0``, or an argument named like the
setting) takes a matching value. "Is it possible when the script uses the library at all?"
assumes the script's library switch on: an argument whose truth guards ``smp.init()`` or
``smp.DistributedModel(...)`` (``if args.smp > 0: smp.init()``). A version range assumed for a
rule decides comparisons of an argument named like ``smp_version`` (``110`` is 1.10).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.literals import UNKNOWN, literal_value
from smpfix.job.groups import group_size
from smpfix.job.jobfacts import FEATURES, KNOWN_KEYS, JobFacts
from smpfix.job.linking import LinkedScript
from smpfix.job.versions import Version, parse_version
from smpfix.program.facts import FileFacts
from smpfix.program.flow.command_line import (
    CommandLineArgument,
    argument_value,
)
from smpfix.program.paths.object_switches import SwitchValue, object_switch

_DEGREE_SETTINGS = frozenset(
    {
        "tensor_parallel_degree",
        "pipeline_parallel_degree",
        "sharded_data_parallel_degree",
        "microbatches",
    }
)
# Values a degree can take when its feature is on: a condition must fail for all of them.
_ON_DEGREES = (2, 4, 8)
_SIZE_QUERIES = {
    "tp_size": "tensor_parallel_degree",
    "pp_size": "pipeline_parallel_degree",
    "num_microbatches": "microbatches",
}
# Rank-group sizes the job's launch numbers decide (``smpfix.job.groups.group_size``).
_GROUP_QUERIES = frozenset({"size", "local_size", "dp_size", "rdp_size", "mp_size"})
_LIBRARY_ENTRY_POINTS = frozenset({"init", "DistributedModel", "DistributedOptimizer"})
_COMPARE: Mapping[type, Callable[[Any, Any], Any]] = {
    cst.Equal: operator.eq,
    cst.NotEqual: operator.ne,
    cst.LessThan: operator.lt,
    cst.LessThanEqual: operator.le,
    cst.GreaterThan: operator.gt,
    cst.GreaterThanEqual: operator.ge,
    cst.Is: operator.is_,
    cst.IsNot: operator.is_not,
}


@dataclass(frozen=True)
class Known:
    """A value (or ``UNKNOWN``), whether it rests on a switch of the script that another
    configuration can set otherwise (``assumed``: a command-line flag, a configuration
    attribute), and how it was found."""

    value: Any
    assumed: bool = False
    how: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        return self.value is not UNKNOWN


_UNKNOWN_VALUE = Known(UNKNOWN)


@dataclass(frozen=True)
class Hypothesis:
    """Values assumed while evaluating: job settings, the library in use, a version range."""

    settings: Mapping[str, Any] = field(default_factory=dict)
    library_on: bool = True
    since: Optional[Version] = None
    until: Optional[Version] = None
    # Truths of expressions the question takes as given, by ``expression_key``: what the other
    # conditions on one path say (``not args.skip_full_optimizer`` there makes the flag false).
    given: Mapping[str, bool] = field(default_factory=dict)


# The plain question: the script uses the library (its switch is on), nothing else assumed.
LIBRARY_ON = Hypothesis()


@dataclass(frozen=True)
class _Link:
    """An argument tied to a job setting: ``identity`` (``"tensor_parallel_degree": args.tp``)
    or ``truthy`` (``"shard_optimizer_state": args.shard_optimizer_state > 0``)."""

    setting: str
    kind: str


@lru_cache(maxsize=4096)
def expression_key(expr: cst.BaseExpression) -> str:
    """An expression's code with its layout dropped: the same condition written in two places
    (``args.skip_full_optimizer`` in ``main`` and in ``save``) has one key. Remembered by node
    (nodes compare by identity and never change): the branches of a file ask about the same
    conditions again and again, and each answer is a code generation."""
    return " ".join(_BLANK.code_for_node(expr).split())


_BLANK = cst.Module(body=[])


def feature_hypotheses(key: str) -> list[Hypothesis]:
    """One hypothesis per value the feature's setting can take when the feature is on."""
    setting = FEATURES[key].setting
    values: Sequence[Any] = _ON_DEGREES if setting in _DEGREE_SETTINGS else (True,)
    return [Hypothesis(settings={setting: value}) for value in values]


class Conditions:
    """Evaluates conditions of one file (and the files it imports) for one job."""

    def __init__(
        self,
        facts: FileFacts,
        job: JobFacts,
        arguments: Mapping[str, Sequence[CommandLineArgument]],
        launchers: Sequence[LinkedScript],
        scripts: Sequence[FileFacts] = (),
        modules: Sequence[FileFacts] = (),
    ) -> None:
        """``facts`` is the file whose conditions are evaluated; ``scripts`` the SMP scripts
        that import it, when it is a helper module (their ``smp.init`` dict and library
        switch decide what its arguments mean); ``modules`` the project modules they import,
        where a model's configuration class may be."""
        self.facts = facts
        self.job = job
        self.arguments = arguments
        self.launchers = launchers
        owners = list(scripts) or [facts]
        self._owners = list({id(f): f for f in [facts, *owners]}.values())
        self._classes = list({id(f): f for f in [*self._owners, *modules]}.values())
        self._assigned: dict[str, list[Optional[cst.BaseExpression]]] = {}
        for owner in {id(f): f for f in [facts, *owners]}.values():
            for name, values in owner.attribute_assignments.items():
                self._assigned.setdefault(name, []).extend(values)
        self._resolving: set[str] = set()
        self._links: dict[str, _Link] = {}
        for owner in owners:
            self._links.update(_setting_links(owner))
        # A switch of the project's helper that sets the library up (``init_distributed``
        # in utils.py) is the script's switch too: the same parsed arguments reach it.
        self.switches: dict[str, Any] = {}
        for owner in self._classes:
            self.switches.update(_library_switches(owner))

    # -- public ---------------------------------------------------------------------------
    def truth(self, expr: cst.BaseExpression, hypothesis: Hypothesis = LIBRARY_ON) -> Known:
        """The truth value of ``expr`` (True, False or ``UNKNOWN``)."""
        found = self.evaluate(expr, hypothesis)
        if not found.known:
            return found
        try:
            return Known(bool(found.value), found.assumed, found.how)
        except Exception:  # a value whose truth Python cannot take
            return _UNKNOWN_VALUE

    def evaluate(
        self, expr: cst.BaseExpression, hypothesis: Hypothesis = LIBRARY_ON, depth: int = 0
    ) -> Known:
        if depth > 12:
            return _UNKNOWN_VALUE
        if hypothesis.given:
            given = hypothesis.given.get(expression_key(expr))
            if given is not None:
                return Known(given)
        if type(expr) is cst.UnaryOperation and type(expr.operator) is cst.Not:
            inner = self.truth(expr.expression, hypothesis)
            return Known(not inner.value, inner.assumed, inner.how) if inner.known else inner
        if type(expr) is cst.BooleanOperation:
            return self._boolean(expr, hypothesis, depth)
        if type(expr) is cst.Comparison:
            return self._comparison(expr, hypothesis, depth)
        if type(expr) is cst.Call and _is_bool_call(expr):
            return self.truth(expr.args[0].value, hypothesis)
        if type(expr) is cst.Name:
            # ``use_inductor = args.inductor == 1`` then ``if use_inductor:``: the name means
            # its only assignment in the file.
            bound = self.facts.names.assignment(expr.value, expr)
            if bound is not None and bound.value is not expr:
                return self.evaluate(bound.value, hypothesis, depth + 1)
        atom = self._atom(expr, hypothesis)
        if atom is not None:
            return atom
        value = self.facts.literal(expr)
        return Known(value) if value is not UNKNOWN else _UNKNOWN_VALUE

    # -- combinations ---------------------------------------------------------------------
    def _boolean(self, expr: cst.BooleanOperation, hypothesis: Hypothesis, depth: int) -> Known:
        left = self.truth(expr.left, hypothesis)
        is_and = type(expr.operator) is cst.And
        if left.known and left.value is not is_and:
            return left  # False and ... / True or ...
        right = self.truth(expr.right, hypothesis)
        if right.known and right.value is not is_and:
            return right
        if left.known and right.known:
            return Known(is_and, left.assumed or right.assumed, left.how + right.how)
        return _UNKNOWN_VALUE

    def _comparison(self, expr: cst.Comparison, hypothesis: Hypothesis, depth: int) -> Known:
        left_node: cst.BaseExpression = expr.left
        assumed = False
        how: tuple[str, ...] = ()
        result: Any = True
        for target in expr.comparisons:
            compare = _COMPARE.get(type(target.operator))
            if compare is None:
                return _UNKNOWN_VALUE
            version = self._version_comparison(left_node, target, hypothesis)
            if version is not None:
                outcome = version
            else:
                left = self.evaluate(left_node, hypothesis, depth + 1)
                right = self.evaluate(target.comparator, hypothesis, depth + 1)
                if not (left.known and right.known):
                    return _UNKNOWN_VALUE
                try:
                    outcome = Known(
                        bool(compare(left.value, right.value)),
                        left.assumed or right.assumed,
                        left.how + right.how,
                    )
                except TypeError:
                    return _UNKNOWN_VALUE
            if not outcome.known:
                return _UNKNOWN_VALUE
            assumed, how = assumed or outcome.assumed, how + outcome.how
            result = result and outcome.value
            left_node = target.comparator
        return Known(result, assumed, how)

    def _version_comparison(
        self, left: cst.BaseExpression, target: cst.ComparisonTarget, hypothesis: Hypothesis
    ) -> Optional[Known]:
        """``args.smp_version < 110`` against the versions the hypothesis (or the job) allows."""
        if not (
            _names_version(left) and (hypothesis.since or hypothesis.until or self.job.smp_version)
        ):
            return None
        bound = _version_literal(self.facts.literal(target.comparator))
        if bound is None:
            return None
        low: Optional[Version] = hypothesis.since
        high: Optional[Version] = hypothesis.until
        if self.job.smp_version is not None:
            low = high = self.job.smp_version.version
        outcome = _range_outcome(type(target.operator), low, high, bound)
        return (
            Known(outcome, how=("the library version",)) if outcome is not None else _UNKNOWN_VALUE
        )

    # -- atoms ----------------------------------------------------------------------------
    def _atom(self, expr: cst.BaseExpression, hypothesis: Hypothesis) -> Optional[Known]:
        if type(expr) is cst.Call and not expr.args:
            member = self.facts.smp_member(expr.func)
            if member in _SIZE_QUERIES:
                return self._setting(_SIZE_QUERIES[member], hypothesis, f"`smp.{member}()`")
            if member in _GROUP_QUERIES:
                size = group_size(member, self.job, hypothesis.settings)
                return (
                    Known(size.value, how=(f"`smp.{member}()` is {size.value} ({size.how})",))
                    if size
                    else _UNKNOWN_VALUE
                )
            return None
        if type(expr) is not cst.Attribute:
            return None
        member = self.facts.smp_member(expr)
        if member is not None:
            if member.startswith("state.cfg."):
                return self._setting(member[len("state.cfg.") :], hypothesis, f"`smp.{member}`")
            return None
        if type(expr.value) is not cst.Name:
            return None
        if expr.value.value == "self" and not self._names_argument(expr.attr.value):
            return self._object_switch(expr.attr.value, hypothesis)
        return self._argument(expr.attr.value, hypothesis)

    def _names_argument(self, name: str) -> bool:
        """Whether ``self.<name>`` may be read as the parsed argument ``name`` (an object that
        keeps the arguments as its own attributes)."""
        return name in self.arguments or name in self._links or name in self.switches

    def _object_switch(self, attribute: str, hypothesis: Hypothesis) -> Known:
        """``self._checkpoint_activations``: ``smpfix.program.paths.object_switches``."""
        if attribute in self._resolving:
            return _UNKNOWN_VALUE
        self._resolving.add(attribute)
        try:
            found = object_switch(
                attribute,
                self._owners,
                self._classes,
                lambda passed: _switch_value(self.truth(passed, hypothesis)),
            )
        finally:
            self._resolving.discard(attribute)
        return Known(found.value, found.assumed, found.how) if found else _UNKNOWN_VALUE

    def _setting(self, key: str, hypothesis: Hypothesis, spelled: str) -> Known:
        if key in hypothesis.settings:
            return Known(hypothesis.settings[key])
        setting = self.job.settings.get(key)
        if setting is None:
            return _UNKNOWN_VALUE
        return Known(setting.value, how=(f"{spelled} is {setting.value!r} ({setting.source})",))

    def _argument(self, dest: str, hypothesis: Hypothesis) -> Known:
        link = self._links.get(dest)
        if link is not None and link.setting in hypothesis.settings:
            value = hypothesis.settings[link.setting]
            return Known(value if link.kind == "identity" else int(bool(value)))
        if hypothesis.library_on and dest in self.switches:
            return Known(self.switches[dest])
        if dest in self._assigned and dest not in self._resolving:
            return self._reassigned(dest, hypothesis)
        found = argument_value(dest, self.arguments, self.launchers)
        if found is None:
            return _UNKNOWN_VALUE
        # Whatever the known launchers pass, the flag is the script's own switch: another run
        # can pass another value, so code it keeps off is off in this job, never unreachable.
        return Known(found.value, True, (found.setting,))

    def _reassigned(self, dest: str, hypothesis: Hypothesis) -> Known:
        """``args.fp16 = args.fp16 or args.amp``, the script's only assignment of the flag,
        means what it computes from the parsed values. Only ``or``: false after it means false
        before it too, so code read before the assignment is judged right as well. Any other
        assignment may give the flag any value."""
        values = self._assigned[dest]
        value = values[0] if len(values) == 1 else None
        if not (type(value) is cst.BooleanOperation and type(value.operator) is cst.Or):
            return _UNKNOWN_VALUE
        self._resolving.add(dest)
        try:
            return self.evaluate(value, hypothesis)
        finally:
            self._resolving.discard(dest)


def _switch_value(known: Known) -> Optional[SwitchValue]:
    return SwitchValue(known.value, known.assumed, known.how) if known.known else None


def _is_bool_call(call: cst.Call) -> bool:
    return (
        type(call.func) is cst.Name
        and call.func.value == "bool"
        and len(call.args) == 1
        and call.args[0].keyword is None
    )


def _names_version(expr: cst.BaseExpression) -> bool:
    return type(expr) is cst.Attribute and "smp_version" in expr.attr.value.lower()


def _version_literal(value: Any) -> Optional[Version]:
    """``110`` -> 1.10, ``"1.10"`` -> 1.10; floats are ambiguous (1.1 or 1.10) and give None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 100:
        return (value // 100, value % 100)
    if isinstance(value, str):
        return parse_version(value)
    return None


def _range_outcome(
    kind: type, low: Optional[Version], high: Optional[Version], bound: Version
) -> Optional[bool]:
    """The comparison's value for every version from ``low`` to ``high`` (None: open), if one value.

    ``<``/``<=`` hold less as the version grows, ``>``/``>=`` more; an open end takes the
    value the comparison has far beyond it.
    """
    compare = _COMPARE[kind]
    at_low = compare(_pad(low), _pad(bound)) if low is not None else None
    at_high = compare(_pad(high), _pad(bound)) if high is not None else None
    if kind in (cst.Equal, cst.NotEqual):
        return at_low if low is not None and low == high else None
    growing = kind in (cst.GreaterThan, cst.GreaterThanEqual)
    beyond_high = growing if high is None else at_high
    beyond_low = (not growing) if low is None else at_low
    return beyond_low if beyond_low == beyond_high else None


def _pad(version: Version) -> Version:
    return tuple(version[:2]) + (0,) * max(0, 2 - len(version))


def _setting_links(facts: FileFacts) -> dict[str, _Link]:
    """Arguments tied to job settings: by the ``smp.init`` dict, or by carrying a setting's name."""
    links: dict[str, _Link] = {}
    for key in KNOWN_KEYS:
        links[key] = _Link(key, "identity" if key in _DEGREE_SETTINGS else "truthy")
    call = facts.init_config_call or (facts.smp_init_calls[0] if facts.smp_init_calls else None)
    config = argument(call, "config", 0) if call is not None else None
    value = facts.names.value(config.value) if config is not None else None
    if type(value) is cst.Dict:
        for element in value.elements:
            if type(element) is not cst.DictElement:
                continue
            key = facts.literal(element.key)
            if isinstance(key, str) and key in KNOWN_KEYS:
                found = _linked_argument(element.value)
                if found is not None:
                    links[found[0]] = _Link(key, found[1])
    return links


def _linked_argument(expr: cst.BaseExpression) -> Optional[tuple[str, str]]:
    """``args.x`` (identity), ``args.x > 0``, ``args.x >= 1``, ``args.x != 0``, ``bool(args.x)``
    (truthy)."""
    if type(expr) is cst.Attribute and type(expr.value) is cst.Name:
        return expr.attr.value, "identity"
    if type(expr) is cst.Call and _is_bool_call(expr):
        inner = _linked_argument(expr.args[0].value)
        return (inner[0], "truthy") if inner is not None else None
    if type(expr) is cst.Comparison and len(expr.comparisons) == 1:
        target = expr.comparisons[0]
        left = expr.left
        bound = target.comparator
        if not (
            type(left) is cst.Attribute
            and type(left.value) is cst.Name
            and type(bound) is cst.Integer
        ):
            return None
        pairs = {
            (cst.GreaterThan, "0"),
            (cst.GreaterThanEqual, "1"),
            (cst.NotEqual, "0"),
            (cst.Equal, "1"),
        }
        if (type(target.operator), bound.value) in pairs:
            return left.attr.value, "truthy"
    return None


def _library_switches(facts: FileFacts) -> dict[str, Any]:
    """Arguments whose value guards the library's own set-up, with the value it then has:
    ``if args.smp > 0: smp.init()`` (1), also in an ``elif`` and beside other tests
    (``elif args.model_parallel and not smp.is_initialized():``), and a backend chosen by
    name (``if args.dist_backend == "smp": smp.init()``: ``"smp"``)."""
    found: dict[str, Any] = {}
    for statement in facts.statements:
        branch: Optional[cst.CSTNode] = statement
        while type(branch) is cst.If:  # exact type: ``isinstance`` goes through ``ABCMeta``
            if any(
                facts.smp_member(call.func) in _LIBRARY_ENTRY_POINTS
                for call in _calls_in(branch.body.body)
            ):
                found.update(_positive_tests(branch.test))
            branch = branch.orelse
    return found


def _positive_tests(test: cst.BaseExpression) -> dict[str, Any]:
    """The arguments that must have a value for ``test`` to hold (each conjunct of an
    ``and``), with that value: 1 for a flag, the literal it is compared equal to."""
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.And:
        return {**_positive_tests(test.left), **_positive_tests(test.right)}
    if type(test) is cst.Attribute and type(test.value) is cst.Name:
        return {test.attr.value: 1}
    named = _named_value(test)
    if named is not None:
        return {named[0]: named[1]}
    linked = _linked_argument(test)
    return {linked[0]: 1} if linked is not None and linked[1] == "truthy" else {}


def _named_value(test: cst.BaseExpression) -> Optional[tuple[str, str]]:
    """``args.dist_backend == "smp"``: the argument and the string it must equal."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    left, right = test.left, target.comparator
    if type(target.operator) is not cst.Equal or type(left) is not cst.Attribute:
        return None
    value = literal_value(right)
    if type(left.value) is not cst.Name or not isinstance(value, str):
        return None
    return left.attr.value, value


def _calls_in(statements: Iterable[cst.CSTNode]) -> Iterable[cst.Call]:
    """Calls in the simple statements of a block (not nested blocks)."""
    for statement in statements:
        if type(statement) is cst.SimpleStatementLine:
            for small in statement.body:
                value = getattr(small, "value", None)
                if type(value) is cst.Call:
                    yield value
