"""What the launched script decides about memory: checkpointing, attention kernels,
precision, optimizer, sequence length, batch, and the ``smp.init`` dict it passes.

Each reading is a value (None when smpfix cannot tell) and, in words, where it came from.
A call under ``if`` tests counts when the tests are known to hold
(``if args.activation_checkpointing:`` with the hyperparameter set to 1); when a test is
unknown the switch is unknown and the plan brackets it (``verdict``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.literals import literal_value
from smpfix.job.jobfacts import KNOWN_KEYS, V2_KNOWN_KEYS, DeclaredJob
from smpfix.plan.models import ModelShape
from smpfix.plan.script_code import ScriptCode
from smpfix.plan.script_flow import FileFunctions, project_function
from smpfix.plan.script_values import ScriptValues
from smpfix.plan.setup import OPTIMIZER_STATE_BYTES
from smpfix.program.data.dataloaders import is_dataloader, loader_argument
from smpfix.program.project.parsed_file import ParsedFile

# The library's activation checkpointing entry points (as SMP807 reads them).
CHECKPOINTING = (
    "set_activation_checkpointing",
    "patches.checkpoint.checkpoint",
    "patches.checkpoint.checkpoint_sequential",
)
# argparse destinations that name the sequence length and the training batch, most specific first.
SEQUENCE_ARGUMENTS = (
    "max_context_width",
    "seq_len",
    "seq_length",
    "sequence_length",
    "max_seq_length",
    "max_seq_len",
    "block_size",
    "context_length",
    "max_length",
)
# Sequence arguments that are the model's context width: the samples may be shorter.
CONTEXT_WIDTH_ARGUMENTS = frozenset({"max_context_width"})
# Names a data pipeline cuts its texts to, most specific first.
DATA_LENGTH_NAMES = ("block_size", "max_seq_length", "max_length", "seq_length")
_NOT_READS = frozenset(
    {cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.Param, cst.FunctionDef, cst.ClassDef}
)
BATCH_ARGUMENTS = (
    "train_batch_size",
    "per_device_train_batch_size",
    "train_micro_batch_size",
    "micro_batch_size",
    "batch_size",
)
_OPTIMIZERS = {
    "adam": "adam",
    "adamw": "adam",
    "fusedadam": "adam",
    "lamb": "adam",
    "fusedlamb": "adam",
    "adamax": "adam",
    "nadam": "adam",
    "radam": "adam",
    "sgd": "sgd",
    "adagrad": "adagrad",
    "rmsprop": "rmsprop",
    "adafactor": "adafactor",
    "adadelta": "adadelta",
    "rprop": "rprop",
    "asgd": "asgd",
    "lion": "lion",
    "sparseadam": "adam",
    "adamw8bit": "adam",
}


@dataclass(frozen=True)
class Reading:
    value: Any  # None when unknown
    how: str
    # A length that is only the longest it can be (the model's context width): the sequence
    # length when the data's own is not known.
    upper_bound: bool = False


def reachable(
    code: ScriptCode, values: ScriptValues, linked: ParsedFile, node: cst.CSTNode
) -> Optional[bool]:
    """Whether the ``if`` tests around ``node`` let it run: True, False, or None when a test is
    unknown."""
    return values.reachable(linked, node)


def _library_calls(code: ScriptCode, *members: str) -> Iterator[tuple[ParsedFile, cst.Call, str]]:
    for linked in code.modules:
        for call in linked.facts.library_calls(*members):
            member = linked.facts.smp_member(call.func)
            assert member is not None
            yield linked, call, member


def activation_checkpointing(code: ScriptCode, values: ScriptValues) -> tuple[Reading, int]:
    """On, off or unknown, and the layers per checkpoint (1 for ``strategy="each"``)."""
    unknown: Optional[str] = None
    for linked, call, member in _library_calls(code, *CHECKPOINTING):
        runs = reachable(code, values, linked, call)
        if runs is False or (runs is None and unknown is not None):
            continue  # its place is quoted only when it decides (it is located on demand)
        where = f"`smp.{member.rsplit('.', 1)[-1]}(...)` at {code.where(linked, call)}"
        if runs is None:
            unknown = f"{where} runs only under a condition smpfix cannot resolve"
            continue
        group, strategy = _strategy(values, linked, call)
        return Reading(True, f"{where}{strategy}"), group
    if unknown is not None:
        return Reading(None, unknown), 1
    return Reading(False, f"{code.name} never calls `smp.set_activation_checkpointing`"), 1


def _strategy(values: ScriptValues, linked: ParsedFile, call: cst.Call) -> tuple[int, str]:
    if linked.facts.smp_member(call.func) != "set_activation_checkpointing":
        return 1, ""
    found = argument(call, "strategy", 2)
    if found is None:
        return 1, ', strategy "each"'
    strategy = values.of(found.value, linked.facts)
    if strategy.known and strategy.value == "each":
        return 1, ', strategy "each"'
    match = re.fullmatch(r"group_(\d+)", str(strategy.value)) if strategy.known else None
    if match and int(match.group(1)) >= 1:
        return int(match.group(1)), f", strategy {strategy.value!r}"
    return 1, ', a strategy taken as "each" (one checkpoint per layer)'


def flash_attention(code: ScriptCode, values: ScriptValues, gpu_supports_it: bool) -> Reading:
    """The library's flash attention kernels: only in its distributed transformer, which
    ``smp.model_creation(tensor_parallelism=...)`` builds, and only on Ampere or newer GPUs."""
    own = _own_flash_attention(code, values) if gpu_supports_it else None
    if own is not None and own.value is not False:
        return own
    calls = [(linked, call) for linked, call, _ in _library_calls(code, "model_creation")]
    if not calls:
        return Reading(
            False, f"{code.name} does not build the model inside `smp.model_creation(...)`"
        )
    if not gpu_supports_it:
        return Reading(False, "this GPU has no flash attention kernels")
    linked, call = calls[0]
    where = f"`smp.model_creation(...)` at {code.where(linked, call)}"
    tensor = argument(call, "tensor_parallelism", 0)
    distributed = values.of(tensor.value, linked.facts) if tensor is not None else None
    if distributed is not None and not distributed.known:
        return Reading(None, f"{where}: tensor_parallelism cannot be resolved")
    if distributed is None or not distributed.value:
        return Reading(
            False,
            f"{where} without tensor_parallelism: the library's attention kernels are not used",
        )
    flash = argument(call, "flash_attention")
    if flash is None:
        return Reading(None, f"{where} does not pass flash_attention")
    found = values.of(flash.value, linked.facts)
    if not found.known:
        return Reading(None, f"{where}: flash_attention cannot be resolved")
    return Reading(
        bool(found.value), f"{where}, flash_attention={bool(found.value)}" + _because(found.how)
    )


def _own_flash_attention(code: ScriptCode, values: ScriptValues) -> Optional[Reading]:
    """The model's own flash attention: a project function named for it (the FLAN-T5 example's
    ``add_flash_attn(model, model_config)``, which swaps each T5 attention for a flash one),
    called where it runs; None when the code has no such function."""
    unknown: Optional[Reading] = None
    for linked in code.modules:
        for name, calls in linked.answer(FileFunctions).calls.items():
            if "flash" not in name.lower() or project_function(code.modules, name) is None:
                continue
            for call in calls:
                runs = values.reachable(linked, call)
                where = f"`{name}(...)` at {code.where(linked, call)}"
                if runs:
                    return Reading(True, f"{where} gives the model its own flash attention")
                if runs is None and unknown is None:
                    unknown = Reading(
                        None, f"{where} runs only under a condition smpfix cannot resolve"
                    )
    return unknown


def model_dtype(code: ScriptCode, values: ScriptValues) -> Reading:
    """The dtype passed to ``smp.model_creation(dtype=...)``: "fp16", "bf16", "fp32" or None."""
    for linked, call, _ in _library_calls(code, "model_creation"):
        found = argument(call, "dtype")
        if found is None:
            continue
        dtype = values.of(found.value, linked.facts)
        where = f"`smp.model_creation(dtype=...)` at {code.where(linked, call)}"
        if dtype.known and dtype.value in ("fp16", "bf16", "fp32"):
            return Reading(dtype.value, f"{where}" + _because(dtype.how))
        return Reading(None, f"{where}: the dtype cannot be resolved")
    return Reading(None, "")


def optimizer(code: ScriptCode, values: ScriptValues) -> Reading:
    """The optimizer whose state the job keeps; Adam (the largest common state) when unclear."""
    found: dict[str, str] = {}
    for linked in code.modules:
        for call in linked.facts.optimizer_constructions:
            qualified = linked.facts.qualified_name(call.func) or ""
            name = qualified.rsplit(".", 1)[-1]
            kind = _OPTIMIZERS.get(name.lower())
            unknown = (
                ""
                if kind is not None
                else ", an optimizer smpfix does not know: Adam's state assumed"
            )
            kind = kind or "adam"
            if kind == "sgd":
                kind = _sgd(values, linked, call)
            if kind not in found:  # the first constructor of each kind is quoted
                found[kind] = f"`{name}` at {code.where(linked, call)}{unknown}"
    if not found:
        return Reading(
            "adam",
            "no optimizer constructed in the launched code: Adam assumed (the Hugging Face "
            "Trainer's default)",
        )
    kind = max(found, key=lambda k: OPTIMIZER_STATE_BYTES[k])
    extra = " (the largest state of the optimizers the code may build)" if len(found) > 1 else ""
    return Reading(kind, f"{found[kind]}{extra}")


def _sgd(values: ScriptValues, linked: ParsedFile, call: cst.Call) -> str:
    """SGD keeps a momentum buffer unless momentum is known to be 0 (its default)."""
    momentum = argument(call, "momentum", 2)
    if momentum is None:
        return "sgd"
    value = values.of(momentum.value, linked.facts)
    return "sgd" if value.known and not value.value else "sgd with momentum"


def sequence_length(code: ScriptCode, values: ScriptValues, shape: Optional[ModelShape]) -> Reading:
    """The length of the training samples: a sequence-length argument, capped by the length
    the data pipeline cuts its texts to where smpfix can read it (``block_size``). The model's
    context width (``max_context_width``, its maximum positions) without such a length is an
    upper bound, and said to be one."""
    data = data_length(code, values)
    for dest in SEQUENCE_ARGUMENTS:
        if values.has_argument(dest):
            found = values.argument(dest)
            if not (found.known and isinstance(found.value, int) and found.value > 0):
                return Reading(None, f"the sequence length `{dest}` cannot be resolved")
            if dest not in CONTEXT_WIDTH_ARGUMENTS:
                return Reading(found.value, found.explained())
            return _capped(found.value, found.explained(), data)
    if shape is not None and shape.max_positions:
        return _capped(
            shape.max_positions,
            f"no sequence-length argument in {code.name}: the model's maximum, "
            f"{shape.max_positions}",
            data,
        )
    if data is not None:
        return data
    return Reading(None, f"no sequence-length argument in {code.name}")


def _capped(width: int, how: str, data: Optional[Reading]) -> Reading:
    if data is None:
        return Reading(width, f"{how} (upper bound: the data's length is not known)", True)
    if data.value >= width:
        return Reading(width, f"{how}; the data is cut to {data.how}")
    return Reading(data.value, f"the data is cut to {data.how}; {how}")


def data_length(code: ScriptCode, values: ScriptValues) -> Optional[Reading]:
    """The length the data pipeline cuts its texts to: the value a length name
    (``block_size``, ``max_length``) holds where the launcher's data preparation or the
    script's top level last reads it, when smpfix can work it out (``block_size =
    min(tokenizer.model_max_length, 1024)`` with a tokenizer it knows)."""
    files: list[ParsedFile] = [
        *((values.launcher_file,) if values.launcher_file is not None else ()),
        *code.modules,
    ]
    for file in files:
        last = file.answer(_LengthReads).last
        for name in DATA_LENGTH_NAMES:
            if name not in last:
                continue
            found = values.of(last[name], file.facts)
            if found.known and isinstance(found.value, int) and found.value > 0:
                where = (
                    code.where(file, last[name])
                    if file is not values.launcher_file
                    else os.path.basename(file.path)  # a notebook's lines are its cells'
                )
                detail = _because(found.how)
                return Reading(found.value, f"`{name}` = {found.value} ({where}){detail}")
    return None


@dataclass(frozen=True)
class _LengthReads:
    """Where the top level of one file last reads each length name it assigns: the same for
    every launcher that plans a script over this file, so read once per tree."""

    last: Mapping[str, cst.Name]

    @classmethod
    def of_file(cls, file: ParsedFile) -> _LengthReads:
        last: dict[str, cst.Name] = {}
        for node in file.nodes_of(cst.Name):
            assert isinstance(node, cst.Name)
            name = node.value
            if name in DATA_LENGTH_NAMES and name in file.facts.names.assignments:
                if type(file.facts.names.scope_of(node)) is cst.Module and _is_read(file, node):
                    last[name] = node
        return cls(last)


def _is_read(file: ParsedFile, node: cst.Name) -> bool:
    """``node`` reads its name (not a target, a keyword, a parameter or an attribute's name)."""
    parent = file.parents.parent_of(node)
    if type(parent) is cst.Arg:
        return parent.value is node
    if type(parent) is cst.Attribute:
        return parent.value is node
    return type(parent) not in _NOT_READS


def batch_size(code: ScriptCode, values: ScriptValues) -> Reading:
    """The training batch: an argparse batch argument, else the batch size of the DataLoaders."""
    for dest in BATCH_ARGUMENTS:
        if values.has_argument(dest):
            found = values.argument(dest)
            if found.known and isinstance(found.value, int) and found.value > 0:
                return Reading(found.value, found.explained())
            return Reading(None, f"the batch `{dest}` cannot be resolved")
    sizes: dict[int, str] = {}
    for linked, call in code.calls():
        if not is_dataloader(call, linked.facts):
            continue
        written = loader_argument(call, "batch_size")
        value = values.of(written, linked.facts) if written is not None else None
        if value is None or not value.known or not isinstance(value.value, int):
            return Reading(
                None,
                f"the batch size of the DataLoader at {code.where(linked, call)} cannot be "
                "resolved",
            )
        sizes.setdefault(
            value.value, f"the DataLoader at {code.where(linked, call)}" + _because(value.how)
        )
    if len(sizes) == 1:
        size, how = next(iter(sizes.items()))
        return Reading(size, how)
    return Reading(None, "no batch-size argument or DataLoader batch size in the launched code")


def init_settings(code: ScriptCode, values: ScriptValues) -> Optional[DeclaredJob]:
    """The script's ``smp.init({...})`` dict (SMP v1), or its ``tsm.init({...})`` dict (SMP v2),
    with its values evaluated (``args.fp16 > 0``); the launcher overrides it, and keys it leaves
    out may still come from the launcher."""
    script = code.script
    if script is None:
        return None
    facts = script.facts
    call, known, name = facts.init_config_call, KNOWN_KEYS, "smp.init"
    if call is None:
        v2_inits = facts.calls_by_qualified_name.get(_TSM_INIT, ())
        call, known, name = (v2_inits[0] if v2_inits else None), V2_KNOWN_KEYS, "tsm.init"
    if call is None:
        return None
    config = argument(call, "config", 0)
    if config is None:
        return None
    written = facts.names.value(config.value)
    if not isinstance(written, cst.Dict):
        return None  # a JSON file's path (SMP v2), or a dict built elsewhere
    settings: dict[str, Any] = {}
    unknown: set[str] = set()
    for element in written.elements:
        if not isinstance(element, cst.DictElement):
            return None  # ** merges another dict: keys smpfix cannot list
        key = literal_value(element.key)
        if not isinstance(key, str) or key not in known:
            continue
        found = values.of(element.value, facts)
        if found.known and isinstance(found.value, (bool, int, float, str)):
            settings[key] = found.value
        else:
            unknown.add(key)
    where = code.where(script, call)
    return DeclaredJob(
        f"the {name}({{...}}) dict at {where}",
        settings,
        complete=False,
        unknown=frozenset(unknown),
    )


_TSM_INIT = "torch.sagemaker.init"


def _because(how: tuple[str, ...]) -> str:
    return f" ({'; '.join(how)})" if how else ""
