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

- DeepSpeed (``_HANDS_OFF``): a script that trains with it hands the model to DeepSpeed's
  engine, which never calls ``smp.init`` nor wraps a model in ``smp.DistributedModel`` (its
  source never names the library). Since 0.9 ``import deepspeed`` imports a transformers model
  module, whose ``modeling_utils`` imports the library when SageMaker enables it (``partitions``
  in ``SM_HP_MP_PARAMETERS``): the library may then be imported, never used. The answer is
  OFF all the same, with ``hands_off`` naming DeepSpeed so the message says so.

A script that starts another program (``subprocess.run``, ``os.system``) is followed when the
command is known: a Python script of the project it starts (``python``, ``torchrun``,
``deepspeed``, ``mpirun ... python``), directly or through the repository's shell scripts, is
read in turn (``smpfix.job.command_launches``, ``smpfix.job.shell_launcher``). Anything else
makes the answer unknown: a package smpfix cannot read (``from mylib.train import main`` may
import the library), a relative import it cannot find, code loaded by name
(``importlib.import_module``, ``exec``) or a program it cannot follow. Installing packages
with ``pip`` from the script is not running other code.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Optional, Union

import libcst as cst

from smpfix.base.walker import iter_nodes
from smpfix.job.command_launches import StartedCommand, started_commands, working_dir
from smpfix.job.jobfacts import Tri
from smpfix.job.launch_chains import MAX_DEPTH, shell_script
from smpfix.job.project_root import project_folder, project_root
from smpfix.job.shell_launcher import command_launch, shell_commands
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
        "typing_extensions",
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
# Packages a script hands its training to, which never use the model parallelism library
# (module docstring), with the name a message gives them.
_HANDS_OFF = {"deepspeed": "DeepSpeed"}
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
        "deepspeed.launcher.runner.main",
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
        "set",
        "export",
        "cd",
        "true",
        "exit",
        "sleep",
        "cat",
        "ln",
        "chmod",
        "touch",
        "nproc",
        "hostname",
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
    # The framework the code trains with instead (``DeepSpeed``), when it imports one.
    hands_off: str = ""
    # Whether some of ``files`` are scripts the code starts as other programs.
    starts: bool = False


def library_loading(script: str, modules: LocalModules) -> LibraryLoading:
    """Whether ``script`` (a project file) or a project module it imports loads the library."""
    # Each file with the script whose process imports it: that script's folder is on
    # ``sys.path`` (its ``sys.path[0]``) for every module the process imports.
    queue = [(os.path.abspath(script), os.path.abspath(script))]
    seen = {os.path.abspath(script)}
    read: list[str] = []
    hands_off = ""
    starts = False
    while queue:
        path, entry = queue.pop(0)
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
        resolvers = [modules.for_importer(path)]
        if entry != path:
            resolvers.append(modules.for_importer(entry))
        for imported in _imports(linked.module):
            if imported.lstrip(".").startswith(_LIBRARY):
                return LibraryLoading(Tri.ON, f"{name} imports the library", tuple(read))
            found = next(
                (f for f in (_project_file(r, imported) for r in resolvers) if f is not None), None
            )
            if found is not None:
                if found not in seen:
                    seen.add(found)
                    queue.append((found, entry))
            elif imported.split(".", 1)[0] in _HANDS_OFF:
                hands_off = hands_off or _HANDS_OFF[imported.split(".", 1)[0]]
            elif imported.startswith(".") or not _never_loads(imported):
                return LibraryLoading(
                    Tri.UNKNOWN,
                    f"{name} imports `{imported}`, which smpfix cannot read",
                    tuple(read),
                )
        started = _started_scripts(linked, modules)
        if isinstance(started, str):
            return LibraryLoading(
                Tri.UNKNOWN, f"{name} runs code smpfix cannot see (`{started}`)", tuple(read)
            )
        for found in started:
            starts = True
            if found not in seen:
                seen.add(found)
                queue.append((found, found))
        if len(seen) > _MAX_FILES:
            return LibraryLoading(Tri.UNKNOWN, "too many project modules to read", tuple(read))
    return LibraryLoading(Tri.OFF, "", tuple(read), hands_off, starts)


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


def _started_scripts(linked: ParsedFile, modules: LocalModules) -> Union[list[str], str]:
    """The project scripts the file starts as other programs, or the code of the first call
    that runs code smpfix cannot follow."""
    module, facts = linked.module, linked.facts
    commands: Optional[dict[int, StartedCommand]] = None
    started: list[str] = []
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
        if qualified not in _PROGRAMS or _harmless_program(call, facts):
            continue
        if commands is None:
            commands = {
                id(command.node): command
                for command in started_commands(module, facts.imports, linked.path)
            }
        command = commands.get(id(call))
        scripts = _command_scripts(command, linked.path, modules) if command is not None else None
        if scripts is None:
            return module.code_for_node(func)
        started.extend(scripts)
    return started


def _command_scripts(
    command: StartedCommand, holder: str, modules: LocalModules, depth: int = 0
) -> Optional[list[str]]:
    """The project scripts a command starts, through the shell scripts it runs; None when a
    program in it is neither harmless nor a script smpfix can read."""
    return _text_scripts(command.text, working_dir(command, holder), holder, modules, depth)


def _text_scripts(
    text: str, cwd: str, holder: str, modules: LocalModules, depth: int
) -> Optional[list[str]]:
    scripts: list[str] = []
    for words in shell_commands(text):
        if _harmless_words(words):
            continue
        launch = command_launch(words, {}, 0, cwd)
        if launch is None:
            return None
        if launch.starts_shell_script:
            folder = project_folder(project_root(holder), holder)
            found = shell_script(launch, holder, folder) if depth < MAX_DEPTH else None
            inner = (
                _text_scripts(found[1], cwd, found[0], modules, depth + 1)
                if found is not None
                else None
            )
            if inner is None:
                return None
            scripts.extend(inner)
            continue
        script = _script_file(launch.script, cwd, holder, modules)
        if script is None:
            return None
        scripts.append(script)
    return scripts


def _script_file(script: str, cwd: str, holder: str, modules: LocalModules) -> Optional[str]:
    for base in (cwd, os.path.dirname(holder)):
        candidate = os.path.normpath(os.path.join(base, script))
        if os.path.isfile(candidate) and modules.project.contains(candidate):
            return candidate
    return None


def _harmless_words(words: Sequence[str]) -> bool:
    program = os.path.basename(words[0])
    if program.startswith("python") and words[1:3] == ["-m", "pip"]:
        return True
    return program in _HARMLESS_PROGRAMS


def _harmless_program(call: cst.Call, facts: FileFacts) -> bool:
    """A literal command whose programs are not Python (``pip install x``, ``nvidia-smi``), or
    ``python -m pip``; a shell string counts only when every command in it is harmless."""
    if not call.args:
        return False
    command = facts.literal(call.args[0].value)
    if isinstance(command, str):
        commands = list(shell_commands(command))
        return bool(commands) and all(_harmless_words(words) for words in commands)
    if not isinstance(command, list) or not command:
        return False
    return all(isinstance(word, str) for word in command) and _harmless_words(command)
