"""The memory estimate against the seeds: the seven reference configurations fit, the same
models on clearly weaker configurations do not, and each technique divides what it should.

Run ``python tests/test_plan_memory.py`` to print the calibration table of docs/plan.md.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from plan_references import (
    GPT2_10B,
    GPT2_10B_OTHER,
    GPT2_30B,
    GPT2_60B,
    NEOX_20B,
    NEOX_65B,
    P4D,
    REFERENCES,
    WEAKER,
    reference,
)

from smpfix.plan.memory import GIB, estimate, model_states
from smpfix.plan.models import count_parameters, parameters_only
from smpfix.plan.setup import Setup, problems
from smpfix.plan.suggestions import suggest
from smpfix.plan.verdict import Verdict, bracket, verdict_of

READINGS = {"OSS splits fp32 gradients": True, "catalog reading, 8 + 12/d": False}


def run(name: str, group: dict, splits: bool = True):  # type: ignore[no-untyped-def]
    shape, setup, instance = group[name]
    return estimate(count_parameters(shape), shape, setup, instance.gpu_memory_mib, splits)


def test_reference_model_sizes() -> None:
    sizes = {
        GPT2_10B: 10e9,
        GPT2_10B_OTHER: 10e9,
        GPT2_30B: 30e9,
        GPT2_60B: 60e9,
        NEOX_20B: 20e9,
        NEOX_65B: 65e9,
    }
    for shape, nominal in sizes.items():
        assert abs(count_parameters(shape).total - nominal) / nominal < 0.04, shape


@pytest.mark.parametrize("reading", sorted(READINGS))
@pytest.mark.parametrize("name", list(REFERENCES))
def test_reference_configurations_fit(name: str, reading: str) -> None:
    assert problems(reference(name)) == ()
    found = run(name, REFERENCES, READINGS[reading])
    assert verdict_of(found) in (Verdict.FITS, Verdict.TIGHT), (name, found.total / GIB)


def test_the_ten_billion_reference_fits_with_the_other_shape_too() -> None:
    setup = reference("GPT-2 10B")
    assert estimate(
        count_parameters(GPT2_10B_OTHER), GPT2_10B_OTHER, setup, P4D.gpu_memory_mib
    ).fits


@pytest.mark.parametrize("reading", sorted(READINGS))
@pytest.mark.parametrize("name", list(WEAKER))
def test_weaker_configurations_do_not_fit(name: str, reading: str) -> None:
    found = run(name, WEAKER, READINGS[reading])
    assert verdict_of(found) is Verdict.DOES_NOT_FIT, (name, found.total / GIB)


# -- model states --------------------------------------------------------------------------------


def test_twenty_bytes_per_parameter_without_sharding() -> None:
    count = count_parameters(GPT2_10B)
    assert model_states(count, Setup(world=1)).states == pytest.approx(20 * count.total)


def test_fp32_and_other_optimizers_cost_what_they_keep() -> None:
    count = count_parameters(GPT2_10B)
    assert model_states(count, Setup(world=1, precision="fp32")).states == pytest.approx(
        16 * count.total
    )
    assert model_states(count, Setup(world=1, optimizer="sgd")).states == pytest.approx(
        12 * count.total
    )
    assert model_states(
        count, Setup(world=1, optimizer="sgd with momentum")
    ).states == pytest.approx(16 * count.total)


def test_the_catalogs_worked_check() -> None:
    # Catalog section 7: 10B, 128 GPUs, tp 4, OSS: about 21 GB with 8 + 12/d, 50 GB without OSS.
    count = count_parameters(GPT2_10B)
    setup = reference("GPT-2 10B")
    catalog = model_states(count, setup, oss_splits_fp32_gradients=False).states
    assert 19e9 < catalog < 23e9
    assert 50e9 < model_states(count, replace(setup, oss=False)).states < 55e9
    assert model_states(count, setup).states < catalog


def test_tensor_and_pipeline_parallelism_divide_the_parameters() -> None:
    count = count_parameters(GPT2_30B)
    one = model_states(count, Setup(world=8)).parameters_per_gpu
    tp8 = model_states(count, Setup(world=8, tp=8)).parameters_per_gpu
    pp2 = model_states(count, Setup(world=8, tp=4, pp=2)).parameters_per_gpu
    assert one == count.total
    assert tp8 == pytest.approx(count.in_layers / 8 + count.outside_layers)  # embeddings stay whole
    assert pp2 == pytest.approx((count.in_layers / 4 + count.outside_layers) / 2)


def test_sharded_data_parallelism_divides_by_its_degree() -> None:
    count = count_parameters(NEOX_20B)
    s16 = model_states(count, reference("GPT-NeoX-20B on 2 instances")).states
    s32 = model_states(count, reference("GPT-NeoX-20B on 8 instances")).states
    assert s16 == pytest.approx(20 * count.total / 16, rel=0.01)
    assert s32 == pytest.approx(s16 / 2, rel=0.01)


# -- activations ---------------------------------------------------------------------------------


def test_checkpointing_offloading_and_flash_attention_reduce_activations() -> None:
    shape, setup, instance = REFERENCES["GPT-NeoX-65B, tp 2"]
    count = count_parameters(shape)

    def activations(**changes: object) -> float:
        found = estimate(
            count, shape, replace(setup, **changes), instance.gpu_memory_mib
        ).activations
        assert found is not None
        return found.total

    everything = activations(microbatches=2)
    assert (
        everything
        < activations(microbatches=2, offload_activations=False)
        < activations(microbatches=2, activation_checkpointing=False, offload_activations=False)
    )
    assert everything < activations(microbatches=2, flash_attention=False)


def test_offloading_one_microbatch_saves_nothing() -> None:
    """Activation offloading page: "When it is used with only one microbatch, it does not save
    memory" (the documented 65B runs set no microbatches)."""
    shape, setup, instance = REFERENCES["GPT-NeoX-65B, tp 8"]
    count = count_parameters(shape)
    assert setup.offload_activations and setup.microbatches == 1
    offloaded = estimate(count, shape, setup, instance.gpu_memory_mib)
    kept = estimate(
        count, shape, replace(setup, offload_activations=False), instance.gpu_memory_mib
    )
    assert offloaded.total == kept.total


def test_grouped_checkpoints_keep_fewer_inputs_and_recompute_more() -> None:
    shape, setup, instance = REFERENCES["GPT-2 30B"]
    count = count_parameters(shape)
    each = estimate(count, shape, setup, instance.gpu_memory_mib).activations
    pairs = estimate(
        count, shape, replace(setup, checkpoint_group=2), instance.gpu_memory_mib
    ).activations
    assert each is not None and pairs is not None
    assert pairs.checkpoints == pytest.approx(each.checkpoints / 2)
    assert pairs.working_layer == pytest.approx(2 * each.working_layer)


def test_fp32_training_doubles_the_activations() -> None:
    shape, setup, instance = REFERENCES["GPT-2 10B"]
    count = count_parameters(shape)
    half = estimate(count, shape, setup, instance.gpu_memory_mib).activations
    full = estimate(
        count, shape, replace(setup, precision="fp32"), instance.gpu_memory_mib
    ).activations
    assert half is not None and full is not None
    assert full.total == pytest.approx(2 * half.total)


def test_a_prescaled_batch_is_the_batch_of_a_tensor_parallel_group() -> None:
    # batch 40 prescaled over tp 4 is batch 10 per rank without prescaling
    shape, setup, instance = REFERENCES["GPT-2 10B"]
    count = count_parameters(shape)
    prescaled = estimate(count, shape, setup, instance.gpu_memory_mib).total
    per_rank = estimate(
        count, shape, replace(setup, prescaled_batch=False, batch=10), instance.gpu_memory_mib
    ).total
    assert prescaled == pytest.approx(per_rank)


def test_a_pipeline_stage_holds_its_microbatches_in_flight() -> None:
    shape, setup, instance = REFERENCES["GPT-2 60B"]
    count = count_parameters(shape)
    two = estimate(count, shape, setup, instance.gpu_memory_mib).activations
    four = estimate(
        count, shape, replace(setup, active_microbatches=4), instance.gpu_memory_mib
    ).activations
    assert two is not None and four is not None
    assert four.checkpoints == pytest.approx(2 * two.checkpoints)


def test_without_sequence_or_batch_only_a_lower_bound() -> None:
    shape, setup, instance = REFERENCES["GPT-2 30B"]
    found = estimate(
        count_parameters(shape), shape, replace(setup, batch=None), instance.gpu_memory_mib
    )
    assert found.activations is None and found.fits is None and verdict_of(found) is Verdict.UNKNOWN
    # ... which can still show that a job does not fit: 20 B/param of 30B on one GPU
    alone = estimate(parameters_only(30 * 10**9), None, Setup(world=8), instance.gpu_memory_mib)
    assert alone.fits is False and verdict_of(alone) is Verdict.DOES_NOT_FIT


# -- unresolved switches ---------------------------------------------------------------------------


def test_unknown_flash_attention_is_bracketed_not_guessed() -> None:
    shape, setup, instance = REFERENCES["GPT-NeoX-20B on 2 instances"]
    count = count_parameters(shape)
    assert (
        bracket(count, shape, setup, instance.gpu_memory_mib, ("flash_attention",)).verdict
        is Verdict.DEPENDS
    )
    shape, setup, instance = REFERENCES["GPT-2 30B"]
    assert bracket(
        count_parameters(shape),
        shape,
        setup,
        instance.gpu_memory_mib,
        ("flash_attention", "offload_activations"),
    ).verdict in (Verdict.FITS, Verdict.TIGHT)
    shape, setup, instance = WEAKER["NeoX-20B, plain data parallelism"]
    assert (
        bracket(
            count_parameters(shape),
            shape,
            setup,
            instance.gpu_memory_mib,
            ("activation_checkpointing",),
        ).verdict
        is Verdict.DOES_NOT_FIT
    )


# -- suggestions ----------------------------------------------------------------------------------


def suggestions(name: str):  # type: ignore[no-untyped-def]
    shape, setup, instance = WEAKER[name]
    return suggest(count_parameters(shape), shape, setup, instance)


def test_suggestions_fit_and_follow_the_search_order() -> None:
    """A bigger GPU first (the best-practices page's first item) when the job fits on one,
    then the configurations the search finds on this cluster, in its order."""
    found = suggestions("10B, tp 4 without OSS")
    assert found[0].change == "use ml.p4de.24xlarge (A100 80GB)"
    assert found[0].instance is not None and found[0].instance.gpus == 8
    assert (
        found[1].change == "set tensor_parallel_degree to 1; set sharded_data_parallel_degree to 8"
    )
    assert found[2].change.startswith("set tensor_parallel_degree to 2; turn on shard_optimizer")
    for name in WEAKER:
        for suggestion in suggestions(name):
            assert verdict_of(suggestion.estimate) in (Verdict.FITS, Verdict.TIGHT), name
            assert problems(suggestion.setup) == (), name
    assert suggestions("NeoX-20B without checkpointing")[0].change.startswith(
        "turn on activation checkpointing"
    )
    assert suggestions("NeoX-20B, plain data parallelism")[0].change == (
        "set sharded_data_parallel_degree to 16"
    )


def test_a_bigger_gpu_when_no_configuration_change_fits() -> None:
    found = suggestions("NeoX-20B on A10G")
    assert [s.change for s in found] == ["use ml.p4d.24xlarge (A100 40GB)"]


def test_a_change_that_keeps_the_global_batch_says_the_new_batch() -> None:
    """Plain data parallelism at 10 samples per rank on 128 GPUs is a global batch of 1280:
    tensor parallelism of 2 with prescaled_batch gives each group 20."""
    changes = [s.change for s in suggestions("10B, plain data parallelism")]
    assert changes[1] == (
        "set tensor_parallel_degree to 2; turn on shard_optimizer_state; with prescaled_batch"
        " and a batch of 20 per tensor-parallel group"
    )


def test_no_suggestion_for_a_job_that_fits() -> None:
    shape, setup, instance = REFERENCES["GPT-2 30B"]
    assert suggest(count_parameters(shape), shape, setup, instance) == ()


def calibration_table() -> str:
    rows = [
        (
            "| configuration | parameters | model states | activations | rest | total GiB | share"
            " of 40 GiB | catalog reading |"
        ),
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for group in (REFERENCES, WEAKER):
        for name in group:
            found, catalog = run(name, group), run(name, group, False)
            acts = found.activations.total if found.activations is not None else 0.0
            rows.append(
                f"| {name} | {found.parameters / 1e9:.2f}B | {found.model_states.total / GIB:.1f} |"
                f" {acts / GIB:.1f} | {found.buffers / GIB:.1f} | {found.total / GIB:.1f} |"
                f" {found.share:.0%} ({verdict_of(found).value}) | {catalog.total / GIB:.1f}"
                f" ({catalog.share:.0%}) |"
            )
    return "\n".join(rows)


if __name__ == "__main__":
    print(calibration_table())
    for name in WEAKER:
        print(
            f"- {name}: "
            + "; or ".join(
                f"{s.change} ({s.estimate.total / GIB:.1f} GiB)" for s in suggestions(name)
            )
        )
