"""``smpfix plan`` as a user runs it, and SMP831 across files.

The seeds' seven reference configurations are written as launchers of two training scripts
in the style of the official examples (``tests/plan_projects``): every size and switch is
traced from the launcher's hyperparameters through argparse, as in the real examples. They
must all fit; the same models on clearly weaker configurations must not.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, finding_text, run_cli

PROJECTS = Path(__file__).parent / "plan_projects"
GPT2 = {"fp16": 1, "max_context_width": 512, "vocab_size": 50257}
NEOX = {"bf16": 1, "flash_attention": 1}
GPT2_10B = {
    **GPT2,
    "hidden_width": 4096,
    "num_layers": 48,
    "num_heads": 32,
}  # assumed shape (docs/plan.md)
GPT2_30B = {
    **GPT2,
    "hidden_width": 7168,
    "num_layers": 48,
    "num_heads": 64,
}  # the official notebook's gpt2-30b
GPT2_60B = {**GPT2, "hidden_width": 8192, "num_layers": 74, "num_heads": 64}  # assumed shape
NEOX_65B = {
    **NEOX,
    "hidden_width": 8192,
    "num_layers": 80,
    "num_heads": 64,
    "intermediate_size": 32768,
}  # assumed
_BEST_PRACTICES = {"shard_optimizer_state": True, "prescaled_batch": True, "ddp": True}

# name: (script, instances, library parameters, hyperparameters); rows of the seed tables.
REFERENCES: dict[str, tuple[str, int, dict[str, Any], dict[str, Any]]] = {
    "gpt2_10b": (
        "gpt_train.py",
        16,
        {"tensor_parallel_degree": 4, **_BEST_PRACTICES},
        {**GPT2_10B, "train_batch_size": 40},
    ),
    "gpt2_30b": (
        "gpt_train.py",
        16,
        {"tensor_parallel_degree": 8, **_BEST_PRACTICES},
        {**GPT2_30B, "train_batch_size": 32},
    ),
    "gpt2_60b": (
        "gpt_train.py",
        32,
        {
            "tensor_parallel_degree": 8,
            "pipeline_parallel_degree": 2,
            "microbatches": 4,
            "active_microbatches": 2,
            **_BEST_PRACTICES,
        },
        {**GPT2_60B, "train_batch_size": 56},
    ),
    "neox20b_2": (
        "neox_train.py",
        2,
        {"ddp": True, "sharded_data_parallel_degree": 16, "bf16": True},
        {**NEOX, "train_batch_size": 4},
    ),
    "neox20b_8": (
        "neox_train.py",
        8,
        {"ddp": True, "sharded_data_parallel_degree": 32, "bf16": True},
        {**NEOX, "train_batch_size": 12},
    ),
    "neox65b_tp8": (
        "neox_train.py",
        64,
        {
            "ddp": True,
            "sharded_data_parallel_degree": 16,
            "tensor_parallel_degree": 8,
            "prescaled_batch": True,
            "offload_activations": True,
            "bf16": True,
        },
        {**NEOX_65B, "train_batch_size": 8},
    ),
    "neox65b_tp2": (
        "neox_train.py",
        64,
        {
            "ddp": True,
            "sharded_data_parallel_degree": 64,
            "tensor_parallel_degree": 2,
            "prescaled_batch": True,
            "offload_activations": True,
            "bf16": True,
        },
        {**NEOX_65B, "max_context_width": 4096, "train_batch_size": 2},
    ),
}
WEAKER: dict[str, tuple[str, int, dict[str, Any], dict[str, Any]]] = {
    "gpt2_10b_without_oss": (
        "gpt_train.py",
        16,
        {"tensor_parallel_degree": 4, "prescaled_batch": True, "ddp": True},
        {**GPT2_10B, "train_batch_size": 40},
    ),
    "gpt2_30b_on_two_instances": (
        "gpt_train.py",
        2,
        {"tensor_parallel_degree": 8, **_BEST_PRACTICES},
        {**GPT2_30B, "train_batch_size": 32},
    ),
    "neox20b_without_sharding": (
        "neox_train.py",
        2,
        {"ddp": True, "bf16": True},
        {**NEOX, "train_batch_size": 4},
    ),
    "neox20b_without_checkpointing": (
        "neox_train.py",
        2,
        {"ddp": True, "sharded_data_parallel_degree": 16, "bf16": True},
        {**NEOX, "train_batch_size": 4, "activation_checkpointing": 0},
    ),
}


def launcher(
    script: str,
    instances: int,
    parameters: dict[str, Any],
    hyperparameters: dict[str, Any],
    instance_type: str = "ml.p4d.24xlarge",
) -> str:
    return f"""\
from sagemaker.pytorch import PyTorch

estimator = PyTorch(
    entry_point="{script}",
    instance_type="{instance_type}",
    instance_count={instances},
    framework_version="1.13.1",
    hyperparameters={hyperparameters!r},
    distribution={{
        "smdistributed": {{"modelparallel": {{"enabled": True, "parameters": {parameters!r}}}}},
        "mpi": {{"enabled": True, "processes_per_host": 8}},
    }},
)
"""


def project(
    tmp_path: Path, rows: dict[str, tuple[str, int, dict[str, Any], dict[str, Any]]]
) -> Path:
    for script in ("gpt_train.py", "neox_train.py"):
        shutil.copy(PROJECTS / script, tmp_path / script)
    for name, row in rows.items():
        (tmp_path / f"launch_{name}.py").write_text(launcher(*row), encoding="utf-8")
    return tmp_path


def plans(folder: Path, *options: str) -> tuple[int, dict[str, dict[str, Any]]]:
    done = run_cli("plan", "--format", "json", *options, str(folder))
    assert done.code in (0, 1), done.stderr
    return done.code, {
        Path(item["filename"]).stem.replace("launch_", ""): item for item in json.loads(done.stdout)
    }


@pytest.fixture(scope="module")
def calibration(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    folder = project(tmp_path_factory.mktemp("calibration"), {**REFERENCES, **WEAKER})
    code, found = plans(folder)
    assert code == 1  # some configurations do not fit
    return found


@pytest.mark.parametrize("name", list(REFERENCES))
def test_the_seed_reference_configurations_fit(
    calibration: dict[str, dict[str, Any]], name: str
) -> None:
    item = calibration[name]
    assert item["fits"] is True, (item["per_gpu_gib"], item["reason"], item["assumptions"])
    assert item["suggestions"] == []


@pytest.mark.parametrize("name", list(WEAKER))
def test_weaker_configurations_do_not_fit_and_get_a_change_that_fits(
    calibration: dict[str, dict[str, Any]], name: str
) -> None:
    item = calibration[name]
    assert item["fits"] is False, (item["per_gpu_gib"], item["assumptions"])
    assert item["suggestions"], item
    assert all(found["share_of_gpu"] <= 1 for found in item["suggestions"])


def test_the_sizes_are_traced_from_the_launchers_hyperparameters(
    calibration: dict[str, dict[str, Any]],
) -> None:
    item = calibration["gpt2_30b"]
    assert 29.5e9 < item["parameters"]["count"] < 30.5e9
    assert (
        "GPT2Config" in item["parameters"]["source"]
        and "`hidden_width` = 7168 (launcher hyperparameter)" in item["parameters"]["source"]
    )
    assert any(a.startswith("batch 32:") for a in item["assumptions"])
    assert any(a.startswith("sequence length 512:") for a in item["assumptions"])
    assert any("fp16" in a for a in item["assumptions"])
    neox = calibration["neox20b_2"]
    assert neox["parameters"]["count"] == pytest.approx(
        20_556_201_984, rel=1e-3
    )  # GPT-NeoX-20B, from argparse defaults
    assert any(a.startswith("flash attention on:") for a in neox["assumptions"])


def test_json_has_the_documented_fields(calibration: dict[str, dict[str, Any]]) -> None:
    item = calibration["gpt2_10b"]
    assert set(item) >= {
        "filename",
        "location",
        "script",
        "instance_type",
        "gpu_memory_gib",
        "parameters",
        "per_gpu_gib",
        "fits",
        "assumptions",
        "suggestions",
    }
    assert item["location"] == {"row": 3, "column": 13}
    assert item["script"] == "gpt_train.py" and item["instance_type"] == "ml.p4d.24xlarge"
    assert item["gpu_memory_gib"] == 40.0
    assert set(item["parameters"]) == {"count", "source"}
    split = item["per_gpu_gib"]
    assert set(split) >= {"model_states", "activations", "total"}
    assert split["total"] == pytest.approx(
        split["model_states"] + split["activations"] + split["other"], abs=0.02
    )


def test_the_table_shows_every_configuration_and_its_details(tmp_path: Path) -> None:
    folder = project(
        tmp_path, {"gpt2_10b": REFERENCES["gpt2_10b"], "weak": WEAKER["gpt2_10b_without_oss"]}
    )
    done = run_cli("plan", str(folder), env={"COLUMNS": "200"})
    assert done.code == 1, done.stderr
    assert "Per-GPU memory plan" in done.stdout
    assert "launch_gpt2_10b.py:3" in done.stdout and "launch_weak.py:3" in done.stdout
    assert "does not fit" in done.stdout and "fits" in done.stdout
    assert "to make it fit:" in done.stdout and "turn on shard_optimizer_state" in done.stdout
    assert "docs/plan.md" in done.stdout


def test_help_points_to_the_page_of_approximations() -> None:
    done = run_cli("plan", "--help")
    assert done.code == 0 and "docs/plan.md" in done.stdout and "--format" in done.stdout


def test_exit_zero_and_usage_errors(tmp_path: Path) -> None:
    folder = project(tmp_path, {"weak": WEAKER["gpt2_10b_without_oss"]})
    assert run_cli("plan", "--exit-zero", str(folder)).code == 0
    assert run_cli("plan", "--job", "nonsense", str(folder)).code == 2
    assert run_cli("plan", str(tmp_path / "missing")).code == 2


def test_job_settings_override_the_launcher(tmp_path: Path) -> None:
    folder = project(tmp_path, {"weak": WEAKER["gpt2_10b_without_oss"]})
    code, found = plans(folder, "--job", "shard_optimizer_state=true")
    assert code == 0 and found["weak"]["fits"] is True
    assert any("command line --job" in a for a in found["weak"]["assumptions"])


def test_the_examples_get_a_plan_for_each_launcher() -> None:
    done = run_cli("plan", "--format", "json", str(EXAMPLES))
    assert done.code in (0, 1), done.stderr
    items = {
        Path(item["filename"]).parent.relative_to(EXAMPLES).as_posix(): item
        for item in json.loads(done.stdout)
    }
    assert set(items) == {
        "pytorch/correct",
        "pytorch/pitfalls",
        "tensorflow/correct",
        "tensorflow/pitfalls",
    }
    correct = items["pytorch/correct"]
    assert correct["script"] == "train_gpt.py" and correct["instance_type"] == "ml.p4d.24xlarge"
    assert correct["location"] == {"row": 26, "column": 13}


def test_the_readme_shows_the_table_the_command_prints() -> None:
    done = run_cli(
        "plan", str(EXAMPLES / "pytorch" / "correct"), cwd=EXAMPLES.parent, env={"COLUMNS": "120"}
    )
    table = "".join(done.stdout.splitlines(keepends=True)[:8])
    assert "examples/pytorch/correct/launch.py:26" in table
    assert table in (EXAMPLES.parent / "README.md").read_text(encoding="utf-8")


def notebook(*cells: str) -> str:
    return json.dumps(
        {
            "cells": [
                {
                    "cell_type": "code",
                    "metadata": {},
                    "source": cell,
                    "outputs": [],
                    "execution_count": None,
                }
                for cell in cells
            ],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


def test_a_notebook_launcher(tmp_path: Path) -> None:
    shutil.copy(PROJECTS / "gpt_train.py", tmp_path / "gpt_train.py")
    hyper = {**GPT2_30B, "train_batch_size": 32}
    cells = (
        "from sagemaker.pytorch import PyTorch\n",
        f"hyperparameters = {hyper!r}\nhyperparameters['tensor_parallel_degree'] = 8\n",
        (
            "smp_estimator = PyTorch(\n    entry_point='gpt_train.py',\n   "
            " instance_type='ml.p4d.24xlarge',\n    instance_count=2,\n   "
            " hyperparameters=hyperparameters,\n    distribution={'smdistributed':"
            " {'modelparallel': {'enabled': True, 'parameters': {\n       "
            " 'tensor_parallel_degree': hyperparameters['tensor_parallel_degree'], 'ddp': True,\n  "
            "      'shard_optimizer_state': True, 'prescaled_batch': True}}},\n        'mpi':"
            " {'enabled': True, 'processes_per_host': 8}},\n)\n"
        ),
    )
    (tmp_path / "launch.ipynb").write_text(notebook(*cells), encoding="utf-8")
    code, found = plans(tmp_path)
    item = found["launch"]
    assert item["location"] == {"row": 1, "column": 17, "cell": 3}
    assert (
        item["fits"] is False and code == 1
    )  # gpt2-30b on 16 GPUs: the states alone exceed 40 GiB
    assert 29.5e9 < item["parameters"]["count"] < 30.5e9
    checked = run_cli("check", "--select", "SMP831", "--format", "json", str(tmp_path))
    findings = json.loads(checked.stdout)
    assert [(f["code"], f["cell"], f["location"]["row"]) for f in findings] == [("SMP831", 3, 1)]


def test_smp831_reports_at_the_estimator_call_across_files(tmp_path: Path) -> None:
    folder = project(
        tmp_path, {"ok": REFERENCES["neox20b_2"], "weak": WEAKER["neox20b_without_checkpointing"]}
    )
    done = run_cli("check", "--select", "SMP831", "--format", "json", str(folder))
    findings = json.loads(done.stdout)
    assert [(Path(f["filename"]).name, f["location"]["row"], f["code"]) for f in findings] == [
        ("launch_weak.py", 3, "SMP831")
    ]
    message = finding_text(findings[0])
    assert "does not fit in GPU memory" in message and "20.6B parameters" in message
    assert "turn on activation checkpointing" in message and "smpfix plan" in message


def test_unknown_stays_unknown(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import smdistributed.modelparallel.torch as smp\nfrom transformers import"
        " AutoModelForCausalLM\nimport argparse\nparser ="
        " argparse.ArgumentParser()\nparser.add_argument('--model')\nargs ="
        " parser.parse_args()\nsmp.init()\nmodel ="
        " smp.DistributedModel(AutoModelForCausalLM.from_pretrained(args.model))\n",
        encoding="utf-8",
    )
    (tmp_path / "launch.py").write_text(
        launcher("train.py", 1, {"ddp": True}, {}), encoding="utf-8"
    )
    code, found = plans(tmp_path)
    assert code == 0
    item = found["launch"]
    assert (
        item["fits"] is None
        and item["verdict"] == "unknown"
        and item["parameters"]["count"] is None
    )
    assert "checkpoint name cannot be resolved" in item["reason"]
    assert run_cli("check", "--select", "SMP831", str(tmp_path)).code == 0


def test_a_declared_job_plans_scripts_no_launcher_starts(tmp_path: Path) -> None:
    shutil.copy(PROJECTS / "neox_train.py", tmp_path / "train.py")
    (tmp_path / "pyproject.toml").write_text(
        "[tool.smpfix.job]\ninstance_type = 'ml.p4d.24xlarge'\ninstance_count ="
        " 2\nprocesses_per_host = 8\nsharded_data_parallel_degree = 16\nbf16 ="
        " true\nmodel_parameters = '20B'\n",
        encoding="utf-8",
    )
    code, found = plans(tmp_path)
    item = found["pyproject"]
    assert item["location"] is None and Path(item["script"]).name == "train.py"
    assert (
        item["parameters"]["count"] == 20 * 10**9
        and "model_parameters" in item["parameters"]["source"]
    )
    assert item["fits"] is True
    # model_parameters is smpfix's own setting: no unknown-key finding for it in pyproject.toml
    checked = run_cli("check", "--format", "json", str(tmp_path))
    assert checked.code in (0, 1), checked.stderr
    assert not [f for f in json.loads(checked.stdout) if f["code"] == "SMP812"]


def test_model_parameters_is_a_job_setting_not_a_library_key(tmp_path: Path) -> None:
    (tmp_path / "launch.py").write_text(
        launcher("train.py", 2, {"ddp": True, "model_parameters": 20e9}, {}), encoding="utf-8"
    )
    done = run_cli(
        "check",
        "--select",
        "SMP812",
        "--job",
        "model_parameters=20e9",
        "--format",
        "json",
        str(tmp_path),
    )
    assert done.code == 1, done.stderr  # the --job setting is accepted; the launcher's key is not
    findings = json.loads(done.stdout)
    assert [f["code"] for f in findings] == ["SMP812"]
    assert "setting of smpfix" in finding_text(findings[0])


def test_a_bigger_instance_is_weighed_against_its_own_gpu(tmp_path: Path) -> None:
    """GPT-2 30B on two instances needs about 50 GiB per GPU: over the A100 40GB's memory,
    well under the A100 80GB's, so the text and the JSON say the same share of the new GPU."""
    folder = project(tmp_path, {"weak": WEAKER["gpt2_30b_on_two_instances"]})
    done = run_cli("plan", str(folder), env={"COLUMNS": "200"})
    assert done.code == 1, done.stderr
    line = next(line for line in done.stdout.splitlines() if "use ml.p4de.24xlarge" in line)
    _, found = plans(folder)
    change = found["weak"]["suggestions"][0]
    assert change["change"] == "use ml.p4de.24xlarge (A100 80GB)"
    assert 0.5 < change["share_of_gpu"] < 1
    assert f"({change['share_of_gpu']:.0%} of the GPU)" in line, line
