"""The fix loop: overlapping fixes wait for the next round, broken results are never kept."""

from __future__ import annotations

from typing import Callable

import libcst as cst

from smpfix.base.edits import ReplaceNode
from smpfix.base.findings import Applicability, Edit, Position
from smpfix.engine.analysis import AnalysisOptions
from smpfix.engine.fixing import MAX_ROUNDS, apply_edits, fix_text
from smpfix.rules.registry import all_rules
from smpfix.rules.rule import PendingFix, Rule

SOURCE = """import smdistributed.modelparallel.torch as smp

smp.init()
x = 1
y = 2
"""


def probe(code: str, rewrite: Callable[[str], str]) -> type[Rule]:
    """A rule that exists only for one test: it rewrites every assigned value."""

    class Probe(Rule):
        def visit_Assign(self, node: cst.Assign) -> None:
            new = rewrite(self.program.code_for(node.value))
            self.report(
                node.value,
                "probe",
                fix=PendingFix(Applicability.SAFE, "probe", (ReplaceNode(node.value, new),)),
            )

    Probe.code, Probe.name = code, "probe"
    return Probe


def test_probe_rules_are_not_rules_of_smpfix() -> None:
    assert probe("SMP990", str).code not in {rule.code for rule in all_rules()}


def test_a_fix_that_breaks_the_code_leaves_the_file_exactly_as_it_was() -> None:
    rule = probe("SMP990", lambda code: "(")
    outcome = fix_text(
        SOURCE, "t.py", AnalysisOptions(select=frozenset({"SMP990"}), extra_rules=(rule,))
    )
    assert outcome.text == SOURCE
    assert outcome.applied == 0
    assert [e.code for e in outcome.errors] == ["SMP990"]
    assert "does not parse" in outcome.errors[0].message


def test_a_fix_that_never_converges_stops_after_the_round_limit() -> None:
    rule = probe("SMP991", lambda code: f"{code} + 1")
    outcome = fix_text(
        SOURCE, "t.py", AnalysisOptions(select=frozenset({"SMP991"}), extra_rules=(rule,))
    )
    assert outcome.applied == 2 * MAX_ROUNDS
    assert "x = 1" + " + 1" * MAX_ROUNDS + "\n" in outcome.text


def test_apply_edits_in_any_order() -> None:
    def edit(start: int, end: int, text: str) -> Edit:
        return Edit(start, end, text, Position(1, start + 1), Position(1, end + 1))

    assert apply_edits("abcdef", [edit(4, 5, "E"), edit(0, 1, "A"), edit(2, 2, "+")]) == "Ab+cdEf"


def test_overlapping_edits_are_detected() -> None:
    a = Edit(0, 5, "", Position(1, 1), Position(1, 6))
    b = Edit(4, 8, "", Position(1, 5), Position(1, 9))
    c = Edit(5, 8, "", Position(1, 6), Position(1, 9))
    assert a.overlaps(b) and not a.overlaps(c)
