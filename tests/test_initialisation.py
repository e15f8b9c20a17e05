"""Is the library initialised at a call (``smpfix.program.order.initialisation``)."""

from __future__ import annotations

import libcst as cst
import pytest
from conftest import parsed

from smpfix.program.facts import collect
from smpfix.program.order.execution import ExecutionOrder
from smpfix.program.order.initialisation import (
    Initialisations,
    init_dict_keys,
    initialised_before,
    script_sets_manual_init,
)

_HEADER = "import os\nimport smdistributed.modelparallel.torch as smp\n"


@pytest.mark.parametrize(
    "line",
    [
        'os.environ["SMP_MANUAL_INIT"] = "1"',
        'os.environ.setdefault("SMP_MANUAL_INIT", "1")',
        'os.putenv("SMP_MANUAL_INIT", "1")',
        "os.environ['SMP_MANUAL_INIT'] = str(1)",
    ],
)
def test_the_script_turns_import_time_initialisation_off(line: str) -> None:
    facts = collect(cst.parse_module(f"{_HEADER}{line}\n"))
    assert script_sets_manual_init(facts) is (line != "os.environ['SMP_MANUAL_INIT'] = str(1)")


def test_other_variables_and_values_do_not_count() -> None:
    facts = collect(
        cst.parse_module(
            f'{_HEADER}os.environ["SMP_MANUAL_INIT"] = "0"\nos.environ["OTHER"] = "1"\n'
        )
    )
    assert not script_sets_manual_init(facts)


def test_init_dict_keys_include_values_smpfix_cannot_read() -> None:
    facts = collect(
        cst.parse_module(
            f'{_HEADER}cfg = {{"ddp": True, "auto_partition": not args.manual}}\nsmp.init(cfg)\n'
        )
    )
    assert init_dict_keys(facts) == {"ddp", "auto_partition"}


def test_hugging_face_training_arguments_initialise() -> None:
    source = (
        f"{_HEADER}from transformers import HfArgumentParser, TrainingArguments\n"
        "parser = HfArgumentParser((TrainingArguments,))\n"
        "(training_args,) = parser.parse_args_into_dataclasses()\n"
        "smp.rank()\n"
        "smp.init()\n"
    )
    file = parsed(source)
    facts = file.facts
    order = ExecutionOrder.of_file(file)
    rank = next(run for run in order.runs if facts.smp_member(run.call.func) == "rank")
    assert initialised_before(order, rank, Initialisations(file, None))


def test_an_init_on_the_other_side_of_an_if_does_not_count() -> None:
    source = f"{_HEADER}if a:\n    smp.init()\nelse:\n    smp.rank()\n"
    file = parsed(source)
    facts = file.facts
    order = ExecutionOrder.of_file(file)
    rank = next(run for run in order.runs if facts.smp_member(run.call.func) == "rank")
    assert not initialised_before(order, rank, Initialisations(file, None))
