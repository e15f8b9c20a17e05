"""One configuration's memory plan: the job settings, the launched script, the estimate.

Settings are merged as the library merges them, highest precedence first: ``--job``,
``[tool.smpfix.job]``, the launcher, the script's ``smp.init({...})`` dict (its values
evaluated through argparse and the launcher's hyperparameters), then the library's defaults.
The script gives the model, the sequence length, the batch, activation checkpointing, flash
attention, precision and optimizer. A number that decides the estimate and cannot be
resolved (an instance type, a degree, the model's size) makes the verdict unknown; a switch
that cannot be resolved is estimated both ways (``verdict.bracket``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from smpfix.base.flavour import Flavour
from smpfix.job.instances import InstanceType, lookup
from smpfix.job.jobfacts import LIBRARY_DEFAULTS, DeclaredJob, JobFacts
from smpfix.job.launcher import Launcher
from smpfix.job.linking import LinkedScript, declared_job, linked_script
from smpfix.plan import script_setup
from smpfix.plan.layers import LayerKind
from smpfix.plan.memory import GIB
from smpfix.plan.planner_fsdp import LauncherParameters, launcher_parameters, plan_v2
from smpfix.plan.results import MemoryPlan, MemorySplit, PlannedChange
from smpfix.plan.script_code import ScriptCode, load_script
from smpfix.plan.script_flow import branches
from smpfix.plan.script_model import FoundModel, find_model
from smpfix.plan.script_values import ScriptValues
from smpfix.plan.setup import OPTIMIZER_STATE_BYTES, Setup, problems
from smpfix.plan.suggestions import suggest
from smpfix.plan.verdict import Verdict, bracket
from smpfix.program.project.local_modules import LocalModules
from smpfix.program.project.parsed_file import ParsedFile

APPROXIMATIONS = "every approximation is listed in docs/plan.md (`smpfix plan --help`)"
_INT_SETTINGS = (
    "tensor_parallel_degree",
    "pipeline_parallel_degree",
    "sharded_data_parallel_degree",
    "microbatches",
)
# Boolean settings that decide memory, as the ``Setup`` switch each one is.
_SWITCH_SETTINGS = {
    "shard_optimizer_state": "oss",
    "prescaled_batch": "prescaled_batch",
    "offload_activations": "offload_activations",
}


@dataclass(frozen=True)
class PlanInputs:
    """``declared``: ``--job`` and ``[tool.smpfix.job]``, highest first; ``launcher``: what the
    launcher says (None for a script planned with the declared job only); ``code``: the
    launched script and its project modules (None when it cannot be read)."""

    declared: tuple[DeclaredJob, ...] = ()
    launcher: Optional[LinkedScript] = None
    code: Optional[ScriptCode] = None
    parameters: Optional[LauncherParameters] = None  # as written, for an SMP v2 job
    # The launcher's own file: a notebook that prepares the data says how long its samples are.
    launcher_file: Optional[ParsedFile] = None
    # The test of the branch the estimator sits in, when the launcher's own values do not take
    # it (``hyperparameters.get("smp")``): the code offers this job.
    offer: str = ""


class _UnresolvedInput(Exception):
    """A deciding input smpfix cannot resolve: the plan says why and gives no verdict."""


@dataclass
class _Reader:
    """The merged job, read key by key, recording what the plan assumed and left unresolved."""

    job: JobFacts
    assumptions: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)

    def number(self, key: str, default: Optional[int] = None) -> Optional[int]:
        """An integer setting. One that a whole configuration leaves out has the library's
        default (already in ``job``); without a whole configuration it is unknown, unless the
        library's default applies whatever the rest (``default``)."""
        if key in self.job.unknown:
            raise _UnresolvedInput(
                f"{key} is set in {self.job.unknown[key]} to a value smpfix cannot resolve"
            )
        setting = self.job.settings.get(key)
        if setting is None:
            if key in LIBRARY_DEFAULTS:
                raise _UnresolvedInput(f"{key} is not set in any configuration smpfix can read")
            return default
        if not isinstance(setting.value, int) or isinstance(setting.value, bool):
            raise _UnresolvedInput(f"{key} {setting.value!r} is not an integer ({setting.source})")
        if setting.value != LIBRARY_DEFAULTS.get(key, default):
            self.assumptions.append(f"{key} {setting.value} ({setting.source})")
        return setting.value

    def switch(self, key: str) -> Optional[bool]:
        """True, False, or None (unresolved) for a boolean setting; one no configuration smpfix
        can read states is unresolved too (``fp16_params``, which has no default, is off)."""
        setting = self.job.settings.get(key)
        if key in self.job.unknown or (setting is None and key in LIBRARY_DEFAULTS):
            return None
        if setting is not None and setting.value is True:
            self.assumptions.append(f"{key} on ({setting.source})")
        return setting is not None and setting.value is True


def declared_by(job: JobFacts) -> tuple[DeclaredJob, ...]:
    """The declared job (``--job``, ``[tool.smpfix.job]``) a launcher file's analysis merged
    into ``job``, one ``DeclaredJob`` per source, without the library defaults it filled in."""
    by_source: dict[str, dict[str, Any]] = {}
    for key, setting in job.settings.items():
        if not setting.source.startswith("library default"):
            by_source.setdefault(setting.source, {})[key] = setting.value
    unknown = frozenset(job.unknown)
    return tuple(
        DeclaredJob(source, settings, unknown=unknown) for source, settings in by_source.items()
    )


def launcher_inputs(
    launcher: Launcher,
    path: str,
    line: Optional[int],
    declared: Sequence[DeclaredJob],
    modules: Optional[LocalModules],
    launcher_file: Optional[ParsedFile] = None,
) -> PlanInputs:
    """What to plan for the estimator ``launcher`` written at ``line`` of ``path``: the declared
    job, the launcher's own, and the script its ``entry_point`` names when it can be read.
    A launcher in a branch its file does not take is planned as written: "would it fit?" is
    the question its configuration asks."""
    offer = launcher.untaken or _conditional(launcher, launcher_file)
    launcher = replace(launcher, untaken="")
    link = linked_script(launcher, path, line)
    if link is None:  # the entry point is not a literal: the launcher's settings still count
        job = declared_job(launcher, f"launcher {os.path.basename(path)}")
        return PlanInputs(
            tuple(declared),
            LinkedScript("", job, {}, os.path.abspath(path), line or 0, False),
            None,
            launcher_parameters(launcher, job.source),
            offer=offer,
        )
    parameters = launcher_parameters(launcher, link.job.source)
    shown = os.path.relpath(link.script, os.path.dirname(os.path.abspath(path)))
    code = load_script(modules, link.script, shown) if modules is not None else None
    return PlanInputs(tuple(declared), link, code, parameters, launcher_file, offer)


def plan(inputs: PlanInputs) -> MemoryPlan:
    """The memory plan of one configuration; its verdict is unknown when a deciding input is.
    An estimator in a branch its launcher's own values do not take is planned as written, and
    its plan says it is an offer."""
    found = _plan(inputs)
    if inputs.offer:
        test, unresolved = (
            inputs.offer.removesuffix(_UNRESOLVED),
            inputs.offer.endswith(_UNRESOLVED),
        )
        note = (
            f"an offer: the launcher builds this estimator only when `{test}`, which "
            + ("smpfix cannot resolve" if unresolved else "its own values do not make true")
            + "; planned as written"
        )
        found = replace(found, assumptions=(note, *found.assumptions))
    return found


_UNRESOLVED = " (unresolved)"


def _conditional(launcher: Launcher, launcher_file: Optional[ParsedFile]) -> str:
    """The innermost ``if`` test around the estimator that smpfix cannot resolve in the
    launcher (``hyperparameters.get("smp")``), marked unresolved; "" when there is none."""
    if launcher_file is None:
        return ""
    values = ScriptValues((), (), JobFacts.resolve([]), launcher_file)
    for test, wanted in branches(launcher_file.parents, launcher.call):
        found = values.of(test, launcher_file.facts)
        if not found.known:
            code = " ".join(launcher_file.code_for(test).split())
            return (code if wanted else f"not ({code})") + _UNRESOLVED
    return ""


def _plan(inputs: PlanInputs) -> MemoryPlan:
    job, values = _merged(inputs)
    code = inputs.code
    script = (
        code.name
        if code is not None
        else (inputs.launcher.script if inputs.launcher is not None else None)
    )
    reader = _Reader(job)
    instance = lookup(job.value("instance_type"))
    model = find_model(code, values, job)
    empty = MemoryPlan(
        script,
        instance.name if instance else None,
        instance.gpu_model if instance else None,
        instance.gpu_memory_mib / 1024 if instance else None,
        model.count.total if model.count else None,
        model.source,
        None,
        Verdict.UNKNOWN,
        "",
    )
    if _tensorflow(job, code):
        return replace(
            empty,
            reason=(
                "a TensorFlow job: the memory plan reads PyTorch models only (SMP v1 for "
                "TensorFlow splits a Keras model into pipeline stages; it has no tensor "
                "parallelism, sharded data parallelism or optimizer-state sharding)"
            ),
        )
    smp_v2 = _smp_v2(job, code)
    if smp_v2 is not None:
        if instance is None:
            return replace(empty, reason=_instance_problem(job))
        return plan_v2(
            empty, replace(job, smp_v2=smp_v2), inputs.parameters, code, values, instance, model
        )
    try:
        if instance is None:
            raise _UnresolvedInput(_instance_problem(job))
        setup = _setup(reader, instance, code, values, model)
        if model.count is None:
            raise _UnresolvedInput(f"the model's size is unknown: {model.source}")
        found = problems(setup)
        if found:
            raise _UnresolvedInput(
                f"the configuration is one the library refuses ({'; '.join(found)}); the "
                "configuration rules report it"
            )
    except _UnresolvedInput as unknown:
        return replace(empty, reason=str(unknown), assumptions=tuple(reader.assumptions))
    return _estimated(empty, model, setup, instance, reader)


def _tensorflow(job: JobFacts, code: Optional[ScriptCode]) -> bool:
    """The job runs the library's TensorFlow flavour: a TensorFlow estimator or script."""
    script = code.script if code is not None else None
    if script is not None and (script.facts.imports_smp_tf or script.facts.imports_smp_torch):
        return not script.facts.imports_smp_torch
    return job.flavour is Flavour.TENSORFLOW


def _smp_v2(job: JobFacts, code: Optional[ScriptCode]) -> Optional[str]:
    """Why the job runs SMP v2 (``smpfix.job.smp_v2``), or None: a launcher or stated job says
    so, or the launched script imports ``torch.sagemaker`` (as ``engine.analysis`` decides it)."""
    script = code.script if code is not None else None
    if job.smp_v2 is None and script is not None and script.facts.imports_smp_v2:
        return f"{code.name if code is not None else 'the script'} imports torch.sagemaker"
    return job.smp_v2


def _merged(inputs: PlanInputs) -> tuple[JobFacts, ScriptValues]:
    """The job's settings in precedence order, and the evaluator of the script's expressions.

    The script's ``smp.init`` dict is evaluated with what the sources above it say (its
    values may read ``smp.tp_size()``), then merged below them."""
    declared = inputs.declared
    if inputs.launcher is not None and not inputs.launcher.job.complete:
        # The configuration that runs is the launcher's, and smpfix cannot read all of it: a
        # declared job gives its explicit values, not the library's defaults for the rest.
        declared = tuple(replace(job, complete=False) for job in declared)
    sources = [*declared, *((inputs.launcher.job,) if inputs.launcher is not None else ())]
    links = (inputs.launcher,) if inputs.launcher is not None else ()
    if inputs.code is None:
        job = JobFacts.resolve(sources)
        return job, ScriptValues((), links, job)
    values = ScriptValues(
        inputs.code.modules, links, JobFacts.resolve(sources), inputs.launcher_file
    )
    init = script_setup.init_settings(inputs.code, values)
    sources += [init] if init is not None else []
    job = JobFacts.resolve(sources)
    return job, values.with_job(job)  # the script read once for both


def _instance_problem(job: JobFacts) -> str:
    if "instance_type" in job.unknown:
        return (
            f"the instance type is set in {job.unknown['instance_type']} to a value smpfix "
            "cannot resolve"
        )
    value = job.value("instance_type")
    if value is None:
        return (
            "no instance type: the launcher does not state one (set instance_type in "
            "[tool.smpfix.job])"
        )
    return f"{value!r} is not an instance type smpfix knows the GPUs of"


def _setup(
    reader: _Reader,
    instance: InstanceType,
    code: Optional[ScriptCode],
    values: ScriptValues,
    model: FoundModel,
) -> Setup:
    world = _world(reader, instance)
    tp, pp, sdp, microbatches = (_required(reader.number(key)) for key in _INT_SETTINGS)
    active = reader.number("active_microbatches") if pp > 1 else None
    switches: dict[str, Any] = {}
    for key, name in _SWITCH_SETTINGS.items():
        value = reader.switch(key)
        if value is None:
            reader.unresolved.append(name)
        switches[name] = bool(value)
    precision = _precision(reader, code, values)
    script = _script_readings(reader, code, values, model, instance) if code is not None else None
    if script is None:
        reader.assumptions.append(
            "the launched script is not among the checked files: activations unknown"
        )
    if switches["prescaled_batch"] and tp > 1 and script is not None and script.batch is not None:
        reader.assumptions.append(
            "with prescaled_batch the batch is that of a tensor-parallel group"
        )
    return Setup(
        world=world,
        tp=tp,
        pp=pp,
        sdp=sdp,
        microbatches=microbatches,
        active_microbatches=active,
        precision=precision,
        activation_loading_horizon=_required(reader.number("activation_loading_horizon", 4)),
        sdp_max_live_parameters=_required(reader.number("sdp_max_live_parameters", 10**9)),
        smddp_collectives=sdp > 1 and tp == 1 and instance.efa and world > instance.gpus,
        sdp_reduce_bucket_size=_bucket(reader) if sdp > 1 else 5 * 10**8,
        layers=_layer_kind(reader, tp, script, model),
        **switches,
        **(script.__dict__ if script is not None else {}),
    )


def _bucket(reader: _Reader) -> int:
    """``sdp_reduce_bucket_size`` in elements: written as an integer or a float (``5e8``)."""
    setting = reader.job.settings.get("sdp_reduce_bucket_size")
    default = 5 * 10**8
    if "sdp_reduce_bucket_size" in reader.job.unknown:
        reader.assumptions.append("sdp_reduce_bucket_size unresolved: the default 5e8 assumed")
        return default
    if setting is None or isinstance(setting.value, bool):
        return default
    if isinstance(setting.value, (int, float)) and setting.value > 0:
        reader.assumptions.append(f"sdp_reduce_bucket_size {setting.value:g} ({setting.source})")
        return int(setting.value)
    return default


def _layer_kind(
    reader: _Reader, tp: int, script: Optional[_ScriptSetup], model: FoundModel
) -> LayerKind:
    """The library's distributed transformer replaces a Hugging Face model under tensor
    parallelism, and runs its flash attention; otherwise a Hugging Face model keeps its own
    layers. A project's own model is counted by Korthikanti's formula."""
    shape = model.shape
    if tp > 1 or shape is None or shape.family == "custom":
        return LayerKind.LIBRARY
    if script is not None and script.flash_attention:
        return LayerKind.LIBRARY
    reader.assumptions.append(
        "activations per layer as the Hugging Face layers keep them, without tensor"
        " parallelism (counted, docs/plan.md)"
    )
    return LayerKind.HUGGING_FACE


def _required(value: Optional[int]) -> int:
    """A number ``_Reader.number`` returned for a key that always has a value."""
    assert value is not None
    return value


@dataclass(frozen=True)
class _ScriptSetup:
    """The ``Setup`` fields the launched script decides."""

    seq_len: Optional[int]
    batch: Optional[int]
    optimizer: str
    activation_checkpointing: bool
    checkpoint_group: int
    flash_attention: bool
    seq_len_upper_bound: bool


def _script_readings(
    reader: _Reader,
    code: ScriptCode,
    values: ScriptValues,
    model: FoundModel,
    instance: InstanceType,
) -> _ScriptSetup:
    checkpointing, group = script_setup.activation_checkpointing(code, values)
    flash = script_setup.flash_attention(code, values, instance.bf16)
    optimizer = script_setup.optimizer(code, values)
    seq = script_setup.sequence_length(code, values, model.shape)
    batch = script_setup.batch_size(code, values)
    for name, reading in (("activation_checkpointing", checkpointing), ("flash_attention", flash)):
        if reading.value is None:
            reader.unresolved.append(name)
        state = "unresolved" if reading.value is None else ("on" if reading.value else "off")
        reader.assumptions.append(f"{name.replace('_', ' ')} {state}: {reading.how}")
    state_bytes = OPTIMIZER_STATE_BYTES[str(optimizer.value)]
    reader.assumptions.append(
        f"optimizer state {state_bytes} bytes per parameter ({optimizer.value}): {optimizer.how}"
    )
    for name, reading in (("sequence length", seq), ("batch", batch)):
        reader.assumptions.append(
            f"{name} {reading.value if reading.value is not None else 'unknown'}: {reading.how}"
        )
    return _ScriptSetup(
        seq.value,
        batch.value,
        str(optimizer.value),
        bool(checkpointing.value),
        group,
        bool(flash.value),
        seq.upper_bound,
    )


def _world(reader: _Reader, instance: InstanceType) -> int:
    count = reader.job.settings.get("instance_count")
    per_host = reader.job.settings.get("processes_per_host")
    for key in ("instance_count", "processes_per_host"):
        if key in reader.job.unknown:
            raise _UnresolvedInput(
                f"{key} is set in {reader.job.unknown[key]} to a value smpfix cannot resolve"
            )
    instances = count.value if count is not None else 1
    processes = per_host.value if per_host is not None else instance.gpus
    if not all(
        isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (instances, processes)
    ):
        raise _UnresolvedInput("instance_count and processes_per_host must be positive integers")
    shown = (
        f"{instances} x {instance.name} ({instance.gpus} x {instance.gpu_model}), {processes} "
        "processes per instance"
    )
    notes = [
        note
        for note, setting in (
            ("instance_count 1 assumed", count),
            ("processes_per_host = GPUs per instance assumed", per_host),
        )
        if setting is None
    ]
    reader.assumptions.append(shown + (f" ({'; '.join(notes)})" if notes else ""))
    return int(instances) * int(processes)


def _precision(reader: _Reader, code: Optional[ScriptCode], values: ScriptValues) -> str:
    """fp16/bf16 from the job (``fp16``, ``bf16``, ``fp16_params``), else the model's dtype in
    ``smp.model_creation``, else fp32; unresolved settings are estimated both ways."""
    unresolved = False
    for key in ("bf16", "fp16", "fp16_params"):
        value = reader.switch(key)
        if value:
            return "bf16" if key == "bf16" else "fp16"
        unresolved = unresolved or value is None
    dtype = script_setup.model_dtype(code, values) if code is not None else None
    if dtype is not None and dtype.value is not None:
        reader.assumptions.append(f"{dtype.value} training: {dtype.how}")
        return str(dtype.value)
    if unresolved or (dtype is not None and dtype.how):
        reader.unresolved.append("precision")
        reader.assumptions.append("precision unresolved: estimated in fp16 and in fp32")
        return "fp16"
    reader.assumptions.append(
        "fp32 training: no fp16, bf16 or fp16_params setting and no 16-bit dtype in "
        "smp.model_creation"
    )
    return "fp32"


def _estimated(
    empty: MemoryPlan, model: FoundModel, setup: Setup, instance: InstanceType, reader: _Reader
) -> MemoryPlan:
    assert model.count is not None
    try:
        found = bracket(model.count, model.shape, setup, instance.gpu_memory_mib, reader.unresolved)
        changes: tuple[PlannedChange, ...] = ()
        if found.verdict in (Verdict.DOES_NOT_FIT, Verdict.MAY_NOT_FIT, Verdict.DEPENDS):
            changes = tuple(
                PlannedChange(s.change, MemorySplit.of(s.estimate), s.estimate.share)
                for s in suggest(model.count, model.shape, found.worst_setup, instance)
            )
    except OverflowError:  # sizes no GPU could hold, beyond floating point
        return replace(
            empty,
            reason="the sizes are too large to estimate",
            assumptions=tuple(reader.assumptions),
        )
    reasons = []
    if found.unresolved:
        spread = f"{found.best.total / GIB:.1f} to {found.worst.total / GIB:.1f} GiB"
        reasons.append(f"estimated with {', '.join(found.unresolved)} both ways: {spread}")
    if not found.worst.complete:
        reasons.append(
            "activations unknown: only model states and buffers are counted, a lower bound"
        )
    elif setup.seq_len_upper_bound and found.verdict.fits is not True:
        reasons.append(
            f"the sequence length {setup.seq_len} is an upper bound (the model's context width):"
            " data cut shorter needs less"
        )
    return replace(
        empty,
        per_gpu=MemorySplit.of(found.worst),
        verdict=found.verdict,
        reason="; ".join(reasons),
        assumptions=(*reader.assumptions, APPROXIMATIONS),
        suggestions=changes,
    )
