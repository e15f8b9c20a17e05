"""The memory plan of an SMP v2 job: its own settings, defaults and model (``fsdp``).

An SMP v2 job (``smpfix.job.smp_v2``) is never planned with SMP v1's model: v1's settings
(``sharded_data_parallel_degree``, ``pipeline_parallel_degree``, ``shard_optimizer_state``,
``fp16``/``bf16``) do not exist in v2, and their v1 defaults (no sharding, fp32 without a
precision setting) would make a job FSDP shards look a hundred times larger than it is.

Settings, highest precedence first: ``--job`` and ``[tool.smpfix.job]``, the launcher's
``modelparallel`` ``parameters`` as written (``launcher_parameters``: v2 keys too, which the
v1 job facts leave out), then the defaults of the v2 reference page ("SMP v2 core feature
configuration parameters"): ``hybrid_shard_degree`` 0, ``tensor_parallel_degree``,
``context_parallel_degree`` and ``expert_parallel_degree`` 1, ``activation_loading_horizon``
2, ``sm_activation_offloading`` True; the script's ``tsm.state.<setting>`` reads them
(``ScriptValues.with_v2_state``). The script gives the model, the sequence length and the
batch as for v1 (``script_setup``), and FSDP's sharding strategy, mixed precision and CPU offload,
activation checkpointing and offloading through PyTorch's APIs (``script_fsdp``). The script's
``tsm.init({...})`` dictionary comes below the launcher (``script_setup.init_settings``).
Flash attention is never assumed: which attention
kernels a v2 job runs depends on the model, ``torch.sagemaker.transform`` and the Hugging Face
version, so it is estimated both ways.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Optional

from smpfix.base.literals import UNKNOWN
from smpfix.job.instances import InstanceType
from smpfix.job.jobfacts import V2_FEATURE_SINCE, JobFacts
from smpfix.job.launcher import Launcher
from smpfix.job.versions import compare
from smpfix.plan import script_fsdp, script_setup
from smpfix.plan.fsdp import (
    HYBRID_SHARD,
    FsdpSetup,
    estimate,
    problems,
    shard_degree,
    sharded_states,
)
from smpfix.plan.layers import LayerKind
from smpfix.plan.memory import GIB, Estimate
from smpfix.plan.models import ModelShape
from smpfix.plan.results import MemoryPlan, MemorySplit, PlannedChange
from smpfix.plan.script_code import ScriptCode
from smpfix.plan.script_model import FoundModel
from smpfix.plan.script_values import ScriptValues
from smpfix.plan.setup import OPTIMIZER_STATE_BYTES
from smpfix.plan.suggestions_fsdp import host_changes, suggest
from smpfix.plan.verdict import Verdict, combined

APPROXIMATIONS = (
    "SMP v2 is planned with its own model (FSDP); every approximation is listed in docs/plan.md"
    " (`smpfix plan --help`)"
)
# The v2 reference page's defaults of the settings the plan reads.
V2_DEFAULTS: Mapping[str, Any] = {
    "hybrid_shard_degree": 0,
    "tensor_parallel_degree": 1,
    "context_parallel_degree": 1,
    "expert_parallel_degree": 1,
    "activation_loading_horizon": 2,
    "sm_activation_offloading": True,
}
# Switches the plan may leave unresolved, as ``FsdpSetup`` fields, with their two values.
_SWITCHES: Mapping[str, tuple[Any, Any]] = {
    "activation_checkpointing": (False, True),
    "offload_activations": (False, True),
    "flash_attention": (False, True),
    "precision": ("bf16", "fp32"),
    "cpu_offload": (False, True),
}


@dataclass(frozen=True)
class LauncherParameters:
    """A launcher's ``modelparallel`` ``parameters`` as written (``UNKNOWN`` for a value
    smpfix cannot resolve); ``complete`` when the dict itself could be read."""

    source: str
    values: Mapping[str, Any]
    complete: bool


def launcher_parameters(launcher: Launcher, source: str) -> LauncherParameters:
    """What ``launcher`` (named ``source`` in the plan) writes in ``parameters``."""
    parameters = launcher.parameters
    if parameters is None or not isinstance(parameters.value, dict):
        return LauncherParameters(source, {}, parameters is None)
    values = {key: located.plain() for key, located in parameters.value.items()}
    return LauncherParameters(source, values, True)


class _Unresolved(Exception):
    """A deciding input smpfix cannot resolve: the plan says why and gives no verdict."""


@dataclass
class _Settings:
    job: JobFacts
    parameters: Optional[LauncherParameters]
    assumptions: list[str]
    # Why the job does not fit in host memory (FSDP CPU offload on an instance whose memory
    # is known), whatever the GPUs hold.
    host_overflow: Optional[str] = None
    processes: int = 0  # on one instance

    def number(self, key: str) -> int:
        """A v2 integer setting: stated, else the launcher's, else the v2 default."""
        value, source = self._value(key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise _Unresolved(f"{key} {value!r} is not an integer ({source})")
        if source:
            self.assumptions.append(f"{key} {value} ({source})")
        return value

    def state(self) -> dict[str, tuple[Any, str]]:
        """What ``tsm.state`` holds of the settings that resolve: ``{key: (value, source)}``."""
        found = {}
        for key in V2_DEFAULTS:
            try:
                value, source = self._value(key)
            except _Unresolved:
                continue
            found[key] = (value, source or "the SMP v2 default")
        return found

    def _value(self, key: str) -> tuple[Any, str]:
        setting = self.job.settings.get(key)
        if setting is not None and not setting.source.startswith("library default"):
            return setting.value, setting.source
        if key in self.job.unknown:
            raise _Unresolved(
                f"{key} is set in {self.job.unknown[key]} to a value smpfix cannot resolve"
            )
        parameters = self.parameters
        if parameters is not None and key in parameters.values:
            value = parameters.values[key]
            if value is UNKNOWN:
                raise _Unresolved(
                    f"{key} is set in {parameters.source} to a value smpfix cannot resolve"
                )
            return value, parameters.source
        if parameters is not None and not parameters.complete:
            raise _Unresolved(f"{key} is not set in any configuration smpfix can read")
        return V2_DEFAULTS[key], ""


def plan_v2(
    empty: MemoryPlan,
    job: JobFacts,
    parameters: Optional[LauncherParameters],
    code: Optional[ScriptCode],
    values: ScriptValues,
    instance: InstanceType,
    model: FoundModel,
) -> MemoryPlan:
    """``empty`` (the plan's instance and model, no verdict) estimated as SMP v2 runs the job."""
    settings = _Settings(job, parameters, [f"SMP v2 job: {job.smp_v2}"])
    try:
        setup, unresolved = _setup(settings, instance, code, values, model)
        if model.count is None:
            raise _Unresolved(f"the model's size is unknown: {model.source}")
        found = problems(setup)
        if found:
            raise _Unresolved(f"the configuration is one SMP v2 refuses ({'; '.join(found)})")
    except _Unresolved as unknown:
        return replace(empty, reason=str(unknown), assumptions=tuple(settings.assumptions))
    try:
        best, (worst, heaviest) = _bracket(model, setup, unresolved, instance)
        verdict = combined(best, worst)
        count = model.count
        options: tuple[tuple[str, Estimate], ...] = ()
        if settings.host_overflow is not None:
            options = host_changes(count, model.shape, heaviest, instance, settings.processes)
        elif verdict in (Verdict.DOES_NOT_FIT, Verdict.MAY_NOT_FIT, Verdict.DEPENDS):
            options = suggest(count, model.shape, heaviest, instance, _has_expert_parallelism(job))
        changes = tuple(
            PlannedChange(change, MemorySplit.of(estimated), estimated.share)
            for change, estimated in options
        )
    except OverflowError:  # sizes no GPU could hold, beyond floating point
        return replace(
            empty,
            reason="the sizes are too large to estimate",
            assumptions=tuple(settings.assumptions),
        )
    reasons = []
    if settings.host_overflow is not None:
        verdict = Verdict.DOES_NOT_FIT
        reasons.append(settings.host_overflow)
    if unresolved and best.total != worst.total:
        spread = f"{best.total / GIB:.1f} to {worst.total / GIB:.1f} GiB"
        reasons.append(f"estimated with {', '.join(unresolved)} both ways: {spread}")
    if not worst.complete:
        reasons.append(
            "activations unknown: only model states and buffers are counted, a lower bound"
        )
    return replace(
        empty,
        per_gpu=MemorySplit.of(worst),
        verdict=verdict,
        reason="; ".join(reasons),
        assumptions=(*settings.assumptions, APPROXIMATIONS),
        suggestions=changes,
    )


def _setup(
    settings: _Settings,
    instance: InstanceType,
    code: Optional[ScriptCode],
    values: ScriptValues,
    model: FoundModel,
) -> tuple[FsdpSetup, list[str]]:
    notes = settings.assumptions
    world, processes = _world(settings.job, instance, notes)
    settings.processes = processes
    tp = settings.number("tensor_parallel_degree")
    cp = settings.number("context_parallel_degree")
    ep = settings.number("expert_parallel_degree")
    if ep > 1:
        notes.append(_experts_note(ep, model))
    hybrid = settings.number("hybrid_shard_degree")
    horizon = settings.number("activation_loading_horizon")
    unresolved: list[str] = ["flash_attention"]
    notes.append(
        "flash attention unresolved: the attention kernels of a v2 job depend on the model and"
        " its transformation, so it is estimated both ways"
    )
    strategy = script_fsdp.sharding_strategy(code, values) if code is not None else None
    if hybrid == 0 and tp == 1:
        if strategy is None or strategy.value is None:
            why = strategy.how if strategy is not None else "the launched script is not read"
            notes.append(
                f"sharding strategy unresolved ({why}): HYBRID_SHARD assumed, the lesser sharding"
                " of FSDP's sharded strategies"
            )
            strategy_name = HYBRID_SHARD
        else:
            strategy_name = str(strategy.value)
            notes.append(f"sharding strategy {strategy_name}: {strategy.how}")
    else:
        strategy_name = str(strategy.value) if strategy is not None and strategy.value else ""
    shard = shard_degree(hybrid, tp, world, strategy_name, ep)
    notes.append(
        f"parameters, gradients and optimizer state sharded over {shard} GPU(s)"
        f" (hybrid_shard_degree {hybrid}, tensor_parallel_degree {tp}"
        + (f", expert_parallel_degree {ep}" if ep > 1 else "")
        + ")"
    )
    setup = FsdpSetup(
        world=world,
        shard=max(shard, 1),
        tp=tp,
        cp=cp,
        ep=ep,
        experts=model.shape.experts if model.shape is not None else 0,
        zero2=strategy_name in ("SHARD_GRAD_OP", "_HYBRID_SHARD_ZERO2"),
        activation_loading_horizon=horizon,
        layers=layer_kind_v2(tp, model.shape),
    )
    notes.append(_layers_note(setup.layers))
    values = values.with_v2_state(settings.state())
    if code is None:
        notes.append("the launched script is not among the checked files: activations unknown")
        unresolved += [
            "activation_checkpointing",
            "offload_activations",
            "precision",
            "cpu_offload",
        ]
        return setup, unresolved
    readings = {
        "activation_checkpointing": script_fsdp.activation_checkpointing(code, values),
        "offload_activations": script_fsdp.activation_offloading(code, values),
        "precision": script_fsdp.precision(code, values),
        "cpu_offload": script_fsdp.cpu_offload(code, values),
    }
    fields: dict[str, Any] = {}
    for name, reading in readings.items():
        if reading.value is None:
            unresolved.append(name)
            state = "unresolved"
        else:
            fields[name] = reading.value
            state = (
                reading.value
                if isinstance(reading.value, str)
                else ("on" if reading.value else "off")
            )
        notes.append(f"{name.replace('_', ' ')} {state}: {reading.how}")
    optimizer = script_setup.optimizer(code, values)
    notes.append(
        f"optimizer state {OPTIMIZER_STATE_BYTES[str(optimizer.value)]} bytes per parameter"
        f" ({optimizer.value}): {optimizer.how}"
    )
    if fields.get("cpu_offload") and model.count is not None:
        host = sharded_states(model.count, replace(setup, **fields, optimizer=optimizer.value))
        note, settings.host_overflow = host_memory(host, processes, instance)
        notes.append(note)
    seq = script_setup.sequence_length(code, values, model.shape)
    batch = script_setup.batch_size(code, values)
    for name, reading in (("sequence length", seq), ("batch per tensor-parallel group", batch)):
        shown = reading.value if reading.value is not None else "unknown"
        notes.append(f"{name} {shown}: {reading.how}")
    return (
        replace(
            setup, seq_len=seq.value, batch=batch.value, optimizer=str(optimizer.value), **fields
        ),
        unresolved,
    )


def host_memory(
    per_rank: float, processes: int, instance: InstanceType
) -> tuple[str, Optional[str]]:
    """What FSDP's CPU offload puts in host memory (``per_rank`` bytes for each of the
    ``processes`` ranks of an instance) against the instance's memory: the plan's note, and
    why the job does not fit when the offloaded states alone exceed it."""
    note = (
        f"FSDP CPU offload keeps each rank's {per_rank / GIB:.1f} GiB of sharded parameters,"
        " gradients and optimizer state in host memory, not on the GPU"
    )
    if instance.host_memory_gib is None:
        return note, None
    total = per_rank * processes / GIB
    host = instance.host_memory_gib
    usage = f"{total:.1f} GiB for the {processes} ranks of an instance"
    if total > host:
        why = (
            f"does not fit in host memory: FSDP CPU offload puts {usage} in host memory, and"
            f" {instance.name} has {host} GiB"
        )
        return f"{note}: {usage}, above the instance's {host} GiB", why
    return f"{note}: {usage}, {host - total:.1f} GiB below the instance's {host} GiB", None


def _has_expert_parallelism(job: JobFacts) -> bool:
    """Some release the job may run has expert parallelism, so a change may set it; the
    SageMaker SDK picks a container's newest release (``v2_key_history``)."""
    version = job.smp_version
    return version is None or compare(version.latest, V2_FEATURE_SINCE["EP"]) >= 0


def _experts_note(ep: int, model: FoundModel) -> str:
    count = model.count
    if count is None or not count.in_experts:
        return (
            f"expert_parallel_degree {ep} splits nothing here: the model's experts are not"
            " known, so every parameter is counted on every rank"
        )
    shape = model.shape
    experts = f"{shape.experts} experts per layer" if shape is not None else "the experts"
    return f"{experts} split over expert_parallel_degree {ep} GPUs (the expert parallelism page)"


def layer_kind_v2(tp: int, shape: Optional[ModelShape]) -> LayerKind:
    """SMP v2's own layers replace a supported model's under tensor parallelism
    (``torch.sagemaker.transform``); otherwise the model keeps its Hugging Face layers. A
    project's own model counts as the library's (Korthikanti's formula)."""
    if tp > 1 or shape is None or shape.family == "custom":
        return LayerKind.LIBRARY
    return LayerKind.HUGGING_FACE


def _layers_note(kind: LayerKind) -> str:
    if kind is LayerKind.LIBRARY:
        return "activations per layer by Korthikanti et al. (the library's transformer layers)"
    return "activations per layer as the Hugging Face layers keep them (counted, docs/plan.md)"


def _world(job: JobFacts, instance: InstanceType, notes: list[str]) -> tuple[int, int]:
    """The processes of the job, and those on one instance."""
    for key in ("instance_count", "processes_per_host"):
        if key in job.unknown:
            raise _Unresolved(
                f"{key} is set in {job.unknown[key]} to a value smpfix cannot resolve"
            )
    count = job.settings.get("instance_count")
    per_host = job.settings.get("processes_per_host")
    instances = count.value if count is not None else 1
    processes = per_host.value if per_host is not None else instance.gpus
    if not (_positive(instances) and _positive(processes)):
        raise _Unresolved("instance_count and processes_per_host must be positive integers")
    assert isinstance(instances, int) and isinstance(processes, int)
    notes.append(
        f"{instances} x {instance.name} ({instance.gpus} x {instance.gpu_model}),"
        f" {processes} processes per instance"
        + ("" if per_host is not None else " (torchrun starts one per GPU)")
    )
    return instances * processes, processes


def _positive(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _bracket(
    model: FoundModel, setup: FsdpSetup, unresolved: list[str], instance: InstanceType
) -> tuple[Estimate, tuple[Estimate, FsdpSetup]]:
    """The lightest estimate over the unresolved switches, and the heaviest with its setup."""
    assert model.count is not None
    found = []
    for mask in range(1 << len(unresolved)):
        switched = {name: _SWITCHES[name][mask >> i & 1] for i, name in enumerate(unresolved)}
        candidate = replace(setup, **switched)
        found.append(
            (estimate(model.count, model.shape, candidate, instance.gpu_memory_mib), candidate)
        )
    lightest = min(found, key=lambda pair: pair[0].total)
    return lightest[0], max(found, key=lambda pair: pair[0].total)
