"""The library version a job runs, and rules that hold only for some versions."""

from __future__ import annotations

import json
from pathlib import Path

import libcst as cst
import pytest
from conftest import run_cli

from smpfix.base.findings import Severity
from smpfix.engine.analysis import AnalysisOptions, analyze
from smpfix.engine.config import ConfigError, load
from smpfix.job.jobfacts import DeclaredJob, JobFacts, Tri
from smpfix.job.linking import link
from smpfix.job.versions import (
    compare,
    describe_range,
    in_range,
    parse_version,
    pytorch_container_smp,
    range_in_words,
    tensorflow_container_smp,
)
from smpfix.rules.rule import Rule

SCRIPT = """import smdistributed.modelparallel.torch as smp

smp.init()
marker = 1
"""


def versioned_probe(since: tuple[int, ...] | None, until: tuple[int, ...] | None, api: bool = False) -> type[Rule]:
    """A rule that exists only for these tests: one error per assignment, for some versions."""

    class Probe(Rule):
        def visit_Assign(self, node: cst.Assign) -> None:
            self.report(node, "probe")

    Probe.code, Probe.name, Probe.since, Probe.until, Probe.since_is_api = "SMP995", "versioned-probe", since, until, api
    return Probe


def findings(job: dict, since: tuple[int, ...] | None = None, until: tuple[int, ...] | None = None, api: bool = False) -> list[Severity]:
    options = AnalysisOptions(
        select=frozenset({"SMP995"}),
        declared_jobs=(DeclaredJob("test", job),) if job else (),
        extra_rules=(versioned_probe(since, until, api),),
    )
    return [finding.severity for finding in analyze(SCRIPT, "train.py", options).findings]


def test_versions_parse_compare_and_read_as_ranges() -> None:
    assert parse_version("1.12.1") == (1, 12, 1)
    assert parse_version(1.9) == (1, 9)
    assert parse_version("latest") is None and parse_version(True) is None
    assert compare((1, 3, 2), (1, 3)) == 0 and compare((1, 10), (1, 9)) == 1 and compare((1, 2), (1, 2, 1)) == -1
    assert in_range((1, 3, 2), None, (1, 3)) and not in_range((1, 4), None, (1, 3))
    assert [describe_range(*r) for r in [(None, None), ((1, 10), None), (None, (1, 3)), ((1, 6), (1, 14))]] == [
        "all", "1.10+", "<=1.3", "1.6-1.14",
    ]
    assert range_in_words((1, 10), None) == "SMP 1.10 and later."


def test_each_container_ships_its_oldest_library_release() -> None:
    assert pytorch_container_smp((1, 12, 1)) == (1, 13)
    assert pytorch_container_smp((1, 12)) == (1, 10)  # 1.12.0 or 1.12.1: the older decides
    assert pytorch_container_smp((2, 0, 0)) == (1, 15)
    assert pytorch_container_smp((2, 1, 0)) is None  # no SMP v1 release there
    assert tensorflow_container_smp((2, 6, 0)) == (1, 4)


def test_the_highest_precedence_source_that_states_a_version_decides() -> None:
    job = JobFacts.resolve([
        DeclaredJob("command line --job", {"tensor_parallel_degree": 2}),
        DeclaredJob("pyproject.toml [tool.smpfix] smp-version", {"smp_version": "1.9"}, complete=False),
        DeclaredJob("launcher launch.py:3", {"framework_version": "1.12.1"}),
    ])
    assert job.smp_version is not None and job.smp_version.version == (1, 9)
    launched = JobFacts.resolve([DeclaredJob("launcher launch.py:3", {"framework_version": "1.12.1"})])
    assert launched.smp_version is not None and launched.smp_version.describe() == "SMP 1.13 (PyTorch 1.12.1 container, launcher launch.py:3)"
    tensorflow = JobFacts.resolve([DeclaredJob("launcher", {"framework": "tensorflow", "framework_version": "2.6.0"})])
    assert tensorflow.smp_version is not None and tensorflow.smp_version.version == (1, 4)


def test_features_that_are_on_bound_the_version_from_below() -> None:
    sdp = JobFacts.resolve([DeclaredJob("launcher", {"sharded_data_parallel_degree": 8})])
    assert sdp.version_applies(None, (1, 3)) is Tri.OFF  # sharded data parallelism needs 1.11
    assert sdp.version_applies((1, 10), None) is Tri.ON
    assert sdp.version_applies((1, 13), None) is Tri.UNKNOWN
    assert JobFacts.resolve([]).version_applies((1, 10), None) is Tri.UNKNOWN
    assert JobFacts.resolve([]).version_applies(None, None) is Tri.ON


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        ({"smp_version": "1.10"}, [Severity.ERROR]),  # in range
        ({"smp_version": "1.9"}, []),  # out of range: the advice would be wrong there
        ({"framework_version": "1.12.0"}, [Severity.ERROR]),  # container with SMP 1.10
        ({"framework_version": "1.11.0"}, []),  # container with SMP 1.9
        ({}, [Severity.HINT]),  # unknown: never above a hint
        ({"fp16": True}, [Severity.ERROR]),  # fp16 exists from 1.10 on
    ],
)
def test_a_rule_since_a_version(job: dict, expected: list[Severity]) -> None:
    assert findings(job, since=(1, 10)) == expected


def test_a_rule_about_an_api_call_is_bounded_by_the_release_that_brought_the_api() -> None:
    # A script that calls `smp.save_checkpoint` runs 1.10 or later: not capped when unknown.
    assert findings({}, since=(1, 10), api=True) == [Severity.ERROR]
    assert findings({"smp_version": "1.9"}, since=(1, 10), api=True) == []
    assert findings({"smp_version": "1.12"}, since=(1, 10), api=True) == [Severity.ERROR]
    assert JobFacts.resolve([]).version_applies((1, 10), (1, 12), floor=(1, 10)) is Tri.UNKNOWN
    assert JobFacts.resolve([]).version_applies(None, (1, 9), floor=(1, 10)) is Tri.OFF


def test_a_rule_for_old_versions_only() -> None:
    assert findings({"smp_version": "1.3.1"}, until=(1, 3)) == [Severity.ERROR]
    assert findings({"tensor_parallel_degree": 4}, until=(1, 3)) == []  # TP implies 1.6 or later
    assert findings({}, until=(1, 3)) == [Severity.HINT]


def test_a_rule_without_a_range_is_not_touched() -> None:
    assert findings({}) == [Severity.ERROR]


def test_smp_version_in_pyproject_and_its_validation(tmp_path: Path) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.smpfix]\nsmp-version = "1.11"\n')
    declared = load(config).declared_jobs()
    assert [(job.source, dict(job.settings), job.complete) for job in declared] == [
        ("pyproject.toml [tool.smpfix] smp-version", {"smp_version": "1.11"}, False)
    ]
    config.write_text('[tool.smpfix]\nsmp-version = "newest"\n')
    with pytest.raises(ConfigError, match="smp-version must be a version"):
        load(config)
    config.write_text('[tool.smpfix.job]\nframework_version = "one"\n')
    with pytest.raises(ConfigError, match="framework_version"):
        load(config)


def test_a_tensorflow_launcher_states_its_container(tmp_path: Path) -> None:
    launcher = """from sagemaker.tensorflow import TensorFlow

TensorFlow(entry_point="train.py", framework_version="2.6.0", py_version="py38",
           distribution={"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"partitions": 2}}},
                         "mpi": {"enabled": True}})
"""
    path = tmp_path / "launch.py"
    path.write_text(launcher)
    [linked] = link([(str(path), launcher)])
    assert JobFacts.resolve([linked.job]).smp_version is not None
    assert JobFacts.resolve([linked.job]).smp_version.version == (1, 4)  # type: ignore[union-attr]


def test_rules_lists_each_rules_versions() -> None:
    rows = json.loads(run_cli("rules", "--format", "json").stdout)
    assert all({"since", "until", "versions"} <= set(row) for row in rows)
    table = run_cli("rules").stdout.splitlines()
    assert "versions" in table[0]


def test_show_job_names_the_version_and_its_source(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    shown = run_cli("check", "--show-job", "--job", "smp_version=1.11", "--no-cache", "train.py", cwd=tmp_path)
    assert "SMP 1.11 (command line --job)" in shown.stdout + shown.stderr
