"""Code in a function of a script that nothing in the project calls runs in no job: what a
rule finds there is a hint that says so, never an error (``smpfix.program.order.uncalled``)."""

from __future__ import annotations

from pathlib import Path

from conftest import parsed

from smpfix.api import check_source
from smpfix.program.order.uncalled import UncalledFunctions

JOB = {"shard_optimizer_state": True, "ddp": True}

HELPER = """\
import smdistributed.modelparallel.torch as smp
import torch


def save(path, optimizer):
    torch.save(optimizer.state_dict(), path)


def main():
    smp.init()
    model = smp.DistributedModel(Net())
    optimizer = smp.DistributedOptimizer(torch.optim.Adam(model.parameters()))
    CALL
"""


MAIN_BLOCK = '\n\nif __name__ == "__main__":\n    main()\n'


def _severities(text: str, path: str = "train.py", roots: tuple[str, ...] = ()) -> list[str]:
    findings = check_source(text, path, select=["SMP303"], job=JOB, roots=roots)
    return [f.severity.value for f in findings]


def _unused(text: str) -> list[str]:
    file = parsed(text)
    return [f.name.value for f in UncalledFunctions.of_file(file, None).functions]


def test_a_function_the_script_never_calls_gives_a_hint_that_says_so() -> None:
    text = HELPER.replace("CALL", "pass") + MAIN_BLOCK
    findings = check_source(text, "train.py", select=["SMP303"], job=JOB)
    assert [f.severity.value for f in findings] == ["hint"]
    assert "this code is in `save()`, which nothing in the project calls" in findings[0].evidence


def test_a_called_function_keeps_its_severity() -> None:
    text = HELPER.replace("CALL", 'save("o.pt", optimizer)') + MAIN_BLOCK
    assert _severities(text) == ["error"]


def test_a_module_without_a_main_block_may_be_called_from_outside() -> None:
    # A module others import (or run through a harness) may have any function called; a
    # script without a main block does not say how it runs either.
    assert _severities(HELPER.replace("CALL", "pass")) == ["error"]


def test_use_is_followed_through_functions() -> None:
    # ``save`` is only called by ``checkpoint``, which nothing calls: both are unused.
    only_dead = HELPER.replace("CALL", "pass") + (
        "\n\ndef checkpoint(optimizer):\n    save('o.pt', optimizer)\n" + MAIN_BLOCK
    )
    assert _unused(only_dead) == ["checkpoint", "save"]
    # Passed by name (a callback) from used code, or named in a string, it is used.
    passed = HELPER.replace("CALL", "run(on_save=save)") + MAIN_BLOCK
    assert _unused(passed) == []
    by_string = HELPER.replace("CALL", 'getattr(sys.modules[__name__], "save")') + MAIN_BLOCK
    assert _unused(by_string) == []
    # ``torch.save`` and a keyword ``save=`` are other names.
    attribute = HELPER.replace("CALL", "torch.save(model, 'm.pt', save=1)") + MAIN_BLOCK
    assert _unused(attribute) == ["save"]


def test_a_decorated_function_may_be_registered() -> None:
    text = HELPER.replace("def save(", "@register\ndef save(").replace("CALL", "pass")
    assert _unused(text + MAIN_BLOCK) == []


def test_a_function_a_project_module_names_is_used(workdir: Path) -> None:
    text = HELPER.replace("CALL", "pass") + MAIN_BLOCK
    (workdir / "train.py").write_text(text, encoding="utf-8")
    (workdir / "export.py").write_text(
        "from train import save\n\nsave('final.pt', load_optimizer())\n", encoding="utf-8"
    )
    assert _severities(text, str(workdir / "train.py"), (str(workdir),)) == ["error"]
    # Without it, nothing in the project calls ``save``.
    (workdir / "export.py").write_text("import train\n", encoding="utf-8")
    assert _severities(text, str(workdir / "train.py"), (str(workdir),)) == ["hint"]
