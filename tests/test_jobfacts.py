"""Job facts: precedence of sources, tri-states, and the wording findings use."""

from __future__ import annotations

import libcst as cst
import pytest
from conftest import finding_text

from smpfix.api import check_source
from smpfix.engine.analysis import AnalysisOptions, analyze
from smpfix.job.jobfacts import DeclaredJob, Evidence, InitDict, JobFacts, Role, Tri, parse_value

SCRIPT = """import smdistributed.modelparallel.torch as smp

config = {"tensor_parallel_degree": 2, "microbatches": 4}
smp.init(config)
with smp.tensor_parallelism():
    model = GPT()
model = smp.DistributedModel(model)
if smp.dp_rank() == 0:
    smp.save(model.local_state_dict(), "m.pt", partial=True)
"""


def job_of(text: str, *declared: DeclaredJob) -> JobFacts:
    analysis = analyze(
        text, "train.py", AnalysisOptions(select=frozenset(), declared_jobs=tuple(declared))
    )
    assert analysis.job is not None
    return analysis.job


def test_command_line_beats_pyproject_beats_init_dict_beats_evidence() -> None:
    cli = DeclaredJob("command line --job", {"tensor_parallel_degree": 1})
    pyproject = DeclaredJob(
        "pyproject.toml [tool.smpfix.job]", {"tensor_parallel_degree": 8, "microbatches": 2}
    )
    both = job_of(SCRIPT, cli, pyproject)
    assert both.feature("TP").state is Tri.OFF and both.feature("TP").source == "command line --job"
    assert both.value("microbatches") == 2 and both.settings["microbatches"].source.startswith(
        "pyproject.toml"
    )
    only_pyproject = job_of(SCRIPT, pyproject)
    assert only_pyproject.value("tensor_parallel_degree") == 8
    from_init = job_of(SCRIPT)
    assert from_init.value("tensor_parallel_degree") == 2
    assert from_init.settings["tensor_parallel_degree"].source == "smp.init({...}) at line 4"
    without_init = job_of(SCRIPT.replace("smp.init(config)", "smp.init()"))
    state = without_init.feature("TP")
    assert (
        state.state is Tri.ON
        and state.source == "script evidence: `with smp.tensor_parallelism()` at line 5"
    )


def test_declared_job_is_complete_but_init_dict_is_not() -> None:
    declared = job_of(
        "import smdistributed.modelparallel.torch as smp\n", DeclaredJob("cli", {"microbatches": 4})
    )
    assert declared.feature("TP").state is Tri.OFF
    assert "library default" in declared.feature("TP").source
    from_init = job_of(
        "import smdistributed.modelparallel.torch as smp\nsmp.init({'microbatches': 4})\n"
    )
    assert from_init.feature("MB").state is Tri.ON
    assert from_init.feature("TP").state is Tri.UNKNOWN


def test_partitions_is_an_alias_of_pipeline_parallel_degree() -> None:
    job = JobFacts.resolve([DeclaredJob("x", {"partitions": 2})])
    assert job.feature("PP").state is Tri.ON


@pytest.mark.parametrize(
    "snippet, feature",
    [
        ("with smp.tensor_parallelism():\n    m = GPT()\n", "TP"),
        ("with smp.model_creation(tensor_parallelism=True):\n    m = GPT()\n", "TP"),
        ("smp.set_tensor_parallelism(m.transformer)\n", "TP"),
        ("layer = smp.nn.DistributedLinear(10, 10)\n", "TP"),
        ("with smp.partition(1):\n    m = GPT()\n", "PP"),
        ("smp.register_parameter(self, self.wte.weight)\n", "SDP"),
    ],
)
def test_script_evidence(snippet: str, feature: str) -> None:
    job = job_of("import smdistributed.modelparallel.torch as smp\n" + snippet)
    assert job.feature(feature).state is Tri.ON
    assert job.feature(feature).source.startswith("script evidence: ")


@pytest.mark.parametrize(
    "snippet",
    [
        "with smp.tensor_parallelism(enabled=False):\n    m = GPT()\n",
        "with smp.model_creation(tensor_parallelism=smp.tp_size() > 1):\n    m = GPT()\n",
        "if smp.tp_size() == 1:\n    pass\n",
    ],
)
def test_non_evidence(snippet: str) -> None:
    assert (
        job_of("import smdistributed.modelparallel.torch as smp\n" + snippet).feature("TP").state
        is Tri.UNKNOWN
    )


def test_a_tp_size_branch_is_weak_evidence() -> None:
    job = job_of(
        "import smdistributed.modelparallel.torch as smp\nif smp.tp_size() > 1:\n    pass\n"
    )
    assert job.feature("TP").state is Tri.UNKNOWN
    assert [(e.feature, e.strong) for e in job.evidence] == [("TP", False)]


def test_condition_wording() -> None:
    on = JobFacts.resolve(
        [DeclaredJob("pyproject.toml [tool.smpfix.job]", {"tensor_parallel_degree": 4})]
    ).feature("TP")
    assert on.condition() == "tensor parallelism is enabled (pyproject.toml [tool.smpfix.job])"
    assert JobFacts().feature("TP").condition() == "if tensor parallelism is enabled"
    evidence = JobFacts(evidence=(Evidence("TP", "`x`", 3),)).feature("TP")
    assert evidence.state is Tri.ON and evidence.source == "script evidence: `x` at line 3"


def test_same_script_tp1_quiet_tp4_errors() -> None:
    plain = """import smdistributed.modelparallel.torch as smp
import torch

smp.init()
with smp.model_creation(tensor_parallelism=smp.tp_size() > 1):
    model = Net()
optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
model = smp.DistributedModel(model)
optimizer = smp.DistributedOptimizer(optimizer)
if smp.dp_rank() == 0:
    smp.save(model.local_state_dict(), "m.pt", partial=True)
"""
    assert check_source(plain, select=["SMP101", "SMP301"], job={"tensor_parallel_degree": 1}) == []
    errors = check_source(plain, select=["SMP101", "SMP301"], job={"tensor_parallel_degree": 4})
    assert sorted((f.code, f.severity.value) for f in errors) == [
        ("SMP101", "error"),
        ("SMP301", "error"),
    ]
    unknown = check_source(plain, select=["SMP101", "SMP301"])
    assert sorted((f.code, f.severity.value) for f in unknown) == [
        ("SMP101", "warning"),
        ("SMP301", "warning"),
    ]
    assert all("if tensor parallelism is" in finding_text(f) for f in unknown)


def test_parse_value() -> None:
    assert (
        parse_value("true") is True
        and parse_value("4") == 4
        and parse_value("0.5") == 0.5
        and parse_value("speed") == "speed"
    )


def test_init_dict_through_names_and_dict_calls() -> None:
    text = """import smdistributed.modelparallel.torch as smp
TP = 4
base = dict(microbatches=2)
smp.init({**base, "tensor_parallel_degree": TP, "ddp": True})
"""
    job = job_of(text)
    assert (
        job.value("tensor_parallel_degree") == 4
        and job.value("microbatches") == 2
        and job.value("ddp") is True
    )
    assert cst.parse_module(text)


# -- the script's smp.init({...}) dict under a known launcher ----------------------------------
_DICT = DeclaredJob(
    "smp.init({...}) at line 4",
    {"microbatches": 4, "tensor_parallel_degree": 2},
    complete=False,
    role=Role.INIT_DICT,
)


def _launched(
    framework: str | None = None, manual_init: bool = False, complete: bool = True
) -> DeclaredJob:
    settings: dict = {"pipeline_parallel_degree": 2, "ddp": True}
    if framework is not None:
        settings["framework_version"] = framework
    return DeclaredJob(
        "launcher launch.py:9", settings, complete, role=Role.LAUNCHER, manual_init=manual_init
    )


def test_a_library_that_initialises_on_import_ignores_the_dict() -> None:
    job = JobFacts.resolve([_launched("1.12.1"), _DICT])  # SMP 1.13
    assert (
        job.init_dict is InitDict.IGNORED and "initialises itself on import" in job.init_dict_reason
    )
    assert job.value("microbatches") == 1 and job.settings["microbatches"].source.startswith(
        "library default"
    )
    assert job.feature("TP").state is Tri.OFF


def test_a_library_without_import_time_initialisation_uses_the_dict() -> None:
    job = JobFacts.resolve([_launched("1.8.1"), _DICT])  # SMP 1.6
    assert job.init_dict is InitDict.APPLIES
    assert job.value("microbatches") == 4 and job.feature("TP").state is Tri.ON


def test_manual_init_makes_the_dict_count_again() -> None:
    job = JobFacts.resolve([_launched("1.12.1", manual_init=True), _DICT])
    assert job.init_dict is InitDict.APPLIES and "SMP_MANUAL_INIT=1" in job.init_dict_reason
    assert job.value("microbatches") == 4


def test_with_the_version_unknown_keys_only_the_dict_sets_are_unknown() -> None:
    job = JobFacts.resolve([_launched(), _DICT])
    assert job.init_dict is InitDict.UNCERTAIN
    state = job.feature("MB")
    assert (
        state.state is Tri.UNKNOWN
        and "counts only if the library does not initialise itself" in state.source
    )
    assert job.feature("PP").state is Tri.ON  # the launcher's own settings stay known
    # A container that shipped releases on both sides (PyTorch 1.10.2: 1.7, then 1.8) is unknown
    # too.
    assert JobFacts.resolve([_launched("1.10.2"), _DICT]).init_dict is InitDict.UNCERTAIN


def test_without_a_launcher_or_with_model_parallelism_not_enabled_the_dict_counts() -> None:
    assert JobFacts.resolve([_DICT]).value("microbatches") == 4
    assert JobFacts.resolve([_launched("1.12.1", complete=False), _DICT]).value("microbatches") == 4
    stated = JobFacts.resolve(
        [
            DeclaredJob("pyproject.toml [tool.smpfix.job]", {"smp_version": "1.13", "ddp": True}),
            _DICT,
        ]
    )
    assert stated.init_dict is InitDict.APPLIES and stated.value("microbatches") == 4
