"""SMP803: the tensor-parallel degree should be a power of two that fits inside one node."""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.findings import Severity
from smpfix.base.flavour import ONLY_PYTORCH
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism

# Placement strategies that do not put T rightmost, so tensor-parallel peers are not neighbours.
_T_NOT_RIGHTMOST = frozenset({"spread", "TPD", "TDP", "PTD", "DTP"})


class TensorParallelDegreeShape(ConfigRule):
    flavours = ONLY_PYTORCH
    summary = (
        "`tensor_parallel_degree` should be a power of two, at most the GPUs of one node, dividing"
        " processes_per_host."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        tp = view.int_value("tensor_parallel_degree")
        if tp is None or tp <= 1:
            return
        at = view.located("tensor_parallel_degree")
        instance = view.instance
        if instance is not None and tp > instance.gpus:
            yield ConfigProblem(
                at,
                f"tensor_parallel_degree {tp} spans nodes: one {instance.name} has"
                f" {instance.gpus} GPUs",
                Severity.ERROR,
                explanation=(
                    "Every tensor-parallel layer would exchange activations across the network on"
                    " each forward and backward pass, which is far slower than NVLink inside a"
                    f" node. Use at most {instance.gpus} and scale with pipeline or data"
                    " parallelism across nodes."
                ),
            )
            return
        wrong, why, evidence = [], [], []
        if tp & (tp - 1):
            wrong.append("is not a power of two")
            why.append(
                "The library accepts a degree that is not a power of two, but its distributed"
                " transformer layers need head and hidden sizes divisible by the degree (otherwise"
                " tensor parallelism is silently not applied to them), and the documented degrees"
                " are 2, 4 and 8."
            )
            if instance is not None:
                evidence.append(f"{instance.name} has {instance.gpus} GPUs per node")
        per_host = view.launch("processes_per_host")
        if (
            isinstance(per_host, int)
            and not isinstance(per_host, bool)
            and per_host > 0
            and per_host % tp
            and tp <= per_host
        ):
            wrong.append(f"does not divide processes_per_host {per_host}")
            why.append(
                "Some tensor-parallel groups would span two nodes and exchange activations over the"
                " network."
            )
        if wrong:
            yield ConfigProblem(
                at,
                f"tensor_parallel_degree {tp} {' and '.join(wrong)}",
                Severity.WARNING,
                explanation=" ".join(
                    [*why, "Use a power of two that divides the GPUs of one node."]
                ),
                evidence=tuple(evidence),
            )
        strategy = view.value("placement_strategy")
        count = view.launch("instance_count")
        if (
            isinstance(strategy, str)
            and strategy in _T_NOT_RIGHTMOST
            and isinstance(count, int)
            and count > 1
        ):
            yield ConfigProblem(
                view.located("placement_strategy") or at,
                f"placement_strategy {strategy!r} may split tensor-parallel groups across the"
                f" {count} instances",
                Severity.WARNING,
                explanation=(
                    f"placement_strategy {strategy!r} does not put tensor parallelism (T)"
                    " rightmost, so tensor-parallel peers may land on different nodes and every"
                    ' layer\'s activations cross the network. Use "cluster" (DPT) so'
                    " tensor-parallel ranks are neighbours within a node."
                ),
            )
