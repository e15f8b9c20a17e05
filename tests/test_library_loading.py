"""Does a launched script, with its project modules, load the library?
(``smpfix.rules.job_config._library_loading``)

The answer is OFF only when every import is known; each case writes a small project and asks
about ``train.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from smpfix.job.jobfacts import Tri
from smpfix.job.project import Project
from smpfix.program.project.local_modules import LocalModules
from smpfix.rules.job_config._library_loading import library_loading, torchrun_variables


def _loading(root: Path, files: dict[str, str]) -> Tri:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    script = str(root / "train.py")
    return library_loading(script, LocalModules(Project((str(root),)), script)).state


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {
                "train.py": (
                    "import os\nimport torch\nimport numpy as np\nfrom torch.utils.data import"
                    " DataLoader\n"
                )
            },
            Tri.OFF,
        ),
        ({"train.py": "import tensorflow as tf\nimport horovod.tensorflow as hvd\n"}, Tri.OFF),
        ({"train.py": "import smdistributed.modelparallel.torch as smp\n"}, Tri.ON),
        ({"train.py": "from smdistributed import modelparallel\n"}, Tri.ON),
        (
            {"train.py": "def main():\n    import smdistributed.modelparallel.tensorflow as smp\n"},
            Tri.ON,
        ),
        ({"train.py": "import smdistributed.dataparallel.torch.distributed as dist\n"}, Tri.OFF),
        ({"train.py": "from model import build\n", "model.py": "import torch\n"}, Tri.OFF),
        (
            {
                "train.py": "from model import build\n",
                "model.py": "from layers import Block\n",
                "layers.py": "import smdistributed.modelparallel.torch as smp\n",
            },
            Tri.ON,
        ),
        (
            {
                "train.py": "from pkg.model import build\n",
                "pkg/__init__.py": "",
                "pkg/model.py": "from .parts import x\n",
                "pkg/parts.py": "import torch\n",
            },
            Tri.OFF,
        ),
        ({"train.py": "from .missing import x\n"}, Tri.UNKNOWN),
        ({"train.py": "from mylib.train import main\n"}, Tri.UNKNOWN),
        (
            {
                "train.py": (
                    "import transformers\nmodel = transformers.AutoModel.from_pretrained('gpt2')\n"
                )
            },
            Tri.UNKNOWN,
        ),
        ({"train.py": "from transformers import Trainer\ntrainer = Trainer(model=m)\n"}, Tri.ON),
        ({"train.py": "import importlib\nmodule = importlib.import_module(name)\n"}, Tri.UNKNOWN),
        (
            {"train.py": "import subprocess\nsubprocess.run(['python', 'train_smp.py'])\n"},
            Tri.UNKNOWN,
        ),
        (
            {"train.py": "import subprocess\nsubprocess.run(['pip', 'install', 'einops'])\n"},
            Tri.OFF,
        ),
        ({"train.py": "import os\nos.system('python -m pip install einops')\n"}, Tri.OFF),
        ({"train.py": "import subprocess\nsubprocess.run(command)\n"}, Tri.UNKNOWN),
        ({"train.py": "def eval(model):\n    return model\neval(1)\n"}, Tri.OFF),
        ({"train.py": "exec(open('other.py').read())\n"}, Tri.UNKNOWN),
        # A program the script starts is followed when it is a script of the project, directly
        # or through the repository's shell scripts.
        (
            {
                "train.py": "import subprocess\nsubprocess.run(['torchrun', 'ddp.py'])\n",
                "ddp.py": "import torch\n",
            },
            Tri.OFF,
        ),
        (
            {
                "train.py": "import os\nos.system('pip install x && bash run.sh --epochs 1')\n",
                "run.sh": 'set -e\nexport NCCL_DEBUG=INFO\npython smp_train.py "$@"\n',
                "smp_train.py": "import smdistributed.modelparallel.torch as smp\n",
            },
            Tri.ON,
        ),
        (
            {
                "train.py": "import subprocess\nsubprocess.run(['bash', 'run.sh'])\n",
                "run.sh": "./prepare_data\npython ddp.py\n",
                "ddp.py": "import torch\n",
            },
            Tri.UNKNOWN,  # a program smpfix cannot read
        ),
        ({"train.py": "import subprocess\nsubprocess.run(['make', '-C', 'csrc'])\n"}, Tri.UNKNOWN),
        # DeepSpeed never uses the library.
        ({"train.py": "import deepspeed\nimport torch\n"}, Tri.OFF),
        (
            {
                "train.py": "import deepspeed\ndeepspeed.launcher.runner.main(['x.py'])\n",
            },
            Tri.UNKNOWN,  # DeepSpeed's runner starts programs smpfix does not follow
        ),
        # A package beside the script is found from any module the script's process imports
        # (the script's folder is on ``sys.path``).
        (
            {
                "train.py": "from pkg.model import build\n",
                "pkg/__init__.py": "",
                "pkg/model.py": "from pkg.layers import Block\n",
                "pkg/layers.py": "import smdistributed.modelparallel.torch as smp\n",
            },
            Tri.ON,
        ),
    ],
)
def test_what_the_script_loads(tmp_path: Path, files: dict[str, str], expected: Tri) -> None:
    assert _loading(tmp_path, files) is expected


def test_a_script_that_is_not_there_is_unknown(tmp_path: Path) -> None:
    script = str(tmp_path / "train.py")
    assert (
        library_loading(script, LocalModules(Project((str(tmp_path),)), script)).state
        is Tri.UNKNOWN
    )


def test_torchrun_variables_and_whether_reading_them_fails(tmp_path: Path) -> None:
    source = (
        "import os\nlocal_rank = int(os.environ['LOCAL_RANK'])\nrank = int(os.environ.get('RANK',"
        " 0))\nworld = os.getenv('WORLD_SIZE')\nhome = os.environ['HOME']\n"
    )
    (tmp_path / "train.py").write_text(source, encoding="utf-8")
    modules = LocalModules(Project((str(tmp_path),)), str(tmp_path / "train.py"))
    linked = modules.load(str(tmp_path / "train.py"))
    assert linked is not None
    assert torchrun_variables([linked]) == {"LOCAL_RANK": True, "RANK": False, "WORLD_SIZE": False}


def test_a_script_that_trains_with_deepspeed_hands_its_training_off(tmp_path: Path) -> None:
    files = {
        "train.py": "import subprocess\nsubprocess.run(['deepspeed', 'pretrain.py'])\n",
        "pretrain.py": "import deepspeed\nfrom model import build\n",
        "model.py": "import torch\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    script = str(tmp_path / "train.py")
    found = library_loading(script, LocalModules(Project((str(tmp_path),)), script))
    assert (found.state, found.hands_off, found.starts) == (Tri.OFF, "DeepSpeed", True)
    assert [Path(path).name for path in found.files] == ["train.py", "pretrain.py", "model.py"]
