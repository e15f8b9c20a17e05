"""A finding that holds only under a feature needs something that can turn the feature on.

Each project under ``tests/projects/`` is shaped like real launchers (issue 22, item 3): a
parametrized container test handing an estimator dict to a helper, a shell entry point that
exports ``SM_HP_MP_PARAMETERS``, estimators in ``if``/``elif`` branches, a commented-out
parameter, and a notebook whose ``entry_point`` names no file. Beside each sits a trap that
must keep its findings.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import ROOT, finding_text, run_cli

from smpfix.job.jobfacts import DeclaredJob, JobFacts, Tri

PROJECTS = ROOT / "tests" / "projects"


def _project(name: str, tmp_path: Path) -> Path:
    root = tmp_path / name
    shutil.copytree(PROJECTS / name, root)
    return root


def _findings(root: Path, *args: str) -> list[dict]:
    found = run_cli("check", "--no-cache", "--format", "json", *args, cwd=root)
    assert found.code in (0, 1), found.stderr
    return json.loads(found.stdout)


def _codes(findings: list[dict], script: str) -> list[str]:
    return [f["code"] for f in findings if f["filename"] == script]


def _feature(root: Path, script: str, key: str) -> str:
    """The ``--show-job`` line of ``key`` for ``script``: state and source."""
    shown = run_cli("check", "--no-cache", "--show-job", "--format", "concise", script, cwd=root)
    line = next(line for line in shown.stdout.splitlines() if line.startswith(f"  {key} "))
    return " ".join(line.split())


def test_a_parametrized_container_test_launches_each_script_it_names(tmp_path: Path) -> None:
    root = _project("parametrized_container_tests", tmp_path)
    mnist = "test/resources/mnist/smp_pt_mnist.py"
    launcher = "launcher test/integration/sagemaker/test_smdmp.py:44[smp_pt_mnist.py-8]"
    findings = _findings(root, ".")
    # No launcher of the MNIST script enables fp16 or optimizer-state sharding: no hint about
    # the scheduler (SMP113) or the guarded local_state_dict (SMP307), no TP warning (SMP301).
    assert _codes(findings, mnist) == []
    assert _feature(root, mnist, "FP16") == f"FP16 off library default; not set in {launcher}"
    assert _feature(root, mnist, "PP") == f"PP on {launcher}"
    # Checked alone, the same launcher is found.
    assert _codes(_findings(root, mnist), mnist) == []
    # The trap: the GPT-2 test enables fp16, handing its dict to the module's helper directly.
    gpt = "test/resources/gpt2/train_gpt_fp16.py"
    scheduler = [f for f in findings if f["filename"] == gpt and f["code"] == "SMP113"]
    assert [f["severity"] for f in scheduler] == ["error"]
    assert "test_smdmp.py:66[train_gpt_fp16.py-8]" in finding_text(scheduler[0])


def test_without_its_launcher_the_script_keeps_its_conditional_findings(tmp_path: Path) -> None:
    root = _project("parametrized_container_tests", tmp_path)
    mnist = "test/resources/mnist/smp_pt_mnist.py"
    alone = _findings(root, "--no-launcher-search", mnist)
    assert sorted(_codes(alone, mnist)) == ["SMP113", "SMP301", "SMP307"]


def test_a_shell_entry_point_configures_the_script_its_mpirun_starts(tmp_path: Path) -> None:
    root = _project("shell_entry_points", tmp_path)
    mnist = "resources/mnist/smp_pt_mnist.py"
    launcher = "launcher resources/mnist/smp_mnist_script_mode.sh:6"
    assert _codes(_findings(root, "."), mnist) == []
    assert _codes(_findings(root, mnist), mnist) == []
    assert _feature(root, mnist, "MB") == f"MB on {launcher}"
    # The other shell script's fp16 and sharding configure only the script it runs.
    assert _feature(root, mnist, "FP16") == f"FP16 off library default; not set in {launcher}"
    other = "resources/other/smp_fp16.py"
    assert _feature(root, other, "FP16") == "FP16 on launcher resources/other/fp16_script_mode.sh:4"
    assert "SMP113" in _codes(_findings(root, other), other)


def test_estimators_in_if_and_elif_branches_are_launchers(tmp_path: Path) -> None:
    root = _project("branch_launchers", tmp_path)
    script = "src/train.py"
    # The `elif mode == "smp-fp16":` launcher enables fp16, the `if` one does not: unknown.
    assert _feature(root, script, "FP16") == (
        "FP16 unknown launcher jobs/submit.py:25, launcher jobs/submit.py:32,"
        " launcher jobs/submit.py:34 set it to different values"
    )
    assert _codes(_findings(root, script), script) == ["SMP113"]


def test_a_commented_out_parameter_is_an_offer_not_a_setting(tmp_path: Path) -> None:
    root = _project("commented_offers", tmp_path)
    script = "scripts/train_gpt.py"
    offer = '`# "shard_optimizer_state": True,` in launcher launch_gpt.py:9'
    assert _feature(root, script, "OSS") == f"OSS offered only offered: {offer}, commented out"
    # A comment that is not an entry (`# "fp16": not sure yet,`) offers nothing.
    assert _feature(root, script, "FP16").startswith("FP16 off library default")
    findings = [f for f in _findings(root, ".") if f["filename"] == script]
    assert [(f["code"], f["severity"]) for f in findings] == [("SMP307", "hint")]
    assert offer in finding_text(findings[0])


def test_a_launcher_naming_a_missing_script_says_so(tmp_path: Path) -> None:
    root = _project("missing_entry_point", tmp_path)
    findings = _findings(root, ".")
    notebook = [
        f
        for f in findings
        if f["filename"] == "notebooks/gpt/launch_gpt.ipynb" and f["code"] == "SMP832"
    ]
    assert [(f["code"], f["severity"], f["cell"]) for f in notebook] == [("SMP832", "warning", 4)]
    assert "`code/train_gpt.py`, which is not there" in finding_text(notebook[0])
    # The script a `%%writefile` cell writes is there when the job starts: nothing said.
    assert "evaluate.py" not in finding_text(notebook[0])


def test_a_release_older_than_a_feature_turns_it_off() -> None:
    job = JobFacts.resolve([DeclaredJob.stated("--job", {"smp_version": "1.10"})])
    sdp = job.feature("SDP")
    assert sdp.state is Tri.OFF
    assert sdp.source == ("SMP 1.10 (--job) predates sharded data parallelism (SMP 1.11)")
    assert job.feature("FP16").state is Tri.UNKNOWN  # fp16 arrived in 1.10
    # A feature a configuration turns on stays on: the old release is that configuration's
    # finding (SMP8xx), not a reason to doubt it.
    stated = DeclaredJob.stated("--job", {"smp_version": "1.10", "sharded_data_parallel_degree": 2})
    assert JobFacts.resolve([stated]).feature("SDP").state is Tri.ON
