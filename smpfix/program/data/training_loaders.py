"""The DataLoaders a training step reads, and whether anything gives each rank its own data.

SMP204 (no sampler under tensor parallelism) and SMP206 (a ``DistributedSampler`` built but
left out) ask the same two questions of a ``DataLoader``:

- does it feed training: do its batches reach a step function that calls
  ``model.backward``, in this file or, for a helper module (``data.py``) checked on behalf
  of the scripts that import it, in one of those scripts (``loader = data.make_loader()``)?
- is it unsharded: no sampler that shards (``sampler=``/``batch_sampler=`` absent, or a
  ``RandomSampler``/``SequentialSampler`` that walks the whole dataset) and a dataset that
  depends on no rank and takes no part of the data (no ``ds.shard(...)``, no ``files[i::n]``,
  no dataset class that reads a rank itself)? A dataset that is a parameter of the loader's function
  is judged by what the callers pass; one built where smpfix cannot see counts as sharded.
"""

from __future__ import annotations

import os
from functools import cached_property
from typing import Optional

import libcst as cst

from smpfix.base.call_binding import bind_arguments
from smpfix.base.calls import argument
from smpfix.base.parents import ParentIndex
from smpfix.base.walker import iter_nodes
from smpfix.program.data.dataloaders import (
    BATCH_SAMPLERS,
    DATALOADER_POSITIONS,
    WHOLE_DATASET_SAMPLERS,
)
from smpfix.program.data.step_feeds import StepFeeds
from smpfix.program.facts import FileFacts
from smpfix.program.flow.call_arguments import call_arguments
from smpfix.program.flow.value_flow import EndKind
from smpfix.program.project.local_modules import LocalModules
from smpfix.program.project.parsed_file import ParsedFile
from smpfix.program.ranks.rank_terms import rank_terms
from smpfix.program.steps import step_functions

# Builtins that take a loader without training on it (``next`` hands a batch to the loop,
# which ``feeds_training`` already follows).
_READERS = frozenset({"len", "print", "next", "iter", "isinstance", "str", "repr", "type"})


def training_steps(facts: FileFacts) -> frozenset[str]:
    """Step functions that train: their body calls ``<model>.backward(...)``.

    When no step body in the file does (backward in a helper, or the body defined
    elsewhere), every step function counts, rather than none.
    """
    steps = step_functions(facts)
    training = frozenset(
        step.name
        for step in steps
        if step.function is not None
        and any(
            type(n) is cst.Call
            and type(n.func) is cst.Attribute
            and n.func.attr.value == "backward"
            for n in iter_nodes(step.function.body)
        )
    )
    return training or frozenset(step.name for step in steps)


def loader_dataset(loader: cst.Call, facts: FileFacts) -> Optional[cst.BaseExpression]:
    """The dataset a ``DataLoader`` (or a sampler) certainly receives; None when it cannot be
    read."""
    arguments = call_arguments(loader, facts)
    return arguments.passed("dataset", 0).certain if arguments is not None else None


def dataset_key(dataset: cst.BaseExpression, file: ParsedFile) -> str:
    """What a dataset expression names, for comparing a sampler's dataset with a loader's:
    its code, after aliases (``train_set = dataset``) assigned once."""
    for _ in range(5):
        if type(dataset) is not cst.Name:
            break
        assignment = file.facts.names.assignment(dataset.value, dataset)
        if assignment is None or type(assignment.value) is not cst.Name:
            break
        dataset = assignment.value
    return file.code_for(dataset)


class TrainingLoaders:
    """Answers ``feeds_training`` and ``unsharded`` for the loaders of one file."""

    def __init__(
        self,
        file: ParsedFile,
        importers: tuple[ParsedFile, ...] = (),
        modules: Optional[LocalModules] = None,
    ) -> None:
        self.facts = file.facts
        self.index = file.parents
        self.path = file.path
        self.importers = importers
        self.modules = modules
        tree = file.answer(LoaderTree)
        self.feeds = tree.feeds
        # What follows from the tree alone, kept with its parse: a helper module is checked
        # once for every script that imports it.
        self._out_of_sight = tree.out_of_sight

    # -- does it feed training? -----------------------------------------------------------------
    def feeds_training(self, loader: cst.Call) -> Optional[str]:
        """How the loader's batches reach a training step (``"`train_step`"``), or None."""
        fed = self.feeds.feed_of(loader)
        if fed is None and self.importers:
            fed = self._fed_in_importers(loader)
        return fed

    def _fed_in_importers(self, loader: cst.Call) -> Optional[str]:
        """For a helper module checked on behalf of scripts: does a script train on what one
        of its functions returns (``loader = data.make_loader(args)``)?"""
        function = self.index.scope_of(loader)
        if type(function) is not cst.FunctionDef or not _returns(function, loader, self.index):
            return None
        module_name = os.path.splitext(os.path.basename(self.path))[0]
        wanted = (module_name, function.name.value)
        for script in self.importers:
            view = self._view_of(script)
            for call in view.calls_to.get(wanted, ()):
                fed = view.feeds.feed_of(call)
                if fed is not None:
                    return f"{fed} of {os.path.basename(script.path)}"
        return None

    def _view_of(self, script: ParsedFile) -> LoaderTree:
        """What the helper's loaders ask of ``script``: built once per script tree, for every
        helper module it imports."""
        return script.answer(LoaderTree)

    def used_out_of_sight(self, loader: cst.Call) -> bool:
        """Does the loader go somewhere smpfix cannot follow (a call it does not know, an
        attribute, a container), where it may still be trained on?"""
        known = self._out_of_sight.get(id(loader))  # with the loader: no other node takes its id
        if known is None or known[0] is not loader:
            known = self._out_of_sight[id(loader)] = (loader, self._goes_out_of_sight(loader))
        return known[1]

    def _goes_out_of_sight(self, loader: cst.Call) -> bool:
        for end in self.feeds.flow.ends(loader):
            if end.kind is EndKind.ESCAPE:
                return True
            if end.kind is EndKind.ARGUMENT:
                func = end.node.func if type(end.node) is cst.Call else None
                if not (
                    type(func) is cst.Name
                    and func.value in _READERS
                    and func.value not in self.facts.imports.bindings
                ):
                    return True
        return False

    # -- is anything sharding it? ---------------------------------------------------------------
    def may_be_unsharded(self, loader: cst.Call) -> bool:
        """No sampler that shards (the cheap part of ``unsharded``, to ask first)."""
        arguments = call_arguments(loader, self.facts)
        if arguments is None or arguments.passed("dataset", 0).certain is None:
            return False
        for name in ("sampler", "batch_sampler"):
            for value in arguments.passed(name, DATALOADER_POSITIONS[name]).values:
                if self.facts.literal(value) is not None and not self.whole_dataset_sampler(value):
                    return False
        return True

    def unsharded(self, loader: cst.Call, *, through_callers: bool = True) -> bool:
        """Every rank reads the whole dataset through this loader (ask ``may_be_unsharded`` first).

        A dataset that is a parameter of the loader's function, or built where smpfix cannot
        see, is judged by what the callers pass (``through_callers``; no caller in the file: it
        may be sharded), or else taken as whole, as when a ``DistributedSampler`` in the same
        function was built over it (its author meant to shard it there).
        """
        dataset = loader_dataset(loader, self.facts)
        if dataset is None:
            return False
        function = self.index.scope_of(loader)
        if through_callers and type(dataset) is cst.Name and type(function) is cst.FunctionDef:
            given = self._arguments_for(function, dataset.value)
            if given is not None:
                # `def make_loader(ds): return DataLoader(ds)`: judged by what its callers pass.
                return bool(given) and not any(self._sharded_dataset(value) for value in given)
        return not self._sharded_dataset(dataset, unseen_is_sharded=through_callers)

    def whole_dataset_sampler(self, value: cst.BaseExpression) -> bool:
        """``RandomSampler(ds)``, ``SequentialSampler(ds)`` or a ``BatchSampler`` over one."""
        value = self.facts.names.value(value)
        if type(value) is not cst.Call:
            return False
        qualified = self.facts.qualified_name(value.func)
        if qualified in WHOLE_DATASET_SAMPLERS:
            return True
        if qualified in BATCH_SAMPLERS:
            inner = argument(value, "sampler", 0)
            return inner is not None and self.whole_dataset_sampler(inner.value)
        return False

    def _arguments_for(
        self, function: cst.FunctionDef, parameter: str
    ) -> Optional[list[cst.BaseExpression]]:
        """What the file's calls of ``function`` pass for ``parameter``; None when it is not a
        parameter, or the function rebinds it."""
        if parameter not in parameter_names(function):
            return None
        if self.facts.names.in_scope(parameter, function):
            return None
        given = []
        for node in self.index.nodes():
            if (
                type(node) is cst.Call
                and type(node.func) is cst.Name
                and node.func.value == function.name.value
            ):
                bound = bind_arguments(function, node)
                if bound is not None and parameter in bound:
                    given.append(bound[parameter])
        return given

    def _sharded_dataset(
        self, dataset: cst.BaseExpression, depth: int = 0, unseen_is_sharded: bool = True
    ) -> bool:
        """Does the dataset depend on a rank (a manual shard), or (``unseen_is_sharded``) is it
        built where smpfix cannot see?"""
        if depth > 3:
            return unseen_is_sharded
        if type(dataset) is cst.Name:
            assignments = self.facts.assignments.get(dataset.value, ())
            if not assignments:
                # Imported, or reached through another name that is a parameter: built where
                # smpfix cannot see. (The loader's own parameter was judged by its callers.)
                return unseen_is_sharded and (
                    dataset.value in self.facts.imports.bindings or depth > 0
                )
            return any(
                self._sharded_dataset(a.value, depth + 1, unseen_is_sharded)
                for a in assignments
                if a.value is not dataset
            )
        if self._reads_rank(dataset):
            return True
        for node in iter_nodes(dataset):
            if _splits(node):
                return True
            if (
                type(node) is cst.Name
                and node is not dataset
                and node.value in self.facts.assignments
            ):
                if any(self._reads_rank(a.value) for a in self.facts.assignments[node.value]):
                    return True
            if (
                type(node) is cst.Call
                and type(node.func) is cst.Name
                and node.func.value in self.facts.classes
            ):
                if self._class_uses_ranks(self.facts.classes[node.func.value]):
                    return True
        return False

    def _reads_rank(self, expr: cst.CSTNode) -> bool:
        return bool(rank_terms(expr, self.facts, modules=self.modules))

    def _class_uses_ranks(self, cls: cst.ClassDef) -> bool:
        """A dataset class that reads a rank itself shards (or at least knows its rank)."""
        return any(type(n) is cst.Call and self._reads_rank(n) for n in iter_nodes(cls.body))


class LoaderTree:
    """What the loader questions ask of one tree, kept with its parse: where its loaders'
    batches go, which of its loaders escape smpfix, and (for a script importing the helper
    module being checked) its calls by the last two parts of the qualified name of what each
    calls (``("data", "make_loader")``)."""

    def __init__(self, file: ParsedFile) -> None:
        self.file = file
        self.out_of_sight: dict[int, tuple[cst.Call, bool]] = {}

    @classmethod
    def of_file(cls, file: ParsedFile) -> LoaderTree:
        return cls(file)

    @cached_property
    def feeds(self) -> StepFeeds:
        """``StepFeeds`` over the training steps of the file."""
        return StepFeeds(self.file, steps=training_steps(self.file.facts))

    @cached_property
    def calls_to(self) -> dict[tuple[str, ...], list[cst.Call]]:
        found: dict[tuple[str, ...], list[cst.Call]] = {}
        for node in self.file.index.order:
            if type(node) is cst.Call:
                qualified = self.file.facts.qualified_name(node.func) or ""
                found.setdefault(tuple(qualified.split(".")[-2:]), []).append(node)
        return found


def _splits(node: cst.CSTNode) -> bool:
    """``ds.shard(n, i)``, ``files[i::n]``: a part of the data, whatever decides which part."""
    if (
        type(node) is cst.Call
        and type(node.func) is cst.Attribute
        and node.func.attr.value == "shard"
    ):
        return True
    return type(node) is cst.Slice and node.step is not None


def parameter_names(function: cst.FunctionDef) -> set[str]:
    params = function.params
    return {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}


def _returns(function: cst.FunctionDef, loader: cst.Call, index: ParentIndex) -> bool:
    """Does ``function`` return ``loader`` (directly, or the name it is bound to)?"""
    parent = index.parent_of(loader)
    if type(parent) is cst.Return:
        return True
    if type(parent) is not cst.Assign or parent.value is not loader:
        return False
    names = {t.target.value for t in parent.targets if type(t.target) is cst.Name}
    return any(
        type(n) is cst.Return and type(n.value) is cst.Name and n.value.value in names
        for n in iter_nodes(function.body)
    )
