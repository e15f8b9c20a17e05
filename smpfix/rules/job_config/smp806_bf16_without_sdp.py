"""SMP806: bf16 training needs sharded data parallelism, and GPUs that have bf16."""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.findings import Severity
from smpfix.base.flavour import ONLY_PYTORCH
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism


class Bf16WithoutSdp(ConfigRule):
    flavours = ONLY_PYTORCH
    summary = (
        '`"bf16": True` works only with sharded data parallelism, and runs fast only on GPUs with'
        " bf16 support (A100, A10G, H100)."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        if view.value("bf16") is not True:
            return
        at = view.located("bf16")
        instance = view.instance
        if instance is not None and not instance.bf16:
            yield ConfigProblem(
                at,
                f"bf16 on {instance.name}, whose {instance.gpu_model} GPUs lack native bf16:"
                " it runs slowly",
                Severity.WARNING,
                explanation=(
                    "Native bf16 support needs Ampere or newer GPUs (A100, A10G, H100): the job"
                    " runs, but its bf16 arithmetic is emulated and much slower than on GPUs with"
                    ' bf16, on instances that are paid for by the hour. Use `"fp16": True` on this'
                    " instance type, or ml.p4d.24xlarge / ml.p4de.24xlarge instances for bf16."
                ),
            )
        sdp = view.int_value("sharded_data_parallel_degree")
        if sdp is None or sdp > 1:
            return
        located = view.located("sharded_data_parallel_degree")
        state = "is not set (default 1)" if located is None else f"is {sdp}"
        yield ConfigProblem(
            at,
            "bf16 without sharded data parallelism, its only documented setting",
            Severity.WARNING,
            explanation=(
                "bf16 training works only when sharded data parallelism is on (the library does"
                " not stop you, but the documented support is bf16 with sharding only). Turn"
                ' sharded data parallelism on (`"sharded_data_parallel_degree"` > 1) or use'
                ' `"fp16": True`.'
            ),
            evidence=(f"bf16 is True; sharded_data_parallel_degree {state}",),
        )
