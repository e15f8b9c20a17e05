"""The data-pipeline pitfalls real scripts hide (issue 12, items 9-12).

- 9: a ``DataLoader(ds, **kwargs)`` whose settings live in a local literal dict, extended by
  ``kwargs.update({...})`` or ``kwargs["k"] = v``: its keys are read (``call_arguments``);
- 10: data sharded with the global rank through the project's own helpers
  (``utils.get_rank()`` returning ``smp.rank()``), in another module (``helper_member``);
- 11: loaders followed through ``x if c else y``, aliases, ``tqdm``, tuples returned by
  helpers and ``pool.submit(make_loader, ...).result()`` (``value_flow``);
- 12: SMP206, a ``DistributedSampler`` left out of the loader training reads, also in a
  helper module checked on behalf of the script.

The fixtures of SMP201-SMP206 hold the single-file cases; these tests pin the shared answers
and the cases that need a project of several files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import libcst as cst
from conftest import finding_text, parsed

from smpfix.engine.analysis import AnalysisOptions, analyze
from smpfix.job.jobfacts import DeclaredJob
from smpfix.job.project import Project
from smpfix.program.data.step_feeds import StepFeeds
from smpfix.program.facts import collect
from smpfix.program.flow.call_arguments import call_arguments
from smpfix.program.flow.value_flow import EndKind, ValueFlow


# -- item 9: the keys of a local **kwargs dict -----------------------------------------------------
def _passed(source: str, key: str, call_index: int = -1) -> Optional[tuple[list[str], bool]]:
    """(the values ``key`` may have, whether it may be absent) at the file's ``DataLoader``
    calls."""
    module = cst.parse_module(source)
    facts = collect(module)
    loaders = [call for call in facts.call_order if module.code_for_node(call.func) == "DataLoader"]
    arguments = call_arguments(loaders[call_index], facts)
    if arguments is None:
        return None
    passed = arguments.passed(key)
    return [module.code_for_node(value) for value in passed.values], passed.maybe_absent


def test_literal_dict_and_its_updates_are_read() -> None:
    source = """
def main():
    kwargs = {"batch_size": 64}
    kwargs.update({"num_workers": 1, "shuffle": False}, pin_memory=True)
    kwargs["drop_last"] = True
    loader = DataLoader(ds, **kwargs)
"""
    assert _passed(source, "batch_size") == (["64"], False)
    assert _passed(source, "shuffle") == (["False"], False)
    assert _passed(source, "pin_memory") == (["True"], False)
    assert _passed(source, "drop_last") == (["True"], False)
    assert _passed(source, "sampler") == ([], True)


def test_a_change_in_a_branch_may_not_have_happened() -> None:
    source = """
def main(use_cuda):
    kwargs = {"batch_size": 64, "shuffle": True}
    if use_cuda:
        kwargs.update({"drop_last": True, "shuffle": False})
    loader = DataLoader(ds, **kwargs)
"""
    assert _passed(source, "drop_last") == (["True"], True)
    assert _passed(source, "shuffle") == (["True", "False"], False)


def test_a_change_in_the_calls_own_branch_happened() -> None:
    source = """
def main(use_cuda):
    kwargs = {"batch_size": 64}
    if use_cuda:
        kwargs["drop_last"] = True
        loader = DataLoader(ds, **kwargs)
"""
    assert _passed(source, "drop_last") == (["True"], False)


def test_removed_keys_and_later_changes() -> None:
    source = """
def main():
    kwargs = dict(batch_size=64, drop_last=True)
    kwargs.pop("drop_last")
    first = DataLoader(ds, **kwargs)
    kwargs["drop_last"] = True
    second = DataLoader(ds, **kwargs)
"""
    assert _passed(source, "drop_last", 0) == ([], True)
    assert _passed(source, "drop_last", 1) == (["True"], False)


def test_a_change_later_in_a_loop_reaches_the_next_iteration() -> None:
    source = """
def main():
    kwargs = {"batch_size": 64}
    for epoch in range(3):
        loader = DataLoader(ds, **kwargs)
        kwargs["drop_last"] = True
"""
    assert _passed(source, "drop_last") == (["True"], True)


def test_dicts_smpfix_cannot_follow_are_unknown() -> None:
    aliased = (
        "def main():\n    kwargs = {}\n    other = kwargs\n    other['drop_last'] = False\n   "
        " DataLoader(ds, **kwargs)\n"
    )
    passed_on = (
        "def main():\n    kwargs = {}\n    configure(kwargs)\n    DataLoader(ds, **kwargs)\n"
    )
    parameter = "def main(**kwargs):\n    DataLoader(ds, **kwargs)\n"
    not_literal = "def main(args):\n    kwargs = vars(args)\n    DataLoader(ds, **kwargs)\n"
    starred = "def main(args):\n    DataLoader(*args)\n"
    for source in (aliased, passed_on, parameter, not_literal, starred):
        assert _passed(source, "drop_last") is None, source


def test_a_module_level_dict_is_read_unless_a_function_changes_it() -> None:
    read = "DEFAULTS = {'drop_last': True}\ndef main():\n    DataLoader(ds, **DEFAULTS)\n"
    changed = (
        "DEFAULTS = {'drop_last': True}\ndef tweak():\n    DEFAULTS['drop_last'] = False\ndef"
        " main():\n    DataLoader(ds, **DEFAULTS)\n"
    )
    assert _passed(read, "drop_last") == (["True"], False)
    assert _passed(changed, "drop_last") is None


# -- item 11: following a loader -------------------------------------------------------------------
FOLLOWED = """\
import smdistributed.modelparallel.torch as smp
from concurrent.futures import ThreadPoolExecutor
from torch.utils.data import DataLoader
from tqdm import tqdm


@smp.step
def train_step(model, batch):
    model.backward(model(batch))


def build(path):
    loader = DataLoader(load(path), batch_size=8)
    return loader, path


def pair():
    return DataLoader(a, batch_size=8), DataLoader(b, batch_size=8)


def main(model):
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(build, "shard-0")
    loader, name = future.result()
    shown = tqdm(loader) if smp.rank() == 0 else loader
    for batch in shown:
        train_step(model, batch)
    train, valid = pair()
    again = train
    for batch in again:
        train_step(model, batch)
    for batch in valid:
        print(batch)
"""


def _loaders(source: str) -> tuple[cst.Module, list[cst.Call], StepFeeds]:
    file = parsed(source)
    module, facts = file.module, file.facts
    loaders = [call for call in facts.call_order if module.code_for_node(call.func) == "DataLoader"]
    return module, loaders, StepFeeds(file)


def test_loaders_are_followed_through_futures_tuples_conditionals_and_aliases() -> None:
    _, loaders, feeds = _loaders(FOLLOWED)
    assert [feeds.feed_of(loader) for loader in loaders] == ["`train_step`", "`train_step`", None]


def test_value_flow_ends_of_a_returned_tuple_element() -> None:
    file = parsed(FOLLOWED)
    module, facts = file.module, file.facts
    flow = ValueFlow(file)
    valid = [
        call
        for call in facts.call_order
        if module.code_for_node(call) == "DataLoader(b, batch_size=8)"
    ][0]
    ends = list(flow.ends(valid))
    assert [end.kind for end in ends] == [EndKind.LOOP]
    loop = ends[0].node
    assert isinstance(loop, cst.For) and module.code_for_node(loop.iter) == "valid"


# -- items 10 and 12: across the modules of a project ----------------------------------------------
UTILS = """\
import smdistributed.modelparallel.torch as smp
import torch.distributed as dist


def get_rank():
    if not dist.is_available() or not dist.is_initialized():
        return 0
    if smp.is_initialized():
        return smp.rank()
    return dist.get_rank()


def get_world_size():
    if not dist.is_initialized():
        return 1
    return smp.size() if smp.is_initialized() else dist.get_world_size()


def get_data_rank():
    return smp.dp_rank() if smp.is_initialized() else 0
"""

PRETRAIN = """\
import smdistributed.modelparallel.torch as smp
import utils
from utils import get_rank, get_data_rank


def main(args, files):
    smp.init()
    for f_id in range(1, len(files)):
        data_file = files[(f_id * utils.get_world_size() + get_rank()) % len(files)]
        train_on(data_file)
    first = files[get_data_rank() % len(files)]
"""


def _analyze(root: Path, name: str, select: str, job: Optional[dict] = None) -> list:
    path = root / name
    declared = (DeclaredJob("test job", job),) if job else ()
    options = AnalysisOptions(
        select=frozenset({select}), declared_jobs=declared, project=Project.of((str(root),))
    )
    return list(analyze(path.read_text(encoding="utf-8"), str(path), options).findings)


def test_global_rank_helpers_of_another_module_shard_by_global_rank(workdir: Path) -> None:
    (workdir / "utils.py").write_text(UTILS, encoding="utf-8")
    (workdir / "pretrain.py").write_text(PRETRAIN, encoding="utf-8")
    findings = _analyze(workdir, "pretrain.py", "SMP202", {"pipeline_parallel_degree": 2})
    assert [(f.start.line, f.severity.value) for f in findings] == [(9, "error")]
    assert "`get_rank()`" in finding_text(findings[0])
    assert "`smp.rank()`" in finding_text(findings[0])
    assert findings[0].fix is None
    assert _analyze(workdir, "pretrain.py", "SMP202", {"pipeline_parallel_degree": 1}) == []


def test_helpers_are_not_read_outside_the_project(workdir: Path) -> None:
    (workdir / "pretrain.py").write_text(PRETRAIN, encoding="utf-8")
    assert _analyze(workdir, "pretrain.py", "SMP202", {"pipeline_parallel_degree": 2}) == []


TRAIN = """\
import smdistributed.modelparallel.torch as smp
import data


@smp.step
def train_step(model, batch):
    loss = model(batch)
    model.backward(loss)
    return loss


smp.init()
model = smp.DistributedModel(Net())
loader = data.make_loader(args)
for batch in loader:
    train_step(model, batch)
"""

DATA = """\
import torch
from torch.utils.data import DataLoader, DistributedSampler


def make_loader(args):
    dataset = load(args.path)
    sampler = DistributedSampler(dataset, num_replicas=args.dp_size, rank=args.dp_rank)
    loader = DataLoader(dataset, batch_size=8, shuffle=True, drop_last=True)
    return loader
"""


def test_sampler_left_out_in_a_helper_module(workdir: Path) -> None:
    (workdir / "train.py").write_text(TRAIN, encoding="utf-8")
    (workdir / "data.py").write_text(DATA, encoding="utf-8")
    job = {"instance_count": 2, "processes_per_host": 8, "pipeline_parallel_degree": 2}
    findings = _analyze(workdir, "train.py", "SMP206", job)
    assert [(Path(f.path).name, f.start.line, f.severity.value) for f in findings] == [
        ("data.py", 7, "error")
    ]
    assert "`train_step` of train.py" in finding_text(findings[0])
    fixed = DATA.replace("shuffle=True", "sampler=sampler")
    (workdir / "data.py").write_text(fixed, encoding="utf-8")
    assert _analyze(workdir, "train.py", "SMP206", job) == []


def test_a_conditional_dict_holds_either_branch() -> None:
    source = """
def main(use_cuda):
    kwargs = {"num_workers": 1, "pin_memory": True} if use_cuda else {}
    loader = DataLoader(ds, batch_size=64, shuffle=True, **kwargs)
"""
    assert _passed(source, "num_workers") == (["1"], True)
    assert _passed(source, "drop_last") == ([], True)
