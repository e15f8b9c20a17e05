"""Paths a script's own early exits rule out, judged together along the calls that lead there.

``smpfix.program.paths.branches`` knows that code after an unconditional ``return``, ``raise``
or ``sys.exit()`` of its block never runs, that ``if test: ... else: raise`` leaves ``test``
true after it, and that a condition which contradicts a guard an earlier exit enforces
cannot hold, also when the guard sits in ``main()`` and the condition in a helper it calls.
Every rule asks the same answer (``Rule.report``, ``Rule.feature(key, at=...)``), so these
cases use rules of different families.
"""

from __future__ import annotations

from smpfix.api import check_source

ARGS = """\
import argparse
import sys

import smdistributed.modelparallel.torch as smp
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--smp", type=int, default=1)
parser.add_argument("--shard_optimizer_state", type=int, default=0)
parser.add_argument("--skip_full_optimizer", type=int, default=0)
args = parser.parse_args()
"""
TP = {"tensor_parallel_degree": 4}


def _found(text: str, select: str, job: dict | None = None) -> list[tuple[int, str]]:
    return sorted(
        (f.start.line, f.severity.value)
        for f in check_source(text, "train.py", select=[select], job=job)
    )


def _lines(text: str, marker: str) -> list[int]:
    return [n for n, line in enumerate(text.splitlines(), start=1) if marker in line]


DP_RANK_SAVE = """\
        if smp.dp_rank() == 0:  # GUARD
            smp.save(model.local_state_dict(), "model.pt", partial=True)
"""


def test_a_branch_contradicting_an_earlier_raise_guard_never_runs() -> None:
    text = (
        ARGS
        + """\


def main():
    if not args.smp:
        raise ValueError("this script needs the model parallelism library")
    smp.init()
    model = smp.DistributedModel(Net())
    if not args.smp:
"""
        + DP_RANK_SAVE
    )
    assert _found(text, "SMP301", TP) == []
    # Without the raise the branch is the script's switch, off by default: a hint.
    warned = text.replace('raise ValueError("this', 'print("this')
    assert _found(warned, "SMP301", TP) == [(_lines(text, "# GUARD")[0], "hint")]


def test_an_else_that_exits_makes_its_test_hold_after_it() -> None:
    text = (
        ARGS
        + """\


def main():
    smp.init()
    model = smp.DistributedModel(Net())
    if args.skip_full_optimizer:
        print("the final checkpoint holds the model only")
    else:
        sys.exit("pass --skip_full_optimizer 1: this trainer saves the model only")
    if not args.skip_full_optimizer:
"""
        + DP_RANK_SAVE
    )
    assert _found(text, "SMP301", TP) == []
    # An ``else`` that carries on leaves both sides possible.
    carries_on = text.replace('sys.exit("pass', 'print("pass')
    assert _found(carries_on, "SMP301", TP) == [(_lines(text, "# GUARD")[0], "error")]


def test_code_after_an_unconditional_exit_in_its_block_never_runs() -> None:
    for exit_statement in ("return None", 'raise NotImplementedError("later")', "sys.exit(1)"):
        text = (
            ARGS
            + f"""\
smp.init()
model = smp.DistributedModel(Net())


def save_checkpoint():
    {exit_statement}
    if smp.dp_rank() == 0:
        smp.save(model.local_state_dict(), "model.pt", partial=True)


save_checkpoint()
"""
        )
        assert _found(text, "SMP301", TP) == [], exit_statement
    # A function of the script's own named like the builtin ends nothing.
    own_exit = text.replace("    sys.exit(1)\n", "    exit()\n") + "\n\ndef exit():\n    pass\n"
    assert _found(own_exit, "SMP301", TP) == [(_lines(own_exit, "smp.dp_rank()")[0], "error")]


def test_the_builtin_exit_ends_the_run() -> None:
    text = (
        ARGS
        + """\
smp.init()
model = smp.DistributedModel(Net())
if smp.tp_size() > 1:
    exit("tensor parallelism is not supported by this script")
if smp.dp_rank() == 0:
    smp.save(model.local_state_dict(), "model.pt", partial=True)
"""
    )
    assert _found(text, "SMP301", TP) == []
    assert _found(text, "SMP301") == []  # the exit leaves tensor parallelism off after it


def test_a_guard_in_main_excludes_a_feature_in_the_helper_it_calls() -> None:
    text = (
        ARGS
        + """\


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(8, 8)


def save_final(optimizer):
    if not args.skip_full_optimizer:
        torch.save(optimizer.state_dict(), "optimizer.pt")  # FULL


def main():
    if args.shard_optimizer_state > 0 and not args.skip_full_optimizer:
        raise ValueError("pass --skip_full_optimizer 1 with shard_optimizer_state")
    smp.init()
    with smp.tensor_parallelism():
        model = Net()
    model = smp.DistributedModel(model)
    optimizer = smp.DistributedOptimizer(torch.optim.Adam(model.parameters()))
    save_final(optimizer)


main()
"""
    )
    oss_only = {"shard_optimizer_state": True, "tensor_parallel_degree": 1}
    assert _found(text, "SMP303", oss_only) == []
    # With tensor parallelism on too, the save still runs with sharding off: reported for
    # tensor parallelism alone.
    found = check_source(
        text, "train.py", select=["SMP303"], job={**oss_only, "tensor_parallel_degree": 4}
    )
    assert [f.start.line for f in found] == _lines(text, "# FULL")
    assert "because tensor parallelism is enabled" in found[0].explanation
    assert "optimizer state sharding" not in found[0].explanation
    # The helper called from somewhere the guard does not reach runs with sharding.
    unguarded = text.replace("\n\nmain()\n", "\n\nmain()\nsave_final(None)\n")
    assert _found(unguarded, "SMP303", oss_only) == [(_lines(text, "# FULL")[0], "error")]


def test_an_elif_chain_of_exits_leaves_every_test_false() -> None:
    text = (
        ARGS
        + """\
smp.init()
model = smp.DistributedModel(Net())
optimizer = smp.DistributedOptimizer(torch.optim.Adam(model.parameters()))
if args.skip_full_optimizer:
    raise SystemExit("nothing to save")
elif args.shard_optimizer_state:
    raise SystemExit("the full optimizer state is not supported with sharding")
torch.save(optimizer.state_dict(), "optimizer.pt")
"""
    )
    assert _found(text, "SMP303", {"shard_optimizer_state": True}) == []
    # Only the first arm exits: the second may fall through with sharding on.
    falls = text.replace(
        '    raise SystemExit("the full optimizer state', '    print("the full optimizer state'
    )
    assert _found(falls, "SMP303", {"shard_optimizer_state": True}) == [
        (_lines(text, "torch.save(")[0], "error")
    ]
