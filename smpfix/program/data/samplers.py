"""Where a ``DistributedSampler`` goes: the DataLoaders it is given to, or somewhere else.

A sampler shards nothing until a loader uses it: ``DataLoader(ds, sampler=sampler)`` or
``batch_sampler=BatchSampler(sampler, ...)``. The sampler is followed with ``value_flow``
(names, aliases, conditional expressions, local functions, returned tuples). Calling its
methods (``sampler.set_epoch(epoch)``) or reading it (``len(sampler)``, ``print``) uses
nothing; anything else it reaches (a call smpfix does not know, an attribute, a container, a
loop over its indices) may be a use smpfix cannot see.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.program.data.dataloaders import BATCH_SAMPLERS, DATALOADER_POSITIONS, is_dataloader
from smpfix.program.data.training_loaders import TrainingLoaders
from smpfix.program.flow.value_flow import EndKind, ValueFlow
from smpfix.program.project.parsed_file import ParsedFile

# Builtins that only read what they are given.
_READERS = frozenset(
    {"len", "print", "isinstance", "str", "repr", "type", "id", "hasattr", "getattr", "bool"}
)
_SAMPLER_PARAMETERS = ("sampler", "batch_sampler")


@dataclass(frozen=True)
class SamplerUse:
    """The loaders a sampler is given to, and the first place it went that smpfix cannot follow."""

    loaders: tuple[cst.Call, ...]
    elsewhere: Optional[cst.CSTNode]


class SamplerUses:
    """``use_of(sampler)`` for the samplers of one file: where a sampler goes does not depend
    on the script a helper module is checked for, so it is worked out once per tree."""

    def __init__(self, file: ParsedFile) -> None:
        self.facts = file.facts
        self.flow = ValueFlow(file, self._carries)
        # By ``id``, with the sampler itself (so that no other node can take its id).
        self._uses: dict[int, tuple[cst.Call, SamplerUse]] = {}

    @classmethod
    def of_file(cls, file: ParsedFile) -> SamplerUses:
        return cls(file)

    def use_of(self, sampler: cst.Call) -> SamplerUse:
        known = self._uses.get(id(sampler))
        if known is None or known[0] is not sampler:
            known = self._uses[id(sampler)] = (sampler, self._use_of(sampler))
        return known[1]

    def _use_of(self, sampler: cst.Call) -> SamplerUse:
        loaders: list[cst.Call] = []
        for end in self.flow.ends(sampler):
            if end.kind is EndKind.METHOD:
                continue
            if end.kind is EndKind.ARGUMENT:
                assert type(end.node) is cst.Call and end.arg is not None
                if self._given_to_loader(end.node, end.arg):
                    loaders.append(end.node)
                    continue
                if self._reader(end.node):
                    continue
            return SamplerUse(tuple(loaders), end.node)
        return SamplerUse(tuple(dict.fromkeys(loaders)), None)

    def left_out(self, sampler: cst.Call, loaders: TrainingLoaders) -> Optional[SamplerUse]:
        """The sampler's use when it shards no loader that training reads: it is given to no
        loader, or only to loaders that no training step reads and that go nowhere smpfix
        cannot follow. None when it is used, or may be."""
        use = self.use_of(sampler)
        if use.elsewhere is not None:
            return None
        if any(
            loaders.feeds_training(given) or loaders.used_out_of_sight(given)
            for given in use.loaders
        ):
            return None
        return use

    def _carries(self, call: cst.Call, arg: Optional[cst.Arg]) -> bool:
        """``BatchSampler(sampler, batch_size, drop_last)`` hands the sampler on."""
        if arg is None or self.facts.qualified_name(call.func) not in BATCH_SAMPLERS:
            return False
        return argument(call, "sampler", 0) is arg

    def _given_to_loader(self, call: cst.Call, arg: cst.Arg) -> bool:
        return is_dataloader(call, self.facts) and any(
            argument(call, name, DATALOADER_POSITIONS[name]) is arg for name in _SAMPLER_PARAMETERS
        )

    def _reader(self, call: cst.Call) -> bool:
        func = call.func
        return (
            type(func) is cst.Name
            and func.value in _READERS
            and func.value not in self.facts.imports.bindings
        )
