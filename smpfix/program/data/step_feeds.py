"""Does a data loader's output reach a step function?

A ``DataLoader`` (or a ``tf.data`` dataset) matters to the microbatch rules only when its
batches are handed to ``smp.step``: a loader built for evaluation, or one whose batches are
filtered by the loop, is fine. The value is followed within one file by ``value_flow`` (names,
aliases, ``x if c else y``, local functions, returned tuples, a pool's futures) to where it
is consumed:

- ``for batch in loader:`` (also through ``enumerate``, ``zip``, ``iter`` and ``tqdm``) whose
  body calls a step function, directly or through a local function, with data from the loop;
- ``batch = next(iterator)`` in a loop or function that hands the batch to a step function;
- for datasets, further dataset methods (``ds.batch(32).prefetch(2)``, ``ds2 = ds.map(f)``)
  and Keras ``model.fit(ds)``.

A loop that skips partial batches itself (``if x.size(0) % smp.num_microbatches(): continue``)
does not count as feeding them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import libcst as cst

from smpfix.base.calls import names_in, target_names
from smpfix.base.walker import iter_nodes
from smpfix.program.flow.value_flow import End, EndKind, ValueFlow
from smpfix.program.project.parsed_file import ParsedFile

_WRAPPERS = frozenset({"enumerate", "zip", "iter"})
_ITERTOOLS = frozenset({"itertools.islice", "itertools.cycle", "itertools.chain"})
_SIZE_ATTRIBUTES = frozenset({"size", "shape"})


def _binding(node: cst.CSTNode) -> tuple[set[str], Optional[cst.BaseExpression]]:
    """(names bound, expression they come from) for a node that binds names."""
    if type(node) is cst.Assign:
        names: set[str] = set()
        for target in node.targets:
            names |= target_names(target.target)
        return names, node.value
    if (type(node) is cst.AnnAssign or type(node) is cst.AugAssign) and node.value is not None:
        return target_names(node.target), node.value
    if type(node) is cst.For or type(node) is cst.CompFor:
        return target_names(node.target), node.iter
    if type(node) is cst.NamedExpr:
        return target_names(node.target), node.value
    if type(node) is cst.WithItem and node.asname is not None:
        return target_names(node.asname.name), node.item  # type: ignore[arg-type]
    return set(), None


def _ends_with_skip(body: cst.BaseSuite) -> bool:
    statements: Sequence[cst.CSTNode] = body.body
    if not statements:
        return False
    last = statements[-1]
    if type(last) is cst.SimpleStatementLine:
        return isinstance(last.body[-1], (cst.Continue, cst.Break))
    return isinstance(last, (cst.Continue, cst.Break))


class StepFeeds:
    """Answers ``feed_of(value)`` for one file; build it only when a rule has a candidate.

    ``datasets=True`` follows ``tf.data`` semantics: a method called on the value yields the
    same data (``.prefetch()``), and ``fit(value)`` trains on it.
    """

    def __init__(
        self, file: ParsedFile, *, datasets: bool = False, steps: Optional[frozenset[str]] = None
    ) -> None:
        self.facts = file.facts
        self.index = file.parents
        self.datasets = datasets
        # Which step functions count (default: all; SMP204 asks about the training steps only).
        self.steps = file.facts.step_functions if steps is None else steps
        self.flow = ValueFlow(file, self._carries)
        # By ``id``, with the node itself (so that no other node can take its id): the answers.
        self._fed: dict[int, tuple[cst.BaseExpression, Optional[str]]] = {}

    def feed_of(self, value: cst.BaseExpression) -> Optional[str]:
        """How ``value``'s batches reach training (``"`train_step`"``), or None if they do not."""
        known = self._fed.get(id(value))
        if known is None or known[0] is not value:
            known = self._fed[id(value)] = (value, self._feed_of(value))
        return known[1]

    def _feed_of(self, value: cst.BaseExpression) -> Optional[str]:
        for end in self.flow.ends(value):
            found = self._feed_at(end)
            if found is not None:
                return found
        return None

    def _feed_at(self, end: End) -> Optional[str]:
        if end.kind is EndKind.LOOP:
            assert type(end.node) is cst.For
            return self.loop_feed(end.node)
        if end.kind is not EndKind.ARGUMENT:
            return None
        call, arg = end.node, end.arg
        assert type(call) is cst.Call and arg is not None
        func = call.func
        if self.datasets and type(func) is cst.Attribute and func.attr.value == "fit":
            first = call.args[0] is arg and arg.keyword is None and not arg.star
            if first or (arg.keyword is not None and arg.keyword.value == "x"):
                return f"`{self.index.module.code_for_node(func)}`"
        if (
            type(func) is cst.Name
            and func.value == "next"
            and func.value not in self.facts.imports.bindings
        ):
            return self._next_feed(call) if call.args[0] is arg else None
        return None

    # -- following the value ----------------------------------------------------------------
    def _carries(self, call: cst.Call, arg: Optional[cst.Arg]) -> bool:
        """Iteration wrappers (``enumerate(x)``) and, for datasets, method chains yield the same
        data."""
        if arg is None:
            return self.datasets
        return arg.keyword is None and self._is_wrapper(call)

    def _is_wrapper(self, call: cst.Call) -> bool:
        func = call.func
        if (
            type(func) is cst.Name
            and func.value in _WRAPPERS
            and func.value not in self.facts.imports.bindings
        ):
            return True
        qualified = self.facts.qualified_name(func) or ""
        return qualified in _ITERTOOLS or (
            qualified.startswith("tqdm.") and qualified.rsplit(".", 1)[-1] == "tqdm"
        )

    def _next_feed(self, call: cst.Call) -> Optional[str]:
        """``batch = next(iterator)``: the batch is used in the loop (or function) that advances
        it."""
        parent = self.index.parent_of(call)
        if type(parent) is cst.Arg:
            consumer = self.index.parent_of(parent)
            step = self._step_name(consumer) if type(consumer) is cst.Call else None
            return f"`{step}`" if step is not None else None
        if type(parent) is not cst.Assign or parent.value is not call:
            return None
        data: set[str] = set()
        for target in parent.targets:
            data |= target_names(target.target)
        holder = next(
            (a for a in self.index.ancestors(call) if isinstance(a, (cst.For, cst.While))), None
        )
        body = holder.body if holder is not None else self.index.scope_of(call)
        return self._feed_in(iter_nodes(body), data)

    # -- the loop ---------------------------------------------------------------------------
    def loop_feed(self, loop: cst.For) -> Optional[str]:
        """The step function the loop body hands loop data to, unless it skips partial batches."""
        return self._feed_in(iter_nodes(loop.body), target_names(loop.target))

    def _feed_in(self, body: Sequence[cst.CSTNode], data: set[str]) -> Optional[str]:
        """The step function ``body`` hands ``data`` (or values computed from it) to."""
        bindings = [found for node in body if (found := _binding(node))[1] is not None]
        for _ in range(5):
            grown = False
            for names, value in bindings:
                if names - data and names_in(value) & data:  # type: ignore[arg-type]
                    data |= names
                    grown = True
            if not grown:
                break
        if self._skips_partial_batches(body, data):
            return None
        for node in body:
            if type(node) is not cst.Call or not any(
                names_in(arg.value) & data for arg in node.args
            ):
                continue
            step = self._step_name(node)
            if step is not None:
                return f"`{step}`"
            through = self._through_helper(node)
            if through is not None:
                return through
        return None

    def _step_name(self, call: cst.Call) -> Optional[str]:
        func = call.func
        if type(func) is cst.Name and func.value in self.steps:
            return func.value
        if type(func) is cst.Attribute and func.attr.value in self.steps:
            return func.attr.value
        return None

    def _through_helper(self, call: cst.Call) -> Optional[str]:
        if type(call.func) is not cst.Name:
            return None
        helper = self.facts.functions.get(call.func.value)
        if helper is None:
            return None
        for node in iter_nodes(helper.body):
            if type(node) is cst.Call:
                step = self._step_name(node)
                if step is not None:
                    return f"`{step}` (through `{helper.name.value}`)"
        return None

    @staticmethod
    def _skips_partial_batches(body: Sequence[cst.CSTNode], data: set[str]) -> bool:
        """``if x.size(0) % smp.num_microbatches(): continue`` and similar size checks."""
        for node in body:
            if type(node) is not cst.If or not _ends_with_skip(node.body):
                continue
            test = iter_nodes(node.test)
            if any(type(n) is cst.BinaryOperation and type(n.operator) is cst.Modulo for n in test):
                return True
            sizes = any(
                (type(n) is cst.Attribute and n.attr.value in _SIZE_ATTRIBUTES)
                or (type(n) is cst.Call and type(n.func) is cst.Name and n.func.value == "len")
                for n in test
            )
            if sizes and names_in(node.test) & data:
                return True
        return False
