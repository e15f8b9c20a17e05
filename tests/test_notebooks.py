"""Notebooks are checked cell by cell and fixed in place, changing only the fixed cells' source."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli

from smpfix.base import notebook


def make_notebook(cells: list[tuple[str, object]], indent: int = 1) -> str:
    data = {
        "cells": [
            {
                "cell_type": kind,
                "metadata": {"tags": ["x"]},
                "source": source,
                **(
                    {
                        "execution_count": 3,
                        "outputs": [{"output_type": "stream", "name": "stdout", "text": ["ok\n"]}],
                    }
                    if kind == "code"
                    else {}
                ),
            }
            for kind, source in cells
        ],
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(data, indent=indent, ensure_ascii=False) + "\n"


CELLS = [
    ("markdown", ["# Train with SMP\n"]),
    (
        "code",
        [
            "!pip install -q sagemaker\n",
            "%matplotlib inline\n",
            "import smdistributed.modelparallel.torch as smp\n",
            "smp.init()\n",
            "model = smp.DistributedModel(build())",
        ],
    ),
    ("code", "for step in range(3):\n    %time run(step)\n"),
    (
        "code",
        [
            "if smp.dp_rank() == 0:\n",
            "    smp.save(model.local_state_dict(), 'm.pt', partial=True)\n",
        ],
    ),
]


def test_positions_are_per_cell_in_text_and_json(tmp_path: Path) -> None:
    path = tmp_path / "train.ipynb"
    path.write_text(make_notebook(CELLS))
    text = run_cli("check", "--format", "concise", "-q", str(path)).stdout
    assert f"{path}:cell 4:1:4: SMP301" in text
    data = json.loads(run_cli("check", "--format", "json", str(path)).stdout)
    assert [(f["cell"], f["location"]) for f in data] == [(4, {"row": 1, "column": 4})]


def test_apply_changes_only_the_fixed_cell_and_keeps_outputs_and_metadata(tmp_path: Path) -> None:
    path = tmp_path / "train.ipynb"
    original = make_notebook(CELLS)
    path.write_text(original)
    assert run_cli("--apply", str(path)).code == 0
    new = path.read_text()
    fixed_cells = list(CELLS)
    fixed_cells[3] = (
        "code",
        [
            "if smp.rdp_rank() == 0:\n",
            "    smp.save(model.local_state_dict(), 'm.pt', partial=True)\n",
        ],
    )
    assert new == make_notebook(fixed_cells)
    loaded = json.loads(new)
    assert loaded["cells"][1]["outputs"] == json.loads(original)["cells"][1]["outputs"]
    assert loaded["metadata"] == json.loads(original)["metadata"]


def test_other_json_layouts_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "train.ipynb"
    path.write_text(make_notebook(CELLS, indent=2))
    run_cli("--apply", str(path))
    assert json.loads(path.read_text())["cells"][3]["source"][0] == "if smp.rdp_rank() == 0:\n"
    assert path.read_text().startswith('{\n  "cells"')


def test_magics_are_masked_line_for_line() -> None:
    code = "!pip install x\nimport os\n    %time f()\nx = !ls\n"
    masked = notebook.mask(code)
    assert masked.count("\n") == code.count("\n")
    assert notebook.unmask(masked) == code
    assert notebook.mask("%%bash\necho hi\n").startswith("pass  #")
    # `%%time` and its kind run the rest of the cell as Python: only the magic line is masked.
    assert notebook.mask("%%time\nimport os\n") == "pass  #smpfix-magic:%%time\nimport os\n"
    assert notebook.mask("%%timeit -n 2\nx = 1").endswith("\nx = 1")


def test_writefile_cell_is_checked_as_its_script(tmp_path: Path) -> None:
    cells = [
        (
            "code",
            [
                "%%writefile train.py\n",
                "import smdistributed.modelparallel.torch as smp\n",
                "if smp.dp_rank() == 0:\n",
                "    smp.save(model.local_state_dict(), 'm.pt', partial=True)\n",
            ],
        )
    ]
    path = tmp_path / "launch.ipynb"
    path.write_text(make_notebook(cells))
    data = json.loads(run_cli("check", "--format", "json", str(path)).stdout)
    assert [(f["code"], f["cell"], f["location"]["row"]) for f in data] == [("SMP301", 1, 3)]
    run_cli("--apply", str(path))
    assert json.loads(path.read_text())["cells"][0]["source"][2] == "if smp.rdp_rank() == 0:\n"


def test_a_writefile_cell_of_another_file_is_not_python(tmp_path: Path) -> None:
    cells = [
        (
            "code",
            [
                "%%writefile ./.sagemaker/config.yml\n",
                "\n",
                "local:\n",
                "    container_root: /tmp/\n",
            ],
        ),
        (
            "code",
            [
                "import smdistributed.modelparallel.torch as smp\n",
                "if smp.dp_rank() == 0:\n",
                "    smp.save(model.local_state_dict(), 'm.pt', partial=True)\n",
            ],
        ),
    ]
    path = tmp_path / "launch.ipynb"
    path.write_text(make_notebook(cells))
    result = run_cli("check", "--format", "json", "--no-cache", str(path))
    assert result.stderr == ""
    assert [(f["code"], f["cell"], f["location"]["row"]) for f in json.loads(result.stdout)] == [
        ("SMP301", 2, 2)
    ]


def test_malformed_notebook_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ipynb"
    bad.write_text('{"cells": [ {"cell_type": "code", "source": "import smdistributed"')
    odd = tmp_path / "odd.ipynb"
    odd.write_text(
        json.dumps(
            {
                "cells": [
                    {"cell_type": "code", "source": 42},
                    {"cell_type": "raw", "source": "smdistributed"},
                    "nonsense",
                ]
            }
        )
    )
    result = run_cli("check", str(tmp_path))
    assert result.code == 2
    assert f"{bad}:1:1: error: malformed notebook JSON" in result.stderr
    assert str(odd) not in result.stderr
    assert bad.read_text().startswith('{"cells"')


def test_a_one_line_automagic_cell_is_a_magic_not_python() -> None:
    """IPython runs a cell that is one line starting with a magic's name as that magic."""
    assert notebook.mask("pip install -q datasets") == "pass  #smpfix-magic:pip install -q datasets"
    assert notebook.mask("cd data\n") == "pass  #smpfix-magic:cd data\n"
    # Python stays Python: an assignment, a bare name, a call, and lines of a longer cell.
    for code in ("cd = 3", "pwd", "run(step)", "ls -l", "import os\npip install x"):
        assert notebook.mask(code) == code


def test_a_cell_that_is_not_python_is_skipped_and_the_others_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "train.ipynb"
    cells = [
        ("code", "pip install -q transformers"),
        (
            "code",
            (
                "%%time\nimport smdistributed.modelparallel.torch as smp\nsmp.init()\nmodel ="
                " smp.DistributedModel(build())\n"
            ),
        ),
        ("code", "import os\npip install x\n"),
        (
            "code",
            [
                "if smp.dp_rank() == 0:\n",
                "    smp.save(model.local_state_dict(), 'm.pt', partial=True)\n",
            ],
        ),
    ]
    original = make_notebook(cells)
    path.write_text(original)
    result = run_cli("check", "--format", "concise", "-q", str(path))
    assert result.code == 2
    assert result.stderr.splitlines() == [
        f"{path}:cell 3:2:5: error: syntax error: invalid syntax; this cell is skipped, the others"
        " are checked"
    ]
    assert f"{path}:cell 4:1:4: SMP301" in result.stdout
    # --apply fixes the other cells and leaves the broken one exactly as it was.
    run_cli("--apply", str(path))
    fixed = json.loads(path.read_text())
    assert fixed["cells"][2]["source"] == cells[2][1]
    assert fixed["cells"][3]["source"][0] == "if smp.rdp_rank() == 0:\n"


def test_checkable_parses_cells_one_by_one_only_when_needed() -> None:
    clean = notebook.parse(make_notebook(CELLS))
    assert clean.checkable() == (clean, ())
    broken = notebook.parse(make_notebook([*CELLS, ("code", "def f(:\n")]))
    kept, errors = broken.checkable()
    assert [cell.index for cell in kept.cells] == [1, 2, 3]
    assert [(error.index, error.line) for error in errors] == [(4, 1)]
