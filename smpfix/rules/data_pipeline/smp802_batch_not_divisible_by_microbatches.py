"""SMP802: the batch a step function receives must split into ``microbatches`` equal parts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.findings import Severity
from smpfix.base.flavour import BOTH
from smpfix.job.jobfacts import Tri
from smpfix.program.data.dataloaders import DATALOADER_POSITIONS, is_dataloader
from smpfix.program.data.step_feeds import StepFeeds
from smpfix.program.flow.call_arguments import call_arguments
from smpfix.program.flow.script_numbers import ResolvedNumber
from smpfix.program.tensorflow.datasets import is_tf_dataset
from smpfix.rules.rule import FixAvailability, Rule, TensorParallelism
from smpfix.rules.titles import snippet

_TF_BATCHING = ("batch", "padded_batch")


@dataclass(frozen=True)
class _BatchSize:
    """A batch-size value (None: the loader's default of 1) of a loader or dataset call; the
    call's own argument, or an entry of a literal dict it unpacks."""

    call: cst.Call
    size: Optional[cst.BaseExpression]
    tensorflow: bool


class BatchNotDivisibleByMicrobatches(Rule):
    flavours = BOTH
    summary = (
        "The batch size of a loader that feeds `smp.step` must be a multiple of `microbatches`."
    )
    fix_availability = FixAvailability.NONE
    depends_on = ("MB",)
    tensor_parallelism = TensorParallelism.CONFIGURED

    def leave_Module(self, node: cst.Module) -> None:
        candidates = [
            found
            for call in self.program.facts.call_order
            if (found := self._candidate(call)) is not None
        ]
        if not candidates:
            return
        microbatches = self.program.numbers.microbatches()
        if microbatches is None or microbatches.value <= 1:
            return
        index = self.program.parents
        loaders, datasets = (
            StepFeeds(self.program.file),
            StepFeeds(self.program.file, datasets=True),
        )
        for batching in candidates:
            feed = (datasets if batching.tensorflow else loaders).feed_of(batching.call)
            if feed is None:
                continue
            if batching.size is not None and _is_parameter(
                batching.size, index.scope_of(batching.call)
            ):
                continue  # a parameter of the enclosing function: its callers decide
            batch = (
                ResolvedNumber(1, "the DataLoader default")
                if batching.size is None
                else self.program.numbers.resolve(batching.size, 0)
            )
            if batch is None or batch.value <= 0 or batch.value % microbatches.value == 0:
                continue
            self._flag(batching, batch, microbatches, feed)

    # -- where batches are made ---------------------------------------------------------------
    def _candidate(self, call: cst.Call) -> Optional[_BatchSize]:
        if is_dataloader(call, self.program.facts):
            arguments = call_arguments(call, self.program.facts)
            if arguments is None:
                return None  # `*args`, or a `**` dict smpfix cannot read, may set the batch size
            if not arguments.passed("batch_sampler", DATALOADER_POSITIONS["batch_sampler"]).absent:
                return None  # the sampler decides the batch size
            size = arguments.passed("batch_size", 1)
            if not size.absent and size.certain is None:
                return None  # set on some paths only
            return _BatchSize(call, size.certain, tensorflow=False)
        if any(arg.star for arg in call.args):
            return None
        func = call.func
        if (
            type(func) is cst.Attribute
            and func.attr.value in _TF_BATCHING
            and is_tf_dataset(func.value, self.program.facts)
        ):
            written = argument(call, "batch_size", 0)
            return _BatchSize(call, written.value, tensorflow=True) if written is not None else None
        return None

    # -- reporting ----------------------------------------------------------------------------
    def _flag(
        self, batching: _BatchSize, batch: ResolvedNumber, microbatches: ResolvedNumber, feed: str
    ) -> None:
        mb = microbatches.value
        remainder = batch.value % mb
        lower, upper = batch.value - remainder, batch.value - remainder + mb
        suggestion = f"{upper}" if lower <= 0 else f"{lower} or {upper}"
        if batching.size is None:
            called = self.program.numbers.code(batching.call.func)
            what = f"`{called}(...)` has no batch_size, so its batches hold 1 sample"
            title = f"{snippet(called + '(...)', 30)} has no batch_size: 1 sample per batch"
        else:
            origin = f" ({batch.how})" if batch.how else ""
            what = f"this batch size is {batch.value}{origin}"
            title = f"batch size {batch.value}"
        title += f" is not a multiple of microbatches {mb}" if batching.size is not None else ""
        prescaled = ""
        state = self.program.job.settings.get("prescaled_batch")
        if state is not None and state.value is True:
            prescaled = (
                " With prescaled_batch, this is the batch of a whole tensor-parallel group"
                " (tensor_parallel_degree × the per-rank batch), and it is this batch that is"
                " split."
            )
        error = "" if batching.tensorflow else " (TensorSplitError)"
        assumed = ""
        if batch.assumed or microbatches.assumed:
            assumed = (
                " (No launcher of this script is among the checked paths: if the job passes other"
                " values as hyperparameters, check those.)"
            )
        if batch.assumed or microbatches.assumed:
            title += ", unless the job passes other values"
        elif batching.size is not None:
            title += ": the first step fails"
        self.report(
            batching.size if batching.size is not None else batching.call.func,
            title,
            explanation=(
                f"`smp.step` splits every batch into {mb} equal microbatches along its first"
                f" dimension, so the first step fails{error} after the instances are up."
                f"{prescaled} Use a batch size that is a multiple of {mb} ({suggestion}), or"
                f" change microbatches.{assumed}"
            ),
            evidence=(
                f"{what}, and microbatches is {mb} ({microbatches.how}): {batch.value} % {mb} ="
                f" {remainder}",
                f"the batches reach {feed}",
            ),
            severity=Severity.WARNING if assumed else Severity.ERROR,
            job_facts=tuple(
                feature for feature in (self.feature("MB"),) if feature.state is Tri.ON
            ),
        )


def _is_parameter(expr: cst.BaseExpression, scope: cst.CSTNode) -> bool:
    if type(expr) is not cst.Name or type(scope) is not cst.FunctionDef:
        return False
    params = scope.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    every += [star for star in (params.star_arg, params.star_kwarg) if type(star) is cst.Param]
    return any(param.name.value == expr.value for param in every)
