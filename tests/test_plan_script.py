"""Reading what the launched script builds: values traced through argparse and the launcher's
hyperparameters, ``if`` branches, and each memory switch, with unknown staying unknown."""

from __future__ import annotations

from typing import Any, Optional

import pytest
from conftest import parsed

from smpfix.base.literals import UNKNOWN
from smpfix.job.jobfacts import DeclaredJob, JobFacts
from smpfix.job.linking import LinkedScript
from smpfix.plan import script_setup
from smpfix.plan.script_code import ScriptCode
from smpfix.plan.script_model import find_model, parse_parameter_count
from smpfix.plan.script_values import ScriptValues

HEADER = """\
import argparse
import smdistributed.modelparallel.torch as smp
import torch
from transformers import AutoConfig, AutoModelForCausalLM, GPT2Config, LlamaConfig

parser = argparse.ArgumentParser()
parser.add_argument("--hidden", type=int, default=1024)
parser.add_argument("--layers", type=int, default=24)
parser.add_argument("--heads", type=int, default=16)
parser.add_argument("--fp16", type=int, default=0)
parser.add_argument("--strategy", type=str, default="each")
parser.add_argument("--model_name", default="gpt2-xl")
parser.add_argument("--lr", type=float, default=1e-4)
parser.add_argument("--flag", action="store_true")
args = parser.parse_args()
"""


def code_of(body: str) -> ScriptCode:
    text = HEADER + body
    return ScriptCode("train.py", (parsed(text),))


def link(hyperparameters: Optional[dict[str, Any]] = None, complete: bool = True) -> LinkedScript:
    job = DeclaredJob(
        "launcher launch.py:3", {"tensor_parallel_degree": 4, "instance_type": "ml.p4d.24xlarge"}
    )
    return LinkedScript("train.py", job, hyperparameters or {}, "launch.py", 3, complete)


def values_for(code: ScriptCode, *links: LinkedScript) -> ScriptValues:
    job = JobFacts.resolve([link.job for link in links])
    return ScriptValues(code.modules, links, job)


def value(body: str, expression: str, *links: LinkedScript) -> Any:
    code = code_of(f"{body}\nRESULT = {expression}\n")
    script = code.modules[0]
    (assignment,) = script.facts.assignments["RESULT"]
    assert assignment is not None
    return values_for(code, *links).of(assignment.value, script.facts).value


# -- values ----------------------------------------------------------------------------------------


def test_argparse_defaults_and_hyperparameters_that_override_them() -> None:
    assert value("", "args.hidden") == 1024  # no launcher known: the default
    assert value("", "args.hidden", link({"hidden": 4096})) == 4096
    assert value("", "args.hidden", link({"hidden": "4096"})) == 4096  # type=int converts the text
    assert value("", "args.lr", link({"lr": "0.001"})) == pytest.approx(0.001)
    assert value("", "args.strategy", link({"strategy": "group_2"})) == "group_2"
    assert (
        value("", "args.model_name", link({"model_name": 7})) == "7"
    )  # no type: argparse gives text


def test_what_cannot_be_known_stays_unknown() -> None:
    assert (
        value("", "args.hidden", link({}, complete=False)) is UNKNOWN
    )  # the launcher may pass it unseen
    assert (
        value("", "args.flag", link({"flag": True})) is UNKNOWN
    )  # an action decides what it becomes
    assert value("", "args.missing") is UNKNOWN
    # The script may change it, where smpfix cannot tell whether it does:
    assert value("if compute():\n    args.hidden = 2048\n", "args.hidden") is UNKNOWN
    assert value("for _ in range(2):\n    args.hidden = 2048\n", "args.hidden") is UNKNOWN
    assert value("args.hidden = 2048\nargs.hidden = 512\n", "args.hidden") is UNKNOWN
    assert value("", "compute_width()") is UNKNOWN


def test_arithmetic_comparisons_and_the_job() -> None:
    assert value("", "4 * args.hidden") == 4096
    assert value("", "args.fp16 > 0", link({"fp16": 1})) is True
    assert value("", "smp.tp_size() > 1 or args.fp16 > 0", link()) is True
    assert value("", "torch.float16 if args.fp16 else torch.float32") == "fp32"
    assert value("width = args.hidden // 2\n", "width") == 512
    assert value("", "not args.fp16 and args.layers == 24") is True


def test_self_attributes_do_not_hide_the_arguments() -> None:
    body = "class Data:\n    def __init__(self, layers):\n        self.layers = layers\n"
    assert value(body, "args.layers") == 24


# -- the model -------------------------------------------------------------------------------------


def model(body: str, *links: LinkedScript, job: Optional[dict[str, Any]] = None):  # type: ignore[no-untyped-def]
    code = code_of(body)
    declared = [DeclaredJob("pyproject.toml [tool.smpfix.job]", job)] if job else []
    facts = JobFacts.resolve([*declared, *(link.job for link in links)])
    return find_model(code, ScriptValues(code.modules, links, facts), facts)


def test_a_configuration_with_traced_sizes() -> None:
    found = model(
        "config = GPT2Config(n_embd=args.hidden, n_layer=args.layers, n_head=args.heads)\n",
        link({"hidden": 1600, "layers": 48, "heads": 25}),
    )
    assert found.count is not None and found.count.total == 1_557_611_200  # gpt2-xl
    assert (
        "`hidden` = 1600 (launcher hyperparameter)" in found.source and "train.py:" in found.source
    )


def test_a_known_checkpoint_and_an_unknown_one() -> None:
    found = model("model = AutoModelForCausalLM.from_pretrained(args.model_name)\n")
    assert found.count is not None and found.count.total == 1_557_611_200
    unknown = model("model = AutoModelForCausalLM.from_pretrained('my-org/secret-model')\n")
    assert unknown.count is None and "does not know" in unknown.source


def test_tokenizers_are_not_models_and_a_config_and_its_model_agree() -> None:
    body = (
        "from transformers import AutoTokenizer\ntokenizer ="
        " AutoTokenizer.from_pretrained('bert-base-uncased')\nconfig ="
        " AutoConfig.from_pretrained('gpt2')\nmodel ="
        " AutoModelForCausalLM.from_pretrained('gpt2')\n"
    )
    found = model(body)
    assert found.count is not None and found.count.total == 124_439_808


def test_a_model_built_in_a_branch_that_does_not_run_does_not_count() -> None:
    body = (
        "if args.fp16 > 0:\n    model = AutoModelForCausalLM.from_pretrained(unknown_name)\nconfig"
        " = GPT2Config()\n"
    )
    found = model(body)
    assert found.count is not None and found.count.total == 124_439_808
    assert (
        model(body, link({"fp16": 1})).count is None
    )  # now it runs, and its checkpoint is unknown


def test_two_different_models_or_an_unresolved_size_give_no_count() -> None:
    assert model("a = GPT2Config()\nb = LlamaConfig()\n").count is None
    unresolved = model("config = GPT2Config(n_embd=compute())\n")
    assert unresolved.count is None and "n_embd cannot be resolved" in unresolved.source
    assert model("").count is None


def test_the_model_parameters_setting() -> None:
    alone = model("", job={"model_parameters": "20B"})
    assert alone.count is not None and alone.count.total == 20 * 10**9 and alone.shape is None
    with_shape = model("config = GPT2Config()\n", job={"model_parameters": 2e9})
    assert (
        with_shape.count is not None
        and with_shape.count.total == 2 * 10**9
        and with_shape.shape is not None
    )
    assert "model_parameters" in with_shape.source


@pytest.mark.parametrize(
    ("text", "count"),
    [
        (20000000000, 20 * 10**9),
        (2e10, 20 * 10**9),
        ("20B", 20 * 10**9),
        ("1.5e9", 1_500_000_000),
        ("350M", 350_000_000),
        ("lots", None),
        (True, None),
    ],
)
def test_parameter_counts_as_written(text: Any, count: Optional[int]) -> None:
    assert parse_parameter_count(text) == count


# -- switches --------------------------------------------------------------------------------------


def checkpointing(body: str, *links: LinkedScript) -> tuple[Any, int]:
    code = code_of(body)
    reading, group = script_setup.activation_checkpointing(code, values_for(code, *links))
    return reading.value, group


def test_checkpointing_under_branches() -> None:
    call = "    smp.set_activation_checkpointing(layers, strategy=args.strategy)\n"
    assert checkpointing("smp.set_activation_checkpointing(layers)\n") == (True, 1)
    assert checkpointing(f"if args.fp16:\n{call}", link({"fp16": 1})) == (True, 1)
    assert checkpointing(f"if args.fp16:\n{call}", link({"fp16": 0})) == (False, 1)
    assert checkpointing(f"if unknown():\n{call}") == (None, 1)
    assert checkpointing(f"if args.fp16:\n    pass\nelse:\n{call}") == (
        True,
        1,
    )  # fp16 defaults to 0
    assert checkpointing(f"if args.fp16:\n{call}", link({"fp16": 1, "strategy": "group_2"})) == (
        True,
        2,
    )
    assert checkpointing("model = build()\n") == (False, 1)


def flash(body: str, *links: LinkedScript, gpu: bool = True) -> Any:
    code = code_of(body)
    return script_setup.flash_attention(code, values_for(code, *links), gpu).value


def test_flash_attention_needs_the_distributed_transformer_and_the_gpu() -> None:
    with_tp = (
        "with smp.model_creation(tensor_parallelism=True, flash_attention=args.fp16 > 0):\n   "
        " model = build()\n"
    )
    assert flash(with_tp, link({"fp16": 1})) is True
    assert flash(with_tp, link({"fp16": 1}), gpu=False) is False
    assert (
        flash(
            "with smp.model_creation(tensor_parallelism=False, flash_attention=True):\n    model ="
            " build()\n"
        )
        is False
    )
    assert (
        flash("with smp.model_creation(tensor_parallelism=True):\n    model = build()\n") is None
    )  # default not documented
    assert (
        flash(
            "with smp.model_creation(tensor_parallelism=True, flash_attention=x):\n    model ="
            " build()\n"
        )
        is None
    )
    assert flash("model = build()\n") is False


def test_dtype_optimizer_sequence_and_batch() -> None:
    code = code_of(
        "parser.add_argument('--max_context_width', type=int,"
        " default=512)\nparser.add_argument('--train_batch_size', type=int, default=8)\nwith"
        " smp.model_creation(dtype=torch.bfloat16 if args.fp16 == 0 else torch.float16):\n    model"
        " = build()\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n"
    )
    values = values_for(code, link({"train_batch_size": 16}))
    assert script_setup.model_dtype(code, values).value == "bf16"
    assert script_setup.optimizer(code, values).value == "sgd with momentum"
    assert script_setup.sequence_length(code, values, None).value == 512
    assert script_setup.batch_size(code, values).value == 16


def test_the_batch_of_the_data_loaders_when_no_argument_names_it() -> None:
    code = code_of(
        "from torch.utils.data import DataLoader\nloader = DataLoader(data, batch_size=2 * 8)\n"
    )
    assert script_setup.batch_size(code, values_for(code)).value == 16
    unknown = code_of(
        "from torch.utils.data import DataLoader\nloader = DataLoader(data, batch_size=size)\n"
    )
    assert script_setup.batch_size(unknown, values_for(unknown)).value is None


def test_the_smp_init_dict_is_evaluated() -> None:
    code = code_of(
        "smp.init({'fp16': args.fp16 > 0, 'microbatches': args.layers // 6, 'bf16': other})\n"
    )
    found = script_setup.init_settings(code, values_for(code, link({"fp16": 1})))
    assert found is not None and found.settings == {"fp16": True, "microbatches": 4}
    assert found.unknown == frozenset({"bf16"}) and not found.complete


# -- models the project defines --------------------------------------------------------------------

CUSTOM = """\
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(hidden)
        self.attn = nn.MultiheadAttention(hidden, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))


class GPT(nn.Module):
    def __init__(self, vocab, hidden, layers, heads, seq_len=1024):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(seq_len, hidden)
        self.blocks = nn.ModuleList([Block(hidden, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        TIE
        self.register_buffer("mask", torch.triu(torch.ones(seq_len, seq_len)))
"""  # noqa: E501


def custom(body: str, tie: str = "") -> Any:
    return model(
        CUSTOM.replace("TIE", tie or "pass") + body,
        link({"hidden": 1024, "layers": 24, "heads": 16}),
    )


def test_a_model_class_of_torch_nn_layers_is_counted_exactly() -> None:
    found = custom("model = GPT(50257, args.hidden, args.layers, args.heads)\n")
    h, v, p, layers = 1024, 50257, 1024, 24
    block = 2 * 2 * h + (4 * h * h + 4 * h) + (4 * h * h + 4 * h) + (4 * h * h + h)
    assert (
        found.count is not None and found.count.total == 2 * v * h + p * h + layers * block + 2 * h
    )
    assert found.count.layers == layers and found.count.in_layers == layers * block
    assert found.shape is not None
    assert (
        found.shape.hidden,
        found.shape.heads,
        found.shape.ffn,
        found.shape.vocab,
        found.shape.layers,
    ) == (h, 16, 4 * h, v, layers)
    assert "counted from its torch.nn layers" in found.source


def test_a_tied_head_is_counted_once() -> None:
    untied = custom("model = GPT(50257, args.hidden, args.layers, args.heads)\n").count
    tied = custom(
        "model = GPT(50257, args.hidden, args.layers, args.heads)\n",
        "self.head.weight = self.embed.weight",
    ).count
    assert untied is not None and tied is not None and untied.total - tied.total == 50257 * 1024


def test_a_layer_it_cannot_count_makes_the_model_unknown() -> None:
    found = custom(
        "model = GPT(50257, args.hidden, args.layers, args.heads)\n",
        "self.extra = nn.LSTM(4, 4)",
    )
    assert found.count is None and "cannot count" in found.source
    assert custom("model = GPT(50257, compute(), args.layers, args.heads)\n").count is None


def test_a_hugging_face_model_wins_over_a_wrapper_class() -> None:
    found = custom(
        "model = GPT(50257, args.hidden, args.layers, args.heads)\nconfig = GPT2Config()\n"
    )
    assert found.count is not None and found.count.total == 124_439_808


# -- absurd inputs ---------------------------------------------------------------------------------


def test_absurd_sizes_give_no_verdict_and_no_crash() -> None:
    from smpfix.plan.planner import PlanInputs, plan

    declared = DeclaredJob(
        "pyproject.toml [tool.smpfix.job]",
        {"instance_type": "ml.p4d.24xlarge", "instance_count": 2},
    )
    for body in (
        "config = GPT2Config(n_embd=1024, n_layer=2, n_head=0)\n",
        f"config = GPT2Config(n_embd={10**400}, n_layer=2, n_head=1)\n",
    ):
        found = plan(PlanInputs((declared,), None, code_of(body)))
        assert found.fits is None, found
    huge = DeclaredJob(
        "--job",
        {"instance_type": "ml.p4d.24xlarge", "instance_count": 10**15, "model_parameters": 10**30},
    )
    found = plan(PlanInputs((huge,), None, None))
    assert found.fits in (False, None)
