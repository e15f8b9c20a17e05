"""What the wiring rules' findings tell their reader (issue 22, items 2, 6 and 7).

A title names the code and the condition in one line; the evidence states the whole condition a
finding depends on (the enclosing switch and every option that sets it); advice that breaks
nothing is a hint and says so.
"""

from __future__ import annotations

from pathlib import Path

from conftest import ROOT, finding_text

from smpfix.api import check_source
from smpfix.base.findings import Severity

FIXTURES = ROOT / "tests" / "fixtures"


def _findings(path: Path, code: str, job: dict[str, object] | None = None) -> list:
    return check_source(path.read_text(encoding="utf-8"), str(path), select=[code], job=job)


def test_apex_behind_a_flag_names_the_switch_and_every_option_that_sets_it() -> None:
    (finding,) = _findings(FIXTURES / "SMP112" / "bad_apex_behind_flag.py", "SMP112")
    assert "under `if args.fp16:`" in finding.message
    assert "runs under `if args.fp16:`; `args.fp16` is set by `--fp16` or `--amp`" in (
        finding.evidence
    )


def test_torchscript_on_a_submodule_names_the_submodule() -> None:
    findings = _findings(FIXTURES / "SMP112" / "bad_jit_submodules.py", "SMP112")
    assert ["`model.encoder`" in f.message for f in findings] == [True, False]
    assert "`model.module.decoder.layer`" in findings[1].message
    assert all("part of the `smp.DistributedModel`" in f.message for f in findings)
    assert all("submodule" in finding_text(f) for f in findings)


def test_an_ignored_model_move_is_a_hint_that_says_it_breaks_nothing() -> None:
    (finding,) = _findings(FIXTURES / "SMP115" / "bad_move_before_step.py", "SMP115")
    assert finding.severity is Severity.HINT
    assert "harmless" in finding.message
    assert "ignoring move of params and buffers to devices" in finding.explanation


def test_fp16_guide_recommendations_are_hints_that_say_they_are_advice() -> None:
    findings = _findings(FIXTURES / "SMP114" / "bad_fp16_plain.py", "SMP114", {"fp16": True})
    assert [f.severity for f in findings] == [Severity.HINT, Severity.HINT]
    assert all(f.message.startswith("fp16 guide advice:") for f in findings)
