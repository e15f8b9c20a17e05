"""SMP408 follows the model into the project module that defines it (``model.py``).

PyTorch's activation checkpointing usually sits in the model's ``forward``, in a module that
never imports the library. Imported by an SMP script, that module runs with the library and is
checked on behalf of the script; imported only by a plain PyTorch script, it is not. A finding
there is named the way the user named the script: relative to the folder checked from.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli

SMP_SCRIPT = """\
import smdistributed.modelparallel.torch as smp
from model import Net

smp.init()
model = smp.DistributedModel(Net())
"""

PLAIN_SCRIPT = """\
import torch
from model import Net

model = Net().cuda()
"""

MODEL = """\
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def forward(self, x):
        return checkpoint(self.block, x)
"""


def _check(root: Path, script: str) -> list[dict]:
    (root / "src").mkdir()
    (root / "src" / "train.py").write_text(script, encoding="utf-8")
    (root / "src" / "model.py").write_text(MODEL, encoding="utf-8")
    completed = run_cli(
        "check",
        ".",
        "--select",
        "SMP408",
        "--format",
        "json",
        "--no-cache",
        "--exit-zero",
        cwd=root,
    )
    assert completed.code == 0, completed.stderr
    return json.loads(completed.stdout)


def test_torch_checkpointing_in_the_model_module_of_an_smp_script(workdir: Path) -> None:
    findings = _check(workdir, SMP_SCRIPT)
    assert [(f["filename"], f["location"]["row"], f["severity"]) for f in findings] == [
        ("src/model.py", 7, "warning")
    ]
    assert "found while checking" in findings[0]["evidence"][0]


def test_the_model_module_of_a_plain_pytorch_script_is_not_checked(workdir: Path) -> None:
    assert _check(workdir, PLAIN_SCRIPT) == []
