"""The library's checkpoint API: ``smp.save_checkpoint`` and ``smp.resume_from_checkpoint``.

Both arrived in SMP 1.10 and take most of their arguments by keyword or by position, so the
rules about them (the tag, the objects saved, the order and arguments of a resume) ask one
question: which expression is bound to ``tag``, ``partial``, ``model``, ... at this call.
Positions follow the 1.12.1 signatures:

    save_checkpoint(path, tag, partial=True, model=None, optimizer=None, user_content=None,
                    translate_if_full=True, num_kept_partial_checkpoints=None)
    resume_from_checkpoint(path, tag=None, partial=True, strict=True, load_optimizer=True,
                           load_sharded_optimizer_state=True, translate_function=None)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import libcst as cst

from smpfix.base.calls import argument, has_star_kwargs
from smpfix.base.imports import dotted_name
from smpfix.base.literals import UNKNOWN
from smpfix.program.facts import FileFacts

# The release that brought `smp.save_checkpoint` and `smp.resume_from_checkpoint`.
CHECKPOINT_API_SINCE = (1, 10)

SAVE_CHECKPOINT = "save_checkpoint"
RESUME_FROM_CHECKPOINT = "resume_from_checkpoint"

_PARAMETERS = {
    SAVE_CHECKPOINT: (
        "path",
        "tag",
        "partial",
        "model",
        "optimizer",
        "user_content",
        "translate_if_full",
        "num_kept_partial_checkpoints",
    ),
    RESUME_FROM_CHECKPOINT: (
        "path",
        "tag",
        "partial",
        "strict",
        "load_optimizer",
        "load_sharded_optimizer_state",
        "translate_function",
    ),
}
_DEFAULTS: dict[str, dict[str, Any]] = {
    SAVE_CHECKPOINT: {"partial": True, "model": None, "optimizer": None},
    RESUME_FROM_CHECKPOINT: {"tag": None, "partial": True, "load_optimizer": True},
}


@dataclass(frozen=True)
class CheckpointCall:
    """One call of ``smp.save_checkpoint`` or ``smp.resume_from_checkpoint``."""

    call: cst.Call
    member: str
    facts: FileFacts

    @property
    def saves(self) -> bool:
        return self.member == SAVE_CHECKPOINT

    def argument(self, name: str) -> Optional[cst.Arg]:
        """The argument bound to parameter ``name``, by keyword or by position."""
        return argument(self.call, name, _PARAMETERS[self.member].index(name))

    def value(self, name: str) -> Any:
        """The literal value of parameter ``name``: the default when it is left out, UNKNOWN
        when the call passes something smpfix cannot read or may pass it through ``**kwargs``."""
        given = self.argument(name)
        if given is not None:
            return self.facts.literal(given.value)
        if has_star_kwargs(self.call) or any(arg.star == "*" for arg in self.call.args):
            return UNKNOWN
        return _DEFAULTS[self.member].get(name, UNKNOWN)


def checkpoint_call(facts: FileFacts, node: cst.CSTNode) -> Optional[CheckpointCall]:
    """``node`` as a checkpoint API call, resolved through the file's imports; None otherwise."""
    if type(node) is not cst.Call:
        return None
    member = facts.smp_member(node.func)
    if member in _PARAMETERS:
        assert member is not None
        return CheckpointCall(node, member, facts)
    return None


# The exceptions the checkpoint API raises for a misuse.
_CHECKPOINT_ERRORS = frozenset({"SMPValidationError", "SMPCheckpointError"})


def raises_on_purpose(stack: Sequence[cst.CSTNode]) -> bool:
    """Whether the node at the end of ``stack`` sits in a ``try`` body whose handler catches the
    library's checkpoint errors by name: code that calls the API wrongly to see it fail (the
    library's own tests do), not a mistake."""
    for position, node in enumerate(stack[:-1]):
        if type(node) is cst.Try and stack[position + 1] is node.body:
            for handler in node.handlers:
                caught = handler.type
                names = (
                    caught.elements
                    if type(caught) is cst.Tuple
                    else [caught]
                    if caught is not None
                    else []
                )
                for name in names:
                    value = name.value if type(name) is cst.Element else name
                    spelled = dotted_name(value) if isinstance(value, cst.BaseExpression) else None
                    if spelled is not None and spelled.rsplit(".", 1)[-1] in _CHECKPOINT_ERRORS:
                        return True
    return False
