"""SMP v2 jobs get no SMP v1 rule and no v1 fix: not the launcher, not the scripts it starts;
they get the SMP v2 family (SMP0xx), and a launcher of one library starting a script of the
other is an error (SMP002).

A job is SMP v2 when its launcher enables ``torch_distributed``, names a PyTorch container of
2.0.1 or later (or the SMP v2 image) with a ``modelparallel`` block, sets a v2-only key, or
starts a script that imports ``torch.sagemaker``; and when ``--job``/``[tool.smpfix]`` name
``smp_version`` 2 or a PyTorch 2.0.1+ ``framework_version``. PyTorch 2.0.0 is still SMP v1 (1.15).
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli

from smpfix.job.jobfacts import JobFacts
from smpfix.job.linking import link

# A v1 script with two findings whenever v1 rules apply to it under tensor parallelism.
V1_SCRIPT = """\
import smdistributed.modelparallel.torch as smp

smp.init()
model = smp.DistributedModel(build_model())
if smp.dp_rank() == 0:
    smp.save(model.local_state_dict(), "/opt/ml/model/model.pt", partial=True)
"""

V2_SCRIPT = """\
import torch
import torch.sagemaker as tsm
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

tsm.init()
model = FSDP(tsm.transform(build_model()))
"""


def launcher(distribution: str, framework: str = "2.2.0", extra: str = "") -> str:
    return f"""\
from sagemaker.pytorch import PyTorch

estimator = PyTorch(
    entry_point="train.py",
    framework_version="{framework}",
    py_version="py310",
    instance_type="ml.p4d.24xlarge",
    instance_count=2,{extra}
    distribution={distribution},
)
"""


V2_DISTRIBUTION = (
    '{"torch_distributed": {"enabled": True}, "smdistributed": {"modelparallel": {"enabled": True,'
    ' "parameters": {"hybrid_shard_degree": 8, "tensor_parallel_degree": 2}}}}'
)
# Looks like v1 and breaks v1 rules (tensor parallelism without ddp, no mpi): only the script says
# v2.
V1_LOOKING = (
    '{"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"tensor_parallel_degree":'
    " 4}}}}"
)


def check(root: Path, *args: str) -> list[tuple[str, str]]:
    result = run_cli("check", ".", "--format", "json", "--no-cache", "--exit-zero", *args, cwd=root)
    assert result.code == 0, result.stderr
    return [(Path(item["filename"]).name, item["code"]) for item in json.loads(result.stdout)]


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_a_v2_launcher_and_the_scripts_it_starts_get_no_v1_rule(tmp_path: Path) -> None:
    root = write(tmp_path, {"launch.py": launcher(V2_DISTRIBUTION), "train.py": V1_SCRIPT})
    # The v1 script under a v2 launcher is a mix-up (SMP002), and gets no v1 rule.
    assert check(root) == [("launch.py", "SMP002")]
    shown = run_cli("check", "--show-job", "--no-cache", "--exit-zero", ".", cwd=root)
    assert "SMP v2: `torch_distributed` is enabled in launcher" in shown.stdout + shown.stderr
    # The same script under a v1 launcher gets its findings, so the silence above is the v2 rule.
    v1 = launcher(
        '{"smdistributed": {"modelparallel": {"enabled": True, "parameters":'
        ' {"tensor_parallel_degree": 4, "ddp": True}}}, "mpi": {"enabled": True,'
        ' "processes_per_host": 8}}',
        framework="1.13.1",
    )
    (root / "launch.py").write_text(v1, encoding="utf-8")
    # (SMP827's hint: a v1 launcher that leaves SageMaker Debugger on.)
    assert check(root) == [("launch.py", "SMP827"), ("train.py", "SMP301")]


def test_the_safe_ddp_fix_never_touches_a_v2_configuration(tmp_path: Path) -> None:
    root = write(tmp_path, {"launch.py": launcher(V2_DISTRIBUTION), "train.py": V2_SCRIPT})
    before = (root / "launch.py").read_text(encoding="utf-8")
    result = run_cli("check", "--apply", "--no-cache", "--exit-zero", ".", cwd=root)
    assert result.code == 0, result.stderr
    assert (root / "launch.py").read_text(encoding="utf-8") == before


def test_a_script_that_imports_torch_sagemaker_makes_its_launcher_v2(tmp_path: Path) -> None:
    root = write(
        tmp_path, {"launch.py": launcher(V1_LOOKING, framework="2.0.0"), "train.py": V2_SCRIPT}
    )
    # No v1 rule; but without `torch_distributed` the SDK picks the PyTorch 2.0.0 image, which
    # has no SMP v2: the mix-up is SMP002's.
    assert check(root) == [("launch.py", "SMP002")]
    # The same launcher starting a v1 script is a v1 launcher on PyTorch 2.0.0 (SMP 1.15).
    (root / "train.py").write_text(V1_SCRIPT, encoding="utf-8")
    codes = {code for name, code in check(root) if name == "launch.py"}
    assert {"SMP814", "SMP817"} <= codes


def test_each_launcher_sign_of_v2(tmp_path: Path) -> None:
    cases = {
        "torch_distributed": launcher(
            '{"torch_distributed": {"enabled": True}, "smdistributed": {"modelparallel":'
            ' {"enabled": True}}}'
        ),
        "container": launcher(
            '{"smdistributed": {"modelparallel": {"enabled": True, "parameters":'
            ' {"tensor_parallel_degree": 2}}}}',
            "2.0.1",
        ),
        "image": launcher(
            V1_LOOKING,
            extra=(
                "\n   "
                ' image_uri="658645717510.dkr.ecr.us-east-1.amazonaws.com/'
                'smdistributed-modelparallel:2.2.0-gpu-py310-cu121",'
            ),
        ),
        "key": launcher(
            '{"smdistributed": {"modelparallel": {"enabled": True, "parameters":'
            ' {"sm_activation_offloading": True}}}}',
            "1.13.1",
        ),
    }
    for name, text in cases.items():
        path = tmp_path / f"{name}.py"
        path.write_text(text, encoding="utf-8")
        [linked] = link([(str(path), text)])
        assert JobFacts.resolve([linked.job]).smp_v2 is not None, name
    for framework in ("2.0.0", "2.0", "1.13.1"):
        text = launcher(V1_LOOKING, framework)
        [linked] = link([(str(tmp_path / "v1.py"), text)])
        assert JobFacts.resolve([linked.job]).smp_v2 is None, framework
    disabled = launcher(
        '{"torch_distributed": {"enabled": False}, "smdistributed": {"modelparallel": {"enabled":'
        " True}}}",
        "1.13.1",
    )
    [linked] = link([(str(tmp_path / "off.py"), disabled)])
    assert JobFacts.resolve([linked.job]).smp_v2 is None


def test_a_stated_v2_job(tmp_path: Path) -> None:
    root = write(tmp_path, {"train.py": V1_SCRIPT})
    assert check(root, "--job", "tensor_parallel_degree=4") == [("train.py", "SMP301")]
    assert check(root, "--job", "tensor_parallel_degree=4", "--job", "smp_version=2.0") == []
    assert (
        check(root, "--job", "tensor_parallel_degree=4", "--job", "framework_version=2.1.0") == []
    )
    (root / "pyproject.toml").write_text(
        '[tool.smpfix]\nsmp-version = "2.1"\n[tool.smpfix.job]\ntensor_parallel_degree = 6\n'
    )
    assert (
        check(root) == []
    )  # the script, and the job table (tensor_parallel_degree 6 is v1's SMP803)


def test_each_library_gets_its_own_family(tmp_path: Path) -> None:
    """A v2 script under a known degree gets SMP v2 findings and no v1 finding; the same
    script as v1 gets v1 findings and no SMP0xx finding beyond the mix-ups."""
    v2_script = V2_SCRIPT.replace("FSDP(tsm.transform(build_model()))", "FSDP(build_model())")
    root = write(tmp_path, {"launch.py": launcher(V2_DISTRIBUTION), "train.py": v2_script})
    assert check(root) == [("train.py", "SMP021")]
    (root / "train.py").write_text(V2_SCRIPT, encoding="utf-8")
    assert check(root) == []


def test_rules_lists_the_v2_family_with_its_versions() -> None:
    result = run_cli("rules", "--format", "json")
    assert result.code == 0, result.stderr
    rows = {row["code"]: row for row in json.loads(result.stdout)}
    v2 = [code for code in rows if code.startswith("SMP0")]
    assert {"SMP001", "SMP002", "SMP003", "SMP004", "SMP010", "SMP020"} <= set(v2)
    # Advice about one release names it: SMP 2.2.0's activation offloading does not work, SMP
    # 2.0.0's activation checkpointing needs a transformer auto-wrap policy; the keys that came
    # later are unknown to the releases before them.
    single = {
        "SMP028": "2.2.0",
        "SMP031": "2.0.0",
        "SMP010": "2.x; EP key 2.0-2.2; CP key 2.0-2.4",
    }
    assert all(rows[code]["versions"] in ("2.x", "1.x, 2.x") for code in v2 if code not in single)
    assert all(rows[code]["versions"] == versions for code, versions in single.items())
    assert rows["SMP010"]["finding_versions"] == {"EP key": "2.0-2.2", "CP key": "2.0-2.4"}
    assert rows["SMP001"]["versions"] == "1.x, 2.x"


def test_show_job_shows_a_v2_scripts_settings(tmp_path: Path) -> None:
    root = write(tmp_path, {"launch.py": launcher(V2_DISTRIBUTION), "train.py": V2_SCRIPT})
    shown = run_cli("check", "--show-job", "--no-cache", "--exit-zero", "train.py", cwd=root)
    text = shown.stdout + shown.stderr
    assert "train.py: job facts" in text
    assert "hybrid_shard_degree = 8  (launcher launch.py" in text
    assert "the SMP v2 rules (SMP0xx) apply" in text


def test_a_stated_job_accepts_v2_settings(tmp_path: Path) -> None:
    root = write(
        tmp_path, {"train.py": V2_SCRIPT.replace("tsm.transform(build_model())", "build_model()")}
    )
    assert check(root, "--job", "expert_parallel_degree=2") == [("train.py", "SMP021")]
    assert check(root, "--job", "expert_parallel_degree=1") == []


def test_one_mix_up_is_one_finding(tmp_path: Path) -> None:
    """A v1 launch on a container without SMP v1 is SMP001's alone: not also SMP002 (the
    library the image holds) nor SMP003 (the v1 keys it carries)."""
    v1_on_v2_image = launcher(
        '{"smdistributed": {"modelparallel": {"enabled": True, "parameters":'
        ' {"tensor_parallel_degree": 4, "ddp": True}}}, "mpi": {"enabled": True,'
        ' "processes_per_host": 8}}',
        extra=(
            "\n   "
            ' image_uri="658645717510.dkr.ecr.us-east-1.amazonaws.com/smdistributed-modelparallel:'
            '2.2.0-gpu-py310-cu121",'
        ),
    )
    root = write(tmp_path, {"launch.py": v1_on_v2_image, "train.py": V1_SCRIPT})
    assert check(root, "--select", "SMP0") == [("launch.py", "SMP001")]


# A script whose activation checkpointing is applied by a helper module it imports (the official
# examples' train_lib.py and train_utils.py), with a size-based FSDP wrap.
SIZE_WRAPPED_SCRIPT = """\
import functools

import torch.sagemaker as tsm
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy

from train_utils import apply_checkpointing

tsm.init()
policy = functools.partial(size_based_auto_wrap_policy, min_num_params=10**8)
model = FSDP(tsm.transform(build_model()), auto_wrap_policy=policy)
apply_checkpointing(model)
"""
CHECKPOINTING_HELPER = """\
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    apply_activation_checkpointing,
)


def apply_checkpointing(model):
    apply_activation_checkpointing(model, check_fn=lambda module: is_block(module))
"""


def test_checkpointing_in_a_helper_with_a_size_based_wrap_is_an_error_on_smp_2_0_0(
    tmp_path: Path,
) -> None:
    """The PyTorch 2.0.1 image holds SMP 2.0.0 only, whose release notes say activation
    checkpointing works only with a transformer auto-wrap policy; a later image is fine."""
    files = {"train.py": SIZE_WRAPPED_SCRIPT, "train_utils.py": CHECKPOINTING_HELPER}
    root = write(tmp_path, {"launch.py": launcher(V2_DISTRIBUTION, framework="2.0.1"), **files})
    assert ("train.py", "SMP031") in check(root)
    result = run_cli(
        "check", "train.py", "--no-cache", "--exit-zero", "--select", "SMP031", cwd=root
    )
    assert "SMP031 error" in result.stdout and "train_utils.py" in result.stdout
    (root / "launch.py").write_text(launcher(V2_DISTRIBUTION, framework="2.2.0"), encoding="utf-8")
    assert ("train.py", "SMP031") not in check(root)
