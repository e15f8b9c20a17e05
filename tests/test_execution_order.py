"""The order a script's calls run in (``smpfix.program.order.execution``): the shared answer to "does
this run before that, on one path?" used by SMP108-SMP111 and SMP115-SMP116."""

from __future__ import annotations

import libcst as cst
from conftest import parsed

from smpfix.program.order.execution import (
    ExecutionOrder,
    execution_order,
    functions_calling,
    happens,
)


def _order(source: str):
    file = parsed(source)
    return file.module, ExecutionOrder.of_file(file)


def _names(module: cst.Module, runs) -> list[str]:
    return [module.code_for_node(run.call.func) for run in runs]


def test_module_level_runs_before_the_main_it_calls() -> None:
    module, order = _order(
        "TP = smp.tp_size()\n"
        "def main():\n    smp.init()\n    build()\n"
        "def build():\n    smp.DistributedModel(Net())\n"
        "if __name__ == '__main__':\n    main()\n"
    )
    assert _names(module, order.runs) == [
        "smp.tp_size",
        "main",
        "smp.init",
        "build",
        "Net",
        "smp.DistributedModel",
    ]


def test_arguments_run_before_the_call_they_are_passed_to() -> None:
    module, order = _order("smp.DistributedModel(Net()).to(device)\n")
    assert _names(module, order.runs) == [
        "Net",
        "smp.DistributedModel",
        "smp.DistributedModel(Net()).to",
    ]


def test_if_and_else_sides_are_exclusive_but_later_code_is_not() -> None:
    module, order = _order("if a:\n    f()\nelse:\n    g()\nh()\n")
    f, g, h = order.runs
    assert f.exclusive_with(g) and g.exclusive_with(f)
    assert not f.exclusive_with(h) and not h.exclusive_with(g)


def test_code_after_an_early_return_is_on_the_other_side_of_its_if() -> None:
    module, order = _order("def main():\n    if a:\n        f()\n        return\n    g()\nmain()\n")
    _, f, g = order.runs
    assert f.exclusive_with(g)


def test_try_body_and_handler_are_exclusive_and_loops_repeat() -> None:
    module, order = _order("try:\n    f()\nexcept E:\n    g()\nfor x in y():\n    h()\n")
    f, g, y, h = order.runs
    assert f.exclusive_with(g)
    assert h.repeated and not y.repeated


def test_class_construction_runs_its_init_and_step_aliases_are_followed() -> None:
    module, order = _order(
        "import smdistributed.modelparallel.torch as smp\n"
        "class Net:\n    def __init__(self):\n        smp.partition(0)\n"
        "def body(m):\n    m.backward()\n"
        "train_step = smp.step(body)\n"
        "Net()\ntrain_step(model)\n"
    )
    assert _names(module, order.runs) == [
        "smp.step",
        "Net",
        "smp.partition",
        "train_step",
        "m.backward",
    ]


def test_recursion_and_depth_stop_with_an_opaque_run() -> None:
    source = "def f():\n    f()\n    smp.init()\nf()\n"
    module = cst.parse_module(source)
    order = execution_order(module)
    opaque = [run for run in order.runs if run.opaque is not None]
    assert len(opaque) == 1 and opaque[0].opaque.name.value == "f"
    inits = happens(module, lambda call: module.code_for_node(call.func) == "smp.init")
    assert inits(opaque[0])
    assert [
        function.name.value
        for function in functions_calling(
            module, lambda call: module.code_for_node(call.func) == "smp.init"
        )
    ] == ["f"]


def test_before_and_after_skip_exclusive_runs() -> None:
    module, order = _order("if a:\n    smp.init()\nelse:\n    smp.rank()\nsmp.init()\n")
    init_a, rank, init_b = order.runs
    is_init = lambda run: module.code_for_node(run.call.func) == "smp.init"  # noqa: E731
    assert order.before(rank, is_init) == []
    assert order.after(rank, is_init) == [init_b]
