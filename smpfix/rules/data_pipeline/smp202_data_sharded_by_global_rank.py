"""SMP202: a dataset sharded by the global rank (or another non-data-parallel rank)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument, called_name
from smpfix.base.edits import NodeEdit
from smpfix.base.findings import Applicability, Severity
from smpfix.base.flavour import BOTH
from smpfix.base.walker import Ancestry, iter_nodes
from smpfix.fixes.arguments import append_arguments
from smpfix.fixes.rank_rewrites import rewrite_terms
from smpfix.fixes.references import smp_reference, spelled
from smpfix.job.groups import DATA_PARALLEL, DataJob, RankVerdict, either
from smpfix.job.jobfacts import Tri
from smpfix.program.data.dataloaders import SAMPLER_POSITIONS, SUBSETS, is_distributed_sampler
from smpfix.program.flow.call_arguments import call_arguments
from smpfix.program.model import Program
from smpfix.program.ranks.rank_terms import RankTerm, rank_terms
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet, unknown_settings

_SHARDING_METHODS = frozenset({"shard", "select"})

_WHY = {
    "global": (
        "{peers} must read the same samples, because each computes the loss from its own labels,"
        " but global ranks hand each of them a different shard"
    ),
    "local": (
        "local ranks repeat on every node, so every node reads the same shards (the rest of the"
        " data is never read) while the peers of one model replica read different ones"
    ),
    "dp": (
        "with prescaled batch the whole tensor-parallel group must read the same batch, and "
        "tensor-parallel peers have different `dp_rank()` values"
    ),
    "rdp": (
        "without prescaled batch each tensor-parallel rank reads its own part of the batch, and"
        " `rdp_rank()` is the same across a tensor-parallel group, so its ranks read the same"
        " samples"
    ),
}


# What goes wrong, short enough for a title.
_HARM = {
    "global": "a replica's ranks read different samples",
    "local": "every node reads the same shards",
    "dp": "tensor-parallel peers read different batches",
    "rdp": "tensor-parallel peers read the same samples",
}


def _why(family: str, peers: str) -> str:
    return _WHY.get(
        family,
        f"`{family}_rank()` numbers the ranks inside one model replica, not the replicas, so every"
        " replica reads the same shards while the peers of one replica read different ones",
    ).format(peers=peers)


class DataShardedByGlobalRank(Rule):
    flavours = BOTH
    summary = (
        "Data sharded by `smp.rank()`/`smp.size()` (or `DistributedSampler`'s defaults) instead of"
        " the data-parallel rank feeds the ranks of one model replica different samples."
    )
    fix_availability = FixAvailability.SOMETIMES_SAFE
    depends_on = ("PP", "TP", "PRESCALED")
    runs_on_helper_modules = True
    tensor_parallelism = TensorParallelism.DEGREE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self.data_job = DataJob.of(self.program.job, self.program.facts.is_tensorflow)
        # The branches (``if`` node, body or else) holding each manual shard reported so far.
        self.reported_branches: list[frozenset[tuple[int, str]]] = []

    def visit_Call(self, node: cst.Call) -> None:
        name = called_name(node, self.program.facts.imports.bindings)
        if name not in ("DistributedSampler", "Subset") and name not in _SHARDING_METHODS:
            return
        if is_distributed_sampler(node, self.program.facts):
            self._check_sampler(node)
            return
        if self.program.facts.qualified_name(node.func) in SUBSETS:
            indices = argument(node, "indices", 1)
            if indices is not None:
                self._check_manual(node, [indices.value], "`Subset(...)`")
            return
        func = node.func
        if (
            type(func) is cst.Attribute
            and func.attr.value in _SHARDING_METHODS
            and self.program.facts.qualified_name(func) is None
        ):
            self._check_manual(node, [arg.value for arg in node.args], f"`.{func.attr.value}(...)`")

    def visit_Subscript(self, node: cst.Subscript) -> None:
        parts = [
            part
            for element in node.slice
            if type(element.slice) is cst.Slice
            for part in (element.slice.lower, element.slice.upper, element.slice.step)
            if part is not None and not self._only_quoted_ranks(part)
        ]
        if parts:
            self._check_manual(node, parts, "slice")
            return
        if len(node.slice) == 1 and type(node.slice[0].slice) is cst.Index:
            index = node.slice[0].slice.value
            if self._picks_a_shard(index):
                self._check_manual(node, [index], "index")
            elif self._picks_a_part(node, index):
                # `np.array_split(files, smp.size())[smp.rank()]`: the size and the rank together.
                self._check_manual(node, [index, node.value], "index")

    def _picks_a_part(self, node: cst.Subscript, index: cst.BaseExpression) -> bool:
        """A rank indexing a split made by a size: ``np.array_split(files, world)[rank]``."""
        terms = rank_terms(index, self.program.facts, modules=self.program.modules)
        if not terms or not all(term.is_rank for term in terms) or type(node.value) is not cst.Call:
            return False
        return any(
            not term.is_rank
            for term in rank_terms(node.value, self.program.facts, modules=self.program.modules)
        )

    def _only_quoted_ranks(self, part: cst.BaseExpression) -> bool:
        """``name[: -len(f".pt_{smp.mp_rank()}")]``: the rank names a file whose length is
        taken; the slice cuts a string, not the data."""
        quoted = {
            id(inner)
            for node in iter_nodes(part)
            if type(node) is cst.FormattedString
            or (type(node) is cst.Call and type(node.func) is cst.Name and node.func.value == "len")
            for inner in iter_nodes(node)
        }
        terms = rank_terms(part, self.program.facts, modules=self.program.modules)
        return bool(terms) and all(id(term.call) in quoted for term in terms)

    def _picks_a_shard(self, index: cst.BaseExpression) -> bool:
        """``files[(epoch * world + rank) % len(files)]``: an index that reads a rank and either a
        size or a modulo by a length. A bare ``devices[smp.local_rank()]`` picks a device, not data.
        """
        terms = rank_terms(index, self.program.facts, modules=self.program.modules)
        if not any(term.is_rank for term in terms):
            return False
        if any(not term.is_rank for term in terms):
            return True
        return any(
            type(n) is cst.BinaryOperation
            and type(n.operator) is cst.Modulo
            and type(n.right) is not cst.Integer
            for n in iter_nodes(index)
        )

    # -- what is wrong ----------------------------------------------------------------------
    def _judge(
        self, expr: cst.BaseExpression
    ) -> tuple[list[tuple[RankTerm, RankVerdict]], list[RankTerm]]:
        """The rank terms of one shard count or index that are wrong for data here, and the
        terms a fix rewrites (every one not of the data-parallel family the job expects).

        An expression that already uses the data-parallel rank is judged on that alone
        (``smp.dp_rank() * smp.tp_size()`` is a deliberate layout); one that chooses between
        ``dp_*`` and ``rdp_*`` (the official ``rdp_rank() if prescaled_batch else dp_rank()``)
        is accepted.
        """
        terms = [
            term
            for term in rank_terms(
                expr, self.program.facts, modules=self.program.modules, branches=True
            )
            if self._taken(term) is not False
        ]
        families = {term.family for term in terms}
        data_parallel = families & DATA_PARALLEL
        if data_parallel == DATA_PARALLEL:
            return [], []
        considered = [t for t in terms if t.family in data_parallel] if data_parallel else terms
        wrong = []
        for term in considered:
            verdict = self.data_job.sharding_verdict(term.family)
            if verdict.wrong:
                wrong.append((term, verdict))
        rewrite = [t for t in considered if t.family != self.data_job.expected_family]
        return wrong, rewrite

    def _judge_all(
        self, parts: Sequence[cst.BaseExpression]
    ) -> tuple[list[tuple[RankTerm, RankVerdict]], list[RankTerm]]:
        wrong: list[tuple[RankTerm, RankVerdict]] = []
        rewrite: list[RankTerm] = []
        for part in parts:
            found, terms = self._judge(part)
            wrong.extend(found)
            rewrite.extend(terms)
        # The definite problems first: they decide the explanation.
        wrong.sort(key=lambda item: item[1].state is not Tri.ON)
        return wrong, rewrite

    def _check_manual(
        self, node: cst.CSTNode, parts: Sequence[cst.BaseExpression], kind: str
    ) -> None:
        offences, rewrite = self._judge_all(parts)
        if not offences:
            return
        if not any(
            term.is_rank
            for part in parts
            for term in rank_terms(
                part, self.program.facts, modules=self.program.modules, branches=True
            )
        ):
            return  # `ds[: smp.size()]` takes a prefix; a shard needs an index
        branches = self._branches()
        if any(_alternatives(branches, earlier) for earlier in self.reported_branches):
            return  # the same shard written once per branch of an `if`: one mistake, one finding
        self.reported_branches.append(branches)
        terms = [term for term, _ in offences]
        lead = f"the data is sharded ({kind}) by {self._listing(terms)}"
        helpers = [term for term in terms if term.helper]
        if helpers:
            returned = " and ".join(dict.fromkeys(f"`smp.{term.member}()`" for term in helpers))
            lead += f" (the project's helpers, which return {returned})"
        subject = f"data sharded by {self._first(terms)}"
        self._report(node, subject, lead, offences, rewrite, (), terms[0].family)

    def _branches(self) -> frozenset[tuple[int, str]]:
        stack = self.ancestry.stack
        found = set()
        for parent, child in zip(stack, stack[1:]):
            if type(parent) is cst.If and child is not parent.test:
                found.add((id(parent), "body" if child is parent.body else "else"))
        return frozenset(found)

    def _check_sampler(self, call: cst.Call) -> None:
        if not call.args or any(arg.star == "*" for arg in call.args):
            return
        # A `**` dict smpfix cannot read may pass what the call does not spell.
        arguments = call_arguments(call, self.program.facts)
        missing: list[str] = []
        given: list[cst.BaseExpression] = []
        for name in ("num_replicas", "rank"):
            written = argument(call, name, SAMPLER_POSITIONS[name])
            if arguments is None:
                given.extend([written.value] if written is not None else [])
                continue
            passed = arguments.passed(name, SAMPLER_POSITIONS[name])
            if passed.absent:
                missing.append(name)
            elif passed.maybe_absent:
                return  # set on some paths only: what the sampler shards by depends on the run
            else:
                given.extend(passed.values)
        offences, rewrite = self._judge_all(given)
        missing_verdict = self.data_job.sharding_verdict("global") if missing else None
        if missing_verdict is not None and not missing_verdict.wrong:
            missing = []
        if not offences and not missing:
            return
        if missing:
            absent = " and ".join(f"`{m}`" for m in missing)
            lead = (
                f"`DistributedSampler` without {absent} shards by global rank (SMP starts"
                " torch.distributed over every rank, so the defaults are the world size and the"
                " global rank)"
            )
            family = "global"
            subject = "`DistributedSampler` defaults shard by global rank"
        else:
            terms = [term for term, _ in offences]
            lead = f"this `DistributedSampler` shards by {self._listing(terms)}"
            family = terms[0].family
            subject = f"`DistributedSampler` shards by {self._first(terms)}"
        self._report(
            call, subject, lead, offences, rewrite, tuple(missing), family, missing_verdict
        )

    def _taken(self, term: RankTerm) -> Optional[bool]:
        """Whether the job takes a branch where ``term`` holds (an attribute the project sets
        in branches: ``if args.smp: args.rank = smp.rank() elif args.hvd: ...``): True when
        one branch's tests all hold in the job, False when every branch has a test that fails,
        None when smpfix cannot tell (the finding then says "if")."""
        if not term.branches:
            return True
        conditions = self.program.conditions
        undecided = False
        for branch in term.branches:
            values = [conditions.truth(test) for test, _ in branch]
            if any(v.known and bool(v.value) != truth for v, (_, truth) in zip(values, branch)):
                continue
            if all(value.known for value in values):
                return True
            undecided = True
        return None if undecided else False

    def _undecided_branch(self, terms: Sequence[RankTerm]) -> Optional[str]:
        """The tests of the branch a term needs, when the job may not take it (``_taken``)."""
        for term in terms:
            if self._taken(term) is None:
                branch = term.branches[0]
                spelled = [(snippet(self.program.code_for(test), 20), t) for test, t in branch]
                return " and ".join(code if truth else f"not {code}" for code, truth in spelled)
        return None

    # -- how it is reported -----------------------------------------------------------------
    def _listing(self, terms: Sequence[RankTerm]) -> str:
        spellings = list(dict.fromkeys(self.program.code_for(term.node) for term in terms))
        return " and ".join(f"`{s}`" for s in spellings)

    def _first(self, terms: Sequence[RankTerm]) -> str:
        """The first rank term, for a title."""
        return snippet(self.program.code_for(terms[0].node), 24)

    def _report(
        self,
        node: cst.CSTNode,
        subject: str,
        lead: str,
        offences: Sequence[tuple[RankTerm, RankVerdict]],
        rewrite: Sequence[RankTerm],
        missing: tuple[str, ...],
        family: str,
        missing_verdict: Optional[RankVerdict] = None,
    ) -> None:
        verdicts = [v for _, v in offences] + (
            [missing_verdict] if missing_verdict is not None else []
        )
        verdict = either(verdicts)
        severity = Severity.ERROR if verdict.state is Tri.ON else Severity.WARNING
        expected = self.data_job.expected_family
        flavour = self.data_job.flavour
        size, rank = (
            spelled(self.program.file, f"{expected}_{kind}", flavour) for kind in ("size", "rank")
        )
        when = f"; this is wrong {verdict.when}" if verdict.when else ""
        advice = f"Shard by `{size}` and `{rank}`"
        if not self.data_job.expectation_known:
            advice += " (by `rdp_size()`/`rdp_rank()` if `prescaled_batch` is enabled)"
        why = _why(family, self.data_job.replica_peers)
        branch = self._undecided_branch([term for term, _ in offences])
        evidence: tuple[str, ...] = (lead,)
        if branch is not None:
            severity = Severity.WARNING
            taken = (
                f"if the job takes the branch where {branch} (the rank is set differently in"
                " the others, and smpfix cannot tell which one runs)"
            )
            when = f"{when}, and {taken}" if when else f"; this is wrong {taken}"
            evidence = (*evidence, f"the global rank is assigned only where {branch}")
        if verdict.state is Tri.ON and branch is not None:
            title = f"{subject}, wrong if the job takes {branch}"
        elif verdict.state is Tri.ON:
            title = f"{subject}: {_HARM.get(family, 'every replica reads the same shards')}"
        else:
            title = f"{subject}, wrong if {unknown_settings(verdict.states)} is on"
        self.report(
            node,
            title,
            explanation=f"{why[:1].upper()}{why[1:]}{when}. {advice}.",
            evidence=evidence,
            severity=severity,
            fix=self._fix(node, rewrite, missing),
            job_facts=verdict.states,
        )

    def _fix(
        self, node: cst.CSTNode, rewrite: Sequence[RankTerm], missing: tuple[str, ...]
    ) -> Optional[PendingFix]:
        job = self.data_job
        family = job.expected_family
        edits: list[NodeEdit] = []
        if rewrite:
            rewritten = rewrite_terms(rewrite, family, self.program.file, job.flavour)
            if rewritten is None:
                return None
            edits.extend(rewritten)
        if missing:
            assert type(node) is cst.Call
            added = []
            for name in missing:
                member = f"{family}_size" if name == "num_replicas" else f"{family}_rank"
                reference = smp_reference(self.program.file, member, job.flavour)
                if reference is None:
                    return None
                edits.extend(e for e in reference.edits if e not in edits)
                added.append(f"{name}={reference.text}()")
            insertion = append_arguments(node, added)
            if insertion is None:
                return None
            edits.append(insertion)
        if job.tensorflow:
            safe = job.pp.state is Tri.OFF
        else:
            safe = job.expectation_known
        applicability = Applicability.SAFE if safe else Applicability.UNSAFE
        return PendingFix(
            applicability, f"Shard by `{family}_size()` and `{family}_rank()`", tuple(edits)
        )


def _alternatives(first: frozenset[tuple[int, str]], second: frozenset[tuple[int, str]]) -> bool:
    """Do two places sit in different branches of one ``if`` (only one of them runs)?"""
    return any((node, "else" if branch == "body" else "body") in second for node, branch in first)
