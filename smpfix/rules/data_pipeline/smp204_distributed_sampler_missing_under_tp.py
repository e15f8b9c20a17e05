"""SMP204: under tensor parallelism, a training DataLoader that nothing shards."""

from __future__ import annotations

import os
from typing import Optional

import libcst as cst

from smpfix.base.call_binding import bind_arguments
from smpfix.base.calls import argument
from smpfix.base.findings import Severity
from smpfix.base.parents import ParentIndex
from smpfix.base.walker import iter_nodes
from smpfix.job.jobfacts import FeatureState, Tri
from smpfix.program.call_arguments import call_arguments
from smpfix.program.data_ranks import DataJob, rank_terms, spelled
from smpfix.program.dataloaders import (
    BATCH_SAMPLERS,
    DATALOADER_POSITIONS,
    WHOLE_DATASET_SAMPLERS,
    bound_value,
    is_dataloader,
)
from smpfix.program.facts import FileFacts
from smpfix.program.step_feeds import StepFeeds
from smpfix.program.steps import step_functions
from smpfix.rules.rule import FixAvailability, Rule, RuleContext


class DistributedSamplerMissingUnderTp(Rule):
    code = "SMP204"
    name = "distributed-sampler-missing-under-tp"
    summary = (
        "Under tensor parallelism a training DataLoader should use a `DistributedSampler` over the "
        "data-parallel ranks (strongly recommended by the library)."
    )
    fix_availability = FixAvailability.NONE
    depends_on = ("TP",)
    runs_on_helper_modules = True

    @classmethod
    def applies_to(cls, facts: FileFacts) -> bool:
        """PyTorch SMP scripts only (the TensorFlow flavour has no tensor parallelism)."""
        return facts.imports_smp_torch and super().applies_to(facts)

    def __init__(self, context: RuleContext) -> None:
        super().__init__(context)
        self.loaders: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        if is_dataloader(node, self.facts):
            self.loaders.append(node)

    def leave_Module(self, node: cst.Module) -> None:
        tp = self.feature("TP")
        if tp.state is not Tri.ON or not self.loaders:
            return
        candidates = [loader for loader in self.loaders if self._may_be_unsharded(loader)]
        if not candidates:
            return
        index = ParentIndex(node)
        feeds = StepFeeds(self.facts, index, steps=training_steps(self.facts))
        for loader in candidates:
            if not self._unsharded(loader, index):
                continue
            fed = feeds.feed_of(loader)
            if fed is None and self.context.importers:
                fed = self._fed_in_importers(loader, index)
            if fed is not None:
                self._flag(loader, fed, tp)

    # -- a loader built in a helper module (data.py) and iterated by the script ----------------
    def _fed_in_importers(self, loader: cst.Call, index: ParentIndex) -> Optional[str]:
        """For a helper module checked on behalf of scripts: does a script train on what one
        of its functions returns (``loader = data.make_loader(args)``)?"""
        function = index.scope_of(loader)
        if not isinstance(function, cst.FunctionDef) or not _returns(function, loader, index):
            return None
        module_name = os.path.splitext(os.path.basename(self.context.path))[0]
        wanted = [module_name, function.name.value]
        for script in self.context.importers:
            calls = [
                n
                for n in iter_nodes(script.module)
                if isinstance(n, cst.Call) and (script.facts.qualified_name(n.func) or "").split(".")[-2:] == wanted
            ]
            if not calls:
                continue
            feeds = StepFeeds(script.facts, ParentIndex(script.module), steps=training_steps(script.facts))
            for call in calls:
                fed = feeds.feed_of(call)
                if fed is not None:
                    return f"{fed} of {os.path.basename(script.path)}"
        return None

    # -- is anything sharding this loader? ------------------------------------------------------
    def _may_be_unsharded(self, loader: cst.Call) -> bool:
        """No sampler that shards (the cheap part of the question, asked first)."""
        arguments = call_arguments(loader, self.facts)
        if arguments is None or arguments.passed("dataset", 0).certain is None:
            return False
        for name in ("sampler", "batch_sampler"):
            for value in arguments.passed(name, DATALOADER_POSITIONS[name]).values:
                if self.facts.literal(value) is not None and not self._whole_dataset_sampler(value):
                    return False
        return True

    def _unsharded(self, loader: cst.Call, index: ParentIndex) -> bool:
        arguments = call_arguments(loader, self.facts)
        dataset = arguments.passed("dataset", 0).certain if arguments is not None else None
        assert dataset is not None
        function = index.scope_of(loader)
        if isinstance(dataset, cst.Name) and isinstance(function, cst.FunctionDef):
            given = self._arguments_for(function, dataset.value, index)
            if given is not None:
                # `def make_loader(ds): return DataLoader(ds)`: judged by what its callers pass.
                return bool(given) and not any(self._sharded_dataset(value) for value in given)
        return not self._sharded_dataset(dataset)

    def _arguments_for(self, function: cst.FunctionDef, parameter: str, index: ParentIndex) -> Optional[list[cst.BaseExpression]]:
        """What the file's calls of ``function`` pass for ``parameter``; None when it is not a
        parameter, or the function rebinds it."""
        if parameter not in parameter_names(function):
            return None
        if any(a.where is not None and a.where.scope is function for a in self.facts.assignments.get(parameter, ())):
            return None
        given = []
        for node in index.nodes():
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == function.name.value:
                bound = bind_arguments(function, node)
                if bound is not None and parameter in bound:
                    given.append(bound[parameter])
        return given

    def _whole_dataset_sampler(self, value: cst.BaseExpression) -> bool:
        """``RandomSampler(ds)``, ``SequentialSampler(ds)`` or a ``BatchSampler`` over one."""
        value = bound_value(value, self.facts)
        if not isinstance(value, cst.Call):
            return False
        qualified = self.facts.qualified_name(value.func)
        if qualified in WHOLE_DATASET_SAMPLERS:
            return True
        if qualified in BATCH_SAMPLERS:
            inner = argument(value, "sampler", 0)
            return inner is not None and self._whole_dataset_sampler(inner.value)
        return False

    def _sharded_dataset(self, dataset: cst.BaseExpression, depth: int = 0) -> bool:
        """Does the dataset depend on a rank (a manual shard), or can smpfix not see it?"""
        if depth > 3:
            return True
        if isinstance(dataset, cst.Name):
            assignments = self.facts.assignments.get(dataset.value, ())
            if not assignments:
                # Imported, or reached through another name that is a parameter: built where
                # smpfix cannot see. (The loader's own parameter was judged by its callers.)
                return dataset.value in self.facts.imports.bindings or depth > 0
            return any(self._sharded_dataset(a.value, depth + 1) for a in assignments if a.value is not dataset)
        if rank_terms(dataset, self.facts, modules=self.context.modules):
            return True
        for node in iter_nodes(dataset):
            if isinstance(node, cst.Name) and node is not dataset and node.value in self.facts.assignments:
                if any(rank_terms(a.value, self.facts, modules=self.context.modules) for a in self.facts.assignments[node.value]):
                    return True
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in self.facts.classes:
                if self._class_uses_ranks(self.facts.classes[node.func.value]):
                    return True
        return False

    def _class_uses_ranks(self, cls: cst.ClassDef) -> bool:
        """A dataset class that reads a rank itself shards (or at least knows its rank)."""
        return any(isinstance(n, cst.Call) and rank_terms(n, self.facts, modules=self.context.modules) for n in iter_nodes(cls.body))

    # -- reporting ------------------------------------------------------------------------------
    def _flag(self, loader: cst.Call, fed: str, state: FeatureState) -> None:
        data_job = DataJob.of(self.job, self.facts)
        family = data_job.expected_family
        module = self.context.module
        size, rank = (spelled(self.facts, module, f"{family}_{kind}") for kind in ("size", "rank"))
        message = (
            f"This DataLoader feeds the training step {fed} with neither a `DistributedSampler` nor a dataset "
            f"sharded by data-parallel rank, and {state.condition()}: every rank reads the whole dataset, so the "
            "data-parallel replicas train on the same samples. The library strongly recommends "
            f"`DistributedSampler(dataset, num_replicas={size}, rank={rank})` under tensor parallelism; it also "
            "gives every data-parallel rank the same number of batches, so no rank waits in a collective the "
            "others never reach."
        )
        self.report(loader, message, severity=Severity.HINT, job_facts=(state,))


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
            isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "backward"
            for n in iter_nodes(step.function.body)
        )
    )
    return training or frozenset(step.name for step in steps)


def parameter_names(function: cst.FunctionDef) -> set[str]:
    params = function.params
    return {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}


def _returns(function: cst.FunctionDef, loader: cst.Call, index: ParentIndex) -> bool:
    """Does ``function`` return ``loader`` (directly, or the name it is bound to)?"""
    parent = index.parent_of(loader)
    if isinstance(parent, cst.Return):
        return True
    if not isinstance(parent, cst.Assign) or parent.value is not loader:
        return False
    names = {t.target.value for t in parent.targets if isinstance(t.target, cst.Name)}
    return any(
        isinstance(n, cst.Return) and isinstance(n.value, cst.Name) and n.value.value in names
        for n in iter_nodes(function.body)
    )
