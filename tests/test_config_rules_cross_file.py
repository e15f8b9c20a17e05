"""Configuration rules that need more than one file, and the job table.

SMP802 reads the batch size in the script and `microbatches` from the job, with the launcher's
`hyperparameters` overriding argparse defaults; SMP805 and SMP807 look into the script a
launcher starts; every configuration rule also checks `[tool.smpfix.job]`. The fixture
harness checks single files, so these tests build small projects.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from conftest import finding_text, run_cli

from smpfix.engine.analysis import AnalysisOptions, analyze
from smpfix.job.linking import link
from smpfix.job.project import Project

TRAIN = """\
import argparse

import smdistributed.modelparallel.torch as smp
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=32)
args = parser.parse_args()

smp.init()
model = smp.DistributedModel(build_model())


@smp.step
def train_step(model, batch):
    loss = model(batch)
    model.backward(loss)
    return loss


loader = DataLoader(dataset, batch_size=args.batch_size, drop_last=True)
for batch in loader:
    train_step(model, batch)
"""


def launcher(
    hyperparameters: str = '{"batch-size": 30}',
    parameters: str = '{"microbatches": 4, "pipeline_parallel_degree": 2, "ddp": True}',
    extra: str = "",
) -> str:
    return f"""\
from sagemaker.pytorch import PyTorch

estimator = PyTorch(
    entry_point="train.py",
    source_dir="code",{extra}
    instance_type="ml.p4d.24xlarge",
    instance_count=2,
    hyperparameters={hyperparameters},
    distribution={{
        "smdistributed": {{"modelparallel": {{"enabled": True, "parameters": {parameters}}}}},
        "mpi": {{"enabled": True, "processes_per_host": 8}},
    }},
)
"""


def project(
    root: Path,
    launchers: dict[str, str],
    script: str = TRAIN,
    helpers: Optional[dict[str, str]] = None,
) -> Path:
    (root / "code").mkdir()
    (root / "code" / "train.py").write_text(script, encoding="utf-8")
    for name, text in (helpers or {}).items():
        (root / "code" / name).write_text(text, encoding="utf-8")
    for name, text in launchers.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def findings(root: Path, path: str, code: str, roots: Optional[tuple[str, ...]] = None) -> list:
    """Check ``path`` as the CLI would, with the launchers among ``roots`` linked."""
    checked = roots or (str(root),)
    files = [
        (str(p), p.read_text(encoding="utf-8"))
        for p in sorted(root.rglob("*.py"))
        if any(str(p).startswith(r) for r in checked)
    ]
    options = AnalysisOptions(
        select=frozenset({code}), project=Project.of(checked).with_links(link(files))
    )
    target = root / path
    return list(analyze(target.read_text(encoding="utf-8"), str(target), options).findings)


# -- SMP802: the batch in the script, microbatches in the launcher ----------------------------
def test_hyperparameter_overrides_the_argparse_default(workdir: Path) -> None:
    root = project(workdir, {"launch.py": launcher()})
    found = findings(root, "code/train.py", "SMP802")
    assert [(f.start.line, f.severity.value) for f in found] == [(21, "error")]
    message = finding_text(found[0])
    assert "30 % 4 = 2" in message
    assert "hyperparameter 'batch-size' from the launcher " in message and "launch.py:3" in message
    assert "overrides the argparse default of `--batch-size` (32)" in message
    assert "microbatches is 4 (launcher " in message


def test_divisible_hyperparameter_is_quiet(workdir: Path) -> None:
    root = project(workdir, {"launch.py": launcher('{"batch-size": 64}')})
    assert findings(root, "code/train.py", "SMP802") == []


def test_default_is_used_when_the_launcher_passes_no_batch_size(workdir: Path) -> None:
    root = project(workdir, {"launch.py": launcher("{}", '{"microbatches": 3, "ddp": True}')})
    found = findings(root, "code/train.py", "SMP802")
    assert [f.start.line for f in found] == [21]
    assert "the argparse default of `--batch-size`" in finding_text(
        found[0]
    ) and "32 % 3 = 2" in finding_text(found[0])


def _init_dict_script() -> str:
    return TRAIN.replace(
        'parser.add_argument("--batch-size", type=int, default=32)\n',
        'parser.add_argument("--batch-size", type=int,'
        ' default=32)\nparser.add_argument("--microbatches", type=int, default=4)\n',
    ).replace(
        "smp.init()", 'smp.init({"microbatches": args.microbatches, "pipeline_parallel_degree": 2})'
    )


def test_microbatches_from_the_init_dict_through_hyperparameters(workdir: Path) -> None:
    # SMP_MANUAL_INIT=1: the library waits for smp.init(dict) instead of initialising on import.
    manual = '\n    environment={"SMP_MANUAL_INIT": "1"},'
    root = project(
        workdir,
        {"launch.py": launcher('{"microbatches": 6}', '{"ddp": True}', manual)},
        _init_dict_script(),
    )
    found = findings(root, "code/train.py", "SMP802")
    assert [(f.start.line, f.severity.value) for f in found] == [(22, "error")]
    assert "32 % 6 = 2" in finding_text(found[0])
    assert (
        "the smp.init({...}) dict: `args.microbatches` = 6, hyperparameter 'microbatches' from the"
        " launcher" in finding_text(found[0])
    )


def test_an_init_dict_the_library_ignores_or_may_ignore_decides_nothing(workdir: Path) -> None:
    # SMP 1.13 (PyTorch 1.12.1) initialises on import from the launcher's parameters: the dict's
    # microbatches never apply. With the version unknown, they may not either.
    version = '\n    framework_version="1.12.1",'
    root = project(
        workdir,
        {"launch.py": launcher('{"microbatches": 6}', '{"ddp": True}', version)},
        _init_dict_script(),
    )
    assert findings(root, "code/train.py", "SMP802") == []
    shown = run_cli(
        "check", "--show-job", "--no-cache", "--exit-zero", "--select", "SMP802", ".", cwd=root
    )
    assert "smp.init     dict ignored: under launcher" in shown.stdout + shown.stderr
    (root / "launch.py").write_text(
        launcher('{"microbatches": 6}', '{"ddp": True}'), encoding="utf-8"
    )
    assert findings(root, "code/train.py", "SMP802") == []
    shown = run_cli(
        "check", "--show-job", "--no-cache", "--exit-zero", "--select", "SMP802", ".", cwd=root
    )
    assert "smp.init     dict uncertain: under launcher" in shown.stdout + shown.stderr


def test_config_rules_skip_an_init_dict_the_library_ignores(workdir: Path) -> None:
    script = TRAIN.replace("smp.init()", 'smp.init({"tensor_parallelism_degree": 2, "ddp": True})')
    version = '\n    framework_version="1.12.1",'
    root = project(workdir, {"launch.py": launcher(extra=version)}, script)
    assert findings(root, "code/train.py", "SMP812") == []
    manual = version + '\n    environment={"SMP_MANUAL_INIT": "1"},'
    (root / "launch.py").write_text(
        launcher(extra=manual), encoding="utf-8"
    )  # the library waits for smp.init(dict)
    assert [(f.code, f.severity.value) for f in findings(root, "code/train.py", "SMP812")] == [
        ("SMP812", "error")
    ]
    (root / "launch.py").write_text(launcher(), encoding="utf-8")  # version unknown: it may read it
    [found] = findings(root, "code/train.py", "SMP812")
    assert (
        found.severity.value == "warning"
        and "this matters only if the library reads this dict" in found.evidence[0]
    )


def test_unreadable_hyperparameters_are_unknown(workdir: Path) -> None:
    root = project(
        workdir,
        {"launch.py": launcher("make_hyperparameters()", '{"microbatches": 3, "ddp": True}')},
    )
    assert findings(root, "code/train.py", "SMP802") == []


def test_launchers_that_disagree_leave_the_batch_unknown(tmp_path: Path) -> None:
    root = project(
        tmp_path, {"a.py": launcher('{"batch-size": 30}'), "b.py": launcher('{"batch-size": 28}')}
    )
    assert findings(root, "code/train.py", "SMP802") == []


def test_cli_end_to_end_and_script_alone(workdir: Path) -> None:
    root = project(workdir, {"launch.py": launcher()})
    result = run_cli("check", "--select", "SMP802", "--format", "json", ".", cwd=root)
    assert result.code == 1, result.stderr
    data = json.loads(result.stdout)
    assert [(Path(f["filename"]).name, f["location"]["row"], f["code"]) for f in data] == [
        ("train.py", 21, "SMP802")
    ]
    # Checked alone, the script still gets its launcher's microbatches (the launcher search).
    alone = run_cli("check", "--select", "SMP802", "--format", "json", "code/train.py", cwd=root)
    assert json.loads(alone.stdout) == data
    # Without the search, only the checked files are launchers: nothing to divide.
    assert (
        run_cli(
            "check", "--select", "SMP802", "--no-launcher-search", "code/train.py", cwd=root
        ).code
        == 0
    )


# -- SMP805 / SMP807: the script a launcher starts ------------------------------------------------
OFFLOAD = (
    '{"pipeline_parallel_degree": 2, "microbatches": 4, "offload_activations": True, "ddp": True}'
)
SDP_TP = (
    '{"sharded_data_parallel_degree": 2, "tensor_parallel_degree": 8, "prescaled_batch": True,'
    ' "ddp": True}'
)

CHECKPOINTING_HELPER = """\
import smdistributed.modelparallel.torch as smp


def checkpoint_layers(model):
    for layer in model.module.transformer.h:
        smp.set_activation_checkpointing(layer)
"""

MODEL_CREATION_HELPER = """\
import smdistributed.modelparallel.torch as smp


def build(config):
    with smp.model_creation(tensor_parallelism=True):
        return make_model(config)
"""


def test_offloading_without_checkpointing_in_the_launched_script(workdir: Path) -> None:
    root = project(workdir, {"launch.py": launcher("{}", OFFLOAD)})
    found = findings(root, "launch.py", "SMP807")
    assert [(f.start.line, f.severity.value) for f in found] == [(10, "warning")]
    assert (
        "code/train.py (and the project modules it imports) never checkpoints activations"
        in finding_text(found[0])
    )


def test_checkpointing_in_an_imported_helper_counts(workdir: Path) -> None:
    script = (
        TRAIN.replace("import argparse\n", "import argparse\nimport layers\n")
        + "layers.checkpoint_layers(model)\n"
    )
    root = project(
        workdir, {"launch.py": launcher("{}", OFFLOAD)}, script, {"layers.py": CHECKPOINTING_HELPER}
    )
    assert findings(root, "launch.py", "SMP807") == []


def test_script_outside_the_checked_paths_is_not_read(workdir: Path) -> None:
    root = project(workdir, {"launch.py": launcher("{}", OFFLOAD)})
    assert findings(root, "launch.py", "SMP807", roots=(str(root / "launch.py"),)) == []


def test_sdp_with_tp_needs_model_creation_in_the_script(workdir: Path) -> None:
    root = project(workdir, {"launch.py": launcher("{}", SDP_TP)})
    found = findings(root, "launch.py", "SMP805")
    assert [(f.start.line, f.severity.value) for f in found] == [(10, "warning")]
    assert "smp.model_creation(tensor_parallelism=True)" in found[0].message


def test_model_creation_in_a_helper_satisfies_it(workdir: Path) -> None:
    script = TRAIN.replace("build_model()", "model_builder.build(config)").replace(
        "import argparse\n", "import argparse\nimport model_builder\n"
    )
    root = project(
        workdir,
        {"launch.py": launcher("{}", SDP_TP)},
        script,
        {"model_builder.py": MODEL_CREATION_HELPER},
    )
    assert findings(root, "launch.py", "SMP805") == []


def test_launcher_result_follows_changes_to_its_script(workdir: Path) -> None:
    """The launcher's cached result depends on the script it looked into."""
    root = project(workdir, {"launch.py": launcher("{}", OFFLOAD)})
    cache = root / "cache"

    def codes() -> list:
        result = run_cli(
            "check",
            "--select",
            "SMP807",
            "--format",
            "json",
            "--cache-dir",
            str(cache),
            ".",
            cwd=root,
        )
        return [(Path(f["filename"]).name, f["code"]) for f in json.loads(result.stdout)]

    assert codes() == [("launch.py", "SMP807")]
    (root / "code" / "train.py").write_text(
        TRAIN + "smp.set_activation_checkpointing(model.module.encoder)\n", encoding="utf-8"
    )
    assert codes() == []


# -- SMP824: the DistributedModel of the launched script --------------------------------------
SHARDED = (
    '{"pipeline_parallel_degree": 2, "microbatches": 4, "shard_optimizer_state": True, "ddp": True}'
)


def test_sharding_with_a_distributed_model_that_turns_bucket_views_off(workdir: Path) -> None:
    script = TRAIN.replace(
        "smp.DistributedModel(build_model())",
        "smp.DistributedModel(build_model(), gradient_as_bucket_view=False)",
    )
    root = project(workdir, {"launch.py": launcher("{}", SHARDED)}, script)
    found = findings(root, "launch.py", "SMP824")
    assert [(f.start.line, f.severity.value) for f in found] == [(10, "error")]
    assert (
        "code/train.py builds `smp.DistributedModel(..., gradient_as_bucket_view=False)`"
        in finding_text(found[0])
    )


def test_sharding_with_the_default_distributed_model_is_quiet(workdir: Path) -> None:
    root = project(workdir, {"launch.py": launcher("{}", SHARDED)})
    assert findings(root, "launch.py", "SMP824") == []


# -- [tool.smpfix.job] ----------------------------------------------------------------------------
def test_job_table_is_checked_by_the_configuration_rules(workdir: Path) -> None:
    (workdir / "pyproject.toml").write_text(
        "[tool.smpfix.job]\n"
        'instance_type = "ml.p3dn.24xlarge"\n'
        "instance_count = 3\n"
        "processes_per_host = 8\n"
        "sharded_data_parallel_degree = 16\n"
        "bf16 = true\n"
        "tensor_parallel_degree = 2\n"
        "prescaled_batch = true\n"
        'optimize = "memory"\n',
        encoding="utf-8",
    )
    (workdir / "train.py").write_text(
        "import smdistributed.modelparallel.torch as smp\nsmp.init()\n", encoding="utf-8"
    )
    result = run_cli(
        "check", "--select", "SMP804,SMP805,SMP806,SMP808", "--format", "json", ".", cwd=workdir
    )
    assert result.code == 1, result.stderr
    data = json.loads(result.stdout)
    found = sorted((Path(f["filename"]).name, f["location"]["row"], f["code"]) for f in data)
    assert found == [
        ("pyproject.toml", 5, "SMP804"),  # 16 > the reduced data-parallel degree 24 / 2 = 12
        ("pyproject.toml", 6, "SMP806"),  # bf16 on V100 GPUs
        ("pyproject.toml", 9, "SMP808"),  # prescaled_batch with optimize "memory"
    ]
    by_code = {f["code"]: finding_text(f) for f in data}
    assert (
        "reduced data-parallel degree 12 = 24 processes / tensor_parallel_degree 2"
        in (by_code["SMP804"])
    )
    assert "V100" in by_code["SMP806"]


def test_job_table_states_ddp_for_the_backend_rules(workdir: Path) -> None:
    """A table that leaves `ddp` out declares only what smpfix needs; one that writes it False is
    checked."""
    table = (
        "[tool.smpfix.job]\ninstance_count = 2\nprocesses_per_host = 8\npipeline_parallel_degree"
        " = 2\n"
    )
    (workdir / "train.py").write_text(
        "import smdistributed.modelparallel.torch as smp\nsmp.init()\n", encoding="utf-8"
    )
    (workdir / "pyproject.toml").write_text(table, encoding="utf-8")
    assert run_cli("check", "--select", "SMP822", ".", cwd=workdir).code == 0
    (workdir / "pyproject.toml").write_text(table + "ddp = false\n", encoding="utf-8")
    result = run_cli("check", "--select", "SMP822", "--format", "json", ".", cwd=workdir)
    assert [
        (Path(f["filename"]).name, f["location"]["row"], f["code"])
        for f in json.loads(result.stdout)
    ] == [("pyproject.toml", 5, "SMP822")]
