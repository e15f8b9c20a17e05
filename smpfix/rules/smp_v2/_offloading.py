"""What the code an SMP v2 configuration runs does about activation memory: whether it applies
PyTorch's ``offload_wrapper`` and whether it checkpoints activations.

SMP v2 has no calls of its own for either: ``sm_activation_offloading`` chooses SMP's
implementation of PyTorch's ``offload_wrapper``, which the script applies, and the activation
offloading page says offloading applies only together with activation checkpointing, which the
script also applies with PyTorch (``apply_activation_checkpointing``). The official v2 example
does both in ``shared-scripts/train_lib.py`` and its helper module ``train_utils.py``, so the
script's project modules are read too (three levels deep). A call made inside an installed
package cannot be seen: the rules that report a missing call say where they looked.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.job.launcher import Located
from smpfix.program.facts import FileFacts
from smpfix.program.model import Program
from smpfix.rules.config_rule import ConfigView
from smpfix.rules.launched_code import launched_code

OFFLOAD_WRAPPER = "torch.distributed.algorithms._checkpoint.checkpoint_wrapper.offload_wrapper"
_CHECKPOINT_WRAPPER = "torch.distributed.algorithms._checkpoint.checkpoint_wrapper."
# Activation checkpointing as a v2 script writes it: PyTorch's wrappers and functions, Transformer
# Engine's (the official example's fp8 path), Hugging Face's switch.
CHECKPOINTING = frozenset(
    {
        _CHECKPOINT_WRAPPER + "apply_activation_checkpointing",
        _CHECKPOINT_WRAPPER + "checkpoint_wrapper",
        "torch.utils.checkpoint.checkpoint",
        "torch.utils.checkpoint.checkpoint_sequential",
        "transformer_engine.pytorch.checkpoint",
    }
)
# The same calls by their last name, as ``smpfix.plan.script_fsdp`` recognises them, for a call
# whose import smpfix cannot resolve (and the official example's own helper).
_CHECKPOINTING_NAMES = frozenset(
    {
        "apply_activation_checkpointing",
        "checkpoint_wrapper",
        "gradient_checkpointing_enable",
        "apply_activation_checkpoint",
    }
)
# How many levels of project imports below the script are searched.
_DEPTH = 3


def offloading_code(
    program: Program, view: ConfigView
) -> Optional[tuple[Located, tuple[FileFacts, ...]]]:
    """Where ``view`` turns SMP activation offloading on, and the code it runs: None when it
    does not, or when that code cannot be read (then nothing can be said about it)."""
    located = view.located("sm_activation_offloading")
    if located is None or located.plain() is not True:
        return None
    files = configured_code(program, view)
    return (located, files) if files is not None else None


def configured_code(program: Program, view: ConfigView) -> Optional[tuple[FileFacts, ...]]:
    """The script ``view`` configures and its project modules, when smpfix can read them: a
    launcher's script, or the file holding a ``tsm.init`` configuration."""
    if view.launcher is not None:
        code = launched_code(program, view)
        return code.files if code is not None and code.files else None
    modules = program.modules
    if modules is None:
        return None
    closure = modules.imported_closure(program.file, _DEPTH)
    return (program.facts, *(linked.facts for linked in closure))


def offloads(facts: FileFacts) -> bool:
    """The file applies ``offload_wrapper``, or an offloading call of ``torch.sagemaker``."""
    for call in facts.call_order:
        name = facts.qualified_name(call.func) or ""
        if name == OFFLOAD_WRAPPER or (
            name.startswith("torch.sagemaker.") and "offload" in name.lower()
        ):
            return True
    return False


def checkpoints(facts: FileFacts) -> bool:
    """The file checkpoints activations (or calls a function named as a checkpointing one)."""
    for call in facts.call_order:
        if facts.qualified_name(call.func) in CHECKPOINTING:
            return True
        func = call.func
        last = (
            func.value
            if isinstance(func, cst.Name)
            else func.attr.value
            if isinstance(func, cst.Attribute)
            else None
        )
        if last in _CHECKPOINTING_NAMES:
            return True
    return False
