"""What every transformation of a script migration reads: the program, the plan being built,
the original lines, and how the file names (or will name) each v2 module it writes.

New code names a module the way the file already does (``import torch.distributed as dist``
gives ``dist``; ``as td`` gives ``td``) and only otherwise adds an import, with an alias no
other binding of the file takes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Optional, Union

import libcst as cst

from smpfix.base.positions import Positions
from smpfix.job.jobfacts import Tri
from smpfix.migrate.script.plan import Plan
from smpfix.program.model import Program

Statement = Union[cst.SimpleStatementLine, cst.BaseCompoundStatement]


@dataclass
class Context:
    program: Program
    plan: Plan
    _names: dict[str, str] = field(default_factory=dict)

    @cached_property
    def positions(self) -> Positions:
        file = self.program.file
        return Positions(file.module, file.text, file.index)

    def line(self, node: cst.CSTNode) -> int:
        """The line of ``node`` in the file before migration."""
        return self.positions.position(self.positions.span(node)[0]).line

    def member(self, node: cst.CSTNode) -> Optional[str]:
        """The SMP v1 member ``node`` names (through the file's imports), or None."""
        if not isinstance(node, (cst.Name, cst.Attribute)):
            return None
        return self.program.facts.imports.smp_member(node)

    def calls(self, *members: str) -> Iterator[cst.Call]:
        """The calls of these SMP v1 members, in source order."""
        for call in self.program.file.nodes_of(cst.Call):
            assert isinstance(call, cst.Call)
            if self.member(call.func) in members:
                yield call

    def statement(self, node: cst.CSTNode) -> Optional[Statement]:
        """The statement holding ``node`` in a block of its own line (never a one-line suite)."""
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return node
        for ancestor in self.program.file.parents.ancestors(node):
            if isinstance(ancestor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                return ancestor
            if isinstance(ancestor, cst.SimpleStatementSuite):
                return None
        return None

    def loop_of(self, statement: Statement) -> Statement:
        """The outermost ``for`` loop that does nothing but this statement (loops in loops),
        else the statement: a loop left with nothing to do goes with it."""
        return self.with_empty_loops([statement])[0]

    def with_empty_loops(self, statements: list[Statement]) -> list[Statement]:
        """``statements`` to drop, each ``for`` loop whose body would be left empty in place of
        its body's statements (loops in loops too)."""
        dropped: list[Statement] = list(statements)
        changed = True
        while changed:
            changed = False
            for statement in list(dropped):
                block = self.parent(statement)
                loop = self.parent(block) if isinstance(block, cst.IndentedBlock) else None
                if (
                    isinstance(block, cst.IndentedBlock)
                    and isinstance(loop, cst.For)
                    and loop.orelse is None
                    and all(any(s is each for each in dropped) for s in block.body)
                ):
                    dropped = [s for s in dropped if not any(s is each for each in block.body)]
                    dropped.append(loop)
                    changed = True
                    break
        return dropped

    def parent(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        return self.program.file.parents.parent_of(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        return self.program.file.parents.ancestors(node)

    def setting(self, key: str) -> object:
        """A job setting's value, None when no source sets it."""
        return self.program.job.value(key)

    @property
    def one_pipeline_stage(self) -> bool:
        """The job runs one pipeline stage: its degree is 1, or the job is known and leaves it
        at the default."""
        degree = self.setting("pipeline_parallel_degree")
        return degree == 1 or (
            degree is None and "pipeline_parallel_degree" not in self.program.job.unknown
        )

    def state(self, feature: str) -> Tri:
        return self.program.job.feature(feature).state

    def bound(self, name: str) -> bool:
        facts = self.program.facts
        return (
            name in facts.imports.bindings
            or name in facts.functions
            or name in facts.classes
            or name in facts.assignments
        )

    def module(self, qualified: str, alias: str) -> str:
        """How the new code names module ``qualified`` (``torch.distributed``): the file's own
        name for it, else ``alias`` (or a free variant) with an ``import ... as`` added."""
        return self._named(qualified, alias, lambda local: f"import {qualified} as {local}")

    def plain_module(self, qualified: str) -> str:
        """``os``, ``torch``, ``functools``: imported as themselves."""
        if qualified in self.program.facts.imports.bindings.values():
            names = self.program.facts.imports.local_names_for(qualified)
            if names:
                return names[0]
        self.plan.need_import(f"import {qualified}")
        return qualified

    def name(self, module: str, member: str, alias: Optional[str] = None) -> str:
        """How the new code names ``module.member``, adding ``from module import member``."""

        def statement(local: str) -> str:
            suffix = f" as {local}" if local != member else ""
            return f"from {module} import {member}{suffix}"

        return self._named(f"{module}.{member}", alias or member, statement)

    def _named(self, qualified: str, alias: str, import_for: object) -> str:
        known = self._names.get(qualified)
        if known is not None:
            return known
        existing = self.program.facts.imports.local_names_for(qualified)
        if existing:
            local = sorted(existing, key=lambda each: ("." in each, len(each)))[0]
        else:
            local = alias
            suffix = 2
            while self.bound(local) or local in self._names.values():
                local, suffix = f"{alias}{suffix}", suffix + 1
            assert callable(import_for)
            self.plan.need_import(import_for(local))
        self._names[qualified] = local
        return local

    # -- the names most transformations write -------------------------------------------
    @property
    def dist(self) -> str:
        return self.module("torch.distributed", "dist")

    @property
    def tsm(self) -> str:
        return self.module("torch.sagemaker", "tsm")

    @property
    def torch(self) -> str:
        return self.plain_module("torch")

    @property
    def fsdp(self) -> str:
        return self.name("torch.distributed.fsdp", "FullyShardedDataParallel", "FSDP")

    def local_rank(self) -> str:
        """The local rank, as ``torchrun`` (the ``torch_distributed`` launcher) sets it."""
        return f'int({self.plain_module("os")}.environ["LOCAL_RANK"])'

    def rdp_rank(self) -> str:
        """The rank among the processes that hold different data: tensor-parallel ranks share
        a batch (the official v2 example's ``global_rank // tensor_parallel_degree``)."""
        return f"{self.dist}.get_rank() // {self.tsm}.state.tensor_parallel_degree"

    def rdp_size(self) -> str:
        return f"{self.dist}.get_world_size() // {self.tsm}.state.tensor_parallel_degree"
