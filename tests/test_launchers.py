"""Launchers configure the scripts they start: linking, precedence, notebooks, resolution."""

from __future__ import annotations

import json
from pathlib import Path

import libcst as cst
import pytest
from conftest import finding_text, run_cli

from smpfix.base.literals import UNKNOWN
from smpfix.job.launcher import find_launchers
from smpfix.program.facts import collect

SCRIPT = """import smdistributed.modelparallel.torch as smp

smp.init({"tensor_parallel_degree": 1})
model = smp.DistributedModel(build())
if smp.dp_rank() == 0:
    smp.save(model.local_state_dict(), "m.pt", partial=True)
"""


def launcher(tp: int, entry: str = "train.py", source_dir: str = "code") -> str:
    return f"""import sagemaker
from sagemaker.pytorch import PyTorch

smp_options = {{"enabled": True, "parameters": {{"microbatches": 4, "ddp": True}}}}
smp_options["parameters"]["tensor_parallel_degree"] = {tp}
mpi_options = {{"enabled": True, "processes_per_host": 8}}
estimator = PyTorch(
    entry_point="{entry}",
    source_dir="{source_dir}",
    role="arn:aws:iam::123456789012:role/sm",
    train_instance_type="ml.p4d.24xlarge",
    train_instance_count=2,
    framework_version="1.12.1",
    hyperparameters={{"batch-size": 8}},
    distribution={{"smdistributed": {{"modelparallel": smp_options}}, "mpi": mpi_options}},
)
estimator.fit()
"""


def tree(tmp_path: Path, tp: int) -> Path:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text(SCRIPT)
    (tmp_path / "launch.py").write_text(launcher(tp))
    return tmp_path


def findings(*args: str) -> list[dict]:
    return json.loads(run_cli("check", "--format", "json", *args).stdout)


def test_launcher_turns_tensor_parallelism_on_for_its_script(tmp_path: Path) -> None:
    tree(tmp_path, tp=4)
    found = [f for f in findings(str(tmp_path)) if f["code"] == "SMP301"]
    assert [(Path(f["filename"]).name, f["severity"]) for f in found] == [("train.py", "error")]
    assert (
        found[0]["job_facts"][0]["source"].startswith("launcher ")
        and "launch.py:7" in found[0]["job_facts"][0]["source"]
    )
    assert "tensor parallelism: on (launcher " in finding_text(found[0])


def test_launcher_with_tensor_parallelism_off_makes_it_disappear(tmp_path: Path) -> None:
    tree(tmp_path, tp=1)
    assert [f for f in findings(str(tmp_path)) if f["code"] == "SMP301"] == []


def test_launcher_overrides_the_init_dict_and_show_job_names_it(tmp_path: Path) -> None:
    tree(tmp_path, tp=4)
    out = run_cli("check", "--show-job", "--format", "concise", str(tmp_path)).stdout
    assert "TP           on       launcher " in out
    assert 'instance_type = "ml.p4d.24xlarge"' in out


def test_command_line_still_beats_the_launcher(tmp_path: Path) -> None:
    tree(tmp_path, tp=4)
    assert [
        f
        for f in findings("--job", "tensor_parallel_degree=1", str(tmp_path))
        if f["code"] == "SMP301"
    ] == []


def test_script_alone_finds_the_launcher_of_its_project(tmp_path: Path) -> None:
    tree(tmp_path, tp=4)
    # No project marker, and not under the current folder: the script's folder is its project.
    assert [f for f in findings(str(tmp_path / "code" / "train.py")) if f["code"] == "SMP301"] == []
    (tmp_path / "pyproject.toml").write_text("")
    found = [f for f in findings(str(tmp_path / "code" / "train.py")) if f["code"] == "SMP301"]
    assert [(f["severity"], f["job_facts"][0]["source"]) for f in found] == [
        ("error", "launcher launch.py:7")
    ]


def test_notebook_launcher_with_writefile_script(tmp_path: Path) -> None:
    cells = [
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": ["%%writefile train.py\n", *SCRIPT.splitlines(keepends=True)],
        },
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": launcher(8, source_dir=".").splitlines(keepends=True),
        },
    ]
    (tmp_path / "launch.ipynb").write_text(
        json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1)
    )
    found = [f for f in findings(str(tmp_path)) if f["code"] == "SMP301"]
    assert [(Path(f["filename"]).name, f["cell"], f["severity"]) for f in found] == [
        ("launch.ipynb", 1, "error")
    ]


def resolve(text: str) -> dict:
    module = cst.parse_module(text)
    launchers = find_launchers(module, collect(module).imports, "launch.py")
    assert len(launchers) == 1
    return launchers[0].distribution.plain()


def test_distribution_resolution_forms() -> None:
    text = """from sagemaker.huggingface import HuggingFace
base = {"microbatches": 4}
params = {**base, "partitions": 2}
mp = dict(enabled=True, parameters=params)
dist = {"smdistributed": {"modelparallel": mp}}
dist["mpi"] = {"enabled": True}
dist["mpi"].update({"processes_per_host": 8})
dist["mpi"]["custom_mpi_options"] = "-verbose"
dist["mpi"]["custom_mpi_options"] += " -x NCCL_DEBUG=WARN"
HuggingFace(entry_point="train.py", distribution=dist)
"""
    assert resolve(text) == {
        "smdistributed": {
            "modelparallel": {"enabled": True, "parameters": {"microbatches": 4, "partitions": 2}}
        },
        "mpi": {
            "enabled": True,
            "processes_per_host": 8,
            "custom_mpi_options": "-verbose -x NCCL_DEBUG=WARN",
        },
    }


def test_strings_written_on_several_lines_are_joined() -> None:
    text = """from sagemaker.pytorch import PyTorch
dist = {"mpi": {"custom_mpi_options": "-verbose "
                                      "-x NCCL_DEBUG=WARN " f"-x A={x}"},
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": {"ddp_dist_backend": "nc"
                                                                            "cl"}}}}
PyTorch(entry_point="train.py", distribution=dist)
"""
    resolved = resolve(text)
    assert resolved["mpi"]["custom_mpi_options"] is UNKNOWN
    assert resolved["smdistributed"]["modelparallel"]["parameters"] == {"ddp_dist_backend": "nccl"}


def test_unresolvable_parts_are_unknown_not_guessed() -> None:
    text = """import sagemaker
dist = {"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"microbatches": args.mb, "partitions": load()}}}}
sagemaker.estimator.Estimator(image_uri="x", distribution=dist)
"""  # noqa: E501
    params = resolve(text)["smdistributed"]["modelparallel"]["parameters"]
    assert params["microbatches"] is UNKNOWN and params["partitions"] is UNKNOWN


def test_parameters_from_a_json_file(tmp_path: Path) -> None:
    (tmp_path / "smp.json").write_text('{"tensor_parallel_degree": 4, "ddp": true}')
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text(SCRIPT)
    (tmp_path / "launch.py").write_text("""from sagemaker.pytorch import PyTorch
PyTorch(entry_point="train.py", source_dir="code", distribution={"smdistributed": {"modelparallel": {"enabled": True, "parameters": "smp.json"}}, "mpi": {"enabled": True, "processes_per_host": 8}})
""")  # noqa: E501
    found = [f for f in findings(str(tmp_path)) if f["code"] == "SMP301"]
    assert [f["severity"] for f in found] == ["error"]


def test_notebook_style_hyperparameter_presets_resolve() -> None:
    """Official launcher notebooks pick a preset with ``if``/``elif``, copy it into the
    hyperparameters with a loop, and derive the parameters by subscripts and comparisons."""
    text = """from sagemaker.pytorch import PyTorch
hp = {"fp16": 1, "manual_partition": 0}
preset = "small"
use_fsx = False
if preset == "large":
    extra = {"tensor_parallel_degree": 8, "prescaled_batch": 1}
elif preset == "small":
    extra = {"tensor_parallel_degree": 4, "prescaled_batch": 0}
else:
    raise RuntimeError("unknown preset")
for k, v in extra.items():
    hp[k] = v
if use_fsx:
    hp["fp16"] = 0
kind = "ml.p4d.24xlarge"
if kind in ["ml.p3.16xlarge", "ml.p4d.24xlarge"]:
    per_host = 8
else:
    per_host = 4
PyTorch(entry_point="train.py", distribution={
    "mpi": {"enabled": True, "processes_per_host": per_host},
    "smdistributed": {"modelparallel": {"enabled": True, "parameters": {
        "tensor_parallel_degree": hp["tensor_parallel_degree"],
        "prescaled_batch": hp["prescaled_batch"] > 0,
        "fp16": hp["fp16"] > 0,
        "auto_partition": False if hp["manual_partition"] else True,
        "ddp": not use_fsx and True,
    }}},
})
"""
    dist = resolve(text)
    assert dist["mpi"]["processes_per_host"] == 8
    assert dist["smdistributed"]["modelparallel"]["parameters"] == {
        "tensor_parallel_degree": 4,
        "prescaled_batch": False,
        "fp16": True,
        "auto_partition": True,
        "ddp": True,
    }


def test_unknown_branch_tests_and_loops_stay_unknown() -> None:
    text = """from sagemaker.pytorch import PyTorch
hp = {"tensor_parallel_degree": 2}
for k, v in load_overrides().items():
    hp[k] = v
PyTorch(entry_point="train.py", distribution={"smdistributed": {"modelparallel": {"enabled": True, "parameters": {
    "tensor_parallel_degree": hp["tensor_parallel_degree"], "fp16": args.fp16 > 0}}}})
"""  # noqa: E501
    params = resolve(text)["smdistributed"]["modelparallel"]["parameters"]
    assert params["tensor_parallel_degree"] is UNKNOWN and params["fp16"] is UNKNOWN


def test_entry_point_given_by_position(tmp_path: Path) -> None:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text(SCRIPT)
    (tmp_path / "launch.py").write_text("""from sagemaker.pytorch import PyTorch
PyTorch("train.py", source_dir="code", distribution={"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"tensor_parallel_degree": 4, "ddp": True}}}, "mpi": {"enabled": True, "processes_per_host": 8}})
""")  # noqa: E501
    found = [f for f in findings(str(tmp_path)) if f["code"] == "SMP301"]
    assert [f["severity"] for f in found] == ["error"]


def test_time_magic_cell_of_a_notebook_launcher_is_python(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    cells = [
        ["%%time\n", "import os\n", "from sagemaker.pytorch import PyTorch\n"],
        [
            'PyTorch(entry_point="train.py", source_dir=os.getcwd(), distribution={"smdistributed":'
            ' {"modelparallel": {"enabled": True, "parameters": {"tensor_parallel_degree": 4,'
            ' "ddp": True}}}, "mpi": {"enabled": True}})\n'
        ],
    ]
    notebook = {
        "cells": [
            {
                "cell_type": "code",
                "metadata": {},
                "outputs": [],
                "execution_count": None,
                "source": cell,
            }
            for cell in cells
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 4,
    }
    (tmp_path / "launch.ipynb").write_text(json.dumps(notebook))
    found = [f for f in findings(str(tmp_path)) if f["code"] == "SMP301"]
    assert [f["severity"] for f in found] == ["error"]


# -- paths the way real launchers build them ------------------------------------------------------


def scripts(text: str, path: str = "/repo/jobs/launch.py", root: str = "/repo") -> list[list[str]]:
    """Each estimator's candidate scripts, for a launcher at ``path`` in the project ``root``."""
    module = cst.parse_module(text)
    return [
        launcher.script_candidates(root)
        for launcher in find_launchers(module, collect(module).imports, path)
    ]


PATH_FORMS = {
    "relative source_dir: the launcher's folder, then the project root": (
        'PyTorch(entry_point="train.py", source_dir="code")',
        ["/repo/jobs/code/train.py", "/repo/code/train.py"],
    ),
    "os.getcwd()": (
        'PyTorch(entry_point="train.py", source_dir=os.path.join(os.getcwd(), "code"))',
        ["/repo/jobs/code/train.py", "/repo/code/train.py"],
    ),
    "os.path.dirname(__file__)": (
        (
            'PyTorch(entry_point="train.py", source_dir=os.path.join(os.path.dirname(__file__),'
            ' "..", "src"))'
        ),
        ["/repo/src/train.py"],
    ),
    "os.path.abspath(__file__) and a constant": (
        (
            'HERE = os.path.dirname(os.path.abspath(__file__))\nPyTorch(entry_point="train.py",'
            " source_dir=HERE)"
        ),
        ["/repo/jobs/train.py"],
    ),
    "pathlib": (
        (
            'ROOT = Path(__file__).resolve().parents[1]\nPyTorch(entry_point="train.py",'
            ' source_dir=str(ROOT / "src" / "gpt"))'
        ),
        ["/repo/src/gpt/train.py"],
    ),
    "Path.cwd() and .parent": (
        'PyTorch(entry_point="train.py", source_dir=(Path.cwd() / "x").parent / "code")',
        ["/repo/jobs/code/train.py", "/repo/code/train.py"],
    ),
    "f-string over a constant": (
        'BASE = "src"\nPyTorch(entry_point=f"{BASE}/train.py", source_dir=None)',
        ["/repo/jobs/src/train.py", "/repo/src/train.py"],
    ),
    "source_dir=None with a folder in entry_point": (
        'PyTorch(entry_point="code/train.py", source_dir=None)',
        ["/repo/jobs/code/train.py", "/repo/code/train.py"],
    ),
    "an S3 source_dir leaves the entry point beside the launcher": (
        'PyTorch(entry_point="train.py", source_dir="s3://bucket/code.tar.gz")',
        ["/repo/jobs/train.py", "/repo/train.py"],
    ),
    "an environment variable is unknown": (
        'PyTorch(entry_point=os.path.join(os.environ["CODE"], "train.py"))',
        [],
    ),
}


@pytest.mark.parametrize("form", sorted(PATH_FORMS))
def test_script_paths_built_the_way_launchers_build_them(form: str) -> None:
    code, expected = PATH_FORMS[form]
    text = f"import os\nfrom pathlib import Path\nfrom sagemaker.pytorch import PyTorch\n{code}\n"
    assert scripts(text) == [expected]


def test_a_notebook_has_no_file() -> None:
    text = (
        'import os\nfrom sagemaker.pytorch import PyTorch\nPyTorch(entry_point="t.py",'
        " source_dir=os.path.dirname(__file__))\n"
    )
    assert scripts(text, path="/repo/nb/launch.ipynb") == [[]]


def test_os_path_must_be_the_standard_library() -> None:
    text = (
        "from mylib import path as os_path\nfrom sagemaker.pytorch import"
        ' PyTorch\nPyTorch(entry_point="t.py", source_dir=os_path.join("a", "b"))\n'
    )
    assert scripts(text) == [[]]  # an unknown source_dir: the script could be anywhere


def test_estimators_built_in_functions_see_the_module_and_their_parametrized_values() -> None:
    """pytest integration tests build the estimator in a test function, from module constants
    (even ones defined below the function) and a ``**kwargs`` dict; a parameter is known only
    where ``@pytest.mark.parametrize`` gives it, once per value (fixtures stay unknown)."""
    text = """import os
import pytest
from sagemaker.pytorch import PyTorch

RESOURCES = os.path.join(os.path.dirname(__file__), "resources")
instance_type = "ml.p3.2xlarge"


@pytest.mark.parametrize("instance_type", ["ml.p3.16xlarge"])
def test_smp(ecr_image, instance_type, **extra):
    kwargs = {"entry_point": "mnist.py", "source_dir": RESOURCES, "train_instance_type": instance_type}
    PyTorch(image_uri=ecr_image, distribution=DISTRIBUTION, **kwargs).fit()


class TestMore:
    def test_other(self):
        PyTorch(entry_point="other.py", source_dir=RESOURCES, instance_type=instance_type, distribution=DISTRIBUTION)


DISTRIBUTION = {"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"partitions": 2}}}}
"""  # noqa: E501
    module = cst.parse_module(text)
    found = find_launchers(module, collect(module).imports, "/repo/test/test_smp.py")
    assert [launcher.script_candidates("/repo") for launcher in found] == [
        ["/repo/test/resources/mnist.py"],
        ["/repo/test/resources/other.py"],
    ]
    assert found[0].literal("instance_type") == "ml.p3.16xlarge"
    assert found[0].variant == "ml.p3.16xlarge"
    assert found[0].literal("image_uri") is UNKNOWN
    assert found[1].literal("instance_type") == "ml.p3.2xlarge"
    assert all(launcher.parameters.plain() == {"partitions": 2} for launcher in found)


@pytest.mark.parametrize(
    ("call", "entry"),
    [
        ('HuggingFace("py39", "run_clm.py", source_dir="code")', "run_clm.py"),
        (
            'TensorFlow(entry_point="tf_train.py", source_dir="code", py_version="py39")',
            "tf_train.py",
        ),
    ],
)
def test_hugging_face_and_tensorflow_estimators(call: str, entry: str) -> None:
    text = (
        "from sagemaker.huggingface import HuggingFace\nfrom sagemaker.tensorflow import"
        f" TensorFlow\n{call}\n"
    )
    assert scripts(text) == [[f"/repo/jobs/code/{entry}", f"/repo/code/{entry}"]]


def test_the_first_candidate_that_exists_is_the_script(tmp_path: Path) -> None:
    _ = tree(tmp_path, tp=4)
    (tmp_path / "jobs").mkdir()
    (tmp_path / "launch.py").rename(tmp_path / "jobs" / "launch.py")
    (tmp_path / "pyproject.toml").write_text("")
    found = [f for f in findings(str(tmp_path)) if f["code"] == "SMP301"]
    assert [(Path(f["filename"]).parent.name, f["severity"]) for f in found] == [("code", "error")]


def test_each_parametrized_row_is_a_launch_also_of_one_script() -> None:
    """Two rows naming one script are two launches (pytest ids tell them apart); a row given
    as ``pytest.param(..., marks=...)`` counts; the dict reaches the estimator through a
    helper another module defines."""
    text = """import pytest
from .helpers import run_estimator

@pytest.mark.parametrize("script, processes", [("mnist.py", 8), pytest.param("mnist.py", 16, marks=pytest.mark.slow)])
def test_smp(ecr_image, script, processes):
    params = {
        "entry_point": script,
        "source_dir": "resources",
        "distribution": {"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"partitions": 2}}},
                         "mpi": {"enabled": True, "processes_per_host": processes}},
    }
    run_estimator(ecr_image, params)
"""  # noqa: E501
    module = cst.parse_module(text)
    found = find_launchers(module, collect(module).imports, "/repo/test/test_smp.py")
    assert [launcher.variant for launcher in found] == ["mnist.py-8", "mnist.py-16"]
    assert [launcher.mpi.plain()["processes_per_host"] for launcher in found] == [8, 16]
    assert all(launcher.estimator == "sagemaker.pytorch.PyTorch" for launcher in found)


def test_two_parametrized_launches_of_one_script_at_one_line_both_count() -> None:
    from smpfix.job.jobfacts import DeclaredJob, Role
    from smpfix.job.linking import LinkedScript
    from smpfix.job.project import Project

    def link(row: str, processes: int) -> LinkedScript:
        source = f"launcher test/test_smp.py:12[{row}]"
        job = DeclaredJob(source, {"processes_per_host": processes}, role=Role.LAUNCHER)
        return LinkedScript("/repo/mnist.py", job, {}, "/repo/test/test_smp.py", 12)

    first, second = link("mnist.py-8", 8), link("mnist.py-16", 16)
    project = Project().with_links([first, second, first])
    assert project.launchers_of("/repo/mnist.py") == (first, second)
    (declared,) = project.declared_for("/repo/mnist.py")
    assert declared.conflicting == frozenset({"processes_per_host"})


def test_dict_get_on_known_hyperparameters_picks_the_branch() -> None:
    """``hyperparameters.get(...)`` on a dict the launcher wrote: the value, the default, or
    None for a missing key, so ``if hp.get("smp"):`` is a known test."""
    text = """from sagemaker.pytorch import PyTorch
hp = {"smp": True, "partitions": 2}
if hp.get("smp"):
    per_host = 8
else:
    per_host = 1
if hp.get("ddp"):
    ddp = False
else:
    ddp = True
PyTorch(entry_point="train.py", distribution={
    "mpi": {"enabled": True, "processes_per_host": per_host},
    "smdistributed": {"modelparallel": {"enabled": True, "parameters": {
        "partitions": hp.get("partitions"),
        "microbatches": hp.get("microbatches", 4),
        "ddp": ddp,
    }}},
})
"""
    dist = resolve(text)
    assert dist["mpi"]["processes_per_host"] == 8
    assert dist["smdistributed"]["modelparallel"]["parameters"] == {
        "partitions": 2,
        "microbatches": 4,
        "ddp": True,
    }


def test_json_file_the_launcher_loads_configures_it(tmp_path: Path) -> None:
    """``json.load(open("config/smp.json"))`` and ``with open(...) as f: json.load(f)`` read
    the file from the launcher's folder; a file that is not there leaves the value unknown."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "smp.json").write_text(
        json.dumps({"parameters": {"partitions": 2, "microbatches": 8}, "per_host": 8}),
        encoding="utf-8",
    )
    launcher = tmp_path / "launch.py"
    launcher.write_text(
        """import json
from sagemaker.pytorch import PyTorch
smp = json.load(open("config/smp.json"))
with open("config/smp.json", "r") as handle:
    again = json.load(handle)
missing = json.load(open("config/absent.json"))
PyTorch(entry_point="train.py", distribution={
    "mpi": {"enabled": True, "processes_per_host": again["per_host"]},
    "smdistributed": {"modelparallel": {"enabled": True, "parameters": smp["parameters"]}},
}, hyperparameters=missing)
""",
        encoding="utf-8",
    )
    module = cst.parse_module(launcher.read_text(encoding="utf-8"))
    (found,) = find_launchers(module, collect(module).imports, str(launcher))
    assert found.distribution is not None
    assert found.distribution.plain() == {
        "mpi": {"enabled": True, "processes_per_host": 8},
        "smdistributed": {
            "modelparallel": {"enabled": True, "parameters": {"partitions": 2, "microbatches": 8}}
        },
    }
    hyperparameters = found.keyword("hyperparameters")
    assert hyperparameters is not None and hyperparameters.plain() is UNKNOWN
