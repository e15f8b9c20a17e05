"""Which rank group a data-pipeline expression follows, and whether that is right for the job.

The ranks of one model replica (its pipeline-parallel peers, and with ``prescaled_batch`` its
tensor-parallel peers too) must read the same batch in the same order: the loss is computed
on every rank from the broadcast model output and the rank's *own* labels. Sharding a
dataset or seeding a data RNG by a rank that differs between those peers feeds them
different samples without any error. The data-parallel rank (``dp_rank``, or ``rdp_rank``
with ``prescaled_batch``) is the one that is equal exactly where it has to be.

Shared by the data rules: SMP202 (sharding), SMP203 (seeds), SMP204 (sharded datasets).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.edits import NodeEdit, ReplaceNode
from smpfix.base.imports import SMP_TF, SMP_TORCH
from smpfix.base.walker import children
from smpfix.job.jobfacts import Feature, FeatureState, JobFacts, Tri
from smpfix.program.codegen import smp_reference
from smpfix.program.facts import RANK_FUNCTIONS, SIZE_FUNCTIONS, FileFacts
from smpfix.program.local_modules import LocalModules
from smpfix.program.steps import own_nodes

# torch.distributed is initialised by SMP over every rank (with ``ddp``), so these are the
# global rank and world size.
_TORCH_DISTRIBUTED = {
    "torch.distributed.get_rank": "rank",
    "torch.distributed.get_world_size": "size",
}

# Families whose rank differs between pipeline-parallel peers / tensor-parallel peers
# (catalog 1.6: PP peers share dp_rank and tp_rank; TP peers share rdp_rank only).
DIFFERS_ACROSS_PP = frozenset({"global", "local", "mp", "pp"})
DIFFERS_ACROSS_TP = frozenset({"global", "local", "mp", "tp", "dp"})
DATA_PARALLEL = frozenset({"dp", "rdp"})


def family_of(member: str) -> str:
    """``"dp"`` for ``dp_rank``/``dp_size``; ``"global"`` for ``rank``/``size``."""
    if member in ("rank", "size"):
        return "global"
    return member.rsplit("_", 1)[0]


@dataclass(frozen=True)
class RankTerm:
    """One rank or size call an expression depends on.

    ``node`` is what stands for it in the expression: the call itself, or a variable
    assigned from it. ``exact`` says that ``node`` *is* the bare call (directly or through a
    variable holding just that call), so replacing ``node`` by another rank call is a
    faithful rewrite.
    """

    member: str
    node: cst.BaseExpression
    call: cst.Call
    exact: bool
    from_library: bool
    # Read through a helper of the project (``utils.get_rank()``), not a library call.
    helper: bool = False

    @property
    def family(self) -> str:
        return family_of(self.member)

    @property
    def is_rank(self) -> bool:
        return self.member in RANK_FUNCTIONS


def _rank_member(call: cst.Call, facts: FileFacts) -> Optional[tuple[str, bool]]:
    if call.args:
        return None
    member = facts.smp_member(call.func)
    if member in RANK_FUNCTIONS or member in SIZE_FUNCTIONS:
        return member, True
    qualified = facts.qualified_name(call.func)
    if qualified in _TORCH_DISTRIBUTED:
        return _TORCH_DISTRIBUTED[qualified], False
    return None


def rank_terms(
    expr: cst.CSTNode, facts: FileFacts, depth: int = 0, modules: Optional[LocalModules] = None
) -> list[RankTerm]:
    """Every rank/size call ``expr`` reads, also through names assigned once in the file and
    through rank helpers (``utils.get_rank()``, see ``helper_member``) defined in the file or in
    a project module it imports (``modules``)."""
    found: list[RankTerm] = []
    stack: list[cst.CSTNode] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Call):
            member = _rank_member(node, facts)
            if member is not None:
                found.append(RankTerm(member[0], node, node, True, member[1]))
                continue
            helper = helper_member(node, facts, modules) if depth < 3 else None
            if helper is not None:
                # Not exact: the helper may do more than call the library (a fallback off SMP).
                found.append(RankTerm(helper, node, node, False, False, helper=True))
                continue
        if isinstance(node, cst.Name) and depth < 3:
            assignment = facts.single_assignment(node.value)
            if assignment is not None and assignment.value is not node:
                value = assignment.value
                for term in rank_terms(value, facts, depth + 1, modules):
                    exact = term.exact and term.node is value
                    found.append(
                        RankTerm(
                            term.member, node, term.call, exact, term.from_library, term.helper
                        )
                    )
            continue
        if isinstance(node, cst.Attribute):
            stack.append(node.value)
            continue
        if isinstance(node, cst.Arg):
            stack.append(node.value)
            continue
        if isinstance(node, (cst.Lambda, cst.FunctionDef)):
            continue
        stack.extend(children(node))
    return found


def helper_member(
    call: cst.Call, facts: FileFacts, modules: Optional[LocalModules] = None, depth: int = 0
) -> Optional[str]:
    """``"rank"`` for ``get_rank()``, a helper of the project whose every return is one rank
    call (or size call) of one family, or a constant fallback for runs without SMP.

    Training code wraps the rank in helpers that also work without a process group (the BERT
    example's ``utils.get_rank()`` returns ``smp.rank()``, ``dist.get_rank()`` or ``0``); the
    helper is found in this file or, through ``modules``, in a project module it imports.
    """
    if call.args or depth > 2:
        return None
    found = _helper_function(call, facts, modules)
    if found is None:
        return None
    function, home = found
    members: set[str] = set()
    for node in own_nodes(function):
        if type(node) is not cst.Return:  # exact type: isinstance against a LibCST class is slow
            continue
        value = node.value
        if value is None:
            return None
        if isinstance(value, cst.Integer):
            continue
        if isinstance(value, cst.Name):
            assignment = home.single_assignment(value.value)
            value = assignment.value if assignment is not None else value
        if not isinstance(value, cst.Call):
            return None
        member = _rank_member(value, home)
        inner = member[0] if member is not None else helper_member(value, home, modules, depth + 1)
        if inner is None:
            return None
        members.add(inner)
    if (
        len({family_of(m) for m in members}) != 1
        or len({m in RANK_FUNCTIONS for m in members}) != 1
    ):
        return None
    return sorted(members)[0]


def _helper_function(
    call: cst.Call, facts: FileFacts, modules: Optional[LocalModules]
) -> Optional[tuple[cst.FunctionDef, FileFacts]]:
    func = call.func
    if isinstance(func, cst.Name) and func.value not in facts.imports.bindings:
        function = facts.functions.get(func.value)
        return (function, facts) if function is not None else None
    qualified = facts.qualified_name(func)
    if qualified is None or modules is None or qualified.startswith(("smdistributed.", "torch.")):
        return None
    definition = modules.definition(qualified)
    if definition is None:
        return None
    linked, name = definition
    function = linked.facts.functions.get(name)
    return (function, linked.facts) if function is not None else None


@dataclass(frozen=True)
class Verdict:
    """Whether data keyed on some rank is wrong under this job.

    ``state`` ON: wrong in this job; UNKNOWN: wrong if a setting smpfix cannot see is on;
    OFF: right. ``because`` holds the settings the verdict rests on (for messages and the
    finding's job facts) and ``when`` says it in words: "because pipeline parallelism is
    enabled (pyproject.toml ...)" or "if pipeline parallelism is enabled".
    """

    state: Tri
    states: tuple[FeatureState, ...] = ()
    when: str = ""

    @property
    def wrong(self) -> bool:
        return self.state is not Tri.OFF


OFF = Verdict(Tri.OFF)
ALWAYS = Verdict(Tri.ON)


def _all(states: Sequence[FeatureState]) -> Tri:
    if any(s.state is Tri.OFF for s in states):
        return Tri.OFF
    return Tri.ON if all(s.state is Tri.ON for s in states) else Tri.UNKNOWN


def _conjunction(states: Sequence[FeatureState]) -> Verdict:
    """Wrong when every one of ``states`` is on."""
    state = _all(states)
    if state is Tri.OFF:
        return OFF
    if state is Tri.ON:
        return Verdict(
            state, tuple(states), "because " + " and ".join(s.condition() for s in states)
        )
    known = [s.condition() for s in states if s.state is Tri.ON]
    unknown = [s.feature.title for s in states if s.state is Tri.UNKNOWN]
    when = "if " + " and ".join(unknown) + (" is" if len(unknown) == 1 else " are") + " enabled"
    if known:
        when = " and ".join(known) + ", so it is wrong " + when
    return Verdict(state, tuple(states), when)


def either(verdicts: Iterable[Verdict]) -> Verdict:
    """Wrong when any of ``verdicts`` is: the strongest one, with every setting named."""
    items = [v for v in verdicts if v.wrong]
    if not items:
        return OFF
    definite = [v for v in items if v.state is Tri.ON]
    if definite:
        return definite[0]
    states = tuple(dict.fromkeys(s for v in items for s in v.states))
    whens = list(dict.fromkeys(v.when for v in items))
    return Verdict(Tri.UNKNOWN, states, whens[0] if len(whens) == 1 else "; or ".join(whens))


DATA_PARALLELISM = Feature(
    "DP", "data_parallel_degree", "data parallelism (more than one data-parallel rank)"
)
_REPLICAS = Feature(
    "DP", "data_parallel_degree", "data parallelism (several replicas, each to read its own data)"
)


def _launch_numbers(job: JobFacts) -> tuple[Optional[int], list[str]]:
    """The world size (``instance_count`` x ``processes_per_host``) and where it comes from."""
    hosts, per_host = job.settings.get("instance_count"), job.settings.get("processes_per_host")
    if hosts is None or per_host is None or not all(_is_int(s.value) for s in (hosts, per_host)):
        return None, []
    return int(hosts.value) * int(per_host.value), sorted({hosts.source, per_host.source})


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def data_parallelism(job: JobFacts) -> FeatureState:
    """Whether more than one data-parallel rank exists: world / pipeline_parallel_degree > 1.

    The world size is known only when the job states ``instance_count`` and
    ``processes_per_host`` (a launcher does); otherwise data parallelism is unknown.
    """
    world, sources = _launch_numbers(job)
    pp = job.settings.get("pipeline_parallel_degree")
    if world is None or pp is None or not _is_int(pp.value):
        return FeatureState(DATA_PARALLELISM, Tri.UNKNOWN, "world size not known")
    degree = int(pp.value)  # type: ignore[arg-type]
    dp = world // degree if degree else world
    sources = sorted({*sources, pp.source})
    state = Tri.ON if dp > 1 else Tri.OFF
    return FeatureState(
        DATA_PARALLELISM, state, f"{dp} data-parallel ranks; {'; '.join(sources)}", dp
    )


def data_replicas(job: JobFacts) -> FeatureState:
    """Whether more than one group of ranks must read its own data, so that a loader every rank
    reads whole wastes the job's data parallelism.

    Pipeline-parallel peers read the same data, so the groups are the data-parallel ranks
    (world / pipeline_parallel_degree, tensor-parallel peers included: each reads its own part
    of the batch); with ``prescaled_batch`` a tensor-parallel group reads one batch together,
    so they are the reduced data-parallel ranks (world / (pipeline x tensor parallel degree)).
    """
    dp = data_parallelism(job)
    if dp.state is not Tri.ON:
        return FeatureState(_REPLICAS, dp.state, dp.source, dp.value)
    tp, prescaled = job.settings.get("tensor_parallel_degree"), job.settings.get("prescaled_batch")
    if prescaled is not None and prescaled.value is False:
        return FeatureState(_REPLICAS, Tri.ON, dp.source, dp.value)
    if tp is None or not _is_int(tp.value):
        return FeatureState(
            _REPLICAS, Tri.UNKNOWN, f"{dp.source}; tensor_parallel_degree not known"
        )
    rdp = int(dp.value) // max(int(tp.value), 1)  # type: ignore[arg-type]
    if rdp > 1:
        return FeatureState(
            _REPLICAS, Tri.ON, f"{rdp} reduced data-parallel ranks; {dp.source}; {tp.source}", rdp
        )
    if prescaled is not None and prescaled.value is True:
        return FeatureState(
            _REPLICAS,
            Tri.OFF,
            f"prescaled batch with one reduced data-parallel rank; {dp.source}",
            rdp,
        )
    return FeatureState(
        _REPLICAS,
        Tri.UNKNOWN,
        f"{dp.source}; one reduced data-parallel rank, so it depends on prescaled_batch",
    )


@dataclass(frozen=True)
class GroupSize:
    """How many ranks a rank group holds in this job, and where the numbers come from."""

    value: int
    how: str


# The settings each group size multiplies (numerator: the world or one host), divides by.
_GROUPS: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "size": ("world", ()),
    "local_size": ("host", ()),
    "dp_size": ("world", ("pipeline_parallel_degree",)),
    "rdp_size": ("world", ("pipeline_parallel_degree", "tensor_parallel_degree")),
}
_DEGREES = {
    "pp_size": ("pipeline_parallel_degree",),
    "tp_size": ("tensor_parallel_degree",),
    "mp_size": ("pipeline_parallel_degree", "tensor_parallel_degree"),
}


def group_size(
    member: str, job: JobFacts, degrees: Optional[Mapping[str, object]] = None
) -> Optional[GroupSize]:
    """What ``smp.<member>()`` returns in this job (``size``, ``local_size``, ``dp_size``,
    ``rdp_size``, ``pp_size``, ``tp_size``, ``mp_size``), when the job states every number it
    needs: the world is ``instance_count`` x ``processes_per_host``, the data-parallel group
    the world over the pipeline-parallel degree (tensor-parallel peers differ in ``dp_rank``),
    the reduced one over both degrees. ``degrees`` overrides job settings (a hypothesis)."""
    overrides = degrees or {}
    sources: list[str] = []

    def setting(key: str) -> Optional[int]:
        if key in overrides:
            value = overrides[key]
            return value if _is_int(value) else None  # type: ignore[return-value]
        found = job.settings.get(key)
        if found is None or not _is_int(found.value):
            return None
        sources.append(found.source)
        return int(found.value)  # type: ignore[arg-type]

    if member in _DEGREES:
        product = 1
        for key in _DEGREES[member]:
            degree = setting(key)
            if degree is None:
                return None
            product *= max(degree, 1)
        return GroupSize(product, "; ".join(sorted(set(sources))))
    if member not in _GROUPS:
        return None
    base, divisors = _GROUPS[member]
    if base == "world":
        world, launch = _launch_numbers(job)
        sources += launch
    else:
        world = setting("processes_per_host")
    if world is None:
        return None
    for key in divisors:
        degree = setting(key)
        if degree is None:
            return None
        world //= max(degree, 1)
    return GroupSize(world, "; ".join(sorted(set(sources))))


@dataclass(frozen=True)
class DataJob:
    """The three settings that decide which rank data must follow, for one file.

    TensorFlow scripts have neither tensor parallelism nor ``prescaled_batch``.
    """

    pp: FeatureState
    tp: FeatureState
    prescaled: FeatureState
    tensorflow: bool

    @classmethod
    def of(cls, job: JobFacts, facts: FileFacts) -> DataJob:
        tensorflow = facts.imports.imports_module(SMP_TF) and not facts.imports.imports_module(
            SMP_TORCH
        )
        return cls(job.feature("PP"), job.feature("TP"), job.feature("PRESCALED"), tensorflow)

    @property
    def replica_peers(self) -> str:
        """Words for the ranks that must share data: "the ranks of one model replica (...)"."""
        if self.tensorflow:
            return "the ranks of one model replica (its pipeline-parallel peers)"
        return (
            "the ranks of one model replica (its pipeline-parallel peers, and with prescaled batch its "
            "tensor-parallel peers)"
        )

    @property
    def flavour(self) -> str:
        return SMP_TF if self.tensorflow else SMP_TORCH

    def pipeline(self) -> Verdict:
        """Wrong when pipeline peers must share the data: pipeline parallelism is on."""
        return _conjunction([self.pp])

    def prescaled_tp(self) -> Verdict:
        """Wrong when tensor-parallel peers must share the data: prescaled batch under TP.

        ``prescaled_batch`` counts only when known to be on: off is the library's default
        and the documented ``dp_rank`` form is not second-guessed (catalog P17).
        """
        if self.tensorflow or self.prescaled.state is not Tri.ON:
            return OFF
        return _conjunction([self.prescaled, self.tp])

    def not_prescaled_tp(self) -> Verdict:
        """``rdp_*`` sharding gives tensor-parallel peers the same shard: wrong without prescaling."""
        if self.tensorflow or self.prescaled.state is not Tri.OFF:
            return OFF
        return _tp_without_prescaled(self.prescaled, self.tp)

    @property
    def expected_family(self) -> str:
        """``rdp`` when prescaled_batch is on, else ``dp``."""
        return "rdp" if not self.tensorflow and self.prescaled.state is Tri.ON else "dp"

    @property
    def expectation_known(self) -> bool:
        return self.tensorflow or self.prescaled.state is not Tri.UNKNOWN

    def sharding_verdict(self, family: str) -> Verdict:
        """Is sharding a dataset by this family's rank and size wrong here?"""
        if family == "dp":
            return self.prescaled_tp()
        if family == "rdp":
            return self.not_prescaled_tp()
        if family == "global":
            return either([self.pipeline(), self.prescaled_tp()])
        return ALWAYS

    def seed_verdict(self, family: str) -> Verdict:
        """Is seeding a data RNG with this family's rank wrong here?"""
        verdicts = []
        if family in DIFFERS_ACROSS_PP:
            verdicts.append(self.pipeline())
        if family in DIFFERS_ACROSS_TP:
            verdicts.append(self.prescaled_tp())
        return either(verdicts)


def _tp_without_prescaled(prescaled: FeatureState, tp: FeatureState) -> Verdict:
    state = tp.state
    if state is Tri.OFF:
        return OFF
    if state is Tri.ON:
        return Verdict(
            Tri.ON, (prescaled, tp), f"because {tp.condition()} and {prescaled.condition()}"
        )
    return Verdict(
        Tri.UNKNOWN,
        (prescaled, tp),
        f"since {prescaled.condition()}, if tensor parallelism is enabled",
    )


def replacement(member: str, family: str) -> str:
    """``rank`` -> ``dp_rank``, ``size`` -> ``dp_size`` (for family ``dp``)."""
    return f"{family}_rank" if member in RANK_FUNCTIONS else f"{family}_size"


def callee(call: cst.Call, module: cst.Module) -> str:
    """How a message names what ``call`` calls: ``random.seed``, or ``.shuffle`` on a chain."""
    func = call.func
    if isinstance(func, cst.Attribute) and not isinstance(func.value, (cst.Name, cst.Attribute)):
        return f".{func.attr.value}"
    return module.code_for_node(func)


def spelled(facts: FileFacts, module: cst.Module, member: str, flavour: str = SMP_TORCH) -> str:
    """How a message names ``member`` in this file (``mp.dp_rank()``), ``smp.`` as a fallback."""
    reference = smp_reference(facts, module, member, flavour)
    return f"{reference.text}()" if reference is not None else f"smp.{member}()"


def rewrite_terms(
    terms: Sequence[RankTerm],
    family: str,
    facts: FileFacts,
    module: cst.Module,
    flavour: str = SMP_TORCH,
) -> Optional[tuple[NodeEdit, ...]]:
    """Edits turning each term into the same kind of call of ``family``; None if one cannot be.

    A library call keeps its spelling and only its name changes (``mp.rank`` ->
    ``mp.dp_rank``); a ``torch.distributed`` call or a variable is replaced by the library
    call written the file's way (adding it to a ``from ... import`` when that is how the
    file names the library).
    """
    edits: list[NodeEdit] = []
    for term in terms:
        member = replacement(term.member, family)
        if not term.exact:
            return None
        if (
            term.node is term.call
            and term.from_library
            and isinstance(term.call.func, cst.Attribute)
        ):
            edits.append(ReplaceNode(term.call.func.attr, member))
            continue
        reference = smp_reference(facts, module, member, flavour)
        if reference is None:
            return None
        edits.extend(reference.edits)
        if term.node is term.call:
            edits.append(ReplaceNode(term.call.func, reference.text))
        else:
            edits.append(ReplaceNode(term.node, f"{reference.text}()"))
    return _unique(edits)


def _unique(edits: Sequence[NodeEdit]) -> tuple[NodeEdit, ...]:
    """The same import addition asked for twice is made once."""
    seen: list[NodeEdit] = []
    for edit in edits:
        if edit not in seen:
            seen.append(edit)
    return tuple(seen)
