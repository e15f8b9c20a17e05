"""SMP v2 plans of mixture-of-experts models under expert parallelism, and of FSDP CPU offload.

Expert parallelism (the v2 expert parallelism page) splits the experts of a Mixtral model over
``expert_parallel_degree`` GPUs; everything else is sharded as in a dense model, and FSDP
shards the experts a rank holds over at most ``world / expert_parallel_degree`` GPUs (the
official Mixtral example's range of ``hybrid_shard_degree``). FSDP's
``CPUOffload(offload_params=True)`` moves the rank's shard of parameters, gradients and
optimizer state to host memory (PyTorch's FSDP reference); what FSDP gathers for computing
stays on the GPU. The official Mixtral example's configuration (8 x ml.p4d.24xlarge,
``hybrid_shard_degree`` 32, ``expert_parallel_degree`` 2, batch 2, sequence 2048) must fit.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli

from smpfix.job.instances import INSTANCE_TYPES
from smpfix.plan.checkpoints import CHECKPOINTS, find_checkpoint
from smpfix.plan.fsdp import (
    FULL_SHARD,
    HYBRID_SHARD,
    FsdpSetup,
    estimate,
    model_states,
    problems,
    shard_degree,
    sharded_states,
)
from smpfix.plan.layers import LayerKind
from smpfix.plan.memory import GIB, Estimate
from smpfix.plan.model_lookup import Dimensions, choose
from smpfix.plan.models import ModelShape, count_parameters, dense_equivalent
from smpfix.plan.planner_fsdp import host_memory
from smpfix.plan.search import Cluster, Workload, search
from smpfix.plan.suggestions_fsdp import host_changes
from smpfix.plan.verdict import Verdict, combined, verdict_of

PROJECTS = Path(__file__).parent / "plan_projects"
A100_40GB_MIB = 40960


def _shape(name: str) -> ModelShape:
    found = find_checkpoint(name)
    assert found is not None
    return found.shape


MIXTRAL = _shape("mistralai/Mixtral-8x7B-v0.1")
LLAMA2_70B = _shape("meta-llama/Llama-2-70b-hf")


def mixtral_setup(instances: int, hybrid: int, ep: int, batch: int = 2) -> FsdpSetup:
    world = instances * 8
    return FsdpSetup(
        world=world,
        shard=shard_degree(hybrid, 1, world, HYBRID_SHARD, ep),
        ep=ep,
        seq_len=2048,
        batch=batch,
        activation_checkpointing=True,
        layers=LayerKind.HUGGING_FACE,
    )


def verdict(shape: ModelShape, setup: FsdpSetup) -> tuple[Verdict, Estimate]:
    """Over flash attention both ways, as the plan does; with the heavier estimate."""
    count = count_parameters(shape)
    best, worst = (
        estimate(count, shape, replace(setup, flash_attention=flash), A100_40GB_MIB)
        for flash in (True, False)
    )
    return combined(best, worst), worst


def test_a_mixtral_layer_counts_its_experts_apart() -> None:
    count = count_parameters(MIXTRAL)
    assert count.total == 46_702_792_704  # the published count of Mixtral-8x7B-v0.1
    assert count.in_experts == 32 * 8 * 3 * 4096 * 14336  # 32 layers of 8 SwiGLU experts
    assert count_parameters(LLAMA2_70B).in_experts == 0


def test_a_mixtral_config_json_gives_the_mixtral_shape(tmp_path: Path) -> None:
    config = {
        "model_type": "mixtral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "vocab_size": 32000,
        "tie_word_embeddings": False,
    }
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    chosen = choose(str(tmp_path), Dimensions())
    assert chosen.shape is not None and chosen.shape.experts == 8
    assert chosen.count.total == 46_702_792_704


def test_expert_parallelism_divides_the_experts_and_nothing_else() -> None:
    count = count_parameters(MIXTRAL)
    dense = count.total - count.in_experts
    alone = FsdpSetup(world=64, shard=32)
    split = replace(alone, ep=2)
    assert sharded_states(count, alone) == pytest.approx(16 * count.total / 32)
    assert sharded_states(count, split) == pytest.approx(16 * (dense + count.in_experts / 2) / 32)
    # The window gathers half of each layer's experts, and all of its attention.
    per_layer = (count.in_layers - count.in_experts + count.in_experts / 2) / count.layers
    assert model_states(count, split).sdp_window == pytest.approx(
        2 * (count.outside_layers + 3 * per_layer)
    )


def test_the_experts_a_rank_holds_shard_over_the_ranks_that_hold_them() -> None:
    """On one instance of 8 with expert_parallel_degree 8, each rank holds one expert of every
    layer and no other rank holds it: FSDP cannot shard it further."""
    count = count_parameters(MIXTRAL)
    setup = FsdpSetup(world=8, shard=1, ep=8)
    assert setup.expert_shard == 1
    assert sharded_states(count, setup) == pytest.approx(
        16 * (count.total - count.in_experts + count.in_experts / 8)
    )


def test_the_sharding_degree_stays_within_world_over_the_expert_degree() -> None:
    assert shard_degree(0, 1, 64, FULL_SHARD, ep=2) == 32
    assert shard_degree(0, 1, 64, HYBRID_SHARD, ep=2) == 8
    assert shard_degree(0, 1, 16, HYBRID_SHARD, ep=4) == 4
    assert shard_degree(32, 1, 64, FULL_SHARD, ep=2) == 32  # as written


def test_configurations_smp_refuses_with_expert_parallelism_get_no_estimate() -> None:
    assert problems(FsdpSetup(world=16, shard=8, ep=2)) == ()
    assert "not compatible with tensor parallelism" in " ".join(
        problems(FsdpSetup(world=16, shard=4, tp=2, ep=2))
    )
    assert "does not divide" in " ".join(problems(FsdpSetup(world=16, shard=1, ep=3)))
    assert "above the process count over expert_parallel_degree" in " ".join(
        problems(FsdpSetup(world=16, shard=16, ep=2))
    )
    assert "8 experts per layer do not divide" in " ".join(
        problems(FsdpSetup(world=48, shard=8, ep=6, experts=8))
    )
    assert problems(FsdpSetup(world=48, shard=8, ep=6)) == ()  # experts unknown


def test_the_official_mixtral_configuration_fits_and_weaker_ones_do_not() -> None:
    found, _ = verdict(MIXTRAL, mixtral_setup(8, 32, 2))
    assert found in (Verdict.FITS, Verdict.TIGHT)
    for weaker in (mixtral_setup(2, 8, 2), mixtral_setup(1, 0, 8), mixtral_setup(1, 8, 1)):
        found, heaviest = verdict(MIXTRAL, weaker)
        assert found is Verdict.DOES_NOT_FIT, (weaker, heaviest.total / GIB)


def test_mixtral_activations_are_those_of_its_chosen_experts() -> None:
    """Each token runs two experts: the MLP activations are those of an MLP twice as wide."""
    assert dense_equivalent(MIXTRAL).ffn == 2 * 14336
    assert dense_equivalent(LLAMA2_70B) is LLAMA2_70B
    count = count_parameters(MIXTRAL)
    setup = mixtral_setup(8, 32, 2)
    two = estimate(count, MIXTRAL, setup, A100_40GB_MIB).activations
    one = estimate(count, replace(MIXTRAL, experts_per_token=1), setup, A100_40GB_MIB).activations
    assert two is not None and one is not None and two.working_layer > one.working_layer


def test_cpu_offload_moves_the_sharded_states_to_the_host_and_keeps_the_window() -> None:
    count = count_parameters(LLAMA2_70B)
    setup = FsdpSetup(world=8, shard=8, seq_len=2048, batch=1, activation_checkpointing=True)
    on_gpu = model_states(count, setup)
    offloaded = model_states(count, replace(setup, cpu_offload=True))
    assert on_gpu.states == pytest.approx(16 * count.total / 8)
    assert offloaded.states == 0
    assert offloaded.sdp_window == on_gpu.sdp_window
    assert sharded_states(count, replace(setup, cpu_offload=True)) == on_gpu.states
    assert verdict(LLAMA2_70B, setup)[0] is Verdict.DOES_NOT_FIT
    assert verdict(LLAMA2_70B, replace(setup, cpu_offload=True))[0] is Verdict.FITS


# Through the command line: launchers in the style of the official v2 notebooks.


def launcher(script: str, instances: int, parameters: dict[str, Any], hyper: dict[str, Any]) -> str:
    return f"""\
from sagemaker.pytorch import PyTorch

estimator = PyTorch(
    entry_point="{script}",
    framework_version="2.4.1",
    py_version="py311",
    instance_type="ml.p4d.24xlarge",
    instance_count={instances},
    hyperparameters={hyper!r},
    distribution={{
        "torch_distributed": {{"enabled": True}},
        "smdistributed": {{"modelparallel": {{"enabled": True, "parameters": {parameters!r}}}}},
    }},
)
"""


NO_OFFLOADING = {"sm_activation_offloading": False}
MIXTRAL_HYPER = {"train_batch_size": 2, "max_context_width": 2048, "num_local_experts": 8}
LAUNCHERS: dict[str, tuple[str, int, dict[str, Any], dict[str, Any]]] = {
    "mixtral_official": (
        "mixtral_v2_train.py",
        8,
        {"hybrid_shard_degree": 32, "expert_parallel_degree": 2, **NO_OFFLOADING},
        MIXTRAL_HYPER,
    ),
    "mixtral_on_two_instances": (
        "mixtral_v2_train.py",
        2,
        {"hybrid_shard_degree": 8, "expert_parallel_degree": 2, **NO_OFFLOADING},
        MIXTRAL_HYPER,
    ),
    "mixtral_experts_do_not_divide": (
        "mixtral_v2_train.py",
        6,
        {"hybrid_shard_degree": 8, "expert_parallel_degree": 6, **NO_OFFLOADING},
        MIXTRAL_HYPER,
    ),
    "mixtral_with_tensor_parallelism": (
        "mixtral_v2_train.py",
        8,
        {"tensor_parallel_degree": 2, "expert_parallel_degree": 2, **NO_OFFLOADING},
        MIXTRAL_HYPER,
    ),
    "offloaded_70b": ("llama_v2_cpu_offload_train.py", 1, {"hybrid_shard_degree": 8}, {}),
    # Sharded over two GPUs only: each rank offloads half the 70B model's states.
    "offloaded_70b_over_two": ("llama_v2_cpu_offload_train.py", 1, {"hybrid_shard_degree": 2}, {}),
    "not_offloaded_70b": (
        "llama_v2_cpu_offload_train.py",
        1,
        {"hybrid_shard_degree": 8},
        {"offload_params": 0},
    ),
}


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("experts")
    for script in ("mixtral_v2_train.py", "llama_v2_cpu_offload_train.py"):
        shutil.copy(PROJECTS / script, folder / script)
    for name, row in LAUNCHERS.items():
        (folder / f"launch_{name}.py").write_text(launcher(*row), encoding="utf-8")
    done = run_cli("plan", "--format", "json", str(folder))
    assert done.code == 1, done.stderr  # the weaker jobs do not fit
    return {
        Path(item["filename"]).stem.replace("launch_", ""): item for item in json.loads(done.stdout)
    }


def test_the_official_mixtral_launcher_fits_with_its_experts_split(
    plans: dict[str, dict[str, Any]],
) -> None:
    item = plans["mixtral_official"]
    assert item["fits"] is True, (item["per_gpu_gib"], item["reason"])
    assumptions = "\n".join(item["assumptions"])
    assert "8 experts per layer split over expert_parallel_degree 2 GPUs" in assumptions
    assert "sharded over 32 GPU(s) (hybrid_shard_degree 32, tensor_parallel_degree 1," in (
        assumptions
    )
    assert "not modelled" not in assumptions


def test_mixtral_on_two_instances_does_not_fit(plans: dict[str, dict[str, Any]]) -> None:
    assert plans["mixtral_on_two_instances"]["fits"] is False


def test_expert_and_tensor_parallelism_together_get_no_verdict(
    plans: dict[str, dict[str, Any]],
) -> None:
    item = plans["mixtral_with_tensor_parallelism"]
    assert item["verdict"] == "unknown"
    assert "not compatible with tensor parallelism" in item["reason"]


def test_experts_that_do_not_divide_over_the_degree_get_no_verdict(
    plans: dict[str, dict[str, Any]],
) -> None:
    item = plans["mixtral_experts_do_not_divide"]
    assert item["verdict"] == "unknown"
    assert "8 experts per layer do not divide over expert_parallel_degree" in item["reason"]


def test_fsdp_cpu_offload_in_the_script_makes_70b_fit_on_one_instance(
    plans: dict[str, dict[str, Any]],
) -> None:
    offloaded = plans["offloaded_70b"]
    assert offloaded["fits"] is True, (offloaded["per_gpu_gib"], offloaded["reason"])
    assumptions = "\n".join(offloaded["assumptions"])
    assert "cpu offload on: the FSDP wrap at llama_v2_cpu_offload_train.py" in assumptions
    assert "GiB of sharded parameters, gradients and optimizer state in host memory" in (
        assumptions
    )
    # 8 ranks of 128.5 GiB: 1027.8 GiB of the p4d.24xlarge's 1152 GiB.
    assert "1027.8 GiB for the 8 ranks of an instance, 124.2 GiB below the instance's 1152 GiB" in (
        assumptions
    )
    kept = plans["not_offloaded_70b"]
    assert kept["fits"] is False
    assert any(line.startswith("cpu offload off: ") for line in kept["assumptions"])
    assert offloaded["per_gpu_gib"]["model_states"] < kept["per_gpu_gib"]["model_states"] / 10


def test_offloaded_states_above_the_instance_memory_do_not_fit(
    plans: dict[str, dict[str, Any]],
) -> None:
    """The GPUs would hold the job; the host cannot hold what FSDP offloads to it."""
    item = plans["offloaded_70b_over_two"]
    assert item["verdict"] == "does not fit"
    assert item["reason"].startswith(
        "does not fit in host memory: FSDP CPU offload puts 4111.3 GiB for the 8 ranks of an"
        " instance in host memory, and ml.p4d.24xlarge has 1152 GiB"
    ), item["reason"]
    # No bigger GPU helps, and 70B does not fit on eight A100s without the offload: the change
    # is sharding the offloaded states over all eight GPUs (the offloaded_70b job, which fits).
    assert [change["change"] for change in item["suggestions"]] == [
        "set hybrid_shard_degree to 8 (the 8 ranks of an instance then offload 1027.8 GiB of"
        " its 1152 GiB)"
    ]
    assert item["suggestions"][0]["per_gpu_gib"] == plans["offloaded_70b"]["per_gpu_gib"]


def test_a_host_overflow_is_fixed_by_the_least_wider_sharding() -> None:
    """Unsharded, each rank of a 13B job offloads 194 GiB, 1552 GiB for eight: over a p4d's
    1152 GiB. Sharded over two GPUs it is 776 GiB; an instance whose host memory is not
    documented gets no change."""
    shape = CHECKPOINTS["meta-llama/Llama-2-13b-hf"].shape
    count = count_parameters(shape)
    setup = FsdpSetup(
        world=16, shard=1, seq_len=2048, batch=1, cpu_offload=True,
        activation_checkpointing=True, layers=LayerKind.HUGGING_FACE,
    )  # fmt: skip
    p4d = INSTANCE_TYPES["ml.p4d.24xlarge"]
    _, overflow = host_memory(sharded_states(count, setup), 8, p4d)
    assert overflow is not None
    [(change, found)] = host_changes(count, shape, setup, p4d, 8)
    assert change.startswith("set hybrid_shard_degree to 2 (the 8 ranks of an instance then")
    assert verdict_of(found) is Verdict.FITS
    assert host_changes(count, shape, setup, INSTANCE_TYPES["ml.g5.48xlarge"], 8) == ()


def test_host_memory_is_weighed_only_where_the_instance_documents_it() -> None:
    per_rank = 100 * GIB
    note, overflow = host_memory(per_rank, 8, INSTANCE_TYPES["ml.p5.48xlarge"])
    assert note.endswith(
        ": 800.0 GiB for the 8 ranks of an instance, 1248.0 GiB below the instance's 2048 GiB"
    )
    assert overflow is None
    note, overflow = host_memory(per_rank, 8, INSTANCE_TYPES["ml.p4de.24xlarge"])
    assert overflow is None and "352.0 GiB below the instance's 1152 GiB" in note
    _, overflow = host_memory(2 * per_rank, 8, INSTANCE_TYPES["ml.p4d.24xlarge"])
    assert overflow == (
        "does not fit in host memory: FSDP CPU offload puts 1600.0 GiB for the 8 ranks of an"
        " instance in host memory, and ml.p4d.24xlarge has 1152 GiB"
    )
    note, overflow = host_memory(per_rank, 8, INSTANCE_TYPES["ml.g5.48xlarge"])
    assert overflow is None and note.endswith("in host memory, not on the GPU")


def test_an_unresolved_cpu_offload_is_estimated_both_ways(tmp_path: Path) -> None:
    script = (PROJECTS / "llama_v2_cpu_offload_train.py").read_text(encoding="utf-8")
    (tmp_path / "train.py").write_text(
        script.replace("offload_params=args.offload_params > 0", "offload_params=OFFLOAD"),
        encoding="utf-8",
    )
    (tmp_path / "launch.py").write_text(
        launcher("train.py", 1, {"hybrid_shard_degree": 8}, {}), encoding="utf-8"
    )
    done = run_cli("plan", "--format", "json", str(tmp_path))
    (item,) = json.loads(done.stdout)
    assert "cpu_offload both ways" in item["reason"]
    assert item["verdict"] == "depends"
    assert any(
        line.startswith("cpu offload unresolved: the FSDP wrap at train.py")
        for line in item["assumptions"]
    )


OFFLOAD_70B = FsdpSetup(
    world=8,
    shard=8,
    seq_len=2048,
    batch=1,
    activation_checkpointing=True,
    cpu_offload=True,
    layers=LayerKind.HUGGING_FACE,
)
# The rows of docs/plan.md's table, in its order.
DOCUMENTED: dict[str, tuple[ModelShape, FsdpSetup]] = {
    "the official Mixtral example": (MIXTRAL, mixtral_setup(8, 32, 2)),
    "without expert parallelism": (MIXTRAL, mixtral_setup(8, 32, 1)),
    "on 2 instances": (MIXTRAL, mixtral_setup(2, 8, 2)),
    "experts over 8 on 1 instance": (MIXTRAL, mixtral_setup(1, 0, 8)),
    "70B with CPU offload": (LLAMA2_70B, OFFLOAD_70B),
    "70B without": (LLAMA2_70B, replace(OFFLOAD_70B, cpu_offload=False)),
}


@pytest.mark.parametrize("name", list(DOCUMENTED))
def test_docs_plan_md_gives_the_numbers_the_code_computes(name: str) -> None:
    docs = (Path(__file__).parent.parent / "docs" / "plan.md").read_text(encoding="utf-8")
    section = docs.split("### Expert parallelism and CPU offload", 1)[1].split("\n## ", 1)[0]
    shape, setup = DOCUMENTED[name]
    count = count_parameters(shape)
    best, worst = (
        estimate(count, shape, replace(setup, flash_attention=flash), A100_40GB_MIB)
        for flash in (True, False)
    )
    assert worst.activations is not None
    row = (
        f"| {worst.model_states.total / GIB:.1f} | {worst.activations.total / GIB:.1f}"
        f" | {worst.buffers / GIB:.1f} | {best.total / GIB:.1f} / {worst.total / GIB:.1f}"
        f" | {worst.share:.0%}".replace("%", " %")
    )
    assert row in section, row


# -- "what fits?" with expert parallelism ---------------------------------------------------------


def what_fits_v2(model: str, nodes: int) -> dict[str, Any]:
    done = run_cli(
        "plan",
        "--format",
        "json",
        "--model",
        model,
        "--library",
        "v2",
        "--instance",
        "ml.p4d.24xlarge",
        "--nodes",
        str(nodes),
        "--seq",
        "2048",
    )
    assert done.code == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def parameters_of(configuration: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = configuration["distribution"]["smdistributed"]["modelparallel"][
        "parameters"
    ]
    return found


def test_what_fits_finds_mixtral_a_place_only_expert_parallelism_makes() -> None:
    """On three p4d.24xlarge no layout without expert parallelism holds Mixtral 8x7B: FSDP
    gathers a whole layer of eight experts. Splitting the experts over 2 or 4 GPUs fits."""
    found = what_fits_v2("mistralai/Mixtral-8x7B-v0.1", 3)
    configurations = found["configurations"]
    assert [c["configuration"] for c in configurations] == [
        "ep 2, shard 12, checkpointing",
        "ep 4, shard 6, checkpointing",
    ]
    assert parameters_of(configurations[0]) == {
        "hybrid_shard_degree": 12,
        "tensor_parallel_degree": 1,
        "expert_parallel_degree": 2,
    }
    assert any("expert parallelism (SMP 2.3.0 and later)" in a for a in found["assumptions"])


def test_expert_parallel_rows_keep_smp012s_constraints_and_the_ranking() -> None:
    """Every expert degree divides the 32 GPUs and the 8 experts, comes without tensor
    parallelism, and leaves FSDP at most 32 / degree GPUs; expert parallelism ranks after the
    layouts without it, as tensor parallelism does."""
    configurations = what_fits_v2("mistralai/Mixtral-8x7B-v0.1", 4)["configurations"]
    degrees = [parameters_of(c).get("expert_parallel_degree", 1) for c in configurations]
    assert degrees == sorted(degrees) and degrees[0] == 1 and degrees[-1] > 1
    for configuration in configurations:
        parameters = parameters_of(configuration)
        ep = parameters.get("expert_parallel_degree", 1)
        assert 32 % ep == 0 and 8 % ep == 0
        assert ep == 1 or parameters["tensor_parallel_degree"] == 1
        assert parameters["hybrid_shard_degree"] <= 32 // ep


def test_a_dense_model_gets_no_expert_parallelism() -> None:
    found = what_fits_v2("meta-llama/Llama-2-13b-hf", 3)
    assert found["configurations"]
    assert all("expert_parallel_degree" not in parameters_of(c) for c in found["configurations"])
    assert not any("expert parallelism" in a for a in found["assumptions"])


def test_a_release_without_expert_parallelism_is_offered_none() -> None:
    mixtral = find_checkpoint("mistralai/Mixtral-8x7B-v0.1")
    assert mixtral is not None
    work = Workload(count_parameters(mixtral.shape), mixtral.shape, 2048, 24, "bf16", True)
    cluster = Cluster(INSTANCE_TYPES["ml.p4d.24xlarge"], 3)
    setups = [c.setup for c in search(work, cluster, "v2")]
    assert {s.ep for s in setups if isinstance(s, FsdpSetup)} == {2, 4}
    assert search(work, cluster, "v2", expert_parallelism=False) == ()


def mixtral_job(tmp_path: Path, framework_version: str) -> dict[str, Any]:
    """Mixtral on three p4d.24xlarge, sharded over all 24 GPUs without expert parallelism."""
    shutil.copy(PROJECTS / "mixtral_v2_train.py", tmp_path / "mixtral_v2_train.py")
    text = launcher(
        "mixtral_v2_train.py",
        3,
        {"hybrid_shard_degree": 24, **NO_OFFLOADING},
        {**MIXTRAL_HYPER, "train_batch_size": 1},
    ).replace('framework_version="2.4.1"', f'framework_version="{framework_version}"')
    (tmp_path / "launch.py").write_text(text, encoding="utf-8")
    done = run_cli("plan", "--format", "json", str(tmp_path))
    (item,) = json.loads(done.stdout)
    assert item["verdict"] == "may not fit", item["per_gpu_gib"]  # 42.9 GiB of 40 in the band
    return item


def test_a_job_that_does_not_fit_is_offered_expert_parallelism_on_a_release_with_it(
    tmp_path: Path,
) -> None:
    changes = [s["change"] for s in mixtral_job(tmp_path, "2.4.1")["suggestions"]]
    assert (
        "set expert_parallel_degree to 2 (SMP 2.3.0 or later; the model's 8 experts per layer"
        " split over 2 GPUs); set hybrid_shard_degree to 12" in changes
    ), changes


def test_a_job_on_a_release_without_expert_parallelism_is_offered_none(tmp_path: Path) -> None:
    changes = [s["change"] for s in mixtral_job(tmp_path, "2.1.2")["suggestions"]]
    assert changes and not any("expert_parallel_degree" in change for change in changes)
