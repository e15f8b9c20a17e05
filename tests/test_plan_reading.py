"""How the plan reads a project's code: values through the functions and branches they flow
through, the data's length, the model a script really builds, and the labels and reasons
(issue 25, items 1, 2, 3 and 5)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import pytest
from conftest import parsed, run_cli

from smpfix.base.literals import UNKNOWN
from smpfix.job.jobfacts import DeclaredJob, JobFacts
from smpfix.job.linking import LinkedScript
from smpfix.plan import script_setup
from smpfix.plan.script_code import ScriptCode
from smpfix.plan.script_model import find_model
from smpfix.plan.script_values import ImportedClass, ScriptValues
from smpfix.plan.setup import OPTIMIZER_STATE_BYTES
from smpfix.program.project.parsed_file import ParsedFile

ARGS = """\
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--model_type", default="gpt2")
parser.add_argument("--model_name", default="")
parser.add_argument("--hidden", type=int, default=1024)
parser.add_argument("--fused", type=int, default=1)
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--accumulate", type=int, default=4)
args = parser.parse_args()
"""


def link(hyperparameters: Optional[dict[str, Any]] = None) -> LinkedScript:
    job = DeclaredJob("launcher launch.py:3", {"instance_type": "ml.p4d.24xlarge"})
    return LinkedScript("train.py", job, hyperparameters or {}, "launch.py", 3, True)


def evaluate(
    files: dict[str, str],
    expression: str,
    hyperparameters: Optional[dict[str, Any]] = None,
    launcher: Optional[ParsedFile] = None,
) -> Any:
    """``expression`` evaluated at the end of ``train.py`` (the first of ``files``)."""
    names = list(files)
    texts = dict(files)
    texts[names[0]] += f"\nRESULT = {expression}\n"
    modules = [parsed(texts[name], name) for name in names]
    linked = link(hyperparameters)
    values = ScriptValues(modules, (linked,), JobFacts.resolve([linked.job]), launcher)
    (assignment,) = modules[0].facts.assignments["RESULT"]
    return values.of(assignment.value, modules[0].facts).value


FACTORY = """\
from transformers import AutoConfig, GPT2Config, T5Config


def _gpt2(args):
    return {"n_embd": args.hidden, "n_layer": 24, "n_head": 16}


def get_config(model_type, model_name, args):
    if model_name:
        return AutoConfig.from_pretrained(model_name), args
    if model_type == "gpt2":
        config_class = GPT2Config
        kwargs = _gpt2(args)
    elif model_type == "t5":
        config_class = T5Config
        kwargs = {"d_model": args.hidden}
        if args.fused > 0:
            args.fused = 0
    return config_class(**kwargs), args
"""
TRAIN = ARGS + (
    "import factory\n"
    "config, args = factory.get_config(args.model_type, args.model_name, args)\n"
    "from transformers import AutoModelForCausalLM\n"
    "model = AutoModelForCausalLM.from_config(config)\n"
)


# -- values through functions and branches -------------------------------------------------------


def _returned(body: str) -> Any:
    """The value ``return width`` has inside the function ``size`` of ``body``."""
    module = parsed(body, "train.py")
    (function,) = [s for s in module.module.body if getattr(s, "name", None) is not None]
    returned = function.body.body[0].body[0].value
    values = ScriptValues([module], (link(),), JobFacts.resolve([link().job]))
    return values.of(returned, module.facts).value


def test_a_parameter_holds_what_every_call_of_its_function_passes() -> None:
    body = ARGS + "def size(width):\n    return width\n\nsize(args.hidden)\nsize(1024)\n"
    assert _returned(body) == 1024
    assert _returned(body.replace("size(1024)", "size(width=1024)")) == 1024
    assert _returned(body.replace("size(1024)", "size(2048)")) is UNKNOWN  # calls disagree
    assert _returned(body.replace("size(1024)", "")) == 1024
    assert _returned(ARGS + "def size(width):\n    return width\n") is UNKNOWN  # no call


def test_the_assignment_of_the_branch_that_runs_gives_a_name_its_value() -> None:
    body = ARGS + ("if args.model_type == 'gpt2':\n    width = 768\nelse:\n    width = 4096\n")
    assert evaluate({"train.py": body}, "width") == 768
    assert evaluate({"train.py": body}, "width", {"model_type": "t5"}) == 4096
    unknown = ARGS + "if compute():\n    width = 768\nelse:\n    width = 4096\n"
    assert evaluate({"train.py": unknown}, "width") is UNKNOWN  # not a guess


def test_a_name_holding_an_imported_hugging_face_class() -> None:
    found = evaluate({"train.py": ARGS + FACTORY}, "GPT2Config")
    assert found == ImportedClass("transformers.GPT2Config")
    assert evaluate({"train.py": "from config import USE_FLASH\n"}, "USE_FLASH") is UNKNOWN


def test_min_max_and_a_known_tokenizer_s_length() -> None:
    body = (
        "from transformers import AutoTokenizer\n"
        "tokenizer = AutoTokenizer.from_pretrained('google/flan-t5-xxl')\n"
    )
    assert evaluate({"train.py": body}, "min(tokenizer.model_max_length, 1024)") == 512
    assert evaluate({"train.py": body}, "max(2, 3, 1)") == 3
    unknown = body.replace("google/flan-t5-xxl", "my-org/private-model")
    assert evaluate({"train.py": unknown}, "tokenizer.model_max_length") is UNKNOWN


def test_code_after_a_return_taken_does_not_run() -> None:
    code = ScriptCode("train.py", (parsed(TRAIN, "train.py"), parsed(FACTORY, "factory.py")))
    found = find_model(code, _values(code, {"model_name": "gpt2-xl"}), JobFacts.resolve([]))
    assert found.count is not None and found.count.total == 1_557_611_200
    assert "'gpt2-xl'" in found.source


def test_a_config_factory_is_followed_into_the_branch_the_launcher_takes() -> None:
    code = ScriptCode("train.py", (parsed(TRAIN, "train.py"), parsed(FACTORY, "factory.py")))
    found = find_model(code, _values(code, {"hidden": 2048}), JobFacts.resolve([]))
    assert found.shape is not None and (found.shape.hidden, found.shape.layers) == (2048, 24)
    assert "a GPT2Config, at factory.py" in found.source
    t5 = find_model(code, _values(code, {"model_type": "t5"}), JobFacts.resolve([]))
    assert t5.shape is not None and t5.shape.family == "t5" and t5.shape.hidden == 1024


def test_an_attribute_written_only_in_a_branch_not_taken_keeps_its_value() -> None:
    files = {"train.py": TRAIN, "factory.py": FACTORY}
    assert evaluate(files, "args.fused") == 1  # gpt2: the t5 branch's write does not run
    assert evaluate(files, "args.fused", {"model_type": "t5"}) == 0  # it runs, and writes 0
    rewritten = ARGS + "args.batch = args.batch // args.accumulate\n"
    assert evaluate({"train.py": rewritten}, "args.batch") == 8


def test_a_function_nothing_calls_builds_no_model() -> None:
    helper = (
        "from transformers import AutoConfig\n\n"
        "def unused(name):\n    return AutoConfig.from_pretrained(name)\n"
    )
    script = ARGS + (
        "import helper\n"
        "from transformers import AutoConfig, AutoModelForCausalLM\n"
        "config = AutoConfig.from_pretrained('tiiuae/falcon-7b')\n"
        "model = AutoModelForCausalLM.from_config(config)\n"
    )
    code = ScriptCode("train.py", (parsed(script, "train.py"), parsed(helper, "helper.py")))
    found = find_model(code, _values(code), JobFacts.resolve([]))
    assert found.count is not None and found.count.total == 6_921_720_704


def test_a_configuration_only_an_untaken_branch_builds_a_model_from_does_not_count() -> None:
    script = ARGS + (
        "import torch\n"
        "from transformers import AutoModelForCausalLM, GPTJConfig\n"
        "config = GPTJConfig(n_embd=args.hidden, n_layer=4, n_head=8)\n"
        "if args.fused:\n"
        "    model = AutoModelForCausalLM.from_pretrained('EleutherAI/gpt-j-6b')\n"
        "else:\n"
        "    model = AutoModelForCausalLM.from_config(config)\n"
        "train(model, config)\n"
    )
    code = ScriptCode("train.py", (parsed(script, "train.py"),))
    found = find_model(code, _values(code), JobFacts.resolve([]))
    assert found.count is not None and found.count.total == 6_050_882_784
    both = find_model(code, _values(code, {"fused": 0}), JobFacts.resolve([]))
    assert both.count is not None and both.shape is not None and both.shape.hidden == 1024


def test_the_project_s_own_class_named_like_a_configuration_is_not_one() -> None:
    script = (
        "class BertConfig:\n"
        "    def __init__(self, vocab_size_or_config_json_file):\n"
        "        self.vocab = vocab_size_or_config_json_file\n\n"
        "config = BertConfig(vocab_size_or_config_json_file=-1)\n"
    )
    code = ScriptCode("train.py", (parsed(script, "train.py"),))
    assert find_model(code, _values(code), JobFacts.resolve([])).count is None


def _values(code: ScriptCode, hyperparameters: Optional[dict[str, Any]] = None) -> ScriptValues:
    linked = link(hyperparameters)
    return ScriptValues(code.modules, (linked,), JobFacts.resolve([linked.job]))


# -- the model's own flash attention --------------------------------------------------------------


def test_a_project_function_that_gives_the_model_flash_attention() -> None:
    script = ARGS + (
        "import smdistributed.modelparallel.torch as smp\n"
        "from flash import add_flash_attn\n"
        "with smp.model_creation(tensor_parallelism=False):\n"
        "    model = build()\n"
        "if args.model_type == 't5':\n"
        "    add_flash_attn(model)\n"
    )
    helper = "def add_flash_attn(model):\n    model.attention = FlashAttention()\n"
    code = ScriptCode("train.py", (parsed(script, "train.py"), parsed(helper, "flash.py")))
    on = script_setup.flash_attention(code, _values(code, {"model_type": "t5"}), True)
    assert on.value is True and "`add_flash_attn(...)` at train.py:15" in on.how
    off = script_setup.flash_attention(code, _values(code), True)
    assert off.value is False  # the gpt2 branch: the library's kernels are not used either
    assert script_setup.flash_attention(code, _values(code, {"model_type": "t5"}), False).value is (
        False
    )


# -- item 5: reasons and labels -------------------------------------------------------------------

CONV = """\
import argparse
import smdistributed.modelparallel.torch as smp
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, kernel_size=(3, 3), stride=1)
        self.norm = nn.BatchNorm2d(64)
        self.pool = nn.MaxPool2d(2)
        self.up = nn.ConvTranspose2d(64, 16, 2, groups=4, bias=False)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(self.fc1(torch.flatten(self.pool(self.norm(self.conv2(self.conv1(x)))), 1)))


smp.init()
model = smp.DistributedModel(Net())
optimizer = smp.DistributedOptimizer(OPTIMIZER)
"""


def test_a_model_of_convolutions_is_counted_from_its_layers() -> None:
    code = ScriptCode("train.py", (parsed(CONV.replace("OPTIMIZER", "None"), "train.py"),))
    found = find_model(code, _values(code), JobFacts.resolve([]))
    conv = 32 * 1 * 9 + 32 + 64 * 32 * 9 + 64
    transposed = 64 * (16 // 4) * 4  # in x out/groups x kernel, no bias
    linear = 9216 * 128 + 128 + 128 * 10 + 10
    assert found.count is not None
    assert found.count.total == conv + 2 * 64 + transposed + linear
    assert "counted from its torch.nn layers" in found.source


def test_each_optimizer_is_labelled_with_its_own_state() -> None:
    for written, kind in (
        ("torch.optim.Adadelta(model.parameters())", "adadelta"),
        ("torch.optim.Rprop(model.parameters())", "rprop"),
        ("torch.optim.ASGD(model.parameters())", "asgd"),
        ("torch.optim.AdamW(model.parameters())", "adam"),
        ("torch.optim.Adagrad(model.parameters())", "adagrad"),
    ):
        code = ScriptCode("train.py", (parsed(CONV.replace("OPTIMIZER", written), "train.py"),))
        found = script_setup.optimizer(code, _values(code))
        assert found.value == kind, written
    assert OPTIMIZER_STATE_BYTES["adadelta"] == 8  # square_avg and acc_delta, fp32
    assert OPTIMIZER_STATE_BYTES["asgd"] == 4  # ax
    odd = CONV.replace("OPTIMIZER", "torch.optim.LBFGS(model.parameters())")
    code = ScriptCode("train.py", (parsed(odd, "train.py"),))
    found = script_setup.optimizer(code, _values(code))
    assert found.value == "adam" and "an optimizer smpfix does not know" in found.how


def _plan(tmp_path: Path, files: dict[str, str]) -> dict[str, Any]:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    done = run_cli("plan", "--format", "json", ".", cwd=tmp_path)
    (row,) = json.loads(done.stdout)
    return row


TF_LAUNCHER = """\
from sagemaker.tensorflow import TensorFlow

estimator = TensorFlow(
    entry_point="tf2.py",
    role="role",
    instance_type="ml.p3.16xlarge",
    instance_count=1,
    framework_version="2.3.1",
    py_version="py37",
    distribution={
        "smdistributed": {
            "modelparallel": {"enabled": True, "parameters": {"partitions": 2, "microbatches": 2}}
        },
        "mpi": {"enabled": True, "processes_per_host": 2},
    },
)
estimator.fit()
"""
TF_SCRIPT = """\
import smdistributed.modelparallel.tensorflow as smp
import tensorflow as tf

smp.init()


class Model(smp.DistributedModel):
    def __init__(self):
        super().__init__()
        self.dense = tf.keras.layers.Dense(10)

    def call(self, x):
        return self.dense(x)
"""


def test_a_tensorflow_job_is_told_why_it_has_no_plan(tmp_path: Path) -> None:
    row = _plan(tmp_path, {"launch.py": TF_LAUNCHER, "tf2.py": TF_SCRIPT})
    assert row["verdict"] == "unknown"
    assert row["reason"].startswith("a TensorFlow job")
    assert "tensor_parallel_degree is not set" not in row["reason"]


PT_SCRIPT = CONV.replace("OPTIMIZER", "torch.optim.Adadelta(model.parameters())")
OFFER = """\
from sagemaker.pytorch import PyTorch

use_smp = False
hyperparameters = {"epochs": 2}
if GUARD:
    estimator = PyTorch(
        entry_point="train.py",
        role="role",
        instance_type="ml.p3.16xlarge",
        instance_count=1,
        framework_version="1.8.1",
        py_version="py36",
        hyperparameters=hyperparameters,
        distribution={
            "smdistributed": {"modelparallel": {"enabled": True, "parameters": {"partitions": 2}}},
            "mpi": {"enabled": True, "processes_per_host": 8},
        },
    )
    estimator.fit()
"""


@pytest.mark.parametrize("guard", ["use_smp", 'hyperparameters.get("smp")'])
def test_an_estimator_in_a_branch_is_planned_and_said_to_be_an_offer(
    guard: str, tmp_path: Path
) -> None:
    row = _plan(tmp_path, {"launch.py": OFFER.replace("GUARD", guard), "train.py": PT_SCRIPT})
    assert row["assumptions"][0] == (
        f"an offer: the launcher builds this estimator only when `{guard}`, which its own values "
        "do not make true; planned as written"
    )


def test_an_estimator_under_a_test_smpfix_cannot_resolve_is_an_offer_too(
    tmp_path: Path,
) -> None:
    guard = 'os.environ.get("USE_SMP")'
    launcher = "import os\n" + OFFER.replace("GUARD", guard)
    row = _plan(tmp_path, {"launch.py": launcher, "train.py": PT_SCRIPT})
    assert row["assumptions"][0] == (
        f"an offer: the launcher builds this estimator only when `{guard}`, which smpfix "
        "cannot resolve; planned as written"
    )
    assert any("(adadelta)" in line for line in row["assumptions"])
