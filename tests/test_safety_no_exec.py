"""smpfix never runs what it reads.

Scripts, the helper modules they import, notebooks and launchers are parsed, never imported
or executed; ``pyproject.toml`` is read with a TOML parser and whatever it holds is at worst
a configuration error; a notebook cannot make smpfix write outside the checked paths. A
guard test keeps ``eval``/``exec``/dynamic imports out of the package.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import ROOT, run_cli
from test_safety_inputs import SCRIPT, fixed

SIDE_EFFECT = "open({sentinel!r}, 'w').write('executed')\n"


def _with_side_effect(text: str, sentinel: Path) -> str:
    return text + SIDE_EFFECT.format(sentinel=str(sentinel))


def test_scripts_helpers_notebooks_and_launchers_are_never_executed(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    sentinels = {
        name: tmp_path / f"{name}.ran"
        for name in ("script", "helper", "notebook", "launcher", "package")
    }
    script = SCRIPT.replace("import torch\n", "import torch\nimport helper\nimport mypackage\n")
    (project / "train.py").write_text(_with_side_effect(script, sentinels["script"]))
    (project / "helper.py").write_text(_with_side_effect("import os\n", sentinels["helper"]))
    (project / "mypackage").mkdir()
    (project / "mypackage" / "__init__.py").write_text(_with_side_effect("", sentinels["package"]))
    (project / "launch.py").write_text(
        _with_side_effect(
            "from sagemaker.pytorch import PyTorch\nestimator = PyTorch(entry_point='train.py',"
            " distribution={'smdistributed': {'modelparallel': {'enabled': True, 'parameters':"
            " {'tensor_parallel_degree': 4}}}, 'mpi': {'enabled': True}})\n",
            sentinels["launcher"],
        )
    )
    notebook = {
        "cells": [
            {
                "cell_type": "code",
                "metadata": {},
                "execution_count": None,
                "outputs": [],
                "source": (
                    _with_side_effect(SCRIPT, sentinels["notebook"]).splitlines(keepends=True)
                ),
            }
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (project / "notebook.ipynb").write_text(json.dumps(notebook))
    for args in (("--no-cache",), ("--no-cache", "--apply", "--job", "tensor_parallel_degree=4")):
        result = run_cli(*args, str(project), cwd=project)
        assert "Traceback" not in result.stderr, result.stderr
        assert [name for name, path in sentinels.items() if path.exists()] == []
    assert "smp.rdp_rank()" in (project / "train.py").read_text()


def test_a_notebook_cannot_make_smpfix_write_outside_the_checked_paths(tmp_path: Path) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    victim = elsewhere / "victim.py"
    victim.write_text(SCRIPT)
    cells = [f"%%writefile {victim}\n" + SCRIPT, "%%writefile ../elsewhere/relative.py\n" + SCRIPT]
    notebook = {
        "cells": [
            {
                "cell_type": "code",
                "metadata": {},
                "execution_count": None,
                "outputs": [],
                "source": cell,
            }
            for cell in cells
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (project / "launch.ipynb").write_text(json.dumps(notebook))
    result = run_cli(
        "--no-cache", "--apply", "--job", "tensor_parallel_degree=4", str(project), cwd=project
    )
    assert "Traceback" not in result.stderr, result.stderr
    assert victim.read_text() == SCRIPT
    assert sorted(path.name for path in elsewhere.iterdir()) == ["victim.py"]


MALICIOUS_CONFIGS = {
    "code_in_a_list_value": (
        "[tool.smpfix]\nselect = \"__import__('os').system('touch {sentinel}')\"\n",
        2,
    ),
    "code_as_a_key": ("[tool.smpfix]\n\"__import__('os').system('touch {sentinel}')\" = 1\n", 2),
    "code_in_a_job_value": (
        (
            "[tool.smpfix.job]\ntensor_parallel_degree = \"__import__('os').system('touch"
            " {sentinel}')\"\n"
        ),
        None,
    ),
    "code_in_an_exclude_pattern": (
        '[tool.smpfix]\nexclude = ["$(touch {sentinel})", "`touch {sentinel}`"]\n',
        None,
    ),
    "tool_is_not_a_table": ('tool = "{sentinel}"\n', 2),
    "smpfix_is_not_a_table": ('[tool]\nsmpfix = ["{sentinel}"]\n', 2),
    "deeply_nested": ("[tool.smpfix]\nselect = " + "[" * 100_000 + "]" * 100_000 + "\n", 2),
    "invalid_toml": ("[tool.smpfix\nselect = [\n", 2),
    "huge_string": (
        '[tool.smpfix.job]\ntensor_parallel_degree = "' + "9" * 2_000_000 + '"\n',
        None,
    ),
    "huge_exponent": ('[tool.smpfix.job]\ntensor_parallel_degree = "1e999999999"\n', None),
    "huge_integer": (
        "[tool.smpfix.job]\ntensor_parallel_degree = 99999999999999999999999999999999\n",
        None,
    ),
    "huge_list": ("[tool.smpfix]\nignore = [" + ", ".join(['"SMP999"'] * 50_000) + "]\n", None),
    "wrong_types": ("[tool.smpfix]\nselect = [1, 2]\nper-file-ignores = 3\n", 2),
}


@pytest.mark.parametrize("name", sorted(MALICIOUS_CONFIGS))
def test_a_malicious_pyproject_only_yields_configuration_errors(tmp_path: Path, name: str) -> None:
    template, expected_code = MALICIOUS_CONFIGS[name]
    sentinel = tmp_path / "pwned"
    (tmp_path / "pyproject.toml").write_text(template.replace("{sentinel}", str(sentinel)))
    (tmp_path / "train.py").write_text(SCRIPT)
    result = run_cli("--no-cache", "--apply", ".", cwd=tmp_path)
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert not sentinel.exists()
    assert result.code in (0, 1, 2)
    if expected_code is not None:
        assert result.code == expected_code, result.stderr[-2000:]
        assert result.stderr.startswith("smpfix: error: "), result.stderr[-2000:]
        assert (tmp_path / "train.py").read_text() == SCRIPT
    else:
        assert (tmp_path / "train.py").read_text() in (SCRIPT, fixed(SCRIPT))


# Calls that run or load code. ``re.compile`` and ``ast.literal_eval`` are fine: they build a
# regular expression, and read a literal without evaluating anything.
_FORBIDDEN = re.compile(
    r"(?<![\w.])(?:eval|exec|execfile|compile|__import__)\s*\("
    r"|\bimport_module\s*\(|\bexec_module\b|\bspec_from_file_location\b|\brun_path\b|\brun_module\b"
    r"|\b(?:import|from)\s+(?:pickle|marshal|shelve|subprocess|runpy)\b|\bos\.(?:system|popen|exec\w*)\s*\("
)
# The one dynamic import: smpfix's own rule modules, by names listed from its own package.
# The one process started: the language server's analysis, smpfix's own code
# (``smpfix.server.worker``), which takes the current folder off ``sys.path`` first.
# The one code compiled: the ``__init__`` the parse gives LibCST's own node classes, written
# from their dataclass fields (names from LibCST, never from what is read), as ``dataclasses``
# itself writes them.
_ALLOWED = {
    ("smpfix/rules/registry.py", "importlib.import_module(qualified)"),
    ("smpfix/server/analysis.py", "import subprocess"),
    ("smpfix/base/parse.py", "exec(source, names)"),
}


def test_the_package_never_evaluates_executes_or_imports_what_it_reads() -> None:
    found = []
    for path in sorted((ROOT / "smpfix").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            code = line.split("#", 1)[0]
            if _FORBIDDEN.search(code) and (relative, code.strip()) not in _ALLOWED:
                found.append(f"{relative}:{number}: {line.strip()}")
    assert found == []
