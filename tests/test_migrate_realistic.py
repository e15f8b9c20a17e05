"""The script migration on whole projects: every v1 training script a launcher of
``tests/realistic`` starts, with the helper modules it imports, migrated under the job of that
launcher; and a project written to move completely (``tests/fixtures/migrate/projects``).

Per project, what a team would see: fully moved, moved with scaffolds a person finishes, or
blocked (v2 cannot run it as designed: pipeline parallelism, TensorFlow, tensor parallelism of
a family v2 does not support). Whatever the outcome, every file parses, a blocked file is left
as it was, a moved one names no ``smdistributed.modelparallel`` and passes the SMP v2 rules.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from conftest import FIXTURES, ROOT
from migrate_program import launched_scripts

from smpfix import api
from smpfix.base.findings import Severity
from smpfix.migrate.items import FileMigration, Outcome

REALISTIC = ROOT / "tests" / "realistic"
PROJECTS = FIXTURES / "migrate" / "projects"

# project -> outcome: "moved" (nothing left), "scaffold" (TODOs to finish), "blocked",
# "unchanged" (already SMP v2, or no SMP v1 in the scripts launched).
OUTCOMES = {
    REALISTIC / "bert_json_config": "blocked",
    REALISTIC / "flowers_trainer_guards": "blocked",
    REALISTIC / "mixtral_experts_smp_v2": "unchanged",
    REALISTIC / "bert_yaml_config": "blocked",
    REALISTIC / "bert_pipeline": "blocked",
    REALISTIC / "bert_pipeline_pretraining": "blocked",
    REALISTIC / "bert_wrappers_correct": "blocked",
    REALISTIC / "clm_branching_dist_setting": "blocked",
    REALISTIC / "ddp_script_under_smp_launcher": "unchanged",
    REALISTIC / "gpt2_tensor_parallel": "blocked",
    REALISTIC / "gpt2_tp_hf_pytorch110": "blocked",
    REALISTIC / "gpt_fp16_p4d": "blocked",
    REALISTIC / "gpt_notebook_shell_chain": "blocked",
    REALISTIC / "gpt_pipeline_checkpointing": "blocked",
    REALISTIC / "gpt_tensor_parallel": "blocked",
    REALISTIC / "gptj_finetune": "blocked",
    REALISTIC / "latent_switches": "blocked",
    REALISTIC / "llama_fsdp_smp_v2": "unchanged",
    REALISTIC / "lm_pipeline_sweep": "blocked",
    REALISTIC / "mnist_pipeline_parallel": "blocked",
    REALISTIC / "neox_finetune_smp_v2_migration": "unchanged",
    REALISTIC / "resnet_dual_backend": "blocked",
    REALISTIC / "resnet_notebook_strategies": "blocked",
    REALISTIC / "roberta_notebook": "blocked",
    REALISTIC / "segformer_trainer_wrappers": "blocked",
    REALISTIC / "t5_sdp_bf16_pytorch113": "scaffold",
    REALISTIC / "t5_shell_yaml_config": "scaffold",
    REALISTIC / "tf_mnist_known_sizes": "blocked",
    REALISTIC / "tf_text_classifier": "blocked",
    REALISTIC / "vit_pipeline_helpers": "blocked",
    PROJECTS / "neox_sharded_bf16": "moved",
}


def _outcome(migrations: dict[str, FileMigration]) -> str:
    items = [item for migration in migrations.values() for item in migration.items]
    if any(item.blocking for item in items):
        return "blocked"
    if any(item.outcome is not Outcome.MOVED for item in items):
        return "scaffold"
    return "moved" if items else "unchanged"


def test_every_realistic_project_has_an_expected_outcome() -> None:
    assert {path for path in REALISTIC.iterdir() if path.is_dir()} <= set(OUTCOMES)


@pytest.mark.parametrize("project", sorted(OUTCOMES), ids=lambda path: path.name)
def test_a_project_moves_as_far_as_v2_lets_it(project: Path) -> None:
    migrations = launched_scripts(project.resolve())
    assert migrations, "no launched script found"
    assert _outcome(migrations) == OUTCOMES[project]
    blocked = _outcome(migrations) == "blocked"
    for path, migration in migrations.items():
        cst.parse_module(migration.after)
        for item in migration.items:
            assert item.link.startswith("https://docs.aws.amazon.com/sagemaker/"), (path, item)
        if blocked or migration.after == migration.before:
            continue
        assert "smdistributed.modelparallel" not in migration.after, path
        findings = api.check_source(migration.after, path=Path(path).name)
        errors = [(f.code, f.message) for f in findings if f.severity is Severity.ERROR]
        assert errors == [], (path, errors)


def test_code_around_a_dropped_loop_stays() -> None:
    """The loops that only marked layers for activation checkpointing go; the evaluation loop
    of the same file, and everything else, stays."""
    migration = launched_scripts((REALISTIC / "t5_sdp_bf16_pytorch113").resolve())[
        "src/finetune.py"
    ]
    kept = [line for line in migration.before.splitlines() if "for input_ids" in line]
    assert len(kept) == 2
    assert all(line in migration.after.splitlines() for line in kept)
    assert "            smp.set_activation_checkpointing(block)" not in migration.after


def test_a_moved_project_moves_its_helper_modules_too() -> None:
    migrations = launched_scripts((PROJECTS / "neox_sharded_bf16").resolve())
    helper = migrations["src/shards.py"]
    assert "files[dist.get_rank() :: dist.get_world_size()]" in helper.after
    assert {item.topic for item in helper.items} == {"ranks"}


@pytest.mark.parametrize("project", sorted(OUTCOMES), ids=lambda path: path.name)
def test_migrating_a_project_twice_changes_nothing(project: Path, tmp_path: Path) -> None:
    first = launched_scripts(project.resolve())
    copy = tmp_path / project.name
    for source in project.rglob("*"):
        if source.is_file():
            target = copy / source.relative_to(project)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    for path, migration in first.items():
        (copy / path).write_text(migration.after, encoding="utf-8")
    again = launched_scripts(copy.resolve())
    for path, migration in first.items():
        assert again[path].after == migration.after, path
