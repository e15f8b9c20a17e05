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


def _helper_codes(root: Path, name: str = "model_setup.py") -> list[tuple[str, int]]:
    """The CLI's view of the module ``name``: checked with the scripts that import it."""
    result = CliRunner().invoke(
        main,
        ["check", "--no-cache", "--select", "SMP106", "--output-format", "json", str(root)],
    )
    return [
        (finding["code"], finding["location"]["row"])
        for finding in json.loads(result.output)
        if Path(finding["filename"]).name == name
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


PACKAGE_MAIN = """\
try:
    import smdistributed.modelparallel.torch as smp
except ImportError:
    smp = None

from training.distributed import init_device


def main():
    init_device()
    model = smp.DistributedModel(Net())


if __name__ == "__main__":
    main()
"""

PACKAGE_DISTRIBUTED = """\
def init_device():
    import smdistributed.modelparallel.torch as smp

    smp.init({"ddp": True})
"""


def test_a_package_module_imports_its_siblings_from_above_the_package(workdir: Path) -> None:
    """``src/training/main.py`` is run as ``python -m training.main`` from ``src``: its
    ``from training.distributed import init_device`` is ``src/training/distributed.py``."""
    package = workdir / "src" / "training"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "main.py").write_text(PACKAGE_MAIN, encoding="utf-8")
    (package / "distributed.py").write_text(PACKAGE_DISTRIBUTED, encoding="utf-8")
    assert _helper_codes(workdir, "main.py") == []
    (package / "distributed.py").write_text("def init_device():\n    pass\n", encoding="utf-8")
    assert _helper_codes(workdir, "main.py") == [("SMP106", 2)]


OPTIMIZER_UTILS = """\
import smdistributed.modelparallel.torch as smp


def create_optimizer(model, optimizer):
    return smp.DistributedOptimizer(optimizer)
"""


def test_a_library_module_of_a_package_no_known_script_imports_is_not_judged(
    workdir: Path,
) -> None:
    """Only its package's ``__init__`` and ``trainer.py`` import ``optimizer_utils.py``; the
    script that imports the package (behind a shell script) is out of sight."""
    package = workdir / "pkg" / "training"
    package.mkdir(parents=True)
    (workdir / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (package / "__init__.py").write_text("from .trainer import Trainer\n", encoding="utf-8")
    (package / "trainer.py").write_text(
        "from .optimizer_utils import create_optimizer\n\n\nclass Trainer:\n    pass\n",
        encoding="utf-8",
    )
    (package / "optimizer_utils.py").write_text(OPTIMIZER_UTILS, encoding="utf-8")
    assert _helper_codes(workdir, "optimizer_utils.py") == []


def test_a_package_module_a_known_script_imports_is_judged_with_it(workdir: Path) -> None:
    """A script of the package's folder (it has a ``__main__`` block) imports the module and
    never initialises the library: the module is reported as before."""
    package = workdir / "training"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "optimizer_utils.py").write_text(OPTIMIZER_UTILS, encoding="utf-8")
    (package / "train.py").write_text(
        "from optimizer_utils import create_optimizer\n\n\nif __name__ == '__main__':\n"
        "    create_optimizer(None, None)\n",
        encoding="utf-8",
    )
    assert _helper_codes(workdir, "optimizer_utils.py") == [("SMP106", 1)]


def test_a_package_module_that_uses_the_library_on_import_is_still_a_script(
    workdir: Path,
) -> None:
    package = workdir / "training"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "wrap.py").write_text(
        "import smdistributed.modelparallel.torch as smp\n\nmodel = smp.DistributedModel(Net())\n",
        encoding="utf-8",
    )
    assert _helper_codes(workdir, "wrap.py") == [("SMP106", 1)]
