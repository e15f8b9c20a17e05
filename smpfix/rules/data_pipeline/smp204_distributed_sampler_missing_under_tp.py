"""SMP204: under tensor parallelism, a training DataLoader that nothing shards."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.findings import Severity
from smpfix.base.parents import ParentIndex
from smpfix.base.walker import Ancestry
from smpfix.fixes.references import spelled
from smpfix.job.groups import DataJob
from smpfix.job.jobfacts import FeatureState, Tri
from smpfix.program.data.dataloaders import is_dataloader, is_distributed_sampler
from smpfix.program.data.samplers import SamplerUses
from smpfix.program.data.training_loaders import TrainingLoaders, dataset_key, loader_dataset
from smpfix.program.model import Program
from smpfix.rules.rule import FixAvailability, Rule, TensorParallelism


class DistributedSamplerMissingUnderTp(Rule):
    summary = (
        "Under tensor parallelism a training DataLoader should use a `DistributedSampler` over the "
        "data-parallel ranks (strongly recommended by the library)."
    )
    fix_availability = FixAvailability.NONE
    depends_on = ("TP",)
    runs_on_helper_modules = True
    tensor_parallelism = TensorParallelism.DEGREE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self.loaders: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        if is_dataloader(node, self.program.facts):
            self.loaders.append(node)

    def leave_Module(self, node: cst.Module) -> None:
        tp = self.feature("TP")
        if tp.state is not Tri.ON or not self.loaders:
            return
        index = self.program.parents
        loaders = self.program.training_loaders
        candidates = [loader for loader in self.loaders if loaders.may_be_unsharded(loader)]
        flow: Optional[SamplerUses] = None
        for loader in candidates:
            if not loaders.unsharded(loader):
                continue
            fed = loaders.feeds_training(loader)
            if fed is None:
                continue
            flow = flow or self.program.file.answer(SamplerUses)
            if not self._left_out_sampler(loader, index, flow, loaders):
                self._flag(loader, fed, tp)

    def _left_out_sampler(
        self, loader: cst.Call, index: ParentIndex, flow: SamplerUses, loaders: TrainingLoaders
    ) -> bool:
        """A ``DistributedSampler`` over the same dataset in the loader's function that shards
        nothing: SMP206 reports that mistake (one mistake, one finding)."""
        dataset = loader_dataset(loader, self.program.facts)
        if dataset is None:
            return False
        scope = index.scope_of(loader)
        key = dataset_key(dataset, self.program.file)
        for call in self.program.facts.call_order:
            if is_distributed_sampler(call, self.program.facts) and index.scope_of(call) is scope:
                built_over = loader_dataset(call, self.program.facts)
                if (
                    built_over is not None
                    and dataset_key(built_over, self.program.file) == key
                    and flow.left_out(call, loaders)
                ):
                    return True
        return False

    # -- reporting ------------------------------------------------------------------------------
    def _flag(self, loader: cst.Call, fed: str, state: FeatureState) -> None:
        data_job = DataJob.of(self.program.job, self.program.facts.is_tensorflow)
        family = data_job.expected_family
        size, rank = (spelled(self.program.file, f"{family}_{kind}") for kind in ("size", "rank"))
        self.report(
            loader,
            "training DataLoader without a `DistributedSampler`: every rank reads the whole"
            " dataset",
            explanation=(
                "With neither a `DistributedSampler` nor a dataset sharded by data-parallel rank,"
                " the data-parallel replicas train on the same samples. The library strongly"
                f" recommends `DistributedSampler(dataset, num_replicas={size}, rank={rank})` under"
                " tensor parallelism; it also gives every data-parallel rank the same number of"
                " batches, so no rank waits in a collective the others never reach."
            ),
            evidence=(f"this DataLoader feeds the training step {fed}",),
            severity=Severity.HINT,
            job_facts=(state,),
        )
