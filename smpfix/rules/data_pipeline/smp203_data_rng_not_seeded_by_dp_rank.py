"""SMP203: a data-pipeline RNG seeded by a rank that differs inside one model replica."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument, called_name, has_star_kwargs
from smpfix.base.findings import Applicability, Severity
from smpfix.base.flavour import BOTH
from smpfix.base.parents import CodeScope
from smpfix.base.walker import Ancestry
from smpfix.fixes.arguments import append_arguments
from smpfix.fixes.rank_rewrites import rewrite_terms
from smpfix.fixes.references import callee, smp_reference, spelled
from smpfix.job.groups import DATA_PARALLEL, DataJob, RankVerdict, either
from smpfix.job.jobfacts import Tri
from smpfix.program.data.dataloaders import (
    DATALOADER_POSITIONS,
    DATALOADERS,
    DISTRIBUTED_SAMPLERS,
    RANDOM_SAMPLERS,
    SAMPLER_POSITIONS,
)
from smpfix.program.flow.call_arguments import call_arguments
from smpfix.program.model import Program
from smpfix.program.ranks.rank_terms import RankTerm, rank_terms
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet, unknown_settings

# Seeds of RNGs that data pipelines draw from: (parameter name, position).
_DATA_SEEDS = {
    "random.seed": ("a", 0),
    "random.Random": ("x", 0),
    "numpy.random.seed": ("seed", 0),
    "numpy.random.default_rng": ("seed", 0),
    "numpy.random.RandomState": ("seed", 0),
    "tensorflow.random.set_seed": ("seed", 0),
    "tensorflow.compat.v1.set_random_seed": ("seed", 0),
    "tensorflow.compat.v1.random.set_random_seed": ("seed", 0),
}
_TF_GLOBAL_SEEDS = frozenset(
    {
        "tensorflow.random.set_seed",
        "tensorflow.compat.v1.set_random_seed",
        "tensorflow.compat.v1.random.set_random_seed",
    }
)
# Seeds that also drive PyTorch's parameter initialisation (and the data RNGs above).
_DATA_AND_INIT_SEEDS = {
    "transformers.set_seed": ("seed", 0),
    "transformers.trainer_utils.set_seed": ("seed", 0),
}
# PyTorch's global RNG: parameter initialisation, and any DataLoader shuffling without a generator.
_TORCH_GLOBAL_SEEDS = {
    "torch.manual_seed": ("seed", 0),
    "torch.random.manual_seed": ("seed", 0),
    "transformers.set_seed": ("seed", 0),
    "transformers.trainer_utils.set_seed": ("seed", 0),
}
_TORCH_GENERATORS = frozenset({"torch.Generator", "torch._C.Generator"})
# The last names of everything above: calls named otherwise are not looked at further.
_NAMES = frozenset(
    name.rsplit(".", 1)[-1]
    for name in (
        *_DATA_SEEDS,
        *_DATA_AND_INIT_SEEDS,
        *_TORCH_GLOBAL_SEEDS,
        *DATALOADERS,
        *DISTRIBUTED_SAMPLERS,
        *RANDOM_SAMPLERS,
    )
) | {"manual_seed", "shuffle"}
_RANDOM_SAMPLER_GENERATOR = 3
# Ranks that differ between tensor-parallel peers: the seeds SMP501 recommends for initialisation.
_INIT_SEED_FAMILIES = frozenset({"tp", "dp"})


@dataclass(frozen=True)
class SeedSite:
    """A call that seeds an RNG: what it seeds and with which expression (None: unseeded)."""

    seed: Optional[cst.BaseExpression]
    data: bool
    torch_global: bool


@dataclass(frozen=True)
class SeedingHelper:
    """A local function that seeds RNGs with one of its parameters (``def set_seed(seed):``)."""

    parameter: str
    position: Optional[int]
    data: bool
    torch_global: bool


class DataRngNotSeededByDpRank(Rule):
    flavours = BOTH
    summary = (
        "Data-pipeline RNGs (shuffling, augmentation) seeded by `smp.rank()`-like ranks, or a"
        " TensorFlow shuffle without a seed, give the ranks of one model replica different data."
    )
    fix_availability = FixAvailability.UNSAFE
    depends_on = ("PP", "TP", "PRESCALED")
    tensor_parallelism = TensorParallelism.DEGREE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self.data_job = DataJob.of(self.program.job, self.program.facts.is_tensorflow)
        # Local seeding helpers (``def set_seed(seed): random.seed(seed)``) are learnt during
        # the walk and their calls judged at the end; a helper calling a helper is not followed.
        self.helpers: dict[str, SeedingHelper] = {}
        self.local_calls: list[cst.Call] = []
        self.global_seeds: list[tuple[cst.Call, RankVerdict]] = []
        self.shuffling_loaders: list[cst.Call] = []
        # The function (or module) each seeding call runs in, and the data seeds that are the
        # same on every rank of a replica: a per-rank initialisation seed (SMP501's advice)
        # that such a seed later replaces never reaches the data pipeline.
        self.scopes: dict[cst.Call, CodeScope] = {}
        self.consistent_data_seeds: list[cst.Call] = []
        self.init_seeds: list[
            tuple[
                cst.Call, SeedSite, list[tuple[RankTerm, RankVerdict]], list[RankTerm], RankVerdict
            ]
        ] = []
        # `tf.random.set_seed(1234)`: a constant global seed from which TensorFlow derives the
        # seed of every later unseeded op alike on every rank (the official scripts' way).
        self.tf_constant_seeds: list[cst.Call] = []

    # -- recognising seeds --------------------------------------------------------------------
    def _site(self, call: cst.Call, qualified: Optional[str]) -> Optional[SeedSite]:
        for table, data, torch_global in (
            (_DATA_SEEDS, True, False),
            (_DATA_AND_INIT_SEEDS, True, True),
        ):
            if qualified in table:
                name, position = table[qualified]
                return SeedSite(_value(argument(call, name, position)), data, torch_global)
        if qualified in _TORCH_GLOBAL_SEEDS:
            name, position = _TORCH_GLOBAL_SEEDS[qualified]
            return SeedSite(_value(argument(call, name, position)), False, True)
        if qualified in DISTRIBUTED_SAMPLERS:
            return SeedSite(_value(argument(call, "seed", SAMPLER_POSITIONS["seed"])), True, False)
        func = call.func
        if (
            type(func) is cst.Attribute
            and func.attr.value == "manual_seed"
            and self._is_generator(func.value)
        ):
            return SeedSite(_value(argument(call, "seed", 0)), True, False)
        return None

    def _is_generator(self, expr: cst.BaseExpression) -> bool:
        if type(expr) is cst.Name:
            assignment = self.program.facts.names.assignment(expr.value, expr)
            expr = assignment.value if assignment is not None else expr
        return (
            type(expr) is cst.Call
            and self.program.facts.qualified_name(expr.func) in _TORCH_GENERATORS
        )

    def _learn_helper(self, site: SeedSite) -> None:
        """A seed taken from a parameter of the enclosing function makes that function a helper."""
        if type(site.seed) is not cst.Name:
            return
        function = self.ancestry.nearest(cst.FunctionDef)
        if type(function) is not cst.FunctionDef:
            return
        positional = [
            p.name.value for p in (*function.params.posonly_params, *function.params.params)
        ]
        keyword_only = [p.name.value for p in function.params.kwonly_params]
        parameter = site.seed.value
        if parameter not in positional and parameter not in keyword_only:
            return
        known = self.helpers.get(function.name.value)
        data = site.data or (known is not None and known.data)
        torch_global = site.torch_global or (known is not None and known.torch_global)
        position = positional.index(parameter) if parameter in positional else None
        self.helpers[function.name.value] = SeedingHelper(parameter, position, data, torch_global)

    # -- visiting -----------------------------------------------------------------------------
    def visit_Call(self, node: cst.Call) -> None:
        if type(node.func) is cst.Name and node.func.value in self.program.facts.functions:
            self.local_calls.append(node)
            self.scopes[node] = self._scope()
            return
        if called_name(node, self.program.facts.imports.bindings) not in _NAMES:
            return
        qualified = self.program.facts.qualified_name(node.func)
        if self._is_shuffling_loader(node, qualified):
            self.shuffling_loaders.append(node)
            return
        if self.data_job.tensorflow and qualified is None and self._is_tf_shuffle(node):
            self._check_tf_shuffle(node)
            return
        site = self._site(node, qualified)
        if (
            qualified in _TF_GLOBAL_SEEDS
            and site is not None
            and site.seed is not None
            and isinstance(self.program.facts.literal(site.seed), int)
        ):
            self.tf_constant_seeds.append(node)
        if site is not None and site.seed is not None:
            self.scopes[node] = self._scope()
            self._learn_helper(site)
            self._check_site(node, site)

    def _scope(self) -> CodeScope:
        function = self.ancestry.nearest(cst.FunctionDef)
        return function if type(function) is cst.FunctionDef else self.program.module

    def _check_site(self, call: cst.Call, site: SeedSite) -> None:
        assert site.seed is not None
        wrong, rewrite = self._judge(site.seed)
        if not wrong:
            if site.data:
                self.consistent_data_seeds.append(call)
            return
        verdict = either(v for _, v in wrong)
        if site.torch_global and site.data and self._seeds_initialisation(call, wrong):
            self.init_seeds.append((call, site, wrong, rewrite, verdict))
            return
        if site.torch_global:
            self.global_seeds.append((call, verdict))
        if site.data:
            self._flag_seed(call, site, wrong, rewrite, verdict)

    def _seeds_initialisation(
        self, call: cst.Call, wrong: Sequence[tuple[RankTerm, RankVerdict]]
    ) -> bool:
        """``set_seed(seed + smp.tp_rank())`` just before ``smp.DistributedModel`` in the same
        function: the per-rank initialisation seed that SMP501 asks for (the official GPT
        examples seed this way), which is a data seed only until something reseeds."""
        if any(term.family not in _INIT_SEED_FAMILIES for term, _ in wrong):
            return False
        scope = self.scopes.get(call)
        return any(
            wrap.where is not None
            and wrap.where.scope is scope
            and self.program.order.runs_before(call, wrap.call)
            for wrap in self.program.facts.distributed_models
        )

    def _reseeded_after(self, call: cst.Call) -> bool:
        """A replica-consistent data seed that runs after ``call``: later in the same function,
        or in another function (a training loop that reseeds before drawing data)."""
        scope = self.scopes.get(call)
        return any(
            self.scopes.get(other) is not scope or self.program.order.runs_before(call, other)
            for other in self.consistent_data_seeds
        )

    def leave_Module(self, node: cst.Module) -> None:
        for call in self.local_calls:
            assert type(call.func) is cst.Name
            helper = self.helpers.get(call.func.value)
            if helper is not None:
                seed = _value(argument(call, helper.parameter, helper.position))
                if seed is not None:
                    self._check_site(call, SeedSite(seed, helper.data, helper.torch_global))
        for call, site, wrong, rewrite, verdict in self.init_seeds:
            if self._reseeded_after(call):
                continue
            self.global_seeds.append((call, verdict))
            self._flag_seed(call, site, wrong, rewrite, verdict)
        if not self.global_seeds or self.data_job.tensorflow:
            return
        verdict = either(v for _, v in self.global_seeds)
        seed_call = self.global_seeds[0][0]
        for loader in self.shuffling_loaders:
            self._flag_loader(loader, seed_call, verdict)

    # -- judging ------------------------------------------------------------------------------
    def _judge(
        self, seed: cst.BaseExpression
    ) -> tuple[list[tuple[RankTerm, RankVerdict]], list[RankTerm]]:
        terms = [
            term
            for term in rank_terms(seed, self.program.facts, modules=self.program.modules)
            if term.is_rank
        ]
        if {term.family for term in terms} >= DATA_PARALLEL:
            return [], []  # `rdp_rank() if prescaled_batch else dp_rank()`
        wrong = []
        for term in terms:
            verdict = self.data_job.seed_verdict(term.family)
            if verdict.wrong:
                wrong.append((term, verdict))
        wrong.sort(key=lambda item: item[1].state is not Tri.ON)
        expected = self.data_job.expected_family
        rewrite = [term for term in terms if term.family not in (expected, "rdp")]
        return wrong, rewrite

    def _is_shuffling_loader(self, call: cst.Call, qualified: Optional[str]) -> bool:
        """A DataLoader or RandomSampler that shuffles with PyTorch's global RNG."""
        arguments = call_arguments(call, self.program.facts) if qualified is not None else None
        if arguments is None:
            return False
        if qualified in DATALOADERS:
            shuffle = arguments.passed("shuffle", DATALOADER_POSITIONS["shuffle"]).certain
            if shuffle is None or self.program.facts.literal(shuffle) is not True:
                return False
            return all(
                arguments.passed(name, DATALOADER_POSITIONS[name]).absent
                for name in ("sampler", "batch_sampler", "generator")
            )
        if qualified in RANDOM_SAMPLERS:
            return arguments.passed("generator", _RANDOM_SAMPLER_GENERATOR).absent
        return False

    def _is_tf_shuffle(self, call: cst.Call) -> bool:
        func = call.func
        return (
            type(func) is cst.Attribute
            and func.attr.value == "shuffle"
            and argument(call, "buffer_size", 0) is not None
        )

    # -- reporting ----------------------------------------------------------------------------
    def _dp_rank(self) -> str:
        return spelled(
            self.program.file,
            f"{self.data_job.expected_family}_rank",
            self.data_job.flavour,
        )

    def _flag_seed(
        self,
        call: cst.Call,
        site: SeedSite,
        wrong: Sequence[tuple[RankTerm, RankVerdict]],
        rewrite: Sequence[RankTerm],
        verdict: RankVerdict,
    ) -> None:
        ranks = " and ".join(
            dict.fromkeys(f"`{self.program.code_for(term.node)}`" for term, _ in wrong)
        )
        why = (
            f"{self.data_job.replica_peers} must shuffle and augment their data identically, since"
            f" each computes the loss from its own copy of the batch, but {ranks} differs between"
            " them"
        )
        first = snippet(self.program.code_for(wrong[0][0].node), 24)
        title = (
            f"data RNG seeded with {first}: a replica's ranks shuffle differently"
            if verdict.state is Tri.ON
            else f"data RNG seeded with {first}, wrong if {unknown_settings(verdict.states)} is on"
        )
        explanation = (
            f"`{callee(call, self.program.module)}(...)` seeds a data-pipeline RNG with {ranks}:"
            f" {why}; this is wrong {verdict.when}. Seed it with `{self._dp_rank()}` or a constant."
        )
        fix: Optional[PendingFix] = None
        expected = self.data_job.expected_family
        if not (site.torch_global and expected == "rdp"):
            # With prescaled batch, rdp_rank would also make tensor-parallel slices initialise alike
            # (SMP501).
            edits = rewrite_terms(rewrite, expected, self.program.file, self.data_job.flavour)
            if edits:
                fix = PendingFix(Applicability.UNSAFE, f"Seed with `{expected}_rank()`", edits)
        elif site.torch_global:
            explanation += (
                " This call also seeds parameter initialisation, which under tensor parallelism"
                " must differ between tensor-parallel ranks: seed the data pipeline with its own"
                " generator instead."
            )
        self.report(
            call,
            title,
            explanation=explanation,
            severity=_severity(verdict),
            fix=fix,
            job_facts=verdict.states,
        )

    def _flag_loader(self, loader: cst.Call, seed_call: cst.Call, verdict: RankVerdict) -> None:
        seed = self.program.code_for(seed_call)
        loader_name = snippet(callee(loader, self.program.module), 24)
        title = (
            f"{loader_name} shuffles with a global RNG seeded per rank: a replica's ranks diverge"
            if verdict.state is Tri.ON
            else f"{loader_name} shuffles with a per-rank seed, wrong if"
            f" {unknown_settings(verdict.states)} is on"
        )
        explanation = (
            f"This `{callee(loader, self.program.module)}` shuffles with PyTorch's global RNG,"
            f" which `{seed}` seeds differently on {self.data_job.replica_peers}, so they read the"
            f" batches in different orders; this is wrong {verdict.when}. Pass"
            " `generator=torch.Generator().manual_seed(...)` seeded with a constant or"
            f" `{self._dp_rank()}`."
        )
        self.report(
            loader,
            title,
            explanation=explanation,
            severity=_severity(verdict),
            job_facts=verdict.states,
        )

    def _check_tf_shuffle(self, call: cst.Call) -> None:
        seed = argument(call, "seed", 1)
        if seed is not None:
            wrong, rewrite = self._judge(seed.value)
            if wrong:
                verdict = either(v for _, v in wrong)
                self._flag_seed(call, SeedSite(seed.value, True, False), wrong, rewrite, verdict)
            return
        if has_star_kwargs(call):
            return
        pp = self.data_job.pp
        severity = {Tri.ON: Severity.ERROR, Tri.UNKNOWN: Severity.WARNING, Tri.OFF: Severity.HINT}[
            pp.state
        ]
        global_seed = next(
            (seed for seed in self.tf_constant_seeds if self.program.order.runs_before(seed, call)),
            None,
        )
        shuffle = snippet(f"{callee(call, self.program.module)}(...)", 30)
        if pp.state is Tri.OFF:
            title = f"{shuffle} has no seed (it matters only with pipeline parallelism)"
            when = f"It only matters with pipeline parallelism, and {pp.condition()}."
        elif global_seed is not None:
            # TensorFlow derives the op's seed from the constant global seed, the same on every
            # rank.
            severity = Severity.HINT
            title = f"{shuffle} has no seed of its own and relies on the global seed's op order"
            when = (
                f"`{self.program.code_for(global_seed)}` above derives its seed alike on every"
                " rank, which holds as long as every rank creates the same ops in the same order"
                " before it; an explicit seed does not depend on that."
            )
        elif pp.state is Tri.ON:
            title = f"{shuffle} has no seed: pipeline-parallel peers shuffle differently"
            when = f"This is wrong because {pp.condition()}."
        else:
            title = f"{shuffle} has no seed: wrong if pipeline parallelism is on"
            when = f"This is wrong {pp.condition()}."
        dp_rank = self._dp_rank()
        explanation = (
            "Without a seed every rank shuffles in its own order, and the pipeline-parallel peers"
            f" of one model replica must read the same batches. {when} Pass `seed={dp_rank}`."
        )
        reference = smp_reference(self.program.file, "dp_rank", self.data_job.flavour)
        fix = None
        if reference is not None:
            insertion = append_arguments(call, [f"seed={reference.text}()"])
            if insertion is not None:
                fix = PendingFix(
                    Applicability.UNSAFE,
                    "Seed the shuffle with `dp_rank()`",
                    (*reference.edits, insertion),
                )
        self.report(
            call, title, explanation=explanation, severity=severity, fix=fix, job_facts=(pp,)
        )


def _value(arg: Optional[cst.Arg]) -> Optional[cst.BaseExpression]:
    return arg.value if arg is not None else None


def _severity(verdict: RankVerdict) -> Severity:
    return Severity.ERROR if verdict.state is Tri.ON else Severity.WARNING
