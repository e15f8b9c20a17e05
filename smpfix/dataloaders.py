"""PyTorch data-pipeline calls, and where a DataLoader's batches go.

"Is this a ``DataLoader`` / ``DistributedSampler``?" is answered through the file's imports
(any import form). "Does this loader feed training?" follows the loader from where it is
built through the names it is bound to, the functions that return it or take it as an
argument, and wrappers such as ``enumerate(loader)``, to the ``for`` loops that iterate it,
and asks which step functions those loops call. A step function that calls
``model.backward`` trains; one that does not only evaluates.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.calls import argument
from smpfix.facts import FileFacts
from smpfix.parents import ParentIndex
from smpfix.walker import iter_nodes

DATALOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
DISTRIBUTED_SAMPLERS = frozenset(
    {"torch.utils.data.DistributedSampler", "torch.utils.data.distributed.DistributedSampler"}
)
# Samplers that walk the whole dataset on every rank: no sharding at all.
WHOLE_DATASET_SAMPLERS = frozenset(
    {
        "torch.utils.data.RandomSampler",
        "torch.utils.data.sampler.RandomSampler",
        "torch.utils.data.SequentialSampler",
        "torch.utils.data.sampler.SequentialSampler",
    }
)
BATCH_SAMPLERS = frozenset({"torch.utils.data.BatchSampler", "torch.utils.data.sampler.BatchSampler"})
RANDOM_SAMPLERS = frozenset({"torch.utils.data.RandomSampler", "torch.utils.data.sampler.RandomSampler"})

# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn,
#            pin_memory, drop_last, timeout, worker_init_fn, multiprocessing_context, generator)
DATALOADER_POSITIONS = {"dataset": 0, "shuffle": 2, "sampler": 3, "batch_sampler": 4, "generator": 12}
# DistributedSampler(dataset, num_replicas, rank, shuffle, seed, drop_last)
SAMPLER_POSITIONS = {"dataset": 0, "num_replicas": 1, "rank": 2, "shuffle": 3, "seed": 4}

# Builtins and wrappers that hand a loader's batches on (``enumerate(loader)``) and those that
# only look at it (``len(loader)``).
_NOT_CARRIERS = frozenset({"len", "print", "isinstance", "type", "id", "repr", "str", "hasattr", "getattr"})


def is_dataloader(node: cst.CSTNode, facts: FileFacts) -> bool:
    return isinstance(node, cst.Call) and facts.qualified_name(node.func) in DATALOADERS


def is_distributed_sampler(node: cst.CSTNode, facts: FileFacts) -> bool:
    return isinstance(node, cst.Call) and facts.qualified_name(node.func) in DISTRIBUTED_SAMPLERS


def loader_argument(call: cst.Call, name: str) -> Optional[cst.BaseExpression]:
    found = argument(call, name, DATALOADER_POSITIONS.get(name))
    return found.value if found is not None else None


def bound_value(expr: cst.BaseExpression, facts: FileFacts) -> cst.BaseExpression:
    """``expr``, or the value of the name it is, when the file assigns that name once."""
    seen = 0
    while isinstance(expr, cst.Name) and seen < 5:
        assignment = facts.single_assignment(expr.value)
        if assignment is None or assignment.value is expr:
            break
        expr = assignment.value
        seen += 1
    return expr


def step_trains(function: cst.FunctionDef) -> bool:
    """A step function that calls ``<something>.backward(...)`` trains."""
    for node in iter_nodes(function.body):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "backward":
            return True
    return False


@dataclass(frozen=True)
class Reach:
    """The step functions a loader's batches reach, and which of them train."""

    steps: frozenset[str]
    training: frozenset[str]

    @property
    def feeds_training(self) -> bool:
        return bool(self.training)


class LoaderFlow:
    """Follows loaders to the step functions their batches are passed to, within one file.

    Names are followed per function: a loader bound to ``loader`` in ``main`` is read where
    ``main`` reads ``loader``; passed to a local function, it continues as that function's
    parameter; returned from one, it continues at every call of that function.
    """

    def __init__(self, module: cst.Module, facts: FileFacts) -> None:
        self.module = module
        self.facts = facts
        self.parents = ParentIndex(module)
        steps = {name: facts.functions[name] for name in facts.step_functions if name in facts.functions}
        training = {name for name, function in steps.items() if step_trains(function)}
        if not training:
            # Backward may live in a helper the step calls; then every step counts as training.
            training = set(facts.step_functions)
        self.steps = frozenset(facts.step_functions)
        self.training_steps = frozenset(training)
        self._calls_steps = self._functions_calling_steps()
        self._reads = self._name_reads()

    def _functions_calling_steps(self) -> dict[str, frozenset[str]]:
        """For each local function: the step functions it calls, directly or through others."""
        direct: dict[str, set[str]] = {}
        callees: dict[str, set[str]] = {}
        for name, function in self.facts.functions.items():
            direct[name], callees[name] = set(), set()
            for node in iter_nodes(function.body):
                if isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
                    called = node.func.value
                    if called in self.steps:
                        direct[name].add(called)
                    elif called in self.facts.functions and called != name:
                        callees[name].add(called)
        result = {name: set(found) for name, found in direct.items()}
        changed = True
        while changed:
            changed = False
            for name, others in callees.items():
                for other in others:
                    extra = result.get(other, set()) - result[name]
                    if extra:
                        result[name] |= extra
                        changed = True
        return {name: frozenset(found) for name, found in result.items()}

    def _name_reads(self) -> dict[str, list[tuple[cst.CSTNode, cst.Name]]]:
        """Every read of a plain name, with the function it is read in."""
        reads: dict[str, list[tuple[cst.CSTNode, cst.Name]]] = {}
        for node in self.parents.nodes():
            if not isinstance(node, cst.Name):
                continue
            parent = self.parents.parent_of(node)
            if isinstance(parent, cst.Attribute) and parent.attr is node:
                continue
            if isinstance(parent, (cst.AssignTarget, cst.Param, cst.FunctionDef, cst.ClassDef, cst.ImportAlias)):
                continue
            if isinstance(parent, cst.Arg) and parent.keyword is node:
                continue
            if isinstance(parent, (cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor)) and getattr(parent, "target", None) is node:
                continue
            reads.setdefault(node.value, []).append((self.parents.scope_of(node), node))
        return reads

    def reads_of(self, name: str, scope: cst.CSTNode) -> Iterator[cst.Name]:
        """Reads of ``name`` bound in ``scope``; a module-level name is read in any function
        that does not take a parameter of that name."""
        for where, node in self._reads.get(name, ()):
            if where is scope:
                yield node
            elif isinstance(scope, cst.Module) and isinstance(where, cst.FunctionDef):
                if name not in {p.name.value for p in where.params.params}:
                    yield node

    def steps_called_in(self, body: cst.CSTNode) -> set[str]:
        found: set[str] = set()
        for node in iter_nodes(body):
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
                called = node.func.value
                if called in self.steps:
                    found.add(called)
                else:
                    found |= self._calls_steps.get(called, frozenset())
        return found

    def reach(self, expressions: Iterable[cst.BaseExpression]) -> Reach:
        """Where the batches of the loader(s) built by ``expressions`` go."""
        steps: set[str] = set()
        pending = list(expressions)
        seen: set[int] = set()
        while pending:
            expr = pending.pop()
            if id(expr) in seen:
                continue
            seen.add(id(expr))
            for consumer in self._consumers(expr):
                if isinstance(consumer, cst.BaseExpression):
                    pending.append(consumer)
                else:
                    steps |= self.steps_called_in(consumer)
        return Reach(frozenset(steps), frozenset(steps & self.training_steps))

    def _consumers(self, expr: cst.BaseExpression) -> Iterator[cst.CSTNode]:
        """What receives the value of ``expr``: expressions carrying it on, or loop bodies."""
        parent = self.parents.parent_of(expr)
        if isinstance(parent, cst.For) and parent.iter is expr:
            yield parent.body
        elif isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is expr:
            targets = parent.targets if isinstance(parent, cst.Assign) else [parent]
            scope = self.parents.scope_of(parent)
            for target in targets:
                if isinstance(target.target, cst.Name):
                    yield from self.reads_of(target.target.value, scope)
        elif isinstance(parent, cst.Return):
            function = self.parents.scope_of(parent)
            if isinstance(function, cst.FunctionDef):
                yield from self._calls_of(function.name.value)
        elif isinstance(parent, cst.Arg) and parent.value is expr:
            yield from self._through_call(parent)
        elif isinstance(parent, (cst.Element, cst.StarredElement)):
            # ``for batch in zip(loader_a, loader_b)`` and tuple packing keep the batches.
            holder = self.parents.parent_of(parent)
            if isinstance(holder, cst.BaseExpression):
                yield holder

    def _through_call(self, arg: cst.Arg) -> Iterator[cst.CSTNode]:
        call = self.parents.parent_of(arg)
        if not isinstance(call, cst.Call):
            return
        func = call.func
        if isinstance(func, cst.Name) and func.value in self.facts.functions:
            function = self.facts.functions[func.value]
            parameter = _parameter_for(function, call, arg)
            if parameter is not None:
                yield from self.reads_of(parameter, function)
            return
        if isinstance(func, cst.Name) and func.value in _NOT_CARRIERS:
            return
        if isinstance(func, cst.Name) and func.value == "next":
            # ``batch = next(iterator)``: the batch is used where the iterator is advanced.
            loop = next((a for a in self.parents.ancestors(call) if isinstance(a, (cst.For, cst.While))), None)
            holder = loop.body if loop is not None else self.parents.scope_of(call)
            yield holder
            return
        # enumerate(loader), iter(loader), tqdm(loader), itertools.cycle(loader), ...
        yield call

    def arguments_for(self, function: cst.FunctionDef, parameter: str) -> Optional[list[cst.BaseExpression]]:
        """What the file's calls of ``function`` pass for ``parameter``; None if it is no parameter
        or the function assigns it itself."""
        params = function.params
        positional = [p.name.value for p in (*params.posonly_params, *params.params)]
        if parameter not in positional and parameter not in [p.name.value for p in params.kwonly_params]:
            return None
        if any(a.where is not None and a.where.scope is function for a in self.facts.assignments.get(parameter, ())):
            return None
        given = []
        for call in self._calls_of(function.name.value):
            found = argument(call, parameter, positional.index(parameter) if parameter in positional else None)
            if found is not None:
                given.append(found.value)
        return given

    def _calls_of(self, name: str) -> Iterator[cst.Call]:
        for node in self.parents.nodes():
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == name:
                yield node


def _parameter_for(function: cst.FunctionDef, call: cst.Call, arg: cst.Arg) -> Optional[str]:
    """The parameter of ``function`` that ``arg`` of ``call`` binds."""
    if arg.keyword is not None:
        return arg.keyword.value
    if arg.star:
        return None
    index = 0
    for other in call.args:
        if other is arg:
            break
        if other.keyword is None and not other.star:
            index += 1
    positional = [*function.params.posonly_params, *function.params.params]
    return positional[index].name.value if index < len(positional) else None
