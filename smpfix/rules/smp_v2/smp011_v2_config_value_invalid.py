"""SMP011: an SMP v2 configuration value of the wrong type or out of its range."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from smpfix.base.findings import Severity
from smpfix.base.literals import UNKNOWN
from smpfix.rules.config_rule import ConfigProblem, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism
from smpfix.rules.smp_v2._config import V2ConfigRule
from smpfix.rules.smp_v2._releases import absent_from_every_release
from smpfix.rules.titles import snippet

# Each integer key and its smallest value (the SMP v2 reference: ``hybrid_shard_degree`` from 0,
# the degrees from 1, ``activation_loading_horizon`` "a positive integer").
_INTEGERS: Mapping[str, int] = {
    "hybrid_shard_degree": 0,
    "tensor_parallel_degree": 1,
    "context_parallel_degree": 1,
    "expert_parallel_degree": 1,
    "activation_loading_horizon": 1,
}
_BOOLEANS = ("sm_activation_offloading", "fsdp_cache_flush_warnings", "allow_empty_shards")


class V2ConfigValueInvalid(V2ConfigRule):
    summary = (
        "An SMP v2 parameter of the wrong type (a degree as a string, a boolean as 0/1 or"
        ' "true") or below its range (a degree under 1, `activation_loading_horizon` under 1).'
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        parameters = view.parameters
        if parameters is None or not parameters.is_dict:
            return
        for key, located in parameters.value.items():
            value = located.plain()
            if value is UNKNOWN or absent_from_every_release(view, key):
                # A key the job's release lacks is SMP010's finding; its value is beside the point.
                continue
            where = (f"`{key}` in {view.where}",)
            if key in _INTEGERS or key == "random_seed":
                if not isinstance(value, int) or isinstance(value, bool):
                    yield ConfigProblem(
                        located,
                        f"`{key}` is {snippet(repr(value), 30)}, but SMP v2 takes an integer",
                        Severity.ERROR,
                        explanation=(
                            f"`{key}` is an Integer in the SMP v2 reference. Write"
                            f" {_as_int(value)}."
                        ),
                        evidence=where,
                    )
                elif key in _INTEGERS and value < _INTEGERS[key]:
                    lowest = _INTEGERS[key]
                    yield ConfigProblem(
                        located,
                        f"`{key}` is {value}, below its range: SMP v2 takes {lowest} or more",
                        Severity.ERROR,
                        explanation=_meaning(key),
                        evidence=where,
                    )
            elif key in _BOOLEANS and not isinstance(value, bool):
                yield ConfigProblem(
                    located,
                    f"`{key}` is {snippet(repr(value), 30)}, but SMP v2 takes a boolean",
                    Severity.ERROR,
                    explanation=(
                        f"`{key}` is a Boolean in the SMP v2 reference: write `True` or `False`."
                    ),
                    evidence=where,
                )


def _as_int(value: object) -> str:
    if isinstance(value, str) and value.strip().isdigit():
        return f"`{int(value)}` without quotes"
    return "a whole number"


def _meaning(key: str) -> str:
    """What the values of an integer key mean, for the explanation of one below its range."""
    if key == "hybrid_shard_degree":
        return (
            "In `hybrid_shard_degree`, 0 lets SMP choose, 1 replicates, 2 and more shard across"
            " that many GPUs."
        )
    if key == "activation_loading_horizon":
        return (
            "`activation_loading_horizon` is how many offloaded or checkpointed layers' inputs"
            " may be on the GPU at once."
        )
    return f"A `{key}` of 1 turns the feature off."
