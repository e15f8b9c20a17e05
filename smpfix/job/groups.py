"""Rank groups of a job: how many ranks each holds, and which rank the data must follow.

The ranks of one model replica (its pipeline-parallel peers, and with ``prescaled_batch`` its
tensor-parallel peers too) must read the same batch in the same order: the loss is computed
on every rank from the broadcast model output and the rank's *own* labels. Sharding a
dataset or seeding a data RNG by a rank that differs between those peers feeds them
different samples without any error. The data-parallel rank (``dp_rank``, or ``rdp_rank``
with ``prescaled_batch``) is the one that is equal exactly where it has to be.

Pure arithmetic over the job's settings (no code is read): the data rules (SMP201-SMP206),
the conditions a script's branches test (``smp.dp_size() > 1``) and the plan ask it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

from smpfix.base.imports import SMP_TF, SMP_TORCH
from smpfix.job.jobfacts import Feature, FeatureState, JobFacts, Tri

# Families whose rank differs between pipeline-parallel peers / tensor-parallel peers
# (developer guide, ranking mechanism: PP peers share dp_rank and tp_rank; TP peers share
# rdp_rank only).
DIFFERS_ACROSS_PP = frozenset({"global", "local", "mp", "pp"})
DIFFERS_ACROSS_TP = frozenset({"global", "local", "mp", "tp", "dp"})
DATA_PARALLEL = frozenset({"dp", "rdp"})


def family_of(member: str) -> str:
    """``"dp"`` for ``dp_rank``/``dp_size``; ``"global"`` for ``rank``/``size``."""
    if member in ("rank", "size"):
        return "global"
    return member.rsplit("_", 1)[0]


@dataclass(frozen=True)
class RankVerdict:
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


OFF = RankVerdict(Tri.OFF)
ALWAYS = RankVerdict(Tri.ON)


def _all(states: Sequence[FeatureState]) -> Tri:
    if any(s.state is Tri.OFF for s in states):
        return Tri.OFF
    return Tri.ON if all(s.state is Tri.ON for s in states) else Tri.UNKNOWN


def _conjunction(states: Sequence[FeatureState]) -> RankVerdict:
    """Wrong when every one of ``states`` is on."""
    state = _all(states)
    if state is Tri.OFF:
        return OFF
    if state is Tri.ON:
        return RankVerdict(
            state, tuple(states), "because " + " and ".join(s.condition() for s in states)
        )
    known = [s.condition() for s in states if s.state is Tri.ON]
    unknown = [s.feature.title for s in states if s.state is Tri.UNKNOWN]
    when = "if " + " and ".join(unknown) + (" is" if len(unknown) == 1 else " are") + " enabled"
    if known:
        when = " and ".join(known) + ", so it is wrong " + when
    return RankVerdict(state, tuple(states), when)


def either(verdicts: Iterable[RankVerdict]) -> RankVerdict:
    """Wrong when any of ``verdicts`` is: the strongest one, with every setting named."""
    items = [v for v in verdicts if v.wrong]
    if not items:
        return OFF
    definite = [v for v in items if v.state is Tri.ON]
    if definite:
        return definite[0]
    states = tuple(dict.fromkeys(s for v in items for s in v.states))
    whens = list(dict.fromkeys(v.when for v in items))
    return RankVerdict(Tri.UNKNOWN, states, whens[0] if len(whens) == 1 else "; or ".join(whens))


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


def data_parallel_degree(world: Optional[int], pp: Optional[int]) -> Optional[int]:
    """The data-parallel ranks per model partition: the processes over the pipeline degree
    (tensor-parallel peers included, as ``smp.dp_size()`` counts them); None unless both are
    known and the degree divides the processes (SMP801 reports a degree that does not). The
    one computation behind SMP824's "nothing to shard" and every rule asking of the job."""
    if world is None or pp is None or pp < 1 or world % pp:
        return None
    return world // pp


def data_parallelism(job: JobFacts) -> FeatureState:
    """Whether more than one data-parallel rank exists: world / pipeline_parallel_degree > 1.

    The world size is known only when the job states ``instance_count`` and
    ``processes_per_host`` (a launcher does); otherwise data parallelism is unknown.
    """
    world, sources = _launch_numbers(job)
    pp = job.settings.get("pipeline_parallel_degree")
    degree = pp.value if pp is not None and _is_int(pp.value) else None
    dp = data_parallel_degree(world, degree)  # type: ignore[arg-type]
    if dp is None or pp is None:
        return FeatureState(DATA_PARALLELISM, Tri.UNKNOWN, "world size not known")
    sources = sorted({*sources, pp.source})
    state = Tri.ON if dp > 1 else Tri.OFF
    return FeatureState(
        DATA_PARALLELISM,
        state,
        f"{dp} data-parallel rank{'' if dp == 1 else 's'}; {'; '.join(sources)}",
        dp,
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
    def of(cls, job: JobFacts, tensorflow: bool) -> DataJob:
        """The settings of ``job`` for a file of the TensorFlow flavour (``tensorflow``) or not."""
        return cls(job.feature("PP"), job.feature("TP"), job.feature("PRESCALED"), tensorflow)

    @property
    def replica_peers(self) -> str:
        """Words for the ranks that must share data: "the ranks of one model replica (...)"."""
        if self.tensorflow:
            return "the ranks of one model replica (its pipeline-parallel peers)"
        return (
            "the ranks of one model replica (its pipeline-parallel peers, and with prescaled"
            " batch its tensor-parallel peers)"
        )

    @property
    def flavour(self) -> str:
        return SMP_TF if self.tensorflow else SMP_TORCH

    def pipeline(self) -> RankVerdict:
        """Wrong when pipeline peers must share the data: pipeline parallelism is on."""
        return _conjunction([self.pp])

    def prescaled_tp(self) -> RankVerdict:
        """Wrong when tensor-parallel peers must share the data: prescaled batch under TP.

        ``prescaled_batch`` counts only when known to be on: off is the library's default
        and the documented ``dp_rank`` form ("Configuration tips and pitfalls") is not
        second-guessed.
        """
        if self.tensorflow or self.prescaled.state is not Tri.ON:
            return OFF
        return _conjunction([self.prescaled, self.tp])

    def not_prescaled_tp(self) -> RankVerdict:
        """``rdp_*`` sharding gives tensor-parallel peers the same shard: wrong without
        prescaling."""
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

    def sharding_verdict(self, family: str) -> RankVerdict:
        """Is sharding a dataset by this family's rank and size wrong here?"""
        if family == "dp":
            return self.prescaled_tp()
        if family == "rdp":
            return self.not_prescaled_tp()
        if family == "global":
            return either([self.pipeline(), self.prescaled_tp()])
        return ALWAYS

    def seed_verdict(self, family: str) -> RankVerdict:
        """Is seeding a data RNG with this family's rank wrong here?"""
        verdicts = []
        if family in DIFFERS_ACROSS_PP:
            verdicts.append(self.pipeline())
        if family in DIFFERS_ACROSS_TP:
            verdicts.append(self.prescaled_tp())
        return either(verdicts)


def _tp_without_prescaled(prescaled: FeatureState, tp: FeatureState) -> RankVerdict:
    state = tp.state
    if state is Tri.OFF:
        return OFF
    if state is Tri.ON:
        return RankVerdict(
            Tri.ON, (prescaled, tp), f"because {tp.condition()} and {prescaled.condition()}"
        )
    return RankVerdict(
        Tri.UNKNOWN,
        (prescaled, tp),
        f"since {prescaled.condition()}, if tensor parallelism is enabled",
    )
