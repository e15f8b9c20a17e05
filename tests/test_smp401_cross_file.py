"""SMP401 follows the wrapped model's class into another file of the checked paths.

The fixture harness checks single files; these tests build a small project (a training
script and the ``model.py`` it imports) and check it as a user would, through the command
line and through the analysis API with a project context.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import finding_text, run_cli

from smpfix.engine.analysis import AnalysisOptions, analyze
from smpfix.job.project import Project

TRAIN = """\
import smdistributed.modelparallel.torch as smp
import torch.nn.functional as F
from model import GPT


@smp.step
def train_step(model, input_ids, labels):
    logits, hidden, attn = model(input_ids)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))
    model.backward(loss)
    return loss


def main():
    smp.init()
    with smp.model_creation(tensor_parallelism=True):
        model = GPT()
    model = smp.DistributedModel(model){suffix}
    for input_ids, labels in loader:
        train_step(model, input_ids, labels)
"""

MODEL = """\
import torch.nn as nn


class GPT(nn.Module):
    def forward(self, input_ids):
        hidden_states = self.transformer(input_ids)
        attn_maps = self.maps(hidden_states)
        return self.lm_head(hidden_states), hidden_states, attn_maps
"""

WRAP_LINE = 18


def _project(root: Path, model: str = MODEL, suffix: str = "") -> Path:
    (root / "train.py").write_text(TRAIN.replace("{suffix}", suffix), encoding="utf-8")
    (root / "model.py").write_text(model, encoding="utf-8")
    return root


def _analyze(root: Path, script: str = "train.py", roots: tuple[str, ...] = ()) -> list:
    path = root / script
    options = AnalysisOptions(
        select=frozenset({"SMP401"}), project=Project.of(roots or (str(root),))
    )
    return list(analyze(path.read_text(encoding="utf-8"), str(path), options).findings)


def test_class_in_another_file_is_reported_on_the_wrap(workdir: Path) -> None:
    root = _project(workdir)
    findings = _analyze(root)
    assert [(f.code, f.start.line, f.severity.value) for f in findings] == [
        ("SMP401", WRAP_LINE, "warning")
    ]
    message = finding_text(findings[0])
    assert "`GPT`" in message and "model.py, line 8" in message
    assert "`hidden_states` (element 2)" in message and "`attn_maps` (element 3)" in message
    assert "`train_step`" in message


def test_cli_reports_the_project_and_exits_one(workdir: Path) -> None:
    root = _project(workdir)
    result = run_cli("check", "--select", "SMP401", "--format", "json", ".", cwd=root)
    assert result.code == 1, result.stderr
    findings = json.loads(result.stdout)
    assert [
        (f["code"], Path(f["filename"]).name, f["location"]["row"], f["severity"]) for f in findings
    ] == [("SMP401", "train.py", WRAP_LINE, "warning")]


def test_cli_full_format_names_the_outputs(workdir: Path) -> None:
    root = _project(workdir)
    result = run_cli("check", "--select", "SMP401", "train.py", "model.py", cwd=root)
    assert result.code == 1, result.stderr
    assert f"train.py:{WRAP_LINE}:" in result.stdout
    assert "hidden_states" in result.stdout and "model.py, line 8" in result.stdout


def test_model_file_outside_the_project_roots_is_not_read(workdir: Path) -> None:
    root = _project(workdir)
    assert _analyze(root, roots=(str(root / "train.py"),)) == []
    # Without the launcher search, the project is only what was named.
    result = run_cli("check", "--select", "SMP401", "--no-launcher-search", "train.py", cwd=root)
    assert result.code == 0, result.stdout + result.stderr


def test_script_checked_alone_reads_its_project_like_a_whole_run(workdir: Path) -> None:
    root = _project(workdir)
    alone = run_cli("check", "--select", "SMP401", "--format", "json", "train.py", cwd=root)
    whole = run_cli("check", "--select", "SMP401", "--format", "json", ".", cwd=root)
    assert alone.code == whole.code == 1, alone.stderr + whole.stderr
    assert json.loads(alone.stdout) == json.loads(whole.stdout)


def test_single_output_model_is_quiet(workdir: Path) -> None:
    model = MODEL.replace(", hidden_states, attn_maps\n", "\n")
    root = _project(workdir, model=model)
    assert _analyze(root) == []


def test_forward_inherited_from_a_base_in_a_third_file(workdir: Path) -> None:
    root = _project(
        workdir, model="from layers import Backbone\n\n\nclass GPT(Backbone):\n    pass\n"
    )
    (root / "layers.py").write_text(
        "class Backbone:\n    def forward(self, x):\n        h = self.body(x)\n        return"
        " self.head(h), h, self.maps(h)\n",
        encoding="utf-8",
    )
    findings = _analyze(root)
    assert len(findings) == 1
    assert "`Backbone.forward` (layers.py, line 4)" in finding_text(findings[0])
    assert "`h` (element 2)" in finding_text(findings[0])


def test_model_in_a_package(workdir: Path) -> None:
    root = _project(workdir)
    (root / "model.py").unlink()
    (root / "models").mkdir()
    (root / "models" / "__init__.py").write_text("", encoding="utf-8")
    (root / "models" / "gpt.py").write_text(MODEL, encoding="utf-8")
    train = root / "train.py"
    train.write_text(
        train.read_text(encoding="utf-8").replace(
            "from model import GPT", "from models.gpt import GPT"
        ),
        encoding="utf-8",
    )
    findings = _analyze(root)
    assert len(findings) == 1
    assert f"{Path('models') / 'gpt.py'}, line 8" in finding_text(findings[0])


def test_model_file_that_imports_the_library_is_followed_too(workdir: Path) -> None:
    model = "import smdistributed.modelparallel.torch as smp\n" + MODEL
    root = _project(workdir, model=model)
    findings = _analyze(root)
    assert len(findings) == 1 and "model.py, line 9" in finding_text(findings[0])


def test_suppression_on_the_wrap_line(workdir: Path) -> None:
    root = _project(workdir, suffix="  # smpfix: ignore[SMP401]")
    assert _analyze(root) == []
