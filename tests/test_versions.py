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
    condition,
    describe_range,
    in_range,
    parse_version,
    pytorch_container_smp,
    range_applies,
    range_in_words,
    tensorflow_container_smp,
)
from smpfix.rules.rule import Rule

SCRIPT = """import smdistributed.modelparallel.torch as smp

smp.init()
marker = 1
"""


def versioned_probe(since: tuple[int, ...] | None, until: tuple[int, ...] | None) -> type[Rule]:
    """A rule that exists only for these tests: one error per assignment, for some versions."""

    class Probe(Rule):
        def visit_Assign(self, node: cst.Assign) -> None:
            self.report(node, "probe")

    Probe.code, Probe.name, Probe.since, Probe.until = "SMP995", "versioned-probe", since, until
    return Probe


def findings(
    job: dict, since: tuple[int, ...] | None = None, until: tuple[int, ...] | None = None
) -> list[Severity]:
    options = AnalysisOptions(
        select=frozenset({"SMP995"}),
        declared_jobs=(DeclaredJob("test", job),) if job else (),
        extra_rules=(versioned_probe(since, until),),
    )
    return [finding.severity for finding in analyze(SCRIPT, "train.py", options).findings]


def test_versions_parse_compare_and_read_as_ranges() -> None:
    assert parse_version("1.12.1") == (1, 12, 1)
    assert parse_version(1.9) == (1, 9)
    assert parse_version("latest") is None and parse_version(True) is None
    assert (
        compare((1, 3, 2), (1, 3)) == 0
        and compare((1, 10), (1, 9)) == 1
        and compare((1, 2), (1, 2, 1)) == -1
    )
    assert in_range((1, 3, 2), None, (1, 3)) and not in_range((1, 4), None, (1, 3))
    assert [
        describe_range(*r)
        for r in [(None, None), ((1, 10), None), (None, (1, 3)), ((1, 6), (1, 14))]
    ] == [
        "all",
        "1.10+",
        "<=1.3",
        "1.6-1.14",
    ]
    assert range_in_words((1, 10), None) == "SMP 1.10 and later."
    # Advice about one release (SMP 2.2.0's broken activation offloading) names it once.
    assert describe_range((2, 2, 0), (2, 2, 0)) == "2.2.0"
    assert range_in_words((2, 2, 0), (2, 2, 0)) == "SMP 2.2.0 only."


def test_each_container_ships_a_range_of_library_releases() -> None:
    assert pytorch_container_smp((1, 12, 1)) == ((1, 13), (1, 13))
    assert pytorch_container_smp((1, 13, 1)) == ((1, 14), (1, 15))  # updated from 1.14 to 1.15
    # "1.12" names no patch release: the SageMaker SDK resolves it to the newest one, 1.12.1.
    assert pytorch_container_smp((1, 12)) == ((1, 13), (1, 13))
    assert pytorch_container_smp((1, 10)) == ((1, 7), (1, 8))
    assert pytorch_container_smp((2, 0, 0)) == ((1, 15), (1, 15))
    assert pytorch_container_smp((2, 1, 0)) is None  # no SMP v1 release there
    assert tensorflow_container_smp((2, 6, 0)) == ((1, 4), (1, 4))


def test_a_range_applies_only_when_every_release_is_inside() -> None:
    assert range_applies((1, 14), (1, 15), None, (1, 14)) is None  # 1.14 yes, 1.15 no
    assert range_applies((1, 14), (1, 15), (1, 14), None) is True
    assert range_applies((1, 9), (1, 10), (1, 11), None) is False
    assert range_applies(None, None, (1, 10), None) is None
    job = JobFacts.resolve([DeclaredJob("launcher", {"framework_version": "1.13.1"})])
    assert (
        job.version_applies(None, (1, 14)) is Tri.OFF
        and job.version_applies((1, 14), None) is Tri.ON
    )
    assert job.version_applies((1, 15), None) is Tri.OFF  # the job may run 1.14
    assert (
        job.smp_version is not None
        and job.smp_version.describe() == "SMP 1.14 or 1.15 (PyTorch 1.13.1 container, launcher)"
    )
    assert condition(job.smp_version, None, (1, 14)).startswith(
        "if the job runs SMP 1.14 or earlier (SMP 1.14 or 1.15"
    )
    assert condition(job.smp_version, (1, 14), None).startswith("the job runs SMP 1.14 or 1.15")
    assert condition(None, (1, 10), None) == "if the job runs SMP 1.10 or later"
    # Features raise the oldest release: sharded data parallelism with tensor parallelism runs
    # 1.15 only, but no feature says so; sharded data parallelism alone raises 1.10 to 1.11.
    sdp = JobFacts.resolve(
        [
            DeclaredJob(
                "launcher", {"framework_version": "1.12.0", "sharded_data_parallel_degree": 4}
            )
        ]
    )
    assert sdp.version_applies((1, 11), None) is Tri.ON


def test_the_highest_precedence_source_that_states_a_version_decides() -> None:
    job = JobFacts.resolve(
        [
            DeclaredJob("command line --job", {"tensor_parallel_degree": 2}),
            DeclaredJob(
                "pyproject.toml [tool.smpfix] smp-version", {"smp_version": "1.9"}, complete=False
            ),
            DeclaredJob("launcher launch.py:3", {"framework_version": "1.12.1"}),
        ]
    )
    assert job.smp_version is not None and job.smp_version.version == (1, 9)
    launched = JobFacts.resolve(
        [DeclaredJob("launcher launch.py:3", {"framework_version": "1.12.1"})]
    )
    assert (
        launched.smp_version is not None
        and launched.smp_version.describe()
        == "SMP 1.13 (PyTorch 1.12.1 container, launcher launch.py:3)"
    )
    tensorflow = JobFacts.resolve(
        [DeclaredJob("launcher", {"framework": "tensorflow", "framework_version": "2.6.0"})]
    )
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
        ({"framework_version": "1.12.0"}, [Severity.ERROR]),  # container with SMP 1.10 or 1.11
        ({"framework_version": "1.10.2"}, []),  # container with SMP 1.7 or 1.8
        (
            {"framework_version": "1.11.0"},
            [],
        ),  # 1.9 (out) or 1.10 (in): it may be the one it is wrong for
        ({}, [Severity.HINT]),  # unknown: never above a hint
        ({"fp16": True}, [Severity.ERROR]),  # fp16 exists from 1.10 on
    ],
)
def test_a_rule_since_a_version(job: dict, expected: list[Severity]) -> None:
    assert findings(job, since=(1, 10)) == expected


def test_what_the_configuration_uses_raises_the_floor() -> None:
    nothing = JobFacts.resolve([])
    # Advice for releases before 1.15 about a configuration that exists only from 1.15.
    assert nothing.version_applies(None, (1, 14), implied=(1, 15)) is Tri.OFF
    assert nothing.version_applies(None, (1, 14)) is Tri.UNKNOWN
    old = JobFacts.resolve([DeclaredJob("launcher", {"framework_version": "1.12.1"})])
    assert (
        old.version_applies(None, (1, 14), implied=(1, 15)) is Tri.ON
    )  # the stated version decides
    both = JobFacts.resolve([DeclaredJob("launcher", {"framework_version": "1.13.1"})])
    assert both.version_applies(None, (1, 14), implied=(1, 15)) is Tri.OFF


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
"""  # noqa: E501
    path = tmp_path / "launch.py"
    path.write_text(launcher)
    [linked] = link([(str(path), launcher)])
    assert JobFacts.resolve([linked.job]).smp_version is not None
    assert JobFacts.resolve([linked.job]).smp_version.version == (1, 4)  # type: ignore[union-attr]


def test_rules_lists_each_rules_versions() -> None:
    rows = json.loads(run_cli("rules", "--format", "json").stdout)
    assert all({"since", "until", "versions", "finding_versions"} <= set(row) for row in rows)
    by_code = {row["code"]: row for row in rows}
    assert by_code["SMP603"]["versions"] == "1.13+" and by_code["SMP603"]["since"] == "1.13"
    assert by_code["SMP815"]["finding_versions"] == {"fp16_params": "1.10+"}
    assert by_code["SMP815"]["versions"] == "all; fp16_params 1.10+"
    table = run_cli("rules", env={"COLUMNS": "250"}).stdout.splitlines()  # a line per rule
    assert "versions" in table[0]
    assert any(line.startswith("SMP815") and "fp16_params 1.10+" in line for line in table)
    assert any(line.startswith("SMP102") and "<=1.14" in line for line in table)


def test_show_job_names_the_version_and_its_source(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    shown = run_cli(
        "check", "--show-job", "--job", "smp_version=1.11", "--no-cache", "train.py", cwd=tmp_path
    )
    assert "SMP 1.11 (command line --job)" in shown.stdout + shown.stderr
