"""SMP812-SMP820 beyond their fixtures: the job table, the launched script, the key tables.

The fixtures cover each rule in one file. Here: ``[tool.smpfix.job]`` (unknown keys are a
usage error before any rule runs; the other checks report at the key's line), SMP820's look
into the script a launcher starts, and the invariants the rules rely on (every schema key
has a type; a type fix keeps the number).
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

from conftest import finding_text, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from smpfix.api import check_source, fix_source
from smpfix.job.config_keys import EXPLAINED, advise
from smpfix.job.jobfacts import KNOWN_KEYS, TF_KNOWN_KEYS
from smpfix.rules.job_config.smp813_config_value_wrong_type import EXPECTED_TYPES

SCRIPT = "import smdistributed.modelparallel.torch as smp\n\nsmp.init()\n"


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def findings(*args: str, cwd: Path) -> list[dict]:
    result = run_cli("check", "--no-cache", "--format", "json", *args, cwd=cwd)
    assert result.code in (0, 1), result.stderr
    return json.loads(result.stdout)


def test_unknown_job_table_key_is_a_usage_error_with_smp812s_advice(tmp_path: Path) -> None:
    write(tmp_path, "train.py", SCRIPT)
    write(tmp_path, "pyproject.toml", "[tool.smpfix.job]\nsharded_data_parallelism_degree = 8\n")
    result = run_cli("check", "--select", "SMP812", ".", cwd=tmp_path)
    assert result.code == 2
    assert (
        "unknown job setting 'sharded_data_parallelism_degree' (did you mean"
        " 'sharded_data_parallel_degree'?)" in result.stderr
    )
    write(tmp_path, "pyproject.toml", "[tool.smpfix.job]\ndeterministic_server = true\n")
    result = run_cli("check", "--ignore", "SMP812", ".", cwd=tmp_path)
    assert result.code == 2 and "1.12 library" in result.stderr and "remove it" in result.stderr
    write(tmp_path, "pyproject.toml", "[tool.smpfix.job]\ninstance_typ = 'ml.p4d.24xlarge'\n")
    result = run_cli("check", ".", cwd=tmp_path)
    assert result.code == 2 and "did you mean 'instance_type'" in result.stderr


def test_job_table_values_are_checked_at_their_lines(tmp_path: Path) -> None:
    write(tmp_path, "train.py", SCRIPT)
    write(
        tmp_path,
        "pyproject.toml",
        "[tool.smpfix.job]\nsharded_data_parallel_degree = 8\nsdp_reduce_bucket_size = 5e8\nbf16 ="
        " true\nfp16 = true\nauto_partition = false\n",
    )
    found = findings("--select", "SMP812,SMP813,SMP815,SMP819", ".", cwd=tmp_path)
    at = {(Path(f["filename"]).name, f["location"]["row"], f["code"]) for f in found}
    assert at == {
        ("pyproject.toml", 3, "SMP813"),
        ("pyproject.toml", 4, "SMP815"),
        ("pyproject.toml", 6, "SMP819"),
    }
    assert all(f["fix"] is None for f in found)


LAUNCHER = """from sagemaker.pytorch import PyTorch

PyTorch(
    entry_point="train.py",
    source_dir="code",
    instance_type="ml.p4d.24xlarge",
    distribution={
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": {"pipeline_parallel_degree": 2, "ddp": True}}},
        "mpi": {"enabled": True, "processes_per_host": 8},
    },
)
"""  # noqa: E501

TRAINER_SCRIPT = """from transformers import Trainer, TrainingArguments

trainer = Trainer(model=model, args=TrainingArguments(output_dir="out"), train_dataset=data)
trainer.train()
"""


def test_launcher_of_a_trainer_script_needs_partitions(tmp_path: Path) -> None:
    write(tmp_path, "launch.py", LAUNCHER)
    write(tmp_path, "code/train.py", TRAINER_SCRIPT)
    found = [f for f in findings("--select", "SMP820", ".", cwd=tmp_path) if f["code"] == "SMP820"]
    assert [(Path(f["filename"]).name, f["location"]["row"], f["severity"]) for f in found] == [
        ("launch.py", 8, "error")
    ]
    assert "code/train.py uses the transformers `Trainer`" in finding_text(found[0])
    assert found[0]["fix"]["applicability"] == "unsafe"


def test_launcher_of_a_plain_script_may_use_pipeline_parallel_degree(tmp_path: Path) -> None:
    write(tmp_path, "launch.py", LAUNCHER)
    write(tmp_path, "code/train.py", SCRIPT)
    assert findings("--select", "SMP820", ".", cwd=tmp_path) == []


def test_every_schema_key_has_a_type_and_the_explained_keys_are_unknown() -> None:
    assert set(EXPECTED_TYPES) == set(KNOWN_KEYS) | set(TF_KNOWN_KEYS)
    assert not set(EXPLAINED) & set(KNOWN_KEYS)
    assert advise("tensor_parallelism_degree").suggestion == "tensor_parallel_degree"
    assert advise("deterministic_server").suggestion is None
    assert advise("sm_activation_offloading").explanation is not None


def _launcher(key: str, value: str) -> str:
    return (
        "from sagemaker.pytorch import PyTorch\n\n"
        f'PyTorch(entry_point="t.py", distribution={{"smdistributed": {{"modelparallel":'
        f' {{"enabled": True, '
        f'"parameters": {{"{key}": {value}}}}}}}}})\n'
    )


@settings(deadline=None, max_examples=60)
@given(st.integers(min_value=0, max_value=10**12), st.integers(min_value=0, max_value=6))
def test_float_to_int_fix_keeps_the_number(mantissa: int, exponent: int) -> None:
    written = f"{mantissa}e{exponent}"
    source = _launcher("sdp_reduce_bucket_size", written)
    fixed = fix_source(source, "launch.py", select=["SMP813"]).text
    assert check_source(fixed, "launch.py", select=["SMP813"]) == []
    value = fixed.split('"sdp_reduce_bucket_size": ')[1].split("}")[0]
    assert Decimal(value) == Decimal(written) and "." not in value and "e" not in value


@settings(deadline=None, max_examples=60)
@given(st.integers(min_value=-(2**53), max_value=2**53))
def test_int_to_float_fix_keeps_the_number(number: int) -> None:
    source = _launcher("sdp_gradient_clipping", str(number))
    fixed = fix_source(source, "launch.py", select=["SMP813"]).text
    value = fixed.split('"sdp_gradient_clipping": ')[1].split("}")[0]
    assert float(value) == number and check_source(fixed, "launch.py", select=["SMP813"]) == []
