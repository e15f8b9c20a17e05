"""SMP805: sharded data parallelism with features it cannot run with, or without what it needs."""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.calls import argument
from smpfix.base.findings import Severity
from smpfix.base.flavour import ONLY_PYTORCH
from smpfix.base.literals import UNKNOWN
from smpfix.job.versions import leading
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.launched_code import launched_code
from smpfix.rules.rule import FixAvailability, TensorParallelism

# Sharded data parallelism combines with tensor parallelism from SMP 1.15 on.
SDP_WITH_TP_SINCE = (1, 15)
BEFORE_SDP_WITH_TP = (1, 14)


class SdpIncompatibleFeatures(ConfigRule):
    flavours = ONLY_PYTORCH
    summary = (
        "Sharded data parallelism cannot run with pipeline parallelism or optimizer state sharding,"
        " and with tensor parallelism it needs SMP 1.15, `prescaled_batch` and"
        " `smp.model_creation(tensor_parallelism=...)`."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.CONFIGURED
    finding_ranges = {"SDP+TP too old": (None, BEFORE_SDP_WITH_TP)}

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        sdp = view.int_value("sharded_data_parallel_degree")
        if sdp is None or sdp <= 1:
            return
        pp = view.int_value("pipeline_parallel_degree")
        if pp is not None and pp > 1:
            key = (
                "partitions"
                if view.parameters is not None
                and view.parameters.get("pipeline_parallel_degree") is None
                else "pipeline_parallel_degree"
            )
            yield ConfigProblem(
                view.located("pipeline_parallel_degree"),
                f"{key} {pp} with sharded_data_parallel_degree {sdp}: the job fails at start-up",
                Severity.ERROR,
                explanation=(
                    "Sharded data parallelism cannot run with pipeline parallelism; the library"
                    " requires a pipeline degree of 1 when sharding and stops at start-up, after"
                    f" the instances are up. Set {key} to 1 (shard over more GPUs, or add tensor"
                    " parallelism, to fit the model) or turn sharded data parallelism off."
                ),
            )
        if view.value("shard_optimizer_state") is True:
            yield ConfigProblem(
                view.located("shard_optimizer_state"),
                f"shard_optimizer_state with sharded_data_parallel_degree {sdp}: the job fails at"
                " start-up",
                Severity.ERROR,
                explanation=(
                    "Sharded data parallelism already shards the optimizer state (with the"
                    " parameters and gradients), and the library refuses the combination at"
                    " start-up. Remove `shard_optimizer_state` (or set it to False)."
                ),
            )
        tp = view.int_value("tensor_parallel_degree")
        if tp is None or tp <= 1:
            return
        yield from _with_tensor_parallelism(view, sdp, tp)

    def check_with_code(self, view: ConfigView) -> Iterator[ConfigProblem]:
        sdp, tp = (
            view.int_value("sharded_data_parallel_degree"),
            view.int_value("tensor_parallel_degree"),
        )
        if sdp is None or tp is None or sdp <= 1 or tp <= 1:
            return
        if view.smp_version is not None and view.smp_version.before(SDP_WITH_TP_SINCE):
            return  # the combination itself is the finding there
        code = launched_code(self.program, view)
        if code is None or code.uses_hf_trainer:
            return
        for facts, call in code.smp_calls("model_creation"):
            found = argument(call, "tensor_parallelism", 0)
            if found is not None and facts.literal(found.value) is not False:
                return
        yield ConfigProblem(
            view.located("tensor_parallel_degree"),
            "sharding with tensor parallelism, but no"
            " `smp.model_creation(tensor_parallelism=True)`",
            Severity.WARNING,
            explanation=(
                f"{code.script} (and the project modules it imports) never builds the model inside"
                " `smp.model_creation(tensor_parallelism=True)`: sharded data parallelism combines"
                " with tensor parallelism only for models created that way (the library's"
                " tensor-parallel Hugging Face models), otherwise the model is not distributed as"
                " the sharding expects. Build the model inside `with"
                " smp.model_creation(tensor_parallelism=True, ...):`."
            ),
            evidence=(f"sharded_data_parallel_degree {sdp}, tensor_parallel_degree {tp}",),
        )


def _with_tensor_parallelism(view: ConfigView, sdp: int, tp: int) -> Iterator[ConfigProblem]:
    """SDP with TP: available from SMP 1.15 (PyTorch 1.13.1 and 2.0.0 containers) and only with
    ``prescaled_batch``. On an older library the combination stops at start-up whatever else is
    set, so that is the one finding (one mistake, one finding)."""
    yield ConfigProblem(
        view.located("tensor_parallel_degree"),
        f"tensor_parallel_degree {tp} with sharded_data_parallel_degree {sdp} needs SMP 1.15",
        Severity.ERROR,
        explanation=(
            "SMP 1.15 ships only in the PyTorch 1.13.1 and 2.0.0 containers."
            f" {leading(view.version_condition(until=BEFORE_SDP_WITH_TP))} that older library"
            " requires tensor_parallel_degree 1 with sharded data parallelism and stops at"
            ' start-up, after the instances are up. Use framework_version "1.13.1" or later, or'
            " drop one of the two."
        ),
        until=BEFORE_SDP_WITH_TP,
        # Writing the combination targets 1.15: only a stated older version makes it a mistake.
        implied=SDP_WITH_TP_SINCE,
    )
    if view.smp_version is not None and view.smp_version.before(SDP_WITH_TP_SINCE):
        return
    prescaled = view.value("prescaled_batch")
    if prescaled is True or prescaled is UNKNOWN:
        return
    located = view.located("prescaled_batch")
    state = "is not set (default False)" if located is None else f"is {prescaled!r}"
    yield ConfigProblem(
        located or view.located("tensor_parallel_degree"),
        'sharding with tensor parallelism needs `"prescaled_batch": True`',
        Severity.ERROR,
        explanation=(
            "With both, each tensor-parallel group must read one combined batch (data sharded by"
            " `smp.rdp_rank()`/`smp.rdp_size()`), which is what prescaled_batch tells the library."
            ' Set `"prescaled_batch": True` and shard the data by the reduced data-parallel rank.'
        ),
        evidence=(
            f"sharded_data_parallel_degree {sdp}, tensor_parallel_degree {tp}, prescaled_batch"
            f" {state}",
        ),
    )
