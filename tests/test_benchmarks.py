"""The benchmark measures what it says: a generated project shaped like real SMP code, a parse
floor that parses what smpfix parses, and phases that add up to the run they time."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from smpfix.base import notebook

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import project_tree  # noqa: E402
import run  # noqa: E402


def floor_notebook_code(text: str) -> list[str]:
    """The code the floor parses for a notebook (``run.PARSE_SCRIPT``'s own function)."""
    namespace: dict[str, object] = {}
    definitions = run.PARSE_SCRIPT.split("\nfor name in files:")[0].split("\nMAGIC", 1)[1]
    exec("import json, re\nMAGIC" + definitions, namespace)
    return namespace["notebook_code"](text)  # type: ignore[operator,no-any-return]


def test_generated_project_is_shaped_like_the_official_examples(tmp_path: Path) -> None:
    paths = project_tree.build(tmp_path / "project", scripts=4, helpers=8, seed=3)
    scripts = [path for path in paths if path.name.startswith("train_")]
    helpers = [path for path in paths if path.parent.name == "src" and path not in scripts]
    notebooks = [path for path in paths if path.suffix == ".ipynb"]
    launchers = [path for path in paths if path.name.startswith("launch_")]
    assert len(scripts) == 4 and len(helpers) == 8 and len(notebooks) == len(launchers) == 2
    for path in paths:
        if path.suffix == ".py":
            ast.parse(path.read_text(encoding="utf-8"))
    low, high = project_tree.SCRIPT_LINES
    for script in scripts:
        text = script.read_text(encoding="utf-8")
        assert low <= text.count("\n") <= high + 5
        for piece in (
            "@smp.step",
            "smp.DistributedModel(",
            "smp.save_checkpoint(",
            "add_argument(",
        ):
            assert piece in text
    imported = [
        sum(
            f"{helper.stem} import" in s.read_text() or f"import {helper.stem}\n" in s.read_text()
            for s in scripts
        )
        for helper in helpers
    ]
    assert max(imported) >= 2  # helpers are shared between scripts
    for book in notebooks:
        cells = json.loads(book.read_text(encoding="utf-8"))["cells"]
        code = "".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")
        assert any(cell["cell_type"] == "markdown" for cell in cells)
        assert "%pip install" in code and "PyTorch(" in code and '"modelparallel"' in code
        entry = code.split('entry_point="', 1)[1].split('"', 1)[0]
        assert (tmp_path / "project" / "src" / entry).is_file()


def test_same_seed_same_project(tmp_path: Path) -> None:
    first = project_tree.build(tmp_path / "a", scripts=2, helpers=3, seed=7)
    second = project_tree.build(tmp_path / "b", scripts=2, helpers=3, seed=7)
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]


def test_the_floor_parses_notebooks_as_smpfix_does(tmp_path: Path) -> None:
    texts = [
        path.read_text(encoding="utf-8")
        for path in project_tree.build(tmp_path / "project", scripts=4, helpers=2, seed=1)
        if path.suffix == ".ipynb"
    ]
    cells = [
        {"cell_type": "code", "metadata": {}, "outputs": [], "source": source}
        for source in (
            "pip install sagemaker --upgrade",
            "%%bash\nls -l",
            "%%time\nif True:\n    !echo indented\nx = 1",
            "files = !ls\ny = 2",
            "%%writefile train.py\nimport os\n",
        )
    ]
    texts.append(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    for text in texts:
        joined, *scripts = floor_notebook_code(text)
        book = notebook.parse(text)
        expected = book.joined()[0]
        assert joined.count("\n") == expected.count("\n")
        ast.parse(joined)
        assert len(scripts) == len(book.scripts)


def test_the_example_the_benchmark_copies_exists() -> None:
    assert (run.EXAMPLE / "train_gpt.py").is_file() and (run.EXAMPLE / "launch.py").is_file()
    assert (run.ROOT / "tests" / "smp_scripts.py").is_file()


def test_phases_add_up_to_the_instrumented_run(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project_tree.build(project, scripts=2, helpers=3, seed=2)
    output = subprocess.run(
        [sys.executable, str(BENCHMARKS / "phases.py"), "."],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    profile = json.loads(output)
    phases = profile["phases"]
    assert abs(sum(phases.values()) - profile["total"]) < 1e-3
    assert profile["unwrapped"] == []  # every function the phases time is still where it was
    for phase in ("imports", "parse", "index", "facts", "rules", "notebooks", "launchers"):
        assert phases[phase] > 0, phase
