"""SMP824: ``shard_optimizer_state`` without what it needs, or where it has nothing to shard.

Optimizer state sharding splits the optimizer state over the data-parallel ranks through the
library's DDP. In the 1.12 source it is not refused at start-up: the first
``optimizer.step()``/``zero_grad()`` raises ("Optimizer state sharding is only supported when
DDP is enabled") without ``"ddp": True``, and ``smp.DistributedModel`` refuses
``gradient_as_bucket_view=False``, and the step ``overlapping_allreduce=False``. With one
data-parallel rank per model partition (pipeline degree = processes) there is nothing to shard:
with ``ddp`` on that is advice (a hint, it breaks nothing); without ``ddp`` the step still
raises (``validate_sharding_config`` does not look at the number of ranks), so it stays an
error.

A missing ``ddp`` that SMP814 (tensor parallelism) or SMP822 (several model replicas) already
reports is theirs; with sharded data parallelism the combination is SMP805's.
"""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.findings import Severity
from smpfix.base.flavour import ONLY_PYTORCH
from smpfix.base.literals import UNKNOWN
from smpfix.job.groups import data_parallel_degree
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.launched_code import launched_code
from smpfix.rules.rule import FixAvailability, TensorParallelism

# ``smp.DistributedModel`` keywords that optimizer state sharding needs True (both default True).
_NEEDED_TRUE = ("overlapping_allreduce", "gradient_as_bucket_view")


class ShardOptimizerStatePrerequisites(ConfigRule):
    flavours = ONLY_PYTORCH
    summary = (
        '`shard_optimizer_state` needs `"ddp": True` and the DistributedModel\'s default'
        " overlapping all-reduce and bucket views, and does nothing with a single data-parallel"
        " rank."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        if view.value("shard_optimizer_state") is not True or _sharded_data_parallel(view):
            return
        at = view.located("shard_optimizer_state")
        world, pp = view.world, view.int_value("pipeline_parallel_degree")
        data_parallel = data_parallel_degree(world, pp)
        single = (
            f"{world} processes ÷ pipeline degree {pp} = 1 data-parallel rank per partition"
            if data_parallel == 1
            else None
        )
        ddp = view.value("ddp")
        explicit = view.located("ddp") is not None
        if (
            ddp is not True
            and ddp is not UNKNOWN
            and (explicit or view.kind == "launcher")
            and not _reported_elsewhere(view)
        ):
            stated = "not set (the library default is False)" if not explicit else repr(ddp)
            remedy = (
                "With a single data-parallel rank per partition there is nothing to shard"
                ' either, so remove `shard_optimizer_state`, or set `"ddp": True` and run more'
                " processes than pipeline stages."
                if single is not None
                else 'Set `"ddp": True`.'
            )
            yield ConfigProblem(
                at,
                "`shard_optimizer_state` without `ddp`: the first optimizer step raises",
                Severity.ERROR,
                explanation=(
                    "The library shards the optimizer state through its DDP, and the first"
                    ' `optimizer.step()` or `zero_grad()` raises "Optimizer state sharding is'
                    ' only supported when DDP is enabled", after the job has started, whatever'
                    f" the number of data-parallel ranks. {remedy}"
                ),
                evidence=(
                    f"ddp: {stated}",
                    *((single,) if single is not None else ()),
                ),
            )
            return
        if single is not None and ddp is True:
            yield ConfigProblem(
                at,
                "`shard_optimizer_state` has no effect: one data-parallel rank per partition",
                Severity.HINT,
                explanation=(
                    "This is advice; training runs. The optimizer state is sharded across the"
                    " data-parallel ranks that hold the same parameters, and here each model"
                    " partition has a single one, so there is nothing to shard (the developer"
                    " guide recommends sharding for a data-parallel degree above 1). The setting"
                    " still keeps `optimizer.state_dict()` from gathering the pipeline stages"
                    " (SMP303 reports a call). Remove it, or run more processes than pipeline"
                    " stages."
                ),
                evidence=(single,),
            )

    def check_with_code(self, view: ConfigView) -> Iterator[ConfigProblem]:
        if view.value("shard_optimizer_state") is not True or _sharded_data_parallel(view):
            return
        code = launched_code(self.program, view)
        if code is None:
            return
        for facts, call in code.smp_calls("DistributedModel"):
            for arg in call.args:
                if (
                    arg.keyword is None
                    or arg.keyword.value not in _NEEDED_TRUE
                    or facts.literal(arg.value) is not False
                ):
                    continue
                needed = (
                    "overlapping all-reduce"
                    if arg.keyword.value == "overlapping_allreduce"
                    else "gradient bucket views"
                )
                yield ConfigProblem(
                    view.located("shard_optimizer_state"),
                    f"`shard_optimizer_state` with `DistributedModel({arg.keyword.value}=False)`:"
                    " refused",
                    Severity.ERROR,
                    explanation=(
                        f"Optimizer state sharding needs the library's {needed}, and the library"
                        " refuses the combination (SMPInvalidArgumentError or ValueError) when"
                        " the model is wrapped or at the first step, after the instances are up."
                        f" Drop `{arg.keyword.value}=False` (the default is True) or turn"
                        " optimizer state sharding off."
                    ),
                    evidence=(
                        f"{code.script} builds `smp.DistributedModel(...,"
                        f" {arg.keyword.value}=False)`",
                    ),
                )


def _sharded_data_parallel(view: ConfigView) -> bool:
    """Sharded data parallelism already shards the optimizer state; SMP805 reports the pair."""
    sdp = view.int_value("sharded_data_parallel_degree")
    return sdp is not None and sdp > 1


def _reported_elsewhere(view: ConfigView) -> bool:
    """A missing ``ddp`` that SMP814 (tensor parallelism) or SMP822 (several replicas) reports."""
    tp = view.int_value("tensor_parallel_degree")
    return (tp is not None and tp > 1) or view.several_replicas is not None
