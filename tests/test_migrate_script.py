"""``smpfix migrate``, the script half: each v1 construct moved to SMP v2, as specifications.

``tests/fixtures/migrate/scripts/NAME.py`` is a v1 script (its first line, ``# job: {...}``,
states the job of its launcher) and ``NAME.migrated.py`` the exact text the migration writes;
``EXPECTED`` says what the report says about each, line by line (lines of the original). Then
the properties every migration keeps: the result parses, names no ``smdistributed`` library
once everything moved, passes the SMP v2 rules, and a second migration changes nothing.
"""

from __future__ import annotations

import json
from typing import Optional

import libcst as cst
import pytest
from conftest import FIXTURES
from migrate_program import migrate_text

from smpfix import api
from smpfix.base.findings import Severity
from smpfix.migrate.items import FileMigration, Outcome
from smpfix.migrate.script.plan import TODO_PREFIX

SCRIPTS = FIXTURES / "migrate" / "scripts"
M, S, R = Outcome.MOVED, Outcome.SCAFFOLD, Outcome.REPORT

# name -> the items, as (line, outcome, topic, blocking), in the report's order.
EXPECTED: dict[str, list[tuple[int, Outcome, str, bool]]] = {
    "init_and_ranks": [
        (14, M, "initialisation", False),
        (15, M, "ranks", False),
        (16, M, "ranks", False),
        (17, M, "ranks", False),
        (17, M, "ranks", False),
        (17, M, "ranks", False),
        (18, M, "ranks", False),
        (19, M, "ranks", False),
        (20, M, "ranks", False),
    ],
    "backward_scaler_clipping": [
        (6, M, "initialisation", False),
        (7, M, "fsdp-wrap", False),
        (8, M, "optimizer", False),
        (9, M, "loss-scaling", False),
        (12, M, "step", False),
        (15, M, "backward", False),
        (20, M, "step", False),
        (21, M, "gradient-clipping", False),
    ],
    "wrap_gpt2_bf16": [(12, M, "fsdp-wrap", False), (13, M, "optimizer", False)],
    "wrap_unknown_family": [
        (6, M, "initialisation", False),
        (7, S, "fsdp-wrap", False),
        (8, M, "optimizer", False),
    ],
    "step_microbatches": [
        (5, M, "fsdp-wrap", False),
        (8, S, "gradient-accumulation", False),
        (11, M, "backward", False),
        (18, M, "step", False),
    ],
    # What a step returned, unpacked from the tuple it returns, then reduced.
    "step_output_unpacked": [
        (6, M, "initialisation", False),
        (7, M, "fsdp-wrap", False),
        (8, M, "optimizer", False),
        (11, M, "step", False),
        (14, M, "backward", False),
        (23, M, "step", False),
    ],
    # Followed through indexing, starred targets and names; a use smpfix cannot rewrite is
    # reported (27, 28); a name rebound to something else keeps its own `reduce_mean()`.
    "step_output_followed": [
        (8, M, "initialisation", False),
        (9, M, "fsdp-wrap", False),
        (10, M, "optimizer", False),
        (13, M, "step", False),
        (16, M, "backward", False),
        (22, M, "step", False),
        (24, M, "step", False),
        (24, M, "step", False),
        (24, M, "step", False),
        (24, M, "step", False),
        (26, M, "step", False),
        (26, M, "step", False),
        (27, R, "step", False),
        (28, R, "step", False),
    ],
    "activation_checkpointing": [
        (5, M, "initialisation", False),
        (6, M, "fsdp-wrap", False),
        (7, M, "fsdp-wrap", False),
        (8, M, "activation-checkpointing", False),
    ],
    "checkpoints": [
        (8, M, "initialisation", False),
        (12, S, "checkpoints", False),
        (12, R, "v1-checkpoints", False),
        (13, M, "fsdp-wrap", False),
        (14, M, "optimizer", False),
        (15, M, "checkpoints", False),
        (16, M, "checkpoints", False),
    ],
    "checkpoint_resume_moves": [
        (6, M, "initialisation", False),
        (8, M, "checkpoints", False),
        (8, R, "v1-checkpoints", False),
        (9, M, "fsdp-wrap", False),
        (10, M, "optimizer", False),
    ],
    # A partial resume reads the tag the migrated saves list in ``newest`` when it is None
    # (written or left out), joins a string tag, and picks one or the other at run time for a
    # tag it cannot read; a full one loads v1's file ``path/tag``.
    "checkpoint_resume_tags": [
        (8, M, "initialisation", False),
        (9, M, "fsdp-wrap", False),
        (10, M, "optimizer", False),
        (13, M, "checkpoints", False),
        (15, M, "checkpoints", False),
        (15, R, "v1-checkpoints", False),
        (17, S, "checkpoints", False),
    ],
    # ``partial`` chosen at run time: both of v1's loads, under the same test.
    "checkpoint_resume_chosen_at_run_time": [
        (8, M, "initialisation", False),
        (9, M, "fsdp-wrap", False),
        (10, M, "optimizer", False),
        (14, S, "checkpoints", False),
        (14, R, "v1-checkpoints", False),
    ],
    "tensor_parallel_llama": [
        (6, M, "initialisation", False),
        (8, M, "tensor-parallelism", False),
        (11, M, "fsdp-wrap", False),
        (12, M, "optimizer", False),
        (13, M, "ranks", False),
    ],
    "delayed_initialization": [
        (6, M, "initialisation", False),
        (8, M, "delayed-parameter-initialization", False),
        (10, M, "fsdp-wrap", False),
        (11, M, "optimizer", False),
    ],
    "fp16_loss_scaling": [
        (6, M, "initialisation", False),
        (7, S, "fp16-loss-scaling", False),
        (7, M, "fsdp-wrap", False),
        (8, M, "optimizer", False),
    ],
    # One pipeline stage: the send to the pipeline group goes, the branch that received it
    # (no rank takes it) is left to a person.
    "pipeline_exchange_one_stage": [
        (7, M, "initialisation", False),
        (8, M, "ranks", False),
        (10, M, "collectives", False),
        (12, S, "collectives", False),
    ],
    # Left on v1 as a whole: a TODO comment at what no transformation moves.
    "smp_nn_modules": [(6, R, "smp-nn", True)],
    "collectives": [
        (4, M, "initialisation", False),
        (6, M, "collectives", False),
        (7, S, "collectives", False),
    ],
    "pipeline_blocked": [
        (5, R, "pipeline-parallelism", True),
        (7, R, "pipeline-parallelism", True),
    ],
    "tensor_parallel_gpt2_blocked": [(6, R, "tensor-parallelism", True)],
    "hf_trainer_blocked": [(6, R, "hf-trainer", True)],
    "tensorflow_blocked": [(1, R, "tensorflow", True)],
    "from_imports_and_aliases": [
        (9, M, "initialisation", False),
        (13, M, "step", False),
        (15, M, "backward", False),
        (18, S, "fsdp-wrap", False),
        (19, M, "optimizer", False),
        (20, M, "ranks", False),
    ],
    "helper_module": [
        (11, M, "initialisation", False),
        (15, M, "ranks", False),
        (16, M, "fsdp-wrap", False),
    ],
    "groups_and_layers": [
        (12, M, "layers", False),
        (18, M, "ranks", False),
        (19, M, "ranks", False),
        (24, M, "ranks", False),
        (27, M, "layers", False),
    ],
    "placement_one_stage": [
        (7, M, "initialisation", False),
        (9, M, "ranks", False),
        (11, M, "pipeline-parallelism", False),
        (12, M, "pipeline-parallelism", False),
    ],
    "save_and_load_objects": [
        (4, M, "initialisation", False),
        (6, M, "checkpoints", False),
        (7, M, "checkpoints", False),
    ],
    "broadcast_and_receive": [
        (4, M, "initialisation", False),
        (5, M, "ranks", False),
        (7, M, "collectives", False),
        (9, M, "collectives", False),
    ],
    # Traps: only what is the library's moves.
    "trap_local_rank_function": [(19, M, "initialisation", False)],
    "trap_smp_alias_of_numpy": [],
    "already_v2": [],
}


def _job(text: str) -> Optional[dict[str, object]]:
    first = text.splitlines()[0]
    return json.loads(first[len("# job: ") :]) if first.startswith("# job: ") else None


def _migrated(name: str) -> FileMigration:
    text = (SCRIPTS / f"{name}.py").read_text(encoding="utf-8")
    return migrate_text(text, _job(text), path=f"{name}.py")


def _v2_job(v1: Optional[dict[str, object]]) -> dict[str, object]:
    """The v2 job the launcher half writes for a v1 job: the degrees that carry over."""
    v1 = v1 or {}
    job: dict[str, object] = {}
    if "sharded_data_parallel_degree" in v1:
        job["hybrid_shard_degree"] = v1["sharded_data_parallel_degree"]
    if "tensor_parallel_degree" in v1:
        job["tensor_parallel_degree"] = v1["tensor_parallel_degree"]
    return job


def test_every_fixture_has_its_expectations() -> None:
    names = {path.stem for path in SCRIPTS.glob("*.py") if not path.stem.endswith(".migrated")}
    assert names == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_migration_writes_exactly_the_fixed_form(name: str) -> None:
    expected = (SCRIPTS / f"{name}.migrated.py").read_text(encoding="utf-8")
    assert _migrated(name).after == expected


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_report_says_what_moved_and_what_needs_a_person(name: str) -> None:
    migration = _migrated(name)
    found = [(i.line, i.outcome, i.topic, i.blocking) for i in migration.items]
    assert found == EXPECTED[name]
    lines = migration.before.splitlines()
    for item in migration.items:
        assert item.link.startswith("https://docs.aws.amazon.com/sagemaker/latest/dg/"), item
        assert item.path == f"{name}.py"
        # The line of the original statement: it names what the item is about.
        assert lines[item.line - 1].strip(), item


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_migrating_twice_changes_nothing(name: str) -> None:
    first = _migrated(name)
    again = migrate_text(first.after, _job(first.before), path=f"{name}.py")
    assert again.after == first.after
    if "smdistributed" not in first.after:
        assert again.items == ()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_migrated_file_parses_and_passes_the_v2_rules(name: str) -> None:
    migration = _migrated(name)
    cst.parse_module(migration.after)
    if any(item.blocking for item in migration.items) or migration.after == migration.before:
        return
    if "smdistributed.modelparallel" in migration.after:
        # Something no transformation moves: the file stays v1, with TODO comments only.
        kept = [line for line in migration.after.splitlines() if TODO_PREFIX not in line]
        assert kept == migration.before.splitlines()
        return
    findings = api.check_source(
        migration.after, path=f"{name}.py", job=_v2_job(_job(migration.before))
    )
    errors = [f for f in findings if f.severity is Severity.ERROR]
    assert errors == [], [(f.code, f.message) for f in errors]


def test_a_blocked_job_keeps_its_file_as_it_is() -> None:
    for name in ("pipeline_blocked", "tensor_parallel_gpt2_blocked", "tensorflow_blocked"):
        migration = _migrated(name)
        assert migration.after == migration.before
        assert all(item.blocking for item in migration.items)


def test_a_scaffold_leaves_a_todo_with_its_page_where_a_person_must_finish() -> None:
    migration = _migrated("step_microbatches")
    todo = [line for line in migration.after.splitlines() if line.startswith(TODO_PREFIX)]
    assert todo == [
        "# smpfix-migrate: TODO(gradient-accumulation): v1 split each batch into 4 microbatches;"
        " the batch now runs whole: lower the batch size and accumulate gradients to keep v1's"
        " memory <https://docs.aws.amazon.com/sagemaker/latest/dg/"
        "distributed-model-parallel-v2-reference.html#model-parallel-v2-upgrade-from-v1>"
    ]
    assert migration.needs_a_person


def test_traps_keep_the_names_that_are_not_the_library() -> None:
    local = _migrated("trap_local_rank_function").after
    assert "def rank():" in local and "teacher.backward(rank())" in local
    alias = _migrated("trap_smp_alias_of_numpy")
    assert alias.after == alias.before and alias.items == ()


def test_new_code_names_modules_the_way_the_file_does() -> None:
    after = _migrated("from_imports_and_aliases").after
    assert "td.init_process_group(" in after and "if td.get_rank() == 0:" in after
    assert "import torch.distributed as dist" not in after  # ``dist`` is the file's variable
    assert "from smdistributed" not in after


def test_comments_and_formatting_are_kept() -> None:
    migration = _migrated("backward_scaler_clipping")
    assert "(loss * 0.5).backward()  # half the loss: two tasks share a batch" in migration.after
    moved = _migrated("wrap_gpt2_bf16").after
    # The optimizer moved below the wrap with its comment.
    assert "    # The optimizer is built first; v1 wrapped both later.\n    optimizer = " in moved


def test_a_rewrite_that_breaks_the_file_is_never_kept() -> None:
    """The last guard before a result is returned: text that does not parse, or that still
    reads a name of the v1 import it removed, is refused (the file stays as it was)."""
    from smpfix.migrate.script import _broken

    assert _broken("x = (\n", ()) is not None
    assert _broken("print(smp.rank())\n", {"smp"}) == ("still uses smp of the v1 import it removed")
    # An attribute, a keyword or a parameter spelled like the import is not a use of it.
    assert _broken("tsm.init()\nf(init=1)\ndef g(init): pass\n", {"init"}) is None


def test_a_step_result_unpacked_from_a_tuple_loses_its_reduction() -> None:
    """v1 made each tensor of the returned tuple a StepOutput; the plain v2 step returns the
    tensors, so the reduction goes where the loop unpacks them (it raised AttributeError)."""
    migration = _migrated("step_output_unpacked")
    assert "        _, loss_mb = train_step(model, batch)\n        loss = loss_mb\n" in (
        migration.after
    )
    assert "reduce_mean" not in migration.after
    assert migration.items[-1].message == (
        "`.reduce_mean()` on a step's result removed: the step returns the tensor"
    )


def test_each_use_of_a_step_result_is_rewritten_or_reported() -> None:
    after = _migrated("step_output_followed").after.splitlines()
    assert "    loss = results[0]" in after
    assert "    print(logits.shape, logits.unsqueeze(0).shape, [logits], logits)" in after
    assert "    total = first + rest[0]" in after
    # Left as they were, each under a TODO naming the value: the code expects a StepOutput.
    for kept in (
        "    log_value(train_step(model, batch)[0])",
        "    doubled = results[0].map(lambda each: each * 2)",
    ):
        assert after[after.index(kept) - 1].startswith("    # smpfix-migrate: TODO(step): `")
    # Another value under the same name keeps its own method.
    assert after[-1] == "    first.reduce_mean()"


def test_a_resume_without_a_tag_loads_the_newest_checkpoint_the_saves_listed() -> None:
    """``tag=None`` is v1's default: the last tag in ``path/newest`` (one a line, as the
    migrated save appends them), never ``os.path.join(path, None)``."""
    after = _migrated("checkpoint_resume_tags").after
    assert "os.path.join(args.checkpoint_dir, None)" not in after
    assert (
        '        with open(os.path.join(args.checkpoint_dir, "newest")) as newest:\n'
        "            newest_tag = newest.read().splitlines()[-1]\n"
    ) in after
    assert (
        "        resume_tag = tag\n"
        "        if resume_tag is None:\n"
        '            with open(os.path.join(args.checkpoint_dir, "newest")) as newest:\n'
        "                resume_tag = newest.read().splitlines()[-1]\n"
    ) in after
    # A full checkpoint is v1's file ``path/tag``: loaded with torch.load, never as a
    # distributed checkpoint directory.
    full = after[after.index("    else:\n") :]
    assert 'torch.load(os.path.join(args.model_dir, "fullmodel.pt"), map_location="cpu")' in full
    assert "FileSystemReader" not in full


def test_a_resume_whose_partial_is_chosen_at_run_time_keeps_both_loads() -> None:
    after = _migrated("checkpoint_resume_chosen_at_run_time").after
    start = after.index("    if partial:\n")
    branches = after[start : after.index("    return ")]
    partial, full = branches.split("    else:\n")
    assert "dcp.FileSystemReader(os.path.join(path, resume_tag))" in partial
    assert "FileSystemReader" not in full
    assert 'torch.load(os.path.join(path, tag), map_location="cpu")' in full
