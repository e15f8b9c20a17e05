"""SMP106 trusts a helper module of the checked paths that initialises the library.

A script may call ``setup_smp()`` from its own ``utils.py``; the fixture harness checks
single files, so this builds the two-file project and checks it with a project context.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from smpfix.cli import main
from smpfix.engine.analysis import AnalysisOptions, analyze
from smpfix.job.project import Project

TRAIN = """\
import smdistributed.modelparallel.torch as smp
from utils import setup_smp

setup_smp()
model = smp.DistributedModel(Net())
"""

UTILS = """\
import smdistributed.modelparallel.torch as smp


def setup_smp():
    smp.init({"ddp": True})
"""


def _codes(root: Path, roots: tuple[str, ...]) -> list[tuple[str, int]]:
    path = root / "train.py"
    options = AnalysisOptions(select=frozenset({"SMP106"}), project=Project.of(roots))
    return [
        (f.code, f.start.line)
        for f in analyze(path.read_text(encoding="utf-8"), str(path), options).findings
    ]


def test_init_in_an_imported_helper_module_counts(workdir: Path) -> None:
    (workdir / "train.py").write_text(TRAIN, encoding="utf-8")
    (workdir / "utils.py").write_text(UTILS, encoding="utf-8")
    assert _codes(workdir, (str(workdir),)) == []


def test_helper_outside_the_checked_paths_is_not_read(workdir: Path) -> None:
    (workdir / "train.py").write_text(TRAIN, encoding="utf-8")
    (workdir / "utils.py").write_text(UTILS, encoding="utf-8")
    assert _codes(workdir, (str(workdir / "train.py"),)) == [("SMP106", 1)]


def test_helper_without_init_does_not_count(workdir: Path) -> None:
    (workdir / "train.py").write_text(TRAIN, encoding="utf-8")
    (workdir / "utils.py").write_text("def setup_smp():\n    pass\n", encoding="utf-8")
    assert _codes(workdir, (str(workdir),)) == [("SMP106", 1)]


ENTRY = """\
import smdistributed.modelparallel.torch as smp

from model_setup import wrap_model

smp.init({"ddp": True})
model = wrap_model()
"""

WRAPPER = """\
import smdistributed.modelparallel.torch as smp


def wrap_model():
    return smp.DistributedModel(Net())
"""


def _helper_codes(root: Path) -> list[tuple[str, int]]:
    """The CLI's view of the helper module: checked with the scripts that import it."""
    result = CliRunner().invoke(
        main,
        ["check", "--no-cache", "--select", "SMP106", "--output-format", "json", str(root)],
    )
    return [
        (finding["code"], finding["location"]["row"])
        for finding in json.loads(result.output)
        if finding["filename"].endswith("model_setup.py")
    ]


def test_a_wrapper_module_whose_importing_script_initialises_is_no_script(workdir: Path) -> None:
    (workdir / "train.py").write_text(ENTRY, encoding="utf-8")
    (workdir / "model_setup.py").write_text(WRAPPER, encoding="utf-8")
    assert _helper_codes(workdir) == []


def test_a_wrapper_module_nobody_initialises_is_still_reported(workdir: Path) -> None:
    (workdir / "train.py").write_text(
        ENTRY.replace('smp.init({"ddp": True})\n', ""), encoding="utf-8"
    )
    (workdir / "model_setup.py").write_text(WRAPPER, encoding="utf-8")
    assert _helper_codes(workdir) == [("SMP106", 1)]
