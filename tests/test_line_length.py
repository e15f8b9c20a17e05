"""The line length fixes keep within: ``line-length`` in ``[tool.smpfix]``, else Ruff's
``line-length`` from the same ``pyproject.toml``, else 100 (issue 24)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli

from smpfix.engine.config import ConfigError, load

SCRIPT = """import smdistributed.modelparallel.torch as smp
import torch
from torch.optim.lr_scheduler import StepLR

smp.init()
model = smp.DistributedModel(GPT())
optimizer = smp.DistributedOptimizer(torch.optim.AdamW(model.parameters()))
scheduler = StepLR(optimizer, step_size=1)
"""
# SMP113's fix makes the scheduler's line 90 characters long.
ONE_LINE = (
    "scheduler = StepLR(optimizer.optimizer if smp.state.cfg.fp16 else optimizer, step_size=1)\n"
)
WRAPPED = (
    "scheduler = StepLR(\n"
    "    optimizer.optimizer if smp.state.cfg.fp16 else optimizer,\n"
    "    step_size=1,\n"
    ")\n"
)


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "length"),
    [
        pytest.param("[tool.smpfix]\n", 100, id="default"),
        pytest.param("[tool.smpfix]\nline-length = 88\n", 88, id="own"),
        pytest.param("[tool.ruff]\nline-length = 79\n[tool.smpfix]\n", 79, id="ruff"),
        pytest.param(
            "[tool.ruff]\nline-length = 79\n[tool.smpfix]\nline-length = 120\n", 120, id="own-wins"
        ),
        pytest.param('[tool.ruff]\nline-length = "79"\n[tool.smpfix]\n', 100, id="ruff-not-int"),
        pytest.param("[tool.ruff]\nline-length = 79\n", 79, id="ruff-without-smpfix-table"),
    ],
)
def test_the_line_length_comes_from_smpfix_then_ruff_then_100(
    tmp_path: Path, text: str, length: int
) -> None:
    assert load(_config(tmp_path, text)).line_length == length


@pytest.mark.parametrize("value", ['"88"', "0", "true", "8.5"])
def test_a_line_length_that_is_not_a_positive_whole_number_is_an_error(
    tmp_path: Path, value: str
) -> None:
    with pytest.raises(ConfigError, match="line-length must be a whole number"):
        load(_config(tmp_path, f"[tool.smpfix]\nline-length = {value}\n"))


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        pytest.param("[tool.smpfix]\n", ONE_LINE, id="100-fits"),
        pytest.param("[tool.smpfix]\nline-length = 70\n", WRAPPED, id="smpfix-70-wraps"),
        pytest.param("[tool.ruff]\nline-length = 70\n[tool.smpfix]\n", WRAPPED, id="ruff-70-wraps"),
    ],
)
def test_a_fix_wraps_at_the_configured_line_length(
    tmp_path: Path, config: str, expected: str
) -> None:
    _config(tmp_path, config)
    script = tmp_path / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    done = run_cli("check", "--apply", "--job", "fp16=true", "--no-cache", "train.py", cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert script.read_text(encoding="utf-8").endswith(expected)


def test_the_api_wraps_fixes_at_the_line_length_it_is_given() -> None:
    from smpfix.api import fix_source

    text = (
        "import glob\n\n"
        "import smdistributed.modelparallel.tensorflow as smp\n"
        "import tensorflow as tf\n\n"
        "smp.init()\n"
        'ds = tf.data.TFRecordDataset(glob.glob("/opt/ml/input/data/train/*"))\n'
    )
    wrapped = fix_source(text, "train.py", select=["SMP707"], line_length=60).text
    assert max(len(line) for line in wrapped.splitlines()) <= 60
    assert "sorted(glob.glob(" in wrapped
    unwrapped = fix_source(text, "train.py", select=["SMP707"]).text
    assert 'ds = tf.data.TFRecordDataset(sorted(glob.glob("/opt/ml/input/data/train/*")))' in (
        unwrapped
    )
