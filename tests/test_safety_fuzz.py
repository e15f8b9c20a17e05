"""Fuzzing: arbitrary valid Python never crashes the analysis, and fixes keep their promises.

- hypothesmith generates arbitrary valid Python (alone, after an SMP import, and appended to
  a generated SMP script): the analysis never raises and never reports an internal error,
  and ``--apply`` leaves a file without findings byte for byte as it was.
- A rule that raises is caught: an internal error for that file and that rule, exit code 2,
  the other rules' findings still reported.
- Generated SMP scripts: every fixed text parses, a second ``--apply`` changes nothing, and
  the rules on the fixed text report no fixable finding any more.

The number of examples follows the profiles of ``test_properties`` ("ci" by default,
``SMPFIX_HYPOTHESIS_PROFILE=thorough`` for many more).
"""

from __future__ import annotations

import random
from pathlib import Path

import hypothesmith
import libcst as cst
import pytest
import test_properties  # noqa: F401  (registers and loads the "ci" and "thorough" profiles)
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from smp_scripts import render

import smpfix.engine.runner
from smpfix.api import fix_source
from smpfix.cli import main
from smpfix.engine.analysis import AnalysisOptions, analyze
from smpfix.engine.discovery import DiscoveredFile
from smpfix.engine.fixing import eligible
from smpfix.engine.runner import RunOptions, check_bytes
from smpfix.job.jobfacts import DeclaredJob
from smpfix.rules.registry import rule_names
from smpfix.rules.rule import Rule

HEADER = "import smdistributed.modelparallel.torch as smp\n"
JOBS = [
    {},
    {"tensor_parallel_degree": 4},
    {"tensor_parallel_degree": 8, "microbatches": 4, "pipeline_parallel_degree": 2},
]
FUZZ = settings(
    max_examples=max(10, settings.default.max_examples // 2),
    suppress_health_check=list(HealthCheck),
    deadline=None,
)


def _programs() -> st.SearchStrategy[str]:
    """Arbitrary valid Python, placed where the rules look at it."""
    code = hypothesmith.from_grammar()
    script = st.randoms(use_true_random=False).map(lambda rng: render(rng).text)
    return st.one_of(
        code,
        code.map(lambda text: HEADER + text),
        st.tuples(script, code).map(lambda pair: pair[0] + "\n" + pair[1]),
    )


def _run_options(job: dict, apply: bool) -> RunOptions:
    names = rule_names()
    declared = (DeclaredJob("fuzz", dict(job)),) if job else ()
    return RunOptions(
        select=frozenset(names), rule_names=names, declared_jobs=declared, apply=apply
    )


@FUZZ
@given(text=_programs(), job=st.sampled_from(JOBS))
@example(text=HEADER + "x = " + "(" * 150 + "1" + ")" * 150 + "\n", job={})
def test_arbitrary_python_never_crashes_and_untouched_without_findings(
    tmp_path_factory: pytest.TempPathFactory, text: str, job: dict
) -> None:
    declared = (DeclaredJob("fuzz", dict(job)),) if job else ()
    analysis = analyze(
        text, "fuzz.py", AnalysisOptions(select=frozenset(rule_names()), declared_jobs=declared)
    )
    assert not [error for error in analysis.errors if "internal error" in error.message], (
        analysis.errors
    )
    path = tmp_path_factory.mktemp("fuzz") / "fuzz.py"
    raw = text.encode("utf-8")
    path.write_bytes(raw)
    result = check_bytes(
        DiscoveredFile(str(path), explicit=True), raw, _run_options(job, apply=True)
    )
    assert not [error for error in result.errors if "internal error" in error.message], (
        result.errors
    )
    if not result.findings and result.fixed_count == 0:
        assert path.read_bytes() == raw


class _Explodes(Rule):
    """A rule that fails on every call: defined outside ``smpfix.rules``, so it is no rule of
    smpfix (``all_rules`` ignores it) and runs only where a test passes it in."""

    code = "SMP998"
    name = "explodes"

    def visit_Call(self, node: cst.Call) -> None:
        raise RuntimeError("boom")


def test_a_crashing_rule_is_an_internal_error_for_that_file_and_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = smpfix.engine.runner._analysis_options

    def with_probe(path: str, options: RunOptions) -> AnalysisOptions:
        chosen = original(path, options)
        return AnalysisOptions(
            select=chosen.select | {"SMP998"},
            declared_jobs=chosen.declared_jobs,
            project=chosen.project,
            extra_rules=(_Explodes,),
        )

    monkeypatch.setattr(smpfix.engine.runner, "_analysis_options", with_probe)
    script = render(random.Random(3), pitfalls={"SMP101": True, "SMP301": True}).text
    (tmp_path / "train.py").write_text(script)
    (tmp_path / "other.py").write_text(script)
    outcome = CliRunner().invoke(
        main,
        [
            "check",
            "--no-cache",
            "--workers",
            "1",
            "--format",
            "concise",
            "--job",
            "tensor_parallel_degree=4",
            str(tmp_path),
        ],
    )
    assert outcome.exit_code == 2, outcome.output
    for name in ("train.py", "other.py"):
        assert (
            f"{tmp_path / name}:1:1: error: internal error in rule SMP998: RuntimeError: boom"
            in outcome.output
        )
        lines = [
            line for line in outcome.output.splitlines() if line.startswith(f"{tmp_path / name}:")
        ]
        assert any("SMP301" in line for line in lines), (
            "the other rules' findings are still reported"
        )
    assert "Traceback" not in outcome.output


def test_the_probe_rule_did_not_become_a_rule_of_smpfix() -> None:
    assert "SMP998" not in rule_names()


@settings(max_examples=max(10, settings.default.max_examples // 2))
@given(rng=st.randoms(use_true_random=False), job=st.sampled_from(JOBS), unsafe=st.booleans())
def test_generated_scripts_fix_once_and_for_all(
    rng: random.Random, job: dict, unsafe: bool
) -> None:
    script = render(rng)
    first = fix_source(script.text, "train.py", job=job, unsafe=unsafe)
    assert not first.errors, first.errors
    cst.parse_module(first.text)
    assert not [finding for finding in first.remaining if eligible(finding, unsafe)], (
        "a fixable finding survived its own fix"
    )
    second = fix_source(first.text, "train.py", job=job, unsafe=unsafe)
    assert second.text == first.text and second.applied == 0


@settings(max_examples=max(5, settings.default.max_examples // 4))
@given(rng=st.randoms(use_true_random=False))
def test_a_second_apply_of_a_file_changes_nothing(
    tmp_path_factory: pytest.TempPathFactory, rng: random.Random
) -> None:
    script = render(rng, pitfalls={"SMP101": True, "SMP301": True})
    path = tmp_path_factory.mktemp("twice") / "train.py"
    path.write_bytes(script.text.encode())
    options = _run_options({"tensor_parallel_degree": 4}, apply=True)
    first = check_bytes(DiscoveredFile(str(path), explicit=True), path.read_bytes(), options)
    assert first.fixed_count > 0 and not first.errors, first.errors
    after_first = path.read_bytes()
    second = check_bytes(DiscoveredFile(str(path), explicit=True), after_first, options)
    assert second.fixed_count == 0 and second.new_text is None and not second.errors
    assert path.read_bytes() == after_first
