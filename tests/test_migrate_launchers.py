"""The launcher half of ``smpfix migrate``, as fixture pairs: ``NAME.py`` -> ``NAME.migrated.py``.

Each fixture is a launcher migrated alone (no script next to it), through the same driver the
command uses, so the pair shows exactly what a person gets: the v2 launcher, or for a job v2
cannot run, the v1 launcher with ``TODO`` comments. A fixture without a ``.migrated.py`` twin
must come out unchanged.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from smpfix.engine.discovery import DiscoveredFile
from smpfix.engine.migration import migrate_files
from smpfix.job.project import Project
from smpfix.migrate.items import Outcome
from smpfix.migrate.launcher import V2_FRAMEWORK_VERSION, V2_PY_VERSION
from smpfix.migrate.run import MigrationRun

FIXTURES = Path(__file__).parent / "fixtures" / "migrate" / "launchers"
CASES = sorted(p for p in FIXTURES.glob("*.py") if not p.name.endswith(".migrated.py"))


def migrate_alone(fixture: Path, tmp_path: Path, name: str = "launch.py") -> MigrationRun:
    shutil.copy(fixture, tmp_path / name)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        return migrate_files([DiscoveredFile(name, True)], Project.of((name,)), ())
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("fixture", CASES, ids=lambda p: p.stem)
def test_launcher_migrates_to_its_twin(fixture: Path, tmp_path: Path) -> None:
    run = migrate_alone(fixture, tmp_path)
    assert not run.errors
    twin = fixture.with_name(fixture.stem + ".migrated.py")
    after = run.files[0].after if run.files else fixture.read_text()
    expected = twin.read_text() if twin.exists() else fixture.read_text()
    assert after == expected


@pytest.mark.parametrize("fixture", CASES, ids=lambda p: p.stem)
def test_migrating_twice_changes_nothing(fixture: Path, tmp_path: Path) -> None:
    twin = fixture.with_name(fixture.stem + ".migrated.py")
    once = twin if twin.exists() else fixture
    assert migrate_alone(once, tmp_path).files == ()


def items(name: str, tmp_path: Path) -> list[tuple[str, str, bool]]:
    run = migrate_alone(FIXTURES / name, tmp_path)
    return [(i.outcome.value, i.message, i.blocking) for job in run.jobs for i in job.items]


def test_each_key_mapping_is_an_item_that_moved(tmp_path: Path) -> None:
    said = [message for outcome, message, _ in items("key_mappings.py", tmp_path)]
    assert (
        "`sharded_data_parallel_degree` renamed `hybrid_shard_degree` (the same setting in v2)"
        in said
    )
    assert "`tensor_parallel_seed` renamed `random_seed` (the same setting in v2)" in said
    assert (
        "`offload_activations` renamed `sm_activation_offloading` (the same setting in v2)" in said
    )
    assert any(m.startswith("`activation_loading_horizon: 4` written out") for m in said)


def test_a_horizon_the_job_set_is_not_overwritten(tmp_path: Path) -> None:
    said = [message for _, message, _ in items("horizon_already_set.py", tmp_path)]
    assert not any("activation_loading_horizon" in m for m in said)


def test_the_proposed_container_is_said_in_the_report(tmp_path: Path) -> None:
    run = migrate_alone(FIXTURES / "mpi_to_torch_distributed.py", tmp_path)
    (job,) = run.jobs
    assert job.container == f"PyTorch {V2_FRAMEWORK_VERSION}, {V2_PY_VERSION} (SMP 2.7.0)"
    container = [i for i in job.items if i.topic == "container"]
    assert container[0].outcome is Outcome.MOVED
    assert "the newest PyTorch with an SMP v2 image" in container[0].message
    assert not job.needs_a_person


def test_every_dropped_key_is_an_item(tmp_path: Path) -> None:
    said = [message for _, message, _ in items("v1_only_keys_dropped.py", tmp_path)]
    for key in (
        "partitions",
        "microbatches",
        "placement_strategy",
        "optimize",
        "auto_partition",
        "ddp",
        "bf16",
        "sdp_max_live_parameters",
    ):
        assert any(m.startswith(f"`{key}` dropped") for m in said), key
    assert any(m.startswith("`custom_mpi_options`") for m in said)


@pytest.mark.parametrize("name", ["pipeline_blocks.py", "tensorflow_blocks.py"])
def test_pipeline_parallelism_and_tensorflow_block_the_job(name: str, tmp_path: Path) -> None:
    run = migrate_alone(FIXTURES / name, tmp_path)
    (job,) = run.jobs
    assert job.blocked and job.needs_a_person
    (changed,) = run.files
    added = [line for line in changed.after.splitlines() if line not in changed.before.splitlines()]
    assert added and all(line.startswith("# smpfix-migrate: TODO(") for line in added)


def test_values_smpfix_cannot_read_are_scaffolded_not_guessed(tmp_path: Path) -> None:
    found = items("non_literal_values.py", tmp_path)
    assert (
        "scaffold",
        "`pipeline_parallel_degree` dropped, but smpfix cannot read its value: v2 has no"
        " pipeline parallelism or microbatches, so the job must have run with 1; check it",
        False,
    ) in found


def test_a_launcher_already_on_v2_is_no_job(tmp_path: Path) -> None:
    run = migrate_alone(FIXTURES / "already_v2.py", tmp_path)
    assert run.jobs == () and run.files == ()


def test_each_item_links_the_v2_page_of_its_setting(tmp_path: Path) -> None:
    from smpfix.migrate import links

    run = migrate_alone(FIXTURES / "key_mappings.py", tmp_path)
    page = {
        item.message.split("`")[1]: item.link
        for item in run.jobs[0].items
        if item.message.startswith("`")
    }
    assert page["sharded_data_parallel_degree"] == links.HYBRID_SHARDING
    assert page["tensor_parallel_seed"] == links.TENSOR_PARALLELISM
    assert page["offload_activations"] == links.ACTIVATION_OFFLOADING
    assert page["mpi"] == links.USE_V2
