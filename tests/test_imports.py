"""Resolving names through the file's own imports, never by the text ``smp.``."""

from __future__ import annotations

import libcst as cst
import pytest

from smpfix.program.facts import collect


def member(source: str, expression: str):
    facts = collect(cst.parse_module(source))
    return facts.smp_member(cst.parse_expression(expression))


@pytest.mark.parametrize(
    "source, expression, expected",
    [
        (
            "import smdistributed.modelparallel.torch as smp",
            "smp.DistributedModel",
            "DistributedModel",
        ),
        ("import smdistributed.modelparallel.torch as mp", "mp.dp_rank", "dp_rank"),
        (
            "from smdistributed.modelparallel.torch import DistributedModel",
            "DistributedModel",
            "DistributedModel",
        ),
        (
            "from smdistributed.modelparallel.torch import DistributedModel as DM",
            "DM",
            "DistributedModel",
        ),
        (
            "import smdistributed.modelparallel.torch",
            "smdistributed.modelparallel.torch.init",
            "init",
        ),
        ("import smdistributed.modelparallel", "smdistributed.modelparallel.torch.init", "init"),
        ("from smdistributed.modelparallel import torch as smp", "smp.step", "step"),
        (
            "import smdistributed.modelparallel.tensorflow as smp",
            "smp.DistributedModel",
            "DistributedModel",
        ),
        (
            "import smdistributed.modelparallel.torch as smp",
            "smp.nn.DistributedLinear",
            "nn.DistributedLinear",
        ),
        ("def main():\n    import smdistributed.modelparallel.torch as smp", "smp.init", "init"),
    ],
)
def test_library_names(source: str, expression: str, expected: str) -> None:
    assert member(source, expression) == expected


@pytest.mark.parametrize(
    "source, expression",
    [
        ("import torch.sagemaker as smp", "smp.init"),
        ("import my_smp as smp", "smp.init"),
        ("", "smp.DistributedModel"),
        ("from .smp import DistributedModel", "DistributedModel"),
        ("import smdistributed.dataparallel.torch.distributed as dist", "dist.get_rank"),
    ],
)
def test_lookalikes_are_not_the_library(source: str, expression: str) -> None:
    assert member(source, expression) is None


def test_step_functions_in_every_spelling() -> None:
    facts = collect(
        cst.parse_module("""import smdistributed.modelparallel.torch as smp
from smdistributed.modelparallel.torch import step

@smp.step
def a(model, x): ...

@smp.step(non_split_inputs=["mask"])
def b(model, x, mask): ...

@step
def c(model, x): ...

def d_impl(model, x): ...
d = smp.step(d_impl)
e = smp.step(non_split_inputs=["m"])(d_impl)

@other.step
def not_a_step(model, x): ...
""")
    )
    assert facts.step_functions == frozenset({"a", "b", "c", "d", "e"})


def test_v2_only_files_are_not_smp_v1() -> None:
    facts = collect(cst.parse_module("import torch.sagemaker as tsm\ntsm.init()\n"))
    assert not facts.imports_smp and facts.imports_smp_v2_only
