"""The order a script's calls run in (``smpfix.program.order.execution``): the shared answer to
"does this run before that, on one path?" used by SMP108-SMP111 and SMP115-SMP116."""

from __future__ import annotations

import random

import libcst as cst
from conftest import parsed
from hypothesis import given, settings
from hypothesis import strategies as st
from smp_scripts import render

from smpfix.program.order.execution import (
    ExecutionOrder,
    execution_order,
    functions_calling,
    happens,
)
from smpfix.program.order.sides import branch_sides


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


# -- one definition of "never both run" -------------------------------------------------------

_BRANCHY = """
import smdistributed.modelparallel.torch as smp


def helper(flag):
    if flag:
        return smp.rank()
    smp.barrier()
    try:
        smp.save({}, "a")
    except OSError:
        smp.save({}, "b")
    else:
        smp.save({}, "c")
    finally:
        smp.barrier()
    value = smp.dp_rank() if flag else smp.tp_rank()
    match flag:
        case 1:
            smp.init()
        case _:
            smp.size()
    for item in range(3):
        if item:
            continue
        smp.local_rank()
    return value


def main():
    if smp.rank() == 0:
        helper(True)
    elif smp.dp_rank() == 0:
        raise SystemExit(1)
    else:
        helper(False)
    smp.barrier()


main()
"""


def _sides_agree(source: str) -> None:
    """Every call the trace follows sits on the sides ``branch_sides`` reads from the tree:
    those of each call that led there, then its own. The module's own sides (an entry point's,
    and what the file runs as a script beside entry points) are the trace's, not the tree's."""
    file = parsed(source)
    order = ExecutionOrder.of_file(file)
    assert order.runs
    for run in order.runs:
        expected = tuple(
            side for call in (*run.through, run.call) for side in branch_sides(file.parents, call)
        )
        sides = tuple(side for side in run.sides if side.branch is not file.module)
        assert sides == expected, file.code_for(run.call)


def test_the_trace_and_the_tree_agree_on_branch_sides() -> None:
    _sides_agree(_BRANCHY)


@settings(max_examples=40, deadline=None)
@given(rng=st.randoms(use_true_random=False))
def test_the_trace_and_the_tree_agree_on_branch_sides_of_generated_scripts(
    rng: random.Random,
) -> None:
    _sides_agree(render(rng).text)


def _call(file, code: str):
    return next(call for call in file.facts.call_order if file.code_for(call) == code)


def test_exclusive_knows_every_kind_of_branch() -> None:
    file = parsed(_BRANCHY)
    order = ExecutionOrder.of_file(file)
    pairs = {
        ("smp.rank()", "smp.barrier()"): True,  # after `if flag: return`
        ('smp.save({}, "a")', 'smp.save({}, "b")'): True,  # try body and handler
        ('smp.save({}, "c")', 'smp.save({}, "b")'): True,  # try else and handler
        ('smp.save({}, "a")', 'smp.save({}, "c")'): False,
        ("smp.dp_rank()", "smp.tp_rank()"): True,  # a conditional expression
        ("smp.init()", "smp.size()"): True,  # match cases
        ("helper(True)", "helper(False)"): True,  # if and else
    }
    for (first, second), answer in pairs.items():
        assert order.exclusive(_call(file, first), _call(file, second)) is answer, (first, second)


def test_runs_before_is_source_order_without_exclusive_sides() -> None:
    file = parsed(_BRANCHY)
    order = ExecutionOrder.of_file(file)
    assert order.runs_before(_call(file, 'smp.save({}, "a")'), _call(file, 'smp.save({}, "c")'))
    assert not order.runs_before(_call(file, 'smp.save({}, "c")'), _call(file, 'smp.save({}, "a")'))
    assert not order.runs_before(_call(file, "helper(True)"), _call(file, "helper(False)"))
    # Across functions: the order the file is written in.
    assert order.runs_before(_call(file, "smp.local_rank()"), _call(file, "helper(True)"))


_ENTRY_POINTS = """\
import smdistributed.modelparallel.torch as smp

smp.init()


def build():
    return smp.DistributedModel(Net())


def main():
    model = build()
    smp.barrier()


def evaluate():
    smp.save({}, "eval")


def train():
    smp.save({}, "train")
    smp.save({}, "again")


if __name__ == "__main__":
    main()
"""


def test_functions_nothing_in_the_file_calls_run_once_on_their_own_side() -> None:
    file = parsed(_ENTRY_POINTS)
    order = ExecutionOrder.of_file(file)
    assert [f.name.value for f in order.entry_points] == ["evaluate", "train"]
    runs = {file.code_for(run.call): run for run in order.runs}
    assert len(order.runs_of(_call(file, 'smp.save({}, "eval")'))) == 1
    # One run of an entry point does all of it, after the module's code.
    assert not runs['smp.save({}, "train")'].exclusive_with(runs['smp.save({}, "again")'])
    assert not runs["smp.init()"].exclusive_with(runs['smp.save({}, "train")'])
    assert runs["smp.init()"].order < runs['smp.save({}, "train")'].order
    # Two entry points are two runs; neither shares one with the file run as a script.
    assert runs['smp.save({}, "eval")'].exclusive_with(runs['smp.save({}, "train")'])
    assert runs["smp.barrier()"].exclusive_with(runs['smp.save({}, "eval")'])
    assert runs["smp.DistributedModel(Net())"].exclusive_with(runs['smp.save({}, "train")'])
