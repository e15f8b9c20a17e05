"""What an SMP v2 script does with PyTorch FSDP and ``torch.sagemaker``: the calls the v2
script rules ask about, resolved through the file's imports (never by their text)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.literals import UNKNOWN
from smpfix.program.facts import FileFacts
from smpfix.program.project.parsed_file import ParsedFile

FSDP = frozenset(
    {
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
    }
)
TRANSFORM = "torch.sagemaker.transform"
INIT_PROCESS_GROUP = "torch.distributed.init_process_group"
# Importing it registers the "smddp" backend with PyTorch (the SMDDP library's page).
SMDDP_MODULE = "smdistributed.dataparallel.torch.torch_smddp"


@dataclass(frozen=True)
class V2Calls:
    """The FSDP wraps and ``tsm.transform`` calls of one file, in the file's order."""

    fsdp: tuple[cst.Call, ...]
    transforms: tuple[cst.Call, ...]

    @classmethod
    def of_file(cls, file: ParsedFile) -> V2Calls:
        facts = file.facts
        return cls(tuple(calls_of(facts, FSDP)), tuple(calls_of(facts, {TRANSFORM})))


def calls_of(facts: FileFacts, names: frozenset[str] | set[str]) -> Iterator[cst.Call]:
    """The file's calls of any of the qualified ``names``."""
    for call in facts.call_order:
        if facts.qualified_name(call.func) in names:
            yield call


def keyword(call: cst.Call, name: str) -> Optional[cst.Arg]:
    return next(
        (arg for arg in call.args if arg.keyword is not None and arg.keyword.value == name), None
    )


def has_star_kwargs(call: cst.Call) -> bool:
    return any(arg.star == "**" for arg in call.args)


def keyword_value(facts: FileFacts, call: cst.Call, name: str) -> object:
    """The literal value of keyword ``name``: None when it is not passed, UNKNOWN when it is
    passed as something smpfix cannot read (or could be, through ``**kwargs``)."""
    found = keyword(call, name)
    if found is None:
        return UNKNOWN if has_star_kwargs(call) else None
    return facts.literal(found.value)


def first_argument(call: cst.Call) -> Optional[cst.BaseExpression]:
    for arg in call.args:
        if arg.keyword is None and not arg.star:
            return arg.value
        if arg.keyword is not None and arg.keyword.value in ("module", "model"):
            return arg.value
    return None


def smddp_backend(facts: FileFacts, group: cst.Call) -> Optional[str]:
    """The backend of an ``init_process_group`` call as far as SMDDP goes: "smddp" when it names
    it (``backend=`` or the first argument), "unknown" when it is a value smpfix cannot read
    and the file imports the SMDDP backend, None otherwise (another backend, or none)."""
    passed = keyword(group, "backend")
    if passed is None:
        positional = [arg for arg in group.args if arg.keyword is None and not arg.star]
        passed = positional[0] if positional else None
    if passed is None:
        return None
    value = facts.literal(passed.value)
    if value == "smddp":
        return "smddp"
    if value is UNKNOWN and facts.imports.imports_module(SMDDP_MODULE):
        return "unknown"
    return None
