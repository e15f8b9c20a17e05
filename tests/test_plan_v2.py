"""SMP v2 jobs are planned with SMP v2's own memory model (FSDP), never with SMP v1's.

The calibration is the best-practices page's table of v2 reference configurations (Llama 2,
ml.p4d.24xlarge, sequence length 4096, mixed precision, activation checkpointing): each must
fit, with flash attention and without it, since the page does not say which kernels ran.
The same models on clearly weaker configurations must not fit. Through the command line, a v2
launcher gets a v2 plan (its ``hybrid_shard_degree`` read, no v1 setting or default applied),
and a v1 launcher keeps its v1 plan.

Run ``python tests/test_plan_v2.py`` to print the calibration table of docs/plan.md.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli

from smpfix.job.instances import lookup
from smpfix.plan.checkpoints import find_checkpoint
from smpfix.plan.fsdp import (
    FULL_SHARD,
    HYBRID_SHARD,
    NO_SHARD,
    FsdpSetup,
    estimate,
    problems,
    shard_degree,
)
from smpfix.plan.memory import GIB, Estimate
from smpfix.plan.models import ModelShape, count_parameters
from smpfix.plan.suggestions_fsdp import suggest
from smpfix.plan.verdict import Verdict, combined

PROJECTS = Path(__file__).parent / "plan_projects"
A100_40GB_MIB = 40960
P4D = lookup("ml.p4d.24xlarge")
assert P4D is not None and P4D.gpu_memory_mib == A100_40GB_MIB


def _llama(name: str) -> ModelShape:
    found = find_checkpoint(name)
    assert found is not None
    return found.shape


LLAMA2_7B = _llama("meta-llama/Llama-2-7b-hf")
LLAMA2_70B = _llama("meta-llama/Llama-2-70b-hf")
# There is no published "Llama 2 175B": an assumed Llama-architecture shape of that size
# (GPT-3 175B's width and depth, a SwiGLU MLP of 32768, Llama 2's vocabulary), docs/plan.md.
LLAMA_175B = ModelShape(
    "llama", 12288, 96, 96, 32000, 32768, 4096, tied_embeddings=False, gated_ffn=True
)

# The best-practices page's rows: (shape, instances, sharded data parallel degree,
# tensor parallel degree, activation offloading, batch size); all with checkpointing.
REFERENCES: dict[str, tuple[ModelShape, int, int, int, bool, int]] = {
    "llama2_7b": (LLAMA2_7B, 1, 8, 1, False, 4),
    "llama2_70b": (LLAMA2_70B, 32, 256, 1, False, 2),
    "llama_175b": (LLAMA_175B, 64, 128, 4, True, 6),
}


def setup_of(instances: int, hybrid: int, tp: int, offload: bool, batch: int) -> FsdpSetup:
    world = instances * 8
    return FsdpSetup(
        world=world,
        shard=shard_degree(hybrid, tp, world, FULL_SHARD),
        tp=tp,
        seq_len=4096,
        batch=batch,
        precision="bf16",
        activation_checkpointing=True,
        offload_activations=offload,
    )


def both_ways(shape: ModelShape, setup: FsdpSetup) -> tuple[Estimate, Estimate]:
    """Without and with flash attention: the heavier and the lighter estimate."""
    count = count_parameters(shape)
    without = estimate(count, shape, replace(setup, flash_attention=False), A100_40GB_MIB)
    with_flash = estimate(count, shape, replace(setup, flash_attention=True), A100_40GB_MIB)
    return with_flash, without


def reference(name: str) -> tuple[ModelShape, FsdpSetup]:
    shape, instances, hybrid, tp, offload, batch = REFERENCES[name]
    return shape, setup_of(instances, hybrid, tp, offload, batch)


def test_reference_model_sizes() -> None:
    """The shapes come to the sizes the table names."""
    sizes = {name: count_parameters(row[0]).total for name, row in REFERENCES.items()}
    assert sizes["llama2_7b"] == 6_738_415_616
    assert sizes["llama2_70b"] == 68_976_648_192
    assert 174e9 < sizes["llama_175b"] < 176e9


@pytest.mark.parametrize("name", list(REFERENCES))
def test_each_v2_reference_configuration_fits_with_or_without_flash_attention(name: str) -> None:
    shape, setup = reference(name)
    assert problems(setup) == ()
    best, worst = both_ways(shape, setup)
    assert combined(best, worst) in (Verdict.FITS, Verdict.TIGHT), worst.total / GIB


WEAKER: dict[str, tuple[ModelShape, FsdpSetup]] = {
    "7B without activation checkpointing": (
        LLAMA2_7B,
        replace(reference("llama2_7b")[1], activation_checkpointing=False),
    ),
    "70B sharded over one instance of 32": (LLAMA2_70B, setup_of(32, 8, 1, False, 2)),
    "175B without activation offloading": (
        LLAMA_175B,
        replace(reference("llama_175b")[1], offload_activations=False),
    ),
    "70B trained in fp32 without MixedPrecision on 2 instances": (
        LLAMA2_70B,
        replace(setup_of(2, 16, 1, False, 2), precision="fp32"),
    ),
}


@pytest.mark.parametrize("name", list(WEAKER))
def test_weaker_v2_configurations_do_not_fit(name: str) -> None:
    shape, setup = WEAKER[name]
    best, worst = both_ways(shape, setup)
    assert combined(best, worst) is Verdict.DOES_NOT_FIT, best.total / GIB


def test_the_sharding_degree_follows_the_v2_reference_page() -> None:
    """hybrid_shard_degree 0: the script's strategy without tensor parallelism (FULL_SHARD over
    every GPU, HYBRID_SHARD over 8), world / tp with it; 1: no sharding; n: n GPUs."""
    assert shard_degree(0, 1, 64, FULL_SHARD) == 64
    assert shard_degree(0, 1, 64, HYBRID_SHARD) == 8
    assert shard_degree(0, 1, 64, "_HYBRID_SHARD_ZERO2") == 8
    assert shard_degree(0, 1, 64, NO_SHARD) == 1
    assert shard_degree(0, 4, 64, HYBRID_SHARD) == 16
    assert shard_degree(1, 4, 64, FULL_SHARD) == 1
    assert shard_degree(16, 2, 64, FULL_SHARD) == 16


def test_each_technique_divides_what_it_should() -> None:
    shape, setup = reference("llama2_70b")
    count = count_parameters(shape)
    base = estimate(count, shape, setup, A100_40GB_MIB)
    halved = estimate(count, shape, replace(setup, shard=128), A100_40GB_MIB)
    assert halved.model_states.states == pytest.approx(2 * base.model_states.states)
    tensor = estimate(count, shape, replace(setup, tp=2, shard=128), A100_40GB_MIB)
    assert tensor.model_states.states < halved.model_states.states
    offloaded = estimate(count, shape, replace(setup, offload_activations=True), A100_40GB_MIB)
    assert base.activations is not None and offloaded.activations is not None
    assert offloaded.activations.checkpoints == pytest.approx(base.activations.checkpoints * 3 / 80)
    gathered = estimate(count, shape, replace(setup, zero2=True), A100_40GB_MIB)
    assert gathered.model_states.sdp_window > base.model_states.sdp_window


def test_refused_configurations_get_no_estimate() -> None:
    assert problems(FsdpSetup(world=16, shard=16, tp=3))
    assert problems(FsdpSetup(world=16, shard=16, tp=2))  # 16 / 2 = 8 GPUs left to shard over
    assert problems(FsdpSetup(world=16, shard=2, cp=4))


# Through the command line: launchers in the style of the official v2 example notebooks.

V2_70B = {
    "hidden_width": 8192,
    "num_layers": 80,
    "num_heads": 64,
    "num_key_value_heads": 8,
    "llama_intermediate_size": 28672,
}


def v2_launcher(instances: int, parameters: dict[str, Any], hyperparameters: dict[str, Any]) -> str:
    return f"""\
from sagemaker.pytorch import PyTorch

estimator = PyTorch(
    entry_point="llama_v2_train.py",
    framework_version="2.2.0",
    py_version="py310",
    instance_type="ml.p4d.24xlarge",
    instance_count={instances},
    hyperparameters={hyperparameters!r},
    distribution={{
        "torch_distributed": {{"enabled": True}},
        "smdistributed": {{"modelparallel": {{"enabled": True, "parameters": {parameters!r}}}}},
    }},
)
"""


# As the official notebooks do, every launcher states sm_activation_offloading, which the
# script tests (``tsm.state.sm_activation_offloading``); its default is True.
NO_OFFLOADING = {"sm_activation_offloading": False}
LAUNCHERS: dict[str, tuple[int, dict[str, Any], dict[str, Any]]] = {
    "llama2_7b": (1, {"hybrid_shard_degree": 8, **NO_OFFLOADING}, {"train_batch_size": 4}),
    "llama2_70b": (
        32,
        {"hybrid_shard_degree": 256, **NO_OFFLOADING},
        {**V2_70B, "train_batch_size": 2},
    ),
    "llama_175b": (
        64,
        {"hybrid_shard_degree": 128, "tensor_parallel_degree": 4, "sm_activation_offloading": True},
        {
            "hidden_width": 12288,
            "num_layers": 96,
            "num_heads": 96,
            "num_key_value_heads": 96,
            "llama_intermediate_size": 32768,
            "train_batch_size": 6,
        },
    ),
    "llama2_70b_on_one_instance": (1, {"hybrid_shard_degree": 8, **NO_OFFLOADING}, {**V2_70B}),
    "llama2_70b_unknown_degree": (
        32,
        {"hybrid_shard_degree": "HSD", **NO_OFFLOADING},
        {**V2_70B},
    ),
    "llama2_70b_sharded_over_16": (8, {"hybrid_shard_degree": 16, **NO_OFFLOADING}, {**V2_70B}),
    "default_degree_hybrid_shard": (32, {**NO_OFFLOADING}, {**V2_70B}),
    "default_degree_full_shard": (
        32,
        {**NO_OFFLOADING},
        {**V2_70B, "sharding_strategy": "full_shard"},
    ),
    "offloading_by_default": (32, {"hybrid_shard_degree": 256}, {**V2_70B}),
}


@pytest.fixture(scope="module")
def v2_plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("v2")
    shutil.copy(PROJECTS / "llama_v2_train.py", folder / "llama_v2_train.py")
    for name, row in LAUNCHERS.items():
        text = v2_launcher(*row).replace("'HSD'", "HSD")  # a value smpfix cannot resolve
        (folder / f"launch_{name}.py").write_text(text, encoding="utf-8")
    done = run_cli("plan", "--format", "json", str(folder))
    assert done.code == 1, done.stderr  # the 70B job on one instance does not fit
    return {
        Path(item["filename"]).stem.replace("launch_", ""): item for item in json.loads(done.stdout)
    }


@pytest.mark.parametrize("name", list(REFERENCES))
def test_v2_reference_launchers_fit(v2_plans: dict[str, dict[str, Any]], name: str) -> None:
    item = v2_plans[name]
    assert item["fits"] is True, (item["per_gpu_gib"], item["reason"], item["assumptions"])
    assert any(line.startswith("SMP v2 job:") for line in item["assumptions"])


def test_a_v2_launcher_reads_the_script_as_fsdp(v2_plans: dict[str, dict[str, Any]]) -> None:
    assumptions = "\n".join(v2_plans["llama2_70b"]["assumptions"])
    assert "sharded over 256 GPU(s)" in assumptions
    assert "precision bf16: `MixedPrecision(...)` at llama_v2_train.py" in assumptions
    assert "activation checkpointing on: `apply_activation_checkpointing(...)`" in assumptions
    assert "offload activations off: `offload_wrapper(...)`" in assumptions
    assert "batch per tensor-parallel group 2" in assumptions
    assert "smp.model_creation" not in assumptions  # nothing of v1
    assert any(
        line.startswith("offload activations on") for line in v2_plans["llama_175b"]["assumptions"]
    )


def test_the_script_s_tsm_state_reads_the_v2_settings(
    v2_plans: dict[str, dict[str, Any]],
) -> None:
    """``if tsm.state.sm_activation_offloading > 0:`` holds when the launcher sets it, and when
    it leaves it out (the v2 reference page's default is True); not when it is False."""
    for name in ("llama_175b", "offloading_by_default"):
        assert any(
            line.startswith("offload activations on: `offload_wrapper(...)`")
            for line in v2_plans[name]["assumptions"]
        ), name
    assert any(
        line.startswith("offload activations off: `offload_wrapper(...)` at llama_v2_train.py")
        for line in v2_plans["llama2_70b"]["assumptions"]
    )


def test_a_weaker_v2_launcher_does_not_fit(v2_plans: dict[str, dict[str, Any]]) -> None:
    item = v2_plans["llama2_70b_on_one_instance"]
    assert item["fits"] is False
    assert item["suggestions"] == []  # no single v2 change fits 70B on eight GPUs


def test_a_v2_launcher_gets_v2_changes_that_fit(v2_plans: dict[str, dict[str, Any]]) -> None:
    item = v2_plans["llama2_70b_sharded_over_16"]
    assert item["fits"] is False
    changes = [found["change"] for found in item["suggestions"]]
    assert changes and all(found["share_of_gpu"] <= 1 for found in item["suggestions"])
    assert any("tensor_parallel_degree" in change for change in changes), changes
    for v1_knob in ("pipeline", "sharded_data_parallel_degree", "shard_optimizer_state", "smp."):
        assert not any(v1_knob in change for change in changes), changes


def test_the_first_v2_change_is_the_cheapest_that_fits() -> None:
    shape, setup = WEAKER["7B without activation checkpointing"]
    found = suggest(count_parameters(shape), shape, setup, P4D)
    assert found[0][0].startswith("turn on activation checkpointing")
    shape, setup = reference("llama2_7b")
    fp32 = replace(setup, precision="fp32", flash_attention=False)
    found = suggest(count_parameters(shape), shape, fp32, P4D)
    assert [change for change, _ in found][:2] == [
        "use ml.p4de.24xlarge (A100 80GB)",  # bigger GPUs first, as the best-practices page
        "train in bf16 with FSDP's `MixedPrecision(param_dtype=torch.bfloat16)`",
    ]


def test_hybrid_shard_degree_0_follows_the_script_s_fsdp_strategy(
    v2_plans: dict[str, dict[str, Any]],
) -> None:
    """Without hybrid_shard_degree (0) and tensor parallelism, the script's FSDP strategy
    decides: the example's ``hybrid_shard`` shards over 8 GPUs, ``full_shard`` over all 256."""
    hybrid = "\n".join(v2_plans["default_degree_hybrid_shard"]["assumptions"])
    assert "sharding strategy HYBRID_SHARD: the FSDP wrap at llama_v2_train.py" in hybrid
    assert "sharded over 8 GPU(s)" in hybrid
    assert v2_plans["default_degree_hybrid_shard"]["fits"] is False
    full = "\n".join(v2_plans["default_degree_full_shard"]["assumptions"])
    assert "sharded over 256 GPU(s)" in full
    assert v2_plans["default_degree_full_shard"]["fits"] is True


def test_an_unknown_v2_degree_gives_no_verdict(v2_plans: dict[str, dict[str, Any]]) -> None:
    item = v2_plans["llama2_70b_unknown_degree"]
    assert item["verdict"] == "unknown"
    assert "hybrid_shard_degree" in item["reason"]


V2_SCRIPT = """\
import torch.sagemaker as tsm
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

tsm.init()
model = FSDP(build_model())
"""


def v2_project(tmp_path: Path, distribution: str, framework: str = "2.2.0") -> Path:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "train.py").write_text(V2_SCRIPT, encoding="utf-8")
    (tmp_path / "launch.py").write_text(
        f"""\
from sagemaker.pytorch import PyTorch

estimator = PyTorch(
    entry_point="train.py",
    framework_version="{framework}",
    instance_type="ml.p4d.24xlarge",
    instance_count=2,
    distribution={distribution},
)
""",
        encoding="utf-8",
    )
    return tmp_path


def only_plan(folder: Path, *options: str) -> dict[str, Any]:
    done = run_cli("plan", "--format", "json", *options, str(folder))
    assert done.code in (0, 1), done.stderr
    found = json.loads(done.stdout)
    assert len(found) == 1
    return dict(found[0])


def test_a_20b_model_on_a_v2_launcher_never_gets_v1_s_verdict(tmp_path: Path) -> None:
    """The issue's case: v1's model (no sharding, fp32) gave "does not fit, at least 158 GiB"."""
    folder = v2_project(
        tmp_path,
        '{"torch_distributed": {"enabled": True}, "smdistributed": {"modelparallel": {'
        '"enabled": True, "parameters": {"hybrid_shard_degree": 16}}}}',
    )
    item = only_plan(folder, "--job", "model_parameters=20B")
    assert item["fits"] is not False
    assert item["per_gpu_gib"]["model_states"] < 20  # 16 bytes x 20B / 16 GPUs, no v1 default
    assert item["suggestions"] == []
    assert not any("sharded_data_parallel_degree" in line for line in item["assumptions"])


def test_v1_settings_in_a_v2_launcher_do_not_change_its_plan(tmp_path: Path) -> None:
    v2 = (
        '"torch_distributed": {"enabled": True}, "smdistributed": {"modelparallel": {"enabled": '
        "True"
    )
    plain = v2_project(tmp_path / "a", "{" + v2 + ', "parameters": {"hybrid_shard_degree": 16}}}}')
    mixed = v2_project(
        tmp_path / "b",
        "{" + v2 + ', "parameters": {"hybrid_shard_degree": 16, "sharded_data_parallel_degree": 2,'
        ' "shard_optimizer_state": True}}}}',
    )
    assert (
        only_plan(mixed, "--job", "model_parameters=20B")["per_gpu_gib"]
        == only_plan(plain, "--job", "model_parameters=20B")["per_gpu_gib"]
    )


def test_a_v1_looking_launcher_of_a_v2_script_is_planned_as_v2(tmp_path: Path) -> None:
    folder = v2_project(
        tmp_path,
        '{"smdistributed": {"modelparallel": {"enabled": True, "parameters": {'
        '"tensor_parallel_degree": 2}}}, "mpi": {"enabled": True, "processes_per_host": 8}}',
        framework="1.13.1",
    )
    item = only_plan(folder, "--job", "model_parameters=20B")
    assert "SMP v2 job: train.py imports torch.sagemaker" in item["assumptions"]


def test_a_v1_launcher_on_pytorch_2_0_0_keeps_the_v1_plan(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import smdistributed.modelparallel.torch as smp\n\nsmp.init()\n"
        "model = smp.DistributedModel(build_model())\n",
        encoding="utf-8",
    )
    (tmp_path / "launch.py").write_text(
        v2_launcher(2, {"tensor_parallel_degree": 2, "ddp": True}, {})
        .replace('"torch_distributed": {"enabled": True},', '"mpi": {"enabled": True},')
        .replace("llama_v2_train.py", "train.py")
        .replace("2.2.0", "2.0.0"),
        encoding="utf-8",
    )
    item = only_plan(tmp_path, "--job", "model_parameters=20B")
    assert not any(line.startswith("SMP v2 job:") for line in item["assumptions"])
    assert item["fits"] is False  # v1's model: 20B without sharding does not fit
    assert item["suggestions"]


if __name__ == "__main__":
    print(
        "| reference configuration | parameters | model states | activations | rest | total GiB "
        "(flash / none) | share |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in REFERENCES:
        shape, setup = reference(name)
        best, worst = both_ways(shape, setup)
        assert worst.activations is not None
        print(
            f"| {name} | {count_parameters(shape).total / 1e9:.2f}B"
            f" | {worst.model_states.total / GIB:.1f} | {worst.activations.total / GIB:.1f}"
            f" | {worst.buffers / GIB:.1f} | {best.total / GIB:.1f} / {worst.total / GIB:.1f}"
            f" | {worst.share:.0%} |"
        )
    for name, (shape, setup) in WEAKER.items():
        best, worst = both_ways(shape, setup)
        print(f"| {name} | {best.total / GIB:.1f} / {worst.total / GIB:.1f} | {best.share:.0%} |")


def test_the_readme_plan_section_says_how_v2_is_planned() -> None:
    """The README says v2 jobs get their own model and links the plan page's v2 section, which
    says what that model reads."""
    root = Path(__file__).parent.parent
    readme = (root / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Will it fit? `smpfix plan`", 1)[1].split("\n## ", 1)[0]
    for said in ("SMP v2 jobs", "never with v1's", "docs/plan.md#smp-v2-jobs"):
        assert said in section
    plan = (root / "docs" / "plan.md").read_text(encoding="utf-8")
    v2 = plan.split("\n## SMP v2 jobs", 1)[1].split("\n## ", 1)[0]
    for said in ("hybrid_shard_degree", "MixedPrecision"):
        assert said in v2


@pytest.mark.parametrize("name", [*REFERENCES, *WEAKER])
def test_docs_plan_md_gives_the_v2_calibration_the_code_computes(name: str) -> None:
    docs = (Path(__file__).parent.parent / "docs" / "plan.md").read_text(encoding="utf-8")
    v2 = docs.split("## SMP v2 jobs", 1)[1]
    shape, setup = reference(name) if name in REFERENCES else WEAKER[name]
    best, worst = both_ways(shape, setup)
    assert f"{best.total / GIB:.1f} / {worst.total / GIB:.1f}" in v2


V2_SCRIPT_WITH_INIT_DICT = """\
import torch
import torch.sagemaker as tsm
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

tsm.init({"hybrid_shard_degree": 8, "tensor_parallel_degree": 1})
model = FSDP(tsm.transform(build_model()), device_id=torch.cuda.current_device())
"""


def test_a_v2_script_without_a_launcher_is_planned_with_the_declared_job(tmp_path: Path) -> None:
    """No estimator starts the script: the job declared in the configuration does, and the
    script's own ``tsm.init({...})`` dict says how FSDP shards."""
    (tmp_path / "train.py").write_text(V2_SCRIPT_WITH_INIT_DICT, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.smpfix.job]\nsmp_version = "2.6.0"\ninstance_type = "ml.p4d.24xlarge"\n'
        'instance_count = 2\nmodel_parameters = "20B"\n',
        encoding="utf-8",
    )
    item = only_plan(tmp_path)
    assert item["script"].endswith("train.py")
    assert "hybrid_shard_degree 8 (the tsm.init({...}) dict at train.py:5)" in item["assumptions"]
    assert any(
        "sharded over 8 GPU(s) (hybrid_shard_degree 8" in line for line in item["assumptions"]
    )


def test_a_launcher_s_v2_parameters_win_over_the_tsm_init_dict(tmp_path: Path) -> None:
    folder = v2_project(
        tmp_path,
        '{"torch_distributed": {"enabled": True}, "smdistributed": {"modelparallel": {'
        '"enabled": True, "parameters": {"hybrid_shard_degree": 16}}}}',
    )
    (folder / "train.py").write_text(V2_SCRIPT_WITH_INIT_DICT, encoding="utf-8")
    item = only_plan(folder, "--job", "model_parameters=20B")
    assert any("hybrid_shard_degree 16" in line for line in item["assumptions"])
    assert not any("hybrid_shard_degree 8" in line for line in item["assumptions"])
