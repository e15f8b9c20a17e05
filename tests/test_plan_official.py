"""``smpfix plan`` on projects laid out as AWS's official SMP v1 notebooks lay theirs out.

Each folder of ``tests/plan_projects/official/`` is written fresh in the structure of one
official example (``training/distributed_training/pytorch/model_parallel/`` of
``aws/amazon-sagemaker-examples``): a launcher notebook that prepares the data
(``block_size`` from the tokenizer's ``model_max_length``, capped at 1024), picks a model
size with ``if model_config == ...`` and starts the estimator; a shared ``model_config.py``
whose factory dispatches on ``model_name`` and ``model_type``; ``train.py`` with argparse,
``model_config, args = ...`` and the library calls; a data pipeline. At their shipped
defaults each must get a verdict with the right model (within a few percent of the real
model's parameter count), the right sequence length and the right switches.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli

OFFICIAL = Path(__file__).parent / "plan_projects" / "official"


@dataclass(frozen=True)
class Expected:
    parameters: int  # the real model's count (its published checkpoint or its config's)
    seq_len: int
    switches: tuple[str, ...]  # assumption lines that must be there, from their start


EXPECTED = {
    # GPT-2 of 7168 x 48 layers, the notebook's "gpt2-30b"; data cut to GPT-2's 1024 tokens.
    "gpt2_30b": Expected(
        29_974_468_608,
        1024,
        ("activation checkpointing on", "flash attention on", "bf16 on"),
    ),
    # model_name "gpt2-xl" wins over the notebook's sizes: the published GPT-2 XL.
    "gpt2_xl_finetune": Expected(
        1_557_611_200, 1024, ("activation checkpointing on", "flash attention on")
    ),
    # GPT-NeoX-20B (20,554,567,680 with its 50,432-token vocabulary; the script's is 50,264).
    "gpt_neox_20b": Expected(20_554_567_680, 1024, ("activation checkpointing on",)),
    # FLAN-T5-XXL (11,135,332,352 with its untied head); T5's tokenizer stops at 512 tokens,
    # and the script swaps in its own flash attention (add_flash_attn).
    "flan_t5_xxl": Expected(
        11_135_332_352,
        512,
        ("activation checkpointing on", "flash attention on: `add_flash_attn(...)`"),
    ),
    # Falcon-7B from the Hub configuration train.py loads, not model_config.py's factory,
    # which it imports and never calls.
    "falcon_7b": Expected(6_921_720_704, 1024, ("activation checkpointing on",)),
    # finetune_6b: 1 in the launcher: the GPT-J 6B checkpoint, not the GPTJConfig of the
    # command-line sizes that only the other branch builds a model from.
    "gptj_6b_tensor_parallel": Expected(
        6_050_882_784, 1024, ("tensor_parallel_degree 8", "activation checkpointing on")
    ),
    # BERT-large from the bert_config.json the script reads (BertForPreTraining: ~336M).
    "bert_large_pipeline": Expected(336_000_000, 128, ("pipeline_parallel_degree 2",)),
}


@pytest.fixture(scope="module")
def plans() -> dict[str, dict[str, Any]]:
    found = {}
    for name in EXPECTED:
        done = run_cli("plan", "--format", "json", ".", cwd=OFFICIAL / name)
        assert done.code == 0, done.stderr
        (row,) = json.loads(done.stdout)
        found[name] = row
    return found


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_an_official_structure_gets_a_verdict_for_the_right_model(
    plans: dict[str, dict[str, Any]], name: str
) -> None:
    row, expected = plans[name], EXPECTED[name]
    assert row["verdict"] == "fits", row["reason"]
    # No lower bound; only the GPT-J script leaves a switch to bracket (its model_creation
    # passes no flash_attention), and fits either way.
    assert row["reason"] == "" or row["reason"].startswith("estimated with flash_attention both")
    count = row["parameters"]["count"]
    assert abs(count - expected.parameters) / expected.parameters < 0.03, row["parameters"]
    sequence = next(a for a in row["assumptions"] if a.startswith("sequence length"))
    assert sequence.startswith(f"sequence length {expected.seq_len}:"), sequence
    assert "upper bound" not in sequence
    for switch in expected.switches:
        assert any(line.startswith(switch) for line in row["assumptions"]), (switch, row)


def test_the_model_comes_from_the_branch_the_launcher_takes(
    plans: dict[str, dict[str, Any]],
) -> None:
    assert "a GPT2Config, at model_config.py" in plans["gpt2_30b"]["parameters"]["source"]
    assert "a GPTNeoXConfig" in plans["gpt_neox_20b"]["parameters"]["source"]
    assert "a T5Config" in plans["flan_t5_xxl"]["parameters"]["source"]
    assert "'gpt2-xl'" in plans["gpt2_xl_finetune"]["parameters"]["source"]
    falcon = plans["falcon_7b"]["parameters"]["source"]
    assert "train.py" in falcon and "model_config.py" not in falcon
    assert "'EleutherAI/gpt-j-6b'" in plans["gptj_6b_tensor_parallel"]["parameters"]["source"]
    assert "'bert_config.json'" in plans["bert_large_pipeline"]["parameters"]["source"]


def test_the_data_length_caps_the_context_width(plans: dict[str, dict[str, Any]]) -> None:
    sequence = next(a for a in plans["gpt2_30b"]["assumptions"] if a.startswith("sequence length"))
    assert "`block_size` = 1024" in sequence and "`max_context_width` = 2048" in sequence
    assert "the tokenizer 'gpt2' has model_max_length 1024" in sequence


def test_a_re_bound_args_keeps_the_distributed_transformer_s_switches(
    plans: dict[str, dict[str, Any]],
) -> None:
    """``model_config, args = ...`` and the factory's ``args.use_distributed_transformer = 0``
    (in the BLOOM and T5 branches) leave the GPT-2 job's flash attention and checkpointing
    as its launcher sets them."""
    lines = plans["gpt2_30b"]["assumptions"]
    assert any("flash_attention=True" in line for line in lines)
    assert any('strategy "each"' in line for line in lines)


def test_without_the_data_s_length_the_context_width_is_an_upper_bound(
    tmp_path: Path,
) -> None:
    for name in ("model_config.py", "data_pipeline.py", "train.py"):
        (tmp_path / name).write_text(
            (OFFICIAL / "gpt2_30b" / name).read_text(encoding="utf-8"), encoding="utf-8"
        )
    notebook = json.loads(
        (OFFICIAL / "gpt2_30b" / "smp-train-gpt2-sharded-data-parallel.ipynb").read_text(
            encoding="utf-8"
        )
    )
    notebook["cells"] = [
        cell for cell in notebook["cells"] if "block_size" not in "".join(cell["source"])
    ]
    (tmp_path / "launch.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    done = run_cli("plan", "--format", "json", ".", cwd=tmp_path)
    (row,) = json.loads(done.stdout)
    sequence = next(a for a in row["assumptions"] if a.startswith("sequence length"))
    assert sequence.startswith("sequence length 2048:")
    assert "(upper bound: the data's length is not known)" in sequence


def test_an_upper_bound_that_decides_a_verdict_is_said_to_be_one(tmp_path: Path) -> None:
    for name in ("model_config.py", "data_pipeline.py", "train.py"):
        (tmp_path / name).write_text(
            (OFFICIAL / "gpt2_30b" / name).read_text(encoding="utf-8"), encoding="utf-8"
        )
    text = (OFFICIAL / "gpt2_30b" / "smp-train-gpt2-sharded-data-parallel.ipynb").read_text(
        encoding="utf-8"
    )
    notebook = json.loads(text.replace('\\"train_batch_size\\": 10', '\\"train_batch_size\\": 40'))
    notebook["cells"] = [
        cell for cell in notebook["cells"] if "block_size" not in "".join(cell["source"])
    ]
    (tmp_path / "launch.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    done = run_cli("plan", "--format", "json", ".", cwd=tmp_path)
    (row,) = json.loads(done.stdout)
    assert row["fits"] is not True
    assert "the sequence length 2048 is an upper bound" in row["reason"]
