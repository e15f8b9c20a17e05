"""What an SMP v2 script decides about memory: FSDP's sharding strategy, mixed precision and
CPU offload, activation checkpointing and offloading.

SMP v2 has no library calls for these: the script uses PyTorch's (the official v2 example,
``shared-scripts/train_lib.py``: ``FSDP(..., mixed_precision=MixedPrecision(param_dtype=...),
sharding_strategy=...)``, ``apply_activation_checkpointing``, ``offload_wrapper(model)``, the
v2 activation offloading page). A call counts as ``script_setup.reachable`` says: under ``if``
tests known to hold it runs, under a test smpfix cannot resolve it leaves the switch unknown
and the plan estimates both ways. Calls are recognised by their name wherever they are
written, as the rest of the plan does (a call inside a helper function counts when the
helper's own tests hold).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.plan.fsdp import FULL_SHARD, STRATEGIES
from smpfix.plan.script_code import ScriptCode
from smpfix.plan.script_setup import Reading, reachable
from smpfix.plan.script_values import ScriptValues
from smpfix.program.project.parsed_file import ParsedFile

# Activation checkpointing in a v2 script: PyTorch's wrapper functions, Hugging Face's switch,
# and the official example's own helper (``train_utils.apply_activation_checkpoint``).
CHECKPOINTING = frozenset(
    {
        "apply_activation_checkpointing",
        "checkpoint_wrapper",
        "gradient_checkpointing_enable",
        "apply_activation_checkpoint",
    }
)
OFFLOADING = frozenset({"offload_wrapper"})
_FSDP = frozenset({"FullyShardedDataParallel", "FSDP"})
_HALF = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "half": "fp16", "fp16": "fp16"}


def _called(call: cst.Call) -> Optional[str]:
    func = call.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


def _calls(code: ScriptCode, names: frozenset[str]) -> Iterator[tuple[ParsedFile, cst.Call, str]]:
    for linked, call in code.calls():
        name = _called(call)
        if name in names:
            yield linked, call, name


def _switch(code: ScriptCode, values: ScriptValues, names: frozenset[str], what: str) -> Reading:
    """On when one of the calls runs, unknown when one may, else off."""
    unknown: Optional[str] = None
    skipped: Optional[str] = None
    for linked, call, name in _calls(code, names):
        runs = reachable(code, values, linked, call)
        where = f"`{name}(...)` at {code.where(linked, call)}"
        if runs:
            return Reading(True, where)
        if runs is None and unknown is None:
            unknown = f"{where} runs only under a condition smpfix cannot resolve"
        if runs is False and skipped is None:
            skipped = f"{where} does not run (the condition around it does not hold)"
    if unknown is not None:
        return Reading(None, unknown)
    return Reading(False, skipped or f"the launched code never calls {what}")


def activation_checkpointing(code: ScriptCode, values: ScriptValues) -> Reading:
    return _switch(code, values, CHECKPOINTING, "`apply_activation_checkpointing`")


def activation_offloading(code: ScriptCode, values: ScriptValues) -> Reading:
    return _switch(code, values, OFFLOADING, "`offload_wrapper`")


def precision(code: ScriptCode, values: ScriptValues) -> Reading:
    """The compute dtype of FSDP's ``MixedPrecision`` ("bf16", "fp16"), "fp32" without one."""
    found = _switch(code, values, frozenset({"MixedPrecision"}), "FSDP's `MixedPrecision`")
    if found.value is not True:
        if found.value is False:
            return Reading("fp32", f"{found.how}: FSDP computes in the parameters' fp32")
        return found
    for linked, call, _ in _calls(code, frozenset({"MixedPrecision"})):
        if reachable(code, values, linked, call):
            written = argument(call, "param_dtype", 0)
            dtype = _dtype(written.value, values, linked) if written is not None else None
            if dtype is not None:
                return Reading(dtype, f"{found.how}, param_dtype {dtype}")
            break
    return Reading("bf16", f"{found.how}: 16-bit compute assumed (its param_dtype is not resolved)")


def cpu_offload(code: ScriptCode, values: ScriptValues) -> Reading:
    """Whether the script's FSDP wrap offloads parameters to the CPU:
    ``cpu_offload=CPUOffload(offload_params=True)`` (PyTorch's ``CPUOffload``; its
    ``offload_params`` defaults to False, and so does a wrap without ``cpu_offload``)."""
    wraps = [(linked, call) for linked, call, _ in _calls(code, _FSDP)]
    if not wraps:
        return Reading(False, "no FSDP wrap found in the launched code")
    linked, call = wraps[0]
    where = f"the FSDP wrap at {code.where(linked, call)}"
    written = argument(call, "cpu_offload")
    if written is None:
        return Reading(False, f"{where} passes no cpu_offload")
    offload = _offload_params(written.value, values, linked)
    if offload is None:
        return Reading(None, f"{where}: its cpu_offload cannot be resolved")
    state = "offloads" if offload else "does not offload"
    return Reading(offload, f"{where} {state} parameters (`CPUOffload`)")


def _offload_params(
    expr: cst.BaseExpression, values: ScriptValues, linked: ParsedFile
) -> Optional[bool]:
    """``CPUOffload(offload_params=X)`` as a bool; None when X, or the expression, is not
    resolved. ``None`` (the argument's default) offloads nothing."""
    if isinstance(expr, cst.Name) and expr.value == "None":
        return False
    if not (isinstance(expr, cst.Call) and _called(expr) == "CPUOffload"):
        return None
    written = argument(expr, "offload_params", 0)
    if written is None:
        return False
    found = values.of(written.value, linked.facts)
    if found.known and isinstance(found.value, (bool, int)):
        return bool(found.value)
    return None


def _dtype(expr: cst.BaseExpression, values: ScriptValues, linked: ParsedFile) -> Optional[str]:
    if isinstance(expr, cst.Attribute):
        return _HALF.get(expr.attr.value, "fp32" if expr.attr.value == "float32" else None)
    found = values.of(expr, linked.facts)
    return _HALF.get(found.value) if found.known and isinstance(found.value, str) else None


def sharding_strategy(code: ScriptCode, values: ScriptValues) -> Reading:
    """The ``sharding_strategy`` of the script's FSDP wrap: written as ``ShardingStrategy.X``,
    as a string the script maps (the example's ``get_sharding_strategy(args.sharding_strategy)``
    with ``"hybrid_shard"``), or left out (FSDP's default, ``FULL_SHARD``)."""
    wraps = [(linked, call) for linked, call, _ in _calls(code, _FSDP)]
    if not wraps:
        return Reading(None, "no FSDP wrap found in the launched code")
    linked, call = wraps[0]
    where = f"the FSDP wrap at {code.where(linked, call)}"
    written = argument(call, "sharding_strategy")
    if written is None:
        return Reading(FULL_SHARD, f"{where} leaves sharding_strategy at FSDP's FULL_SHARD")
    strategy = _strategy(written.value, values, linked)
    if strategy is None:
        return Reading(None, f"{where}: its sharding_strategy cannot be resolved")
    return Reading(strategy, f"{where}, sharding_strategy {strategy}")


def _strategy(expr: cst.BaseExpression, values: ScriptValues, linked: ParsedFile) -> Optional[str]:
    if isinstance(expr, cst.Attribute) and expr.attr.value in STRATEGIES:
        return expr.attr.value
    if isinstance(expr, cst.Call) and len(expr.args) == 1:
        expr = expr.args[0].value  # a helper that maps a name to the enum
    found = values.of(expr, linked.facts)
    if found.known and isinstance(found.value, str):
        name = found.value.upper()
        return name if name in STRATEGIES else None
    return None
