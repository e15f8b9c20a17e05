"""SMP206: a ``DistributedSampler`` built but not given to the DataLoader that training reads."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.edits import NodeEdit, ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.base.parents import ParentIndex
from smpfix.base.positions import Positions
from smpfix.base.walker import Ancestry
from smpfix.fixes.arguments import append_arguments
from smpfix.job.groups import data_replicas
from smpfix.job.jobfacts import FeatureState, Tri
from smpfix.program.data.dataloaders import (
    DATALOADER_POSITIONS,
    is_dataloader,
    is_distributed_sampler,
)
from smpfix.program.data.samplers import SamplerUse, SamplerUses
from smpfix.program.data.training_loaders import TrainingLoaders, dataset_key, loader_dataset
from smpfix.program.flow.call_arguments import call_arguments
from smpfix.program.model import Program
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism


class DistributedSamplerUnused(Rule):
    summary = (
        "A `DistributedSampler` is built but the DataLoader that training iterates does not use it"
        " (often `shuffle=True` instead): every data-parallel replica trains on the whole dataset."
    )
    fix_availability = FixAvailability.UNSAFE
    depends_on = ("PP", "TP", "PRESCALED")
    runs_on_helper_modules = True
    tensor_parallelism = TensorParallelism.NONE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self.samplers: list[cst.Call] = []
        self.loaders: list[cst.Call] = []
        self.positions: Optional[Positions] = None

    def visit_Call(self, node: cst.Call) -> None:
        if is_distributed_sampler(node, self.program.facts):
            self.samplers.append(node)
        elif is_dataloader(node, self.program.facts):
            self.loaders.append(node)

    def leave_Module(self, node: cst.Module) -> None:
        if not self.samplers or not self.loaders:
            return
        replicas = data_replicas(self.program.job)
        if replicas.state is Tri.OFF:
            return
        index = self.program.parents
        flow = self.program.file.answer(SamplerUses)
        loaders = self.program.training_loaders
        for sampler in self.samplers:
            use = flow.left_out(sampler, loaders)
            if use is None:
                continue
            found = self._left_out_of(sampler, index, loaders)
            if found is not None:
                self._flag(sampler, use, found[0], found[1], replicas, index)

    def _left_out_of(
        self, sampler: cst.Call, index: ParentIndex, loaders: TrainingLoaders
    ) -> Optional[tuple[cst.Call, str]]:
        """The unsharded loader over the sampler's dataset, in the same function, that training
        reads (and how its batches reach training)."""
        dataset = loader_dataset(sampler, self.program.facts)
        if dataset is None:
            return None
        scope = index.scope_of(sampler)
        key = dataset_key(dataset, self.program.file)
        for loader in self.loaders:
            over = loader_dataset(loader, self.program.facts)
            if (
                over is None
                or index.scope_of(loader) is not scope
                or dataset_key(over, self.program.file) != key
            ):
                continue
            if not (
                loaders.may_be_unsharded(loader)
                and loaders.unsharded(loader, through_callers=False)
            ):
                continue
            fed = loaders.feeds_training(loader)
            if fed is not None:
                return loader, fed
        return None

    # -- reporting ------------------------------------------------------------------------------
    def _flag(
        self,
        sampler: cst.Call,
        use: SamplerUse,
        loader: cst.Call,
        fed: str,
        replicas: FeatureState,
        index: ParentIndex,
    ) -> None:
        line = self._line(loader)
        how = self._how_it_reads(loader)
        if use.loaders:
            given = ", ".join(f"line {self._line(other)}" for other in use.loaders)
            went = (
                f"it goes to the DataLoader at {given}, which no training step reads, while the"
                f" DataLoader at line {line}"
            )
        else:
            went = f"it is never given to a DataLoader, and the DataLoader at line {line}"
        so = ", so" if replicas.state is Tri.ON else ","
        title = (
            f"`DistributedSampler` shards nothing: the DataLoader at line {line} reads every sample"
            if replicas.state is Tri.ON
            else "`DistributedSampler` shards nothing: replicas read the same samples if several"
        )
        explanation = (
            f"{went[:1].upper()}{went[1:]} {how} reads the whole dataset and feeds {fed}. Every"
            f" rank then iterates every sample: {replicas.condition()}{so} the replicas train on"
            " the same samples and an epoch takes as many steps as on one replica. Pass the"
            " sampler to that DataLoader (`sampler=...` in place of `shuffle=True`: PyTorch"
            " rejects both, and the sampler shuffles) and call `sampler.set_epoch(epoch)` every"
            " epoch."
        )
        severity = Severity.ERROR if replicas.state is Tri.ON else Severity.WARNING
        fix = None if use.loaders else self._fix(sampler, loader, index)
        self.report(
            sampler,
            title,
            explanation=explanation,
            severity=severity,
            fix=fix,
            job_facts=(replicas,),
        )

    def _line(self, node: cst.CSTNode) -> int:
        """Line numbers for the message (computed only for a file with a finding)."""
        if self.positions is None:
            # Located through the statement holding the node: generating the whole module
            # took a second on a 20,000-line script.
            file = self.program.file
            self.positions = Positions(file.module, file.text, file.index)
        return self.positions.position(self.positions.span(node)[0]).line

    def _how_it_reads(self, loader: cst.Call) -> str:
        arguments = call_arguments(loader, self.program.facts)
        if arguments is not None:
            shuffle = arguments.passed("shuffle", DATALOADER_POSITIONS["shuffle"]).certain
            if shuffle is not None and self.program.facts.literal(shuffle) is True:
                return "(`shuffle=True`)"
            if not arguments.passed("sampler", DATALOADER_POSITIONS["sampler"]).absent:
                return "(its sampler walks all of it)"
        return "(no sampler)"

    def _fix(self, sampler: cst.Call, loader: cst.Call, index: ParentIndex) -> Optional[PendingFix]:
        """``shuffle=True`` (or a whole-dataset sampler, or nothing) -> ``sampler=<name>``; unsafe:
        each rank then reads 1/N of the data per epoch, in the sampler's order."""
        name = self._bound_name(sampler, index)
        arguments = call_arguments(loader, self.program.facts)
        if name is None or arguments is None or not self.program.order.runs_before(sampler, loader):
            return None
        shuffle = arguments.passed("shuffle", DATALOADER_POSITIONS["shuffle"])
        given = arguments.passed("sampler", DATALOADER_POSITIONS["sampler"])
        if (
            shuffle.from_dict
            or given.from_dict
            or not arguments.passed("batch_sampler", DATALOADER_POSITIONS["batch_sampler"]).absent
        ):
            return None
        edits: list[NodeEdit] = []
        if given.written is not None:
            edits.append(ReplaceNode(given.written.value, name))
            if shuffle.written is not None:
                return None
        elif shuffle.written is not None:
            if shuffle.written.keyword is None:
                return None
            edits += [
                ReplaceNode(shuffle.written.keyword, "sampler"),
                ReplaceNode(shuffle.written.value, name),
            ]
        else:
            insertion = append_arguments(loader, [f"sampler={name}"])
            if insertion is None:
                return None
            edits.append(insertion)
        return PendingFix(
            Applicability.UNSAFE, f"Give the DataLoader `sampler={name}`", tuple(edits)
        )

    def _bound_name(self, sampler: cst.Call, index: ParentIndex) -> Optional[str]:
        parent = index.parent_of(sampler)
        if type(parent) is cst.Assign and parent.value is sampler and len(parent.targets) == 1:
            target = parent.targets[0].target
            if type(target) is not cst.Name:
                return None
            scope = index.scope_of(parent)
            here = list(self.program.facts.names.in_scope(target.value, scope))
            return target.value if len(here) == 1 else None
        return None
