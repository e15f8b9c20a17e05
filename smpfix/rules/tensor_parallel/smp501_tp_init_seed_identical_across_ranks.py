"""SMP501: the torch seed in force when ``smp.DistributedModel`` is built is the same on every
rank."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument, has_star_kwargs, names_in
from smpfix.base.edits import NodeEdit, ReplaceNode
from smpfix.base.findings import Applicability
from smpfix.base.imports import dotted_name
from smpfix.base.parents import CodeScope, ParentIndex
from smpfix.base.walker import iter_nodes
from smpfix.fixes.references import smp_reference
from smpfix.job.groups import DIFFERS_ACROSS_TP, family_of
from smpfix.program.data.dataloaders import (
    DATALOADER_POSITIONS,
    DISTRIBUTED_SAMPLERS,
    is_dataloader,
)
from smpfix.program.facts import RANK_FUNCTIONS, Wrap
from smpfix.program.order.initialisation import Initialisations, initialised_before
from smpfix.program.ranks.rank_terms import RankTerm, initialised_attribute_terms, rank_terms
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet

_TORCH_SEEDS = frozenset(
    {
        "torch.manual_seed",
        "torch.random.manual_seed",
        "torch.cuda.manual_seed",
        "torch.cuda.manual_seed_all",
        "transformers.set_seed",
        "transformers.trainer_utils.set_seed",
    }
)
_OWN_RNG_SAMPLERS = DISTRIBUTED_SAMPLERS | frozenset(
    {"torch.utils.data.SequentialSampler", "torch.utils.data.sampler.SequentialSampler"}
)
_RANDOM_SPLITS = frozenset(
    {"torch.utils.data.random_split", "torch.utils.data.dataset.random_split"}
)
_NO_PARENS = (
    cst.Name,
    cst.Attribute,
    cst.Call,
    cst.Subscript,
    cst.Integer,
    cst.Float,
    cst.UnaryOperation,
)
_ARITHMETIC = (
    cst.Add,
    cst.Subtract,
    cst.Multiply,
    cst.Divide,
    cst.FloorDivide,
    cst.Modulo,
    cst.MatrixMultiply,
    cst.Power,
)
_MAX_DEPTH = 4


@dataclass(frozen=True)
class _Seeding:
    """A call that seeds torch's global RNG, as it appears on the path that builds the model.

    ``call`` is the torch call, or the call of a local helper that makes one; ``terms`` are the
    expressions that decide the seed (the helper's own seed expression and the argument it
    is given); ``target`` is the expression a fix extends.
    """

    call: cst.Call
    terms: tuple[cst.BaseExpression, ...]
    target: cst.BaseExpression


def _differs_across_tp(term: RankTerm) -> bool:
    """A rank that tensor-parallel peers do not share (not ``rdp_rank``, ``pp_rank`` or a
    size)."""
    return term.is_rank and term.family in DIFFERS_ACROSS_TP


def _parameters(function: cst.FunctionDef) -> list[cst.Param]:
    params = function.params
    return [*params.posonly_params, *params.params, *params.kwonly_params]


class TpInitSeedIdenticalAcrossRanks(Rule):
    summary = (
        "Under tensor parallelism, a torch seed without a per-rank term before"
        " `smp.DistributedModel` initialises every slice of a distributed parameter identically."
    )
    fix_availability = FixAvailability.UNSAFE
    depends_on = ("TP",)
    tensor_parallelism = TensorParallelism.BOTH

    def leave_Module(self, node: cst.Module) -> None:
        if (
            not self.program.facts.distributed_models
            or self.severity_when(self.tp_distributed()) is None
        ):
            return
        seedings = self._seedings()
        if not seedings:
            return
        index = self.program.parents
        bindings = self._bindings()
        flagged: set[cst.Call] = set()
        for wrap in self.program.facts.distributed_models:
            seeding = self._last_on_path(index.scope_of(wrap.call), wrap.call, seedings, index, 0)
            if seeding is None or seeding.call in flagged:
                continue
            if any(
                self._per_rank(term, index.scope_of(term), bindings, 0, seeding.call)
                for term in seeding.terms
            ):
                continue
            flagged.add(seeding.call)
            self._flag(seeding, wrap)

    # -- which seed is in force ---------------------------------------------------------------
    def _seedings(self) -> list[_Seeding]:
        found = []
        for call in self.program.facts.call_order:
            if self.program.facts.qualified_name(call.func) in _TORCH_SEEDS:
                seed = argument(call, "seed", 0)
                if seed is not None and not seed.star:
                    found.append(_Seeding(call, (seed.value,), seed.value))
            elif type(call.func) is cst.Name and call.func.value in self.program.facts.functions:
                through = self._through_helper(call, self.program.facts.functions[call.func.value])
                if through is not None:
                    found.append(through)
        return found

    def _through_helper(self, call: cst.Call, helper: cst.FunctionDef) -> Optional[_Seeding]:
        """``set_seed(args.seed)`` where the file's own ``set_seed`` calls ``torch.manual_seed``.

        The seed is the helper's expression with each parameter it reads bound to what the call
        passes (or the parameter's default): ``random_seed(args.seed, args.rank)`` with
        ``torch.manual_seed(seed + rank)`` inside reads ``args.rank``. A fix extends the one
        argument the expression reads, or the expression itself when it reads several.
        """
        inner = [
            node
            for node in iter_nodes(helper.body)
            if type(node) is cst.Call
            and self.program.facts.qualified_name(node.func) in _TORCH_SEEDS
        ]
        seed = argument(inner[-1], "seed", 0) if inner else None
        if seed is None or seed.star:
            return None
        expression = seed.value
        positional = [*helper.params.posonly_params, *helper.params.params]
        bound: list[cst.BaseExpression] = []
        passed_alone: Optional[cst.BaseExpression] = None
        used = [p for p in _parameters(helper) if p.name.value in names_in(expression)]
        for parameter in used:
            position = positional.index(parameter) if parameter in positional else None
            passed = argument(call, parameter.name.value, position)
            if passed is not None and not passed.star:
                bound.append(passed.value)
                passed_alone = passed.value
            elif parameter.default is not None:
                bound.append(parameter.default)
        target = passed_alone if len(used) == 1 and passed_alone is not None else expression
        return _Seeding(call, (expression, *bound), target)

    def _last_on_path(
        self,
        scope: CodeScope,
        point: cst.Call,
        seedings: list[_Seeding],
        index: ParentIndex,
        depth: int,
    ) -> Optional[_Seeding]:
        """The last seeding that runs before ``point`` in ``scope``, else before ``scope`` is
        called."""
        before = [
            s
            for s in seedings
            if index.scope_of(s.call) is scope and self.program.order.runs_before(s.call, point)
        ]
        if before:
            return before[-1]
        if type(scope) is not cst.FunctionDef or depth >= _MAX_DEPTH:
            return None
        callers = [
            call
            for call in self.program.facts.call_order
            if type(call.func) is cst.Name
            and self.program.facts.functions.get(call.func.value) is scope
        ]
        for caller in callers:
            found = self._last_on_path(index.scope_of(caller), caller, seedings, index, depth + 1)
            if found is not None:
                return found
        if not callers:
            # Called from outside the file: the whole module body has run by then.
            module_level = [s for s in seedings if index.scope_of(s.call) is index.module]
            return module_level[-1] if module_level else None
        return None

    # -- is the seed per rank -----------------------------------------------------------------
    def _bindings(self) -> Mapping[str, list[tuple[CodeScope, cst.BaseExpression]]]:
        """``seed = ...``, ``args.seed = ...``, ``seed += ...``: each with the function it is in."""
        index = self.program.parents
        found: dict[str, list[tuple[CodeScope, cst.BaseExpression]]] = {}
        for node in self.program.file.nodes_of(cst.Assign, cst.AugAssign, cst.AnnAssign):
            if type(node) is cst.Assign:
                targets, value = [target.target for target in node.targets], node.value  # type: ignore[attr-defined]
            elif node.value is not None:  # type: ignore[attr-defined]
                targets, value = [node.target], node.value  # type: ignore[attr-defined]
            else:
                continue
            for target in targets:
                name = dotted_name(target)
                if name is not None:
                    found.setdefault(name, []).append((index.scope_of(node), value))
        return found

    def _rank_call(self, node: cst.CSTNode) -> bool:
        """A rank that differs between tensor-parallel peers (developer guide, ranking
        mechanism); ``rdp_rank`` does not."""
        if type(node) is not cst.Call or node.args:
            return False
        member = self.program.facts.smp_member(node.func)
        if member in RANK_FUNCTIONS:
            return family_of(member) in DIFFERS_ACROSS_TP
        return self.program.facts.qualified_name(node.func) == "torch.distributed.get_rank"

    def _per_rank(
        self,
        expr: cst.BaseExpression,
        scope: CodeScope,
        bindings: Mapping[str, list[tuple[CodeScope, cst.BaseExpression]]],
        depth: int,
        seeding: cst.Call,
    ) -> bool:
        """Does ``expr`` hold a rank term, directly, through a name bound to one in its function
        (a helper's parameters hide the module's names), or through what the program model
        resolves: a name's reaching assignment, the project's rank helpers, an attribute every
        assignment of which is a rank, or one the library's initialisation sets to a rank
        (``args.rank = smp.rank()`` after ``smp.init``) when that ran before ``seeding``?"""
        if depth > _MAX_DEPTH:
            return False
        nodes = iter_nodes(expr)
        if any(self._rank_call(node) for node in nodes):
            return True
        hidden = (
            {p.name.value for p in _parameters(scope)} if type(scope) is cst.FunctionDef else set()
        )
        # Names read and dotted attributes; the ``rank`` of ``args.rank`` is no variable.
        read = names_in(expr) | {
            name
            for node in nodes
            if type(node) is cst.Attribute and (name := dotted_name(node)) is not None
        }
        for name in sorted(read):
            for where, value in bindings.get(name, ()):
                visible = where is scope or (
                    type(where) is cst.Module and name.split(".", 1)[0] not in hidden
                )
                if (
                    visible
                    and value is not expr
                    and self._per_rank(value, where, bindings, depth + 1, seeding)
                ):
                    return True
        return depth == 0 and self._resolved_per_rank(expr, seeding)

    def _resolved_per_rank(self, expr: cst.BaseExpression, seeding: cst.Call) -> bool:
        """A rank that differs between tensor-parallel peers, as ``program.ranks`` finds it."""
        facts, modules = self.program.facts, self.program.modules
        if any(_differs_across_tp(term) for term in rank_terms(expr, facts, modules=modules)):
            return True
        attributes = [node for node in iter_nodes(expr) if type(node) is cst.Attribute]
        if not any(
            _differs_across_tp(term)
            for node in attributes
            for term in initialised_attribute_terms(node, facts, modules)  # type: ignore[arg-type]
        ):
            return False
        return self._initialised_before(seeding)

    def _initialised_before(self, call: cst.Call) -> bool:
        """Whether the library is initialised before every run of ``call``."""
        order = self.program.order
        runs = order.runs_of(call)
        inits = Initialisations(self.program.file, self.program.modules)
        return bool(runs) and all(initialised_before(order, run, inits) for run in runs)

    # -- can the fix be offered ---------------------------------------------------------------
    def _global_rng_data(self) -> Optional[str]:
        """Why a per-rank seed could change the data order, or None when the data path has its own
        RNG."""
        loaders = [c for c in self.program.facts.call_order if is_dataloader(c, self.program.facts)]
        if not loaders:
            return (
                "this file builds no `DataLoader`, so smpfix cannot tell whether the data order"
                " comes from this seed"
            )
        for loader in loaders:
            if argument(loader, "generator", DATALOADER_POSITIONS["generator"]) is not None:
                continue
            if has_star_kwargs(loader):
                return (
                    "a `DataLoader` here takes `**kwargs`, which may make it shuffle with torch's"
                    " global RNG"
                )
            shuffle = argument(loader, "shuffle", DATALOADER_POSITIONS["shuffle"])
            if shuffle is not None and self.program.facts.literal(shuffle.value) not in (
                False,
                None,
            ):
                return "a `DataLoader` here shuffles with torch's global RNG (no `generator=`)"
            batch_sampler = argument(loader, "batch_sampler", DATALOADER_POSITIONS["batch_sampler"])
            if (
                batch_sampler is not None
                and self.program.facts.literal(batch_sampler.value) is not None
            ):
                return (
                    "a `DataLoader` here takes a batch sampler that may draw from torch's"
                    " global RNG"
                )
            sampler = argument(loader, "sampler", DATALOADER_POSITIONS["sampler"])
            if sampler is not None and not self._sampler_has_own_rng(sampler.value):
                return "a `DataLoader` here takes a sampler that may draw from torch's global RNG"
        for call in self.program.facts.calls_of(*_RANDOM_SPLITS):
            if argument(call, "generator", 2) is None:
                return "`random_split(...)` here splits with torch's global RNG (no `generator=`)"
        return None

    def _sampler_has_own_rng(self, value: cst.BaseExpression) -> bool:
        if self.program.facts.literal(value) is None:
            return True
        value = self.program.facts.names.value(value)
        if type(value) is not cst.Call:
            return False
        return self.program.facts.qualified_name(value.func) in _OWN_RNG_SAMPLERS or any(
            arg.keyword is not None and arg.keyword.value == "generator" for arg in value.args
        )

    # -- reporting ----------------------------------------------------------------------------
    def _fix(self, seeding: _Seeding) -> Optional[PendingFix]:
        reference = smp_reference(self.program.file, "dp_rank")
        if reference is None:
            return None
        target = seeding.target
        code = self.program.code_for(target)
        parenthesized = bool(getattr(target, "lpar", ()))
        simple = isinstance(target, _NO_PARENS) or (
            type(target) is cst.BinaryOperation and isinstance(target.operator, _ARITHMETIC)
        )
        if not parenthesized and not simple:
            code = f"({code})"
        edits: tuple[NodeEdit, ...] = (
            *reference.edits,
            ReplaceNode(target, f"{code} + {reference.text}()"),
        )
        return PendingFix(Applicability.UNSAFE, f"Seed with `{code} + {reference.text}()`", edits)

    def _spelled(self, member: str) -> str:
        reference = smp_reference(self.program.file, member)
        return reference.text if reference is not None else f"smp.{member}"

    def _flag(self, seeding: _Seeding, wrap: Wrap) -> None:
        # Slices of distributed parameters exist only when modules are marked and the degree
        # is above 1 (``Rule.tp_distributed``).
        tp = self.tp_distributed(at=seeding.call)
        severity = self.severity_when(tp)
        if severity is None:
            return
        call = self.program.code_for(seeding.call)
        wrapped = self.program.code_for(wrap.argument) if wrap.argument is not None else "..."
        wrapper = self.program.code_for(wrap.call.func)
        seed = snippet(call, 36)
        title = (
            f"{seed} gives every tensor-parallel rank identical slices"
            if tp.state.value == "on"
            else f"{seed} gives identical slices if tensor parallelism is on"
        )
        dp_rank, tp_rank = (self._spelled(member) for member in ("dp_rank", "tp_rank"))
        explanation = (
            "Each tensor-parallel rank initialises its slice of a distributed parameter from"
            " torch's global RNG, so the same seed makes every slice identical, which hurts"
            f" convergence. Add a per-rank term, e.g. `seed + {dp_rank}()` (`{tp_rank}()` works"
            " too)."
        )
        blocker = self._global_rng_data()
        fix = None
        if blocker is None:
            fix = self._fix(seeding)
        else:
            explanation += (
                f" Not fixed automatically: {blocker}; with `prescaled_batch`, tensor-parallel"
                " peers must read the same batches, and a per-rank seed would make them differ."
                " Give the data pipeline its own `generator=torch.Generator().manual_seed(seed)`"
                " first."
            )
        self.report(
            seeding.call,
            title,
            explanation=explanation,
            evidence=(
                f"`{call}` is the last torch seed set before `{wrapper}({wrapped})`, and it is the"
                " same on all tensor-parallel ranks",
            ),
            severity=severity,
            fix=fix,
            job_facts=(tp,),
        )
