"""The TensorFlow flavour: one set of facts, two flavours, and no cross-talk.

A rule declares the flavours whose scripts it checks; configurations are judged against
their flavour's schema. The fixtures check each rule on single files; here: every rule over
every fixture (no PyTorch rule on a TensorFlow script and the other way round), the
TensorFlow job facts and configuration schema, and projects spread over several files.
"""

from __future__ import annotations

import json
from pathlib import Path

import libcst as cst
import pytest
from conftest import FIXTURES, finding_text, fixture_job, run_cli

from smpfix.api import check_source
from smpfix.base.flavour import BOTH, Flavour
from smpfix.job.jobfacts import DeclaredJob, JobFacts, Tri
from smpfix.job.linking import link
from smpfix.program.facts import collect
from smpfix.rules.config_rule import ConfigRule
from smpfix.rules.registry import all_rules

RULES = {rule.code: rule for rule in all_rules()}
ALL_CODES = sorted(RULES)


def _fixtures_of(flavour: Flavour) -> list[Path]:
    found = []
    for path in sorted(FIXTURES.glob("SMP*/*.py")):
        if path.name.endswith(".fixed.py"):
            continue
        facts = collect(cst.parse_module(path.read_text(encoding="utf-8")))
        if facts.flavours == {flavour}:
            found.append(path)
    return found


TF_FIXTURES = _fixtures_of(Flavour.TENSORFLOW)
PT_FIXTURES = _fixtures_of(Flavour.PYTORCH)


def test_there_are_fixtures_of_both_flavours() -> None:
    assert len(TF_FIXTURES) >= 30 and len(PT_FIXTURES) >= 100


@pytest.mark.parametrize(
    ("flavour", "path"),
    [(Flavour.TENSORFLOW, path) for path in TF_FIXTURES]
    + [(Flavour.PYTORCH, path) for path in PT_FIXTURES],
    ids=lambda item: f"{item.parent.name}/{item.name}" if isinstance(item, Path) else item.value,
)
def test_every_rule_over_a_fixture_reports_only_rules_of_its_flavour(
    flavour: Flavour, path: Path
) -> None:
    text = path.read_text(encoding="utf-8")
    findings = check_source(text, str(path), select=ALL_CODES, job=fixture_job(text))
    script_rules = {f.code for f in findings if not issubclass(RULES[f.code], ConfigRule)}
    foreign = sorted(code for code in script_rules if flavour not in RULES[code].flavours)
    assert foreign == [], f"{path.name}: rules of the other flavour fired: {foreign}"


def test_the_tensorflow_rules_check_only_tensorflow_scripts() -> None:
    tensorflow_rules = {code for code in RULES if code.startswith("SMP7")}
    assert tensorflow_rules == {f"SMP70{n}" for n in range(1, 9)}
    assert all(RULES[code].flavours == {Flavour.TENSORFLOW} for code in tensorflow_rules)
    shared = {
        code
        for code, rule in RULES.items()
        if rule.flavours == BOTH and not issubclass(rule, ConfigRule)
    }
    assert {"SMP106", "SMP201", "SMP202", "SMP203", "SMP302", "SMP401", "SMP802"} <= shared
    assert not {"SMP101", "SMP403", "SMP404", "SMP405", "SMP501", "SMP601"} & shared


def test_rules_listing_names_the_flavours() -> None:
    table = json.loads(run_cli("rules", "--format", "json").stdout)
    flavours = {row["code"]: row["flavours"] for row in table}
    assert flavours["SMP701"] == ["tensorflow"]
    assert flavours["SMP101"] == ["pytorch"]
    assert flavours["SMP201"] == ["pytorch", "tensorflow"]


# -- facts --------------------------------------------------------------------------------------


def test_flavour_and_distributed_models_of_a_tensorflow_script() -> None:
    facts = collect(
        cst.parse_module(
            "import smdistributed.modelparallel.tensorflow.v2 as smp\n"
            "class Base(smp.DistributedModel):\n    pass\n"
            "class Net(Base):\n    pass\n"
            "model = Net()\n"
            "@smp.step(input_signature=None)\ndef step(x):\n    return model(x)\n"
        )
    )
    assert facts.is_tensorflow and facts.flavours == {Flavour.TENSORFLOW}
    assert facts.distributed_model_classes == {"Base", "Net"}
    assert facts.distributed_model_names() == {"model"}
    assert facts.step_functions == {"step"}
    v1 = collect(cst.parse_module("import smdistributed.modelparallel.tensorflow.v1 as smp\n"))
    assert v1.is_tensorflow and v1.tensorflow_v1_only
    torch = collect(
        cst.parse_module(
            "import smdistributed.modelparallel.torch as smp\nclass Net(smp.DistributedModel):\n   "
            " pass\nNet()\n"
        )
    )
    assert torch.flavours == {Flavour.PYTORCH} and torch.distributed_model_classes == frozenset()


# -- job facts ----------------------------------------------------------------------------------


def test_tensorflow_job_facts_take_tensorflow_defaults_and_have_no_pytorch_features() -> None:
    launcher = DeclaredJob(
        "launcher", {"framework": "tensorflow", "partitions": 2, "microbatches": 4}
    )
    job = JobFacts.resolve([launcher])
    assert job.flavour is Flavour.TENSORFLOW
    assert job.feature("PP").state is Tri.ON and job.feature("HVD").state is Tri.OFF
    assert job.feature("TP").state is Tri.OFF and job.feature("SDP").state is Tri.OFF
    assert (
        job.value("xla") is False and job.value("optimize") is None
    )  # documented and schema defaults disagree
    assert set(job.describe()["features"]) == {"PP", "MB", "HVD", "XLA"}
    # A TensorFlow script runs the TensorFlow library whatever the job table says.
    assert (
        JobFacts.resolve(
            [DeclaredJob("table", {"tensor_parallel_degree": 4})], (), Flavour.TENSORFLOW
        )
        .feature("TP")
        .state
        is Tri.OFF
    )


def test_a_tensorflow_launcher_declares_the_flavour_and_keeps_tensorflow_keys(
    tmp_path: Path,
) -> None:
    launcher = tmp_path / "launch.py"
    launcher.write_text(
        'from sagemaker.tensorflow import TensorFlow\nTensorFlow(entry_point="train.py",'
        ' framework_version="2.4.1", instance_count=1,\n           distribution={"smdistributed":'
        ' {"modelparallel": {"enabled": True, "parameters": {\n               "partitions": 2,'
        ' "horovod": True, "xla": False, "tensor_parallel_degree": 2}}},\n               "mpi":'
        ' {"enabled": True, "processes_per_host": 4}})\n',
        encoding="utf-8",
    )
    (linked,) = link([(str(launcher), launcher.read_text(encoding="utf-8"))])
    settings = linked.job.settings
    assert settings["framework"] == "tensorflow" and settings["framework_version"] == "2.4.1"
    assert settings["horovod"] is True and settings["xla"] is False
    assert "tensor_parallel_degree" not in settings  # not a TensorFlow key: SMP812 reports it
    job = JobFacts.resolve([linked.job])
    assert job.smp_version is not None and job.smp_version.version == (1, 2)
    assert job.feature("HVD").state is Tri.ON


# -- configurations against the TensorFlow schema -----------------------------------------------

TF_INIT = """\
import smdistributed.modelparallel.tensorflow as smp

smp.init({"partitions": 2, "microbatches": 2, "xla": False, "horovod": True, "contiguous": False,
          "pipeline_parallel_degree": 2, "memory_weight": 0.5, "xla_jit": 1})
"""


def test_a_tensorflow_smp_init_dict_is_checked_against_tensorflow_keys() -> None:
    findings = check_source(TF_INIT, "train.py", select=["SMP812", "SMP813", "SMP820"])
    by_key = {f.message.split("`")[1]: f for f in findings}
    assert set(by_key) == {"pipeline_parallel_degree", "memory_weight", "xla_jit"}
    assert "calls it `partitions`" in finding_text(by_key["pipeline_parallel_degree"])
    assert by_key["memory_weight"].severity.value == "warning"
    assert "Did you mean `xla`?" in finding_text(by_key["xla_jit"])


def test_tensorflow_values_are_typed_and_pytorch_keys_left_to_smp812() -> None:
    text = (
        'import smdistributed.modelparallel.tensorflow as smp\nsmp.init({"xla": 1, "partitions":'
        ' "2", "fp16": 1})\n'
    )
    findings = check_source(text, "train.py", select=["SMP813"])
    assert sorted(f.message.split("`")[1] for f in findings) == ["partitions", "xla"]


def test_a_pytorch_smp_init_dict_rejects_the_tensorflow_key() -> None:
    text = (
        'import smdistributed.modelparallel.torch as smp\nsmp.init({"partitions": 2, "xla":'
        " False})\n"
    )
    (finding,) = check_source(text, "train.py", select=["SMP812"])
    assert "TensorFlow flavour" in finding_text(finding)


def test_a_tensorflow_launcher_without_partitions_and_with_pytorch_keys(tmp_path: Path) -> None:
    (tmp_path / "launch.py").write_text(
        'from sagemaker.tensorflow import TensorFlow\nTensorFlow(entry_point="train.py",'
        ' framework_version="2.3.1", instance_type="ml.p3.16xlarge", instance_count=1,\n          '
        ' distribution={"smdistributed": {"modelparallel": {"enabled": True, "parameters": {\n     '
        '          "pipeline_parallel_degree": 2, "microbatches": 2, "ddp": True}}},\n             '
        '  "mpi": {"enabled": True, "processes_per_host": 8}})\n',
        encoding="utf-8",
    )
    (tmp_path / "train.py").write_text(
        "import smdistributed.modelparallel.tensorflow as smp\n\nsmp.init()\n", encoding="utf-8"
    )
    result = run_cli(
        "check", "--no-cache", "--format", "json", "--select", "SMP8", ".", cwd=tmp_path
    )
    codes = sorted((item["code"], item["severity"]) for item in json.loads(result.stdout))
    # The PyTorch name of the degree (with a rename as the fix), "ddp" (Horovod's job in
    # TensorFlow);
    # no "partitions is required" on top of the rename, and no PyTorch-only configuration rule;
    # SMP827's hint, as Debugger is left on.
    assert codes == [("SMP812", "error"), ("SMP812", "error"), ("SMP827", "hint")], result.stdout
    fixed = run_cli(
        "check", "--no-cache", "--apply", "--unsafe-fixes", "--select", "SMP812", ".", cwd=tmp_path
    )
    assert fixed.code == 1
    assert '"partitions": 2' in (tmp_path / "launch.py").read_text(encoding="utf-8")


def test_a_tensorflow_job_table(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.smpfix.job]\nframework = "tensorflow"\npartitions = 2\nxla ='
        " true\ntensor_parallel_degree = 2\n",
        encoding="utf-8",
    )
    (tmp_path / "train.py").write_text(
        "import smdistributed.modelparallel.tensorflow as smp\nsmp.init()\n", encoding="utf-8"
    )
    result = run_cli(
        "check", "--no-cache", "--format", "json", "--select", "SMP812,SMP813", ".", cwd=tmp_path
    )
    findings = json.loads(result.stdout)
    assert [(f["code"], f["location"]["row"]) for f in findings] == [("SMP812", 5)], result.stdout
    (tmp_path / "pyproject.toml").write_text(
        '[tool.smpfix.job]\nframework = "jax"\n', encoding="utf-8"
    )
    assert run_cli("check", ".", cwd=tmp_path).code == 2


# -- projects over several files ------------------------------------------------------------------

MODEL = """\
import smdistributed.modelparallel.tensorflow as smp
import tensorflow as tf


class Net(smp.DistributedModel):
    def __init__(self):
        super().__init__()
        self.body = tf.keras.layers.Dense(256)
        self.head = tf.keras.layers.Dense(10)

    def call(self, x):
        hidden = self.body(x)
        return self.head(hidden), hidden


class Plain(tf.keras.Model):
    def call(self, x):
        return x
"""

TRAIN = """\
import smdistributed.modelparallel.tensorflow as smp

from model import Net, Plain

smp.init()
model = Net()
teacher = Plain()


@smp.step
def get_grads(images, labels):
    logits, _ = model(images, training=True)
    loss = loss_object(labels, logits) + teacher(images)
    return optimizer.get_gradients(loss, model.trainable_variables), loss


sample = model(images)
"""


def test_a_model_class_from_another_file(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(MODEL, encoding="utf-8")
    (tmp_path / "train.py").write_text(TRAIN, encoding="utf-8")
    result = run_cli(
        "check", "--no-cache", "--format", "json", "--select", "SMP401,SMP704", ".", cwd=tmp_path
    )
    found = sorted(
        (item["filename"].removeprefix("./"), item["location"]["row"], item["code"])
        for item in json.loads(result.stdout)
    )
    assert found == [
        ("train.py", 6, "SMP401"),
        ("train.py", 7, "SMP704"),
        ("train.py", 17, "SMP704"),
    ], result.stdout
