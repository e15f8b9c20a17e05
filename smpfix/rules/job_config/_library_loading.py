"""Does a script, with the project modules it imports, ever load the model parallelism library?

A launcher that enables ``smdistributed.modelparallel`` only sets the library up for the
processes ``mpirun`` starts; the library does something only in a process that imports it
(the PyTorch or TensorFlow flavour, which initialise it), or that builds a Hugging Face
``Trainer`` (which imports and drives it when SageMaker enables it). Whether a script never
does is provable only when every import it and its project modules make is known:

- a project file, read in turn (any depth, up to a bound);
- the standard library, or a third-party package known not to load the library (PyTorch,
  NumPy, TensorFlow, ... : ``_NEVER_LOADS``); ``transformers`` is not one of them, since its
  ``TrainingArguments`` initialises the library when SageMaker enables it.

Anything else makes the answer unknown: a package smpfix cannot read (``from mylib.train import
main`` may import the library), a relative import it cannot find, code loaded by name
(``importlib.import_module``, ``exec``) or started as another program (``subprocess`` running
Python). Installing packages with ``pip`` from the script is not running other code.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.walker import iter_nodes
from smpfix.job.jobfacts import Tri
from smpfix.program.facts import FileFacts
from smpfix.program.project.local_modules import LocalModules
from smpfix.program.project.parsed_file import ParsedFile

_LIBRARY = "smdistributed.modelparallel"
# Project files read before giving up.
_MAX_FILES = 40

# Top-level packages (or dotted prefixes) that never import the model parallelism library.
_NEVER_LOADS = frozenset(
    {
        "torch",
        "torchvision",
        "torchaudio",
        "torchtext",
        "torchdata",
        "torchmetrics",
        "numpy",
        "scipy",
        "pandas",
        "sklearn",
        "PIL",
        "cv2",
        "skimage",
        "matplotlib",
        "seaborn",
        "tqdm",
        "yaml",
        "h5py",
        "boto3",
        "botocore",
        "s3fs",
        "fsspec",
        "requests",
        "datasets",
        "tokenizers",
        "sentencepiece",
        "safetensors",
        "huggingface_hub",
        "timm",
        "einops",
        "tensorflow",
        "keras",
        "tensorflow_datasets",
        "tensorflow_addons",
        "horovod",
        "mpi4py",
        "apex",
        "wandb",
        "mlflow",
        "tensorboard",
        "tensorboardX",
        "psutil",
        "pynvml",
        "nltk",
        "packaging",
        "filelock",
        "pyarrow",
        "regex",
        "six",
        "click",
        "absl",
        "sagemaker",
        "smdistributed.dataparallel",
    }
)
# The standard library's top-level modules (all of them from Python 3.10; before, the common ones).
_STANDARD = frozenset(getattr(sys, "stdlib_module_names", ())) | frozenset(
    {
        "__future__",
        "abc",
        "argparse",
        "ast",
        "asyncio",
        "base64",
        "collections",
        "contextlib",
        "copy",
        "csv",
        "dataclasses",
        "datetime",
        "enum",
        "errno",
        "functools",
        "gc",
        "glob",
        "gzip",
        "hashlib",
        "heapq",
        "importlib",
        "inspect",
        "io",
        "itertools",
        "json",
        "logging",
        "math",
        "multiprocessing",
        "operator",
        "os",
        "pathlib",
        "pickle",
        "platform",
        "queue",
        "random",
        "re",
        "shutil",
        "signal",
        "socket",
        "string",
        "struct",
        "subprocess",
        "sys",
        "tarfile",
        "tempfile",
        "threading",
        "time",
        "traceback",
        "types",
        "typing",
        "unittest",
        "urllib",
        "uuid",
        "warnings",
        "zipfile",
    }
)
# Calls that run code smpfix cannot see: loaded by name (also anything of ``runpy``), or another
# program.
_LOADERS = frozenset({"importlib.import_module", "builtins.exec"})
_PROGRAMS = frozenset(
    {
        "subprocess.run",
        "subprocess.call",
        "subprocess.check_call",
        "subprocess.check_output",
        "subprocess.Popen",
        "os.system",
        "os.popen",
        "os.execv",
        "os.execvp",
        "os.execvpe",
        "os.execl",
        "os.execlp",
        "os.spawnv",
        "os.spawnl",
    }
)
# Programs a script may run that are not Python training code.
_HARMLESS_PROGRAMS = frozenset(
    {
        "pip",
        "pip3",
        "conda",
        "apt",
        "apt-get",
        "nvidia-smi",
        "aws",
        "ls",
        "mkdir",
        "cp",
        "mv",
        "rm",
        "tar",
        "unzip",
        "wget",
        "curl",
        "echo",
        "df",
        "du",
        "free",
        "git",
        "env",
    }
)
# Variables torchrun sets and mpirun does not.
TORCHRUN_VARIABLES = ("LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")


@dataclass(frozen=True)
class LibraryLoading:
    """``state``: ON when the code loads the library, OFF when it provably never does,
    UNKNOWN otherwise; ``why`` says what decided it; ``files`` are the files read (script first)."""

    state: Tri
    why: str
    files: tuple[str, ...]


def library_loading(script: str, modules: LocalModules) -> LibraryLoading:
    """Whether ``script`` (a project file) or a project module it imports loads the library."""
    queue = [os.path.abspath(script)]
    seen = set(queue)
    read: list[str] = []
    while queue:
        path = queue.pop(0)
        linked = modules.load(path)
        name = os.path.basename(path)
        if linked is None:
            return LibraryLoading(Tri.UNKNOWN, f"{name} cannot be read", tuple(read))
        read.append(path)
        facts = linked.facts
        if facts.imports_smp or facts.imports_smp_v2:
            return LibraryLoading(Tri.ON, f"{name} imports the library", tuple(read))
        if facts.uses_hf_trainer:
            return LibraryLoading(Tri.ON, f"{name} builds a Hugging Face Trainer", tuple(read))
        resolver = modules.for_importer(path)
        for imported in _imports(linked.module):
            if imported.lstrip(".").startswith(_LIBRARY):
                return LibraryLoading(Tri.ON, f"{name} imports the library", tuple(read))
            found = _project_file(resolver, imported)
            if found is not None:
                if found not in seen:
                    seen.add(found)
                    queue.append(found)
            elif imported.startswith(".") or not _never_loads(imported):
                return LibraryLoading(
                    Tri.UNKNOWN,
                    f"{name} imports `{imported}`, which smpfix cannot read",
                    tuple(read),
                )
        runner = _runs_other_code(linked.module, facts)
        if runner is not None:
            return LibraryLoading(
                Tri.UNKNOWN, f"{name} runs code smpfix cannot see (`{runner}`)", tuple(read)
            )
        if len(seen) > _MAX_FILES:
            return LibraryLoading(Tri.UNKNOWN, "too many project modules to read", tuple(read))
    return LibraryLoading(Tri.OFF, "", tuple(read))


def torchrun_variables(files: Sequence[ParsedFile]) -> dict[str, bool]:
    """The torchrun variables the code reads from the environment, each with whether a read
    fails when it is unset (``os.environ["LOCAL_RANK"]``) rather than taking a default
    (``os.environ.get("RANK")``, ``os.getenv("WORLD_SIZE")``); in the order of
    ``TORCHRUN_VARIABLES``.
    """
    found: dict[str, bool] = {}
    for linked in files:
        facts = linked.facts
        for node in iter_nodes(linked.module):
            key: Optional[cst.BaseExpression] = None
            raises = type(node) is cst.Subscript
            if (
                type(node) is cst.Subscript
                and facts.qualified_name(node.value) == "os.environ"
                and len(node.slice) == 1
            ):
                index = node.slice[0].slice
                key = index.value if type(index) is cst.Index else None
            elif type(node) is cst.Call and node.args and _reads_environment(node, facts):
                key = node.args[0].value
            value = facts.literal(key) if key is not None else None
            if isinstance(value, str) and value in TORCHRUN_VARIABLES:
                found[value] = found.get(value, False) or raises
    return {name: found[name] for name in TORCHRUN_VARIABLES if name in found}


def _reads_environment(call: cst.Call, facts: FileFacts) -> bool:
    func = call.func
    if facts.qualified_name(func) == "os.getenv":
        return True
    return (
        type(func) is cst.Attribute
        and func.attr.value == "get"
        and facts.qualified_name(func.value) == "os.environ"
    )


def _imports(module: cst.Module) -> Iterator[str]:
    """Every module name an import anywhere in ``module`` may load: ``a.b`` for ``import a.b``;
    ``pkg.x`` (which may be a submodule) for ``from pkg import x``; dots kept for relative imports.
    """
    for node in iter_nodes(module):
        if type(node) is cst.Import:
            for alias in node.names:
                yield _dotted(alias.name)
        elif type(node) is cst.ImportFrom:
            base = "." * len(node.relative) + (
                _dotted(node.module) if node.module is not None else ""
            )
            if isinstance(node.names, cst.ImportStar):
                yield base
                continue
            for alias in node.names:
                name = _dotted(alias.name)
                yield f"{base}{name}" if base.endswith(".") or not base else f"{base}.{name}"


def _dotted(node: cst.BaseExpression) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _project_file(resolver: LocalModules, imported: str) -> Optional[str]:
    """The project file ``imported`` names, or the package module holding it (``from model import
    GPT``)."""
    dots = len(imported) - len(imported.lstrip("."))
    parts = imported[dots:].split(".")
    for cut in range(len(parts), 0, -1):
        found = resolver.find_file("." * dots + ".".join(parts[:cut]))
        if found is not None:
            return os.path.abspath(found)
    return None


def _never_loads(imported: str) -> bool:
    top = imported.split(".", 1)[0]
    if top in _STANDARD:
        return True
    return any(imported == known or imported.startswith(known + ".") for known in _NEVER_LOADS)


def _runs_other_code(module: cst.Module, facts: FileFacts) -> Optional[str]:
    for call in facts.call_order:
        func = call.func
        local = type(func) is cst.Name and (
            func.value in facts.functions or func.value in facts.classes
        )
        qualified = facts.qualified_name(func) or (
            func.value if type(func) is cst.Name and not local else ""
        )
        if (
            qualified in _LOADERS
            or qualified.startswith("runpy.")
            or qualified in ("exec", "eval", "__import__")
        ):
            return module.code_for_node(func)
        if qualified in _PROGRAMS and not _harmless_program(call, facts):
            return module.code_for_node(func)
    return None


def _harmless_program(call: cst.Call, facts: FileFacts) -> bool:
    """A literal command whose program is not Python (``pip install x``, ``nvidia-smi``), or
    ``python -m pip``."""
    if not call.args:
        return False
    command = facts.literal(call.args[0].value)
    words = (
        command.split()
        if isinstance(command, str)
        else command
        if isinstance(command, list)
        else None
    )
    if not words or not all(isinstance(word, str) for word in words):
        return False
    program = os.path.basename(words[0])
    if program.startswith("python"):
        return words[1:3] == ["-m", "pip"]
    return program in _HARMLESS_PROGRAMS
