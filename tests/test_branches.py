"""The code's own guards: a finding on a path the job does not take is wrong.

Real scripts switch features with their own flags (``if args.shard_optimizer_state > 0:``,
``if args.smp > 0: ... else:``, ``if args.smp_version < 110:``, ``if args.save_full_model:``).
``smpfix.program.paths.branches`` decides, once for every rule, whether a finding's path runs in
the job: never (a launcher, the configuration, the library switch or the version range rules
it out: silent), only if a flag that is off by default is turned on (at most a hint), or
maybe (reported as usual). ``Rule.feature(key, at=node)`` also sees a guard that excludes a
feature (the ``elif`` after ``if args.shard_optimizer_state > 0:``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import libcst as cst
from conftest import finding_text, run_cli

from smpfix.api import check_source
from smpfix.base.findings import Severity
from smpfix.engine.analysis import AnalysisOptions, analyze
from smpfix.job.linking import link
from smpfix.job.project import Project
from smpfix.job.versions import Version
from smpfix.rules.rule import Rule

ARGS = """\
import argparse

import smdistributed.modelparallel.torch as smp
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--shard_optimizer_state", type=int, default=0)
parser.add_argument("--save_full_model", type=int, default=0)
parser.add_argument("--skip_full_optimizer", type=int, default=1)
parser.add_argument("--smp", type=int, default=0)
parser.add_argument("--do_train", type=int, default=0)
args = parser.parse_args()
"""


def _found(text: str, select: str, job: dict | None = None) -> list[tuple[int, str]]:
    return sorted(
        (f.start.line, f.severity.value)
        for f in check_source(text, "train.py", select=[select], job=job)
    )


def test_the_elif_after_an_oss_test_runs_without_oss() -> None:
    text = (
        ARGS
        + """\
smp.init({"tensor_parallel_degree": 1, "sharded_data_parallel_degree": 1,
          "shard_optimizer_state": args.shard_optimizer_state > 0})
model = smp.DistributedModel(Net())
optimizer = smp.DistributedOptimizer(torch.optim.Adam(model.parameters()))
if args.shard_optimizer_state > 0:
    print("full optimizer state is not saved with shard_optimizer_state")
elif smp.rdp_rank() == 0:
    torch.save(optimizer.state_dict(), "opt.pt")
torch.save(optimizer.state_dict(), "opt_again.pt")
"""
    )
    # The first save sits where the script's own test says sharding is off; the second may run with
    # it.
    assert _found(text, "SMP303") == [(21, "warning")]


def test_the_non_library_branch_and_the_helpers_it_alone_calls() -> None:
    text = (
        ARGS
        + """\
if args.smp > 0:
    smp.init()


def plain_eval(model, x):
    return model(x)


@smp.step
def eval_step(model, x):
    return model(x)


model = Net()
if args.smp > 0:
    model = smp.DistributedModel(model)
for x in batches:
    if args.smp > 0:
        out = eval_step(model, x)
    else:
        out = plain_eval(model, x)
"""
    )
    assert _found(text, "SMP403", {"pipeline_parallel_degree": 2}) == []
    # The same helper called outside the switch is reported.
    assert _found(
        text + "plain_eval(model, batches[0])\n", "SMP403", {"pipeline_parallel_degree": 2}
    ) == [(18, "error")]


def test_opt_in_flag_off_by_default_is_at_most_a_hint() -> None:
    text = (
        ARGS
        + """\
smp.init()
model = smp.DistributedModel(Net())
if args.save_full_model:
    if smp.dp_rank() == 0:
        smp.save(model.local_state_dict(), "model.pt", partial=True)
"""
    )
    found = check_source(text, "train.py", select=["SMP301"], job={"tensor_parallel_degree": 4})
    assert [(f.start.line, f.severity) for f in found] == [(16, Severity.HINT)]
    assert (
        "this code runs only when `args.save_full_model` is true; `--save_full_model` defaults"
        " to 0 and no launcher of this script sets it" in found[0].evidence
    )
    # A flag that is on by default keeps the finding's severity; one that is off but negated too.
    assert _found(
        text.replace("if args.save_full_model:", "if not args.save_full_model:"),
        "SMP301",
        {"tensor_parallel_degree": 4},
    ) == [(16, "error")]


def test_a_flag_read_through_a_name_assigned_once_is_the_flag() -> None:
    text = (
        ARGS
        + """\
smp.init()
model = Net()
save_full = args.save_full_model == 1
if save_full:
    if smp.dp_rank() == 0:
        smp.save(model.local_state_dict(), "model.pt", partial=True)
"""
    )
    assert _found(text, "SMP301", {"tensor_parallel_degree": 4}) == [(17, "hint")]
    # A name assigned twice may hold either value: the finding keeps its severity.
    twice = text.replace(
        "save_full = args.save_full_model == 1\n",
        "save_full = args.save_full_model == 1\nsave_full = True\n",
    )
    assert _found(twice, "SMP301", {"tensor_parallel_degree": 4}) == [(18, "error")]


def test_a_flag_widened_by_or_is_off_when_every_part_is() -> None:
    text = (
        ARGS
        + """\
args.save_full_model = args.save_full_model or args.do_train
smp.init()
model = Net()
if args.save_full_model:
    if smp.dp_rank() == 0:
        smp.save(model.local_state_dict(), "model.pt", partial=True)
"""
    )
    assert _found(text, "SMP301", {"tensor_parallel_degree": 4}) == [(17, "hint")]
    # One part on by default turns the flag on; any other assignment may give it any value.
    assert _found(
        text.replace("args.do_train\n", "args.skip_full_optimizer\n"),
        "SMP301",
        {"tensor_parallel_degree": 4},
    ) == [(17, "error")]
    assert _found(
        text.replace(" or args.do_train", " + 1"), "SMP301", {"tensor_parallel_degree": 4}
    ) == [(17, "error")]
    assert _found(
        text.replace(" or args.do_train", " and args.do_train"),
        "SMP301",
        {"tensor_parallel_degree": 4},
    ) == [(17, "error")]


def test_skip_flag_on_by_default_makes_the_unskipped_path_a_hint() -> None:
    text = (
        ARGS
        + """\
smp.init()
model = smp.DistributedModel(Net())
optimizer = smp.DistributedOptimizer(torch.optim.Adam(model.parameters()))
if not args.skip_full_optimizer:
    torch.save(optimizer.state_dict(), "opt.pt")
"""
    )
    assert _found(text, "SMP303", {"shard_optimizer_state": True}) == [(17, "hint")]


LAUNCHER = """\
from sagemaker.pytorch import PyTorch

PyTorch(
    entry_point="train.py",
    role="arn:aws:iam::111122223333:role/sm",
    instance_type="ml.p3.16xlarge",
    instance_count=1,
    framework_version="1.12.0",
    py_version="py38",
    hyperparameters=HYPERPARAMETERS,
    distribution={
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": {"tensor_parallel_degree": 4, "ddp": True}}},
        "mpi": {"enabled": True, "processes_per_host": 8},
    },
).fit()
"""  # noqa: E501


def _project_findings(
    root: Path, script: str, hyperparameters: dict, select: str
) -> list[tuple[int, str]]:
    (root / "train.py").write_text(script, encoding="utf-8")
    launcher = LAUNCHER.replace("HYPERPARAMETERS", repr(hyperparameters))
    (root / "launch.py").write_text(launcher, encoding="utf-8")
    project = Project.of((str(root),)).with_links(link([(str(root / "launch.py"), launcher)]))
    path = root / "train.py"
    options = AnalysisOptions(
        select=frozenset({select}), project=project, declared_jobs=project.declared_for(str(path))
    )
    return sorted(
        (f.start.line, f.severity.value) for f in analyze(script, str(path), options).findings
    )


def test_launcher_hyperparameters_decide_the_branch(workdir: Path) -> None:
    script = (
        ARGS
        + """\
smp.init()
model = smp.DistributedModel(Net())
if args.save_full_model:
    if smp.dp_rank() == 0:
        smp.save(model.local_state_dict(), "model.pt", partial=True)
"""
    )
    # The launcher turns the flag on: the finding stands, with the job's tensor parallelism.
    assert _project_findings(workdir, script, {"save_full_model": 1}, "SMP301") == [(16, "error")]
    # The launcher turns it off explicitly: off in this job, but another run can pass the flag.
    assert _project_findings(workdir, script, {"save_full_model": 0}, "SMP301") == [(16, "hint")]
    # The launcher leaves it at its default (off): a hint.
    assert _project_findings(workdir, script, {"epochs": 3}, "SMP301") == [(16, "hint")]


class _NewApiProbe(Rule):
    """Reports every ``print`` call, as advice that holds from SMP 1.10."""

    code = "SMP999"
    name = "probe"
    since: ClassVar[Version | None] = (1, 10)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "print":
            self.report(node, "probe", severity=Severity.WARNING)


def test_version_gates_keep_advice_for_other_versions_out() -> None:
    text = """\
import smdistributed.modelparallel.torch as smp

if args.smp_version < 110:
    print("the old API")
else:
    print("the new API")
"""
    options = AnalysisOptions(select=frozenset({"SMP999"}), extra_rules=(_NewApiProbe,))
    found = analyze(text, "train.py", options).findings
    assert [f.start.line for f in found] == [6]


MODEL_WITH_SETTER = """\
import math

import torch
from torch.utils import checkpoint


class Encoder(torch.nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = layers
        self._checkpoint_activations = False

    def checkpoint_activations(self, val):
        for module in self.modules():
            if hasattr(module, "_checkpoint_activations"):
                module._checkpoint_activations = val

    def forward(self, x):
        if self._checkpoint_activations:
            return checkpoint.checkpoint(self.layers, x)
        return self.layers(x)
"""

SETTER_SCRIPT = """\
import argparse

import smdistributed.modelparallel.torch as smp

from modeling import Encoder

parser = argparse.ArgumentParser()
parser.add_argument("--checkpoint_activations", type=int, default=0)
args = parser.parse_args()
smp.init()
model = Encoder(layers)
model.checkpoint_activations(args.checkpoint_activations)
model = smp.DistributedModel(model)
"""


def _modeling_findings(root: Path, hyperparameters: dict) -> list[tuple[int, str]]:
    """SMP408 in the model module, checked as a user checks the project from its folder."""
    (root / "modeling.py").write_text(MODEL_WITH_SETTER, encoding="utf-8")
    (root / "train.py").write_text(SETTER_SCRIPT, encoding="utf-8")
    launcher = LAUNCHER.replace("HYPERPARAMETERS", repr(hyperparameters))
    (root / "launch.py").write_text(launcher, encoding="utf-8")
    completed = run_cli(
        "check",
        ".",
        "--select",
        "SMP408",
        "--format",
        "json",
        "--no-cache",
        "--exit-zero",
        cwd=root,
    )
    return sorted(
        (item["location"]["row"], item["severity"])
        for item in json.loads(completed.stdout)
        if item["filename"].endswith("modeling.py")
    )


def test_a_model_switch_set_through_a_setter_is_what_the_script_passes(workdir: Path) -> None:
    # ``self._checkpoint_activations`` starts False and the script's setter call passes a flag
    # that is off by default: the checkpointing path is a hint naming the flag.
    assert _modeling_findings(workdir, {"epochs": 3}) == [(20, "hint")]
    # The launcher turns the flag on: the finding stands.
    assert _modeling_findings(workdir, {"checkpoint_activations": 1}) == [(20, "warning")]


def test_a_model_switch_read_from_its_configuration_is_off_by_default() -> None:
    text = """\
import smdistributed.modelparallel.torch as smp
import torch
from torch.utils import checkpoint


class Encoder(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layers = torch.nn.Linear(config.hidden_size, config.hidden_size)
        self._checkpoint_activations = getattr(config, "checkpoint_activations", False)

    def forward(self, x):
        if self._checkpoint_activations:
            return checkpoint.checkpoint(self.layers, x)
        return self.layers(x)


smp.init()
model = smp.DistributedModel(Encoder(config))
"""
    found = check_source(text, "train.py", select=["SMP408"])
    assert [(f.start.line, f.severity.value) for f in found] == [(14, "hint")]
    assert "`checkpoint_activations` defaults to False" in finding_text(found[0])
    # Set to a literal that is on: the path runs, the finding keeps its severity.
    on = text.replace('getattr(config, "checkpoint_activations", False)', "True")
    assert _found(on, "SMP408") == [(14, "warning")]
    # Never on in any configuration: only a literal False sets it, the code is dead.
    dead = text.replace('getattr(config, "checkpoint_activations", False)', "False")
    assert _found(dead, "SMP408") == []


HF_SCRIPT = """\
from dataclasses import dataclass, field

import smdistributed.modelparallel.torch as smp
import torch
from transformers import HfArgumentParser


@dataclass
class TrainingArgs:
    full_optimizer_state: bool = field(default=False, metadata={"help": "save it all"})


(training_args,) = HfArgumentParser((TrainingArgs,)).parse_args_into_dataclasses()
smp.init()
with smp.tensor_parallelism():
    model = smp.DistributedModel(Net())
optimizer = smp.DistributedOptimizer(torch.optim.Adam(model.parameters()))
if training_args.full_optimizer_state:
    torch.save(optimizer.state_dict(), "opt.pt")
"""


def test_hf_argument_parser_dataclass_fields_are_switches(workdir: Path) -> None:
    # The field's default keeps the save off: a hint, not the error it would be when on.
    assert _project_findings(workdir, HF_SCRIPT, {"epochs": 3}, "SMP303") == [(19, "hint")]
    # A launcher passing the field as a hyperparameter turns it on (``string_to_bool``).
    assert _project_findings(workdir, HF_SCRIPT, {"full_optimizer_state": True}, "SMP303") == [
        (19, "error")
    ]
    # A dataclass no HfArgumentParser parses holds no switches: the path may run.
    plain = HF_SCRIPT.replace("HfArgumentParser((TrainingArgs,))", "HfArgumentParser(())")
    assert _project_findings(workdir, plain, {"epochs": 3}, "SMP303") == [(19, "error")]


def test_a_path_the_launcher_turns_off_but_the_default_runs_is_a_hint(workdir: Path) -> None:
    script = (
        ARGS
        + """\
smp.init()
model = smp.DistributedModel(Net())
if args.do_train:
    pass
else:
    if smp.dp_rank() == 0:
        smp.save(model.local_state_dict(), "model.pt", partial=True)
"""
    )
    # ``--do_train 0``, the script's default, runs the checkpoint; this job's launcher passes 1.
    assert _project_findings(workdir, script, {"do_train": 1}, "SMP301") == [(18, "hint")]
    assert _project_findings(workdir, script, {"do_train": 0}, "SMP301") == [(18, "error")]
    # The library switch's other branch runs in no configuration of the library: silent.
    no_library = script.replace("if args.do_train:", "if args.smp > 0:\n    smp.init()")
    assert _project_findings(workdir, no_library, {"do_train": 1}, "SMP301") == []
