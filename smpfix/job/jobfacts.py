"""What smpfix knows about the job a script will run in, and how it knows it.

Several pitfalls exist only under some configurations: a ``dp_rank()`` checkpoint guard is
correct without tensor parallelism and a hang with it. Each setting's value is taken from the
most authoritative source that states it:

1. ``--job KEY=VALUE`` on the command line;
2. the file's configuration: the job overrides that match it, then ``[tool.smpfix.job]``;
3. the launcher that starts the script (estimator ``distribution``), when one is known;
4. the literal dict passed to ``smp.init({...})`` in the script, where the library reads it
   (below);
5. evidence in the script (``with smp.tensor_parallelism():`` and the like), which can only
   turn a feature from UNKNOWN to ON.

A configuration that is declared (sources 1-3) is a whole configuration: settings it leaves
out take the library's defaults, as they would at run time. A source that states only launch
settings (``--job smp_version=1.9``) declares no configuration. Keys missing from an
``smp.init`` dict stay unknown, because a launcher may still set them.

The ``smp.init`` dict under a known launcher (``InitDict``). Under the SageMaker launcher the
1.12.1 library initialises itself when it is imported (``SM_HP_MP_PARAMETERS`` and the MPI rank
are set), from the launcher's parameters alone, and the script's later ``smp.init(dict)``
returns at once: the dict is ignored entirely, keys the launcher does not set included. The
1.7 library has no such code and merges launcher over dict; ``SMP_MANUAL_INIT=1`` turns the
import-time initialisation off. Precision first, so when a launcher that enables model
parallelism is known:

- the job runs 1.12 or later (its version, or features that imply it): the dict is IGNORED,
  keys only it sets take the library's defaults, and configuration rules skip it;
- it runs 1.7 or earlier, or the launcher sets ``SMP_MANUAL_INIT=1``: the dict APPLIES, under
  the launcher, as before;
- otherwise (version unknown, or 1.8 to 1.11, whose source is not published): UNCERTAIN, and
  keys only the dict sets are unknown, neither its value nor the default.

Without a known launcher the dict applies: a script checked alone, or one a shell script starts
with ``mpirun`` and its own configuration (the container tests), is configured by it.

A job is SMP v2 (``smp_v2``, ``smpfix.job.smp_v2``) when a launcher or a stated job says so;
no v1 rule applies to it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Optional, Union

from smpfix.base.flavour import Flavour
from smpfix.job.v2_key_history import V2_KEY_HISTORY
from smpfix.job.versions import (
    FEATURE_SINCE,
    FIRST_V2,
    FIRST_WITH_AUTO_INIT,
    LAST_WITHOUT_AUTO_INIT,
    SmpVersion,
    Version,
    compare,
    explicit_version,
    pytorch_job_version,
    range_applies,
    smp_v2_job_version,
    stated_v2,
    tensorflow_job_version,
)
from smpfix.job.versions import text as _text

Value = Union[bool, int, float, str]

LIBRARY_DEFAULTS: Mapping[str, Value] = {
    "tensor_parallel_degree": 1,
    "pipeline_parallel_degree": 1,
    "microbatches": 1,
    "sharded_data_parallel_degree": 1,
    "prescaled_batch": False,
    "ddp": False,
    "horovod": False,
    "fp16": False,
    "bf16": False,
    "shard_optimizer_state": False,
    "offload_activations": False,
    "delayed_parameter_initialization": False,
    "sdp_gradient_clipping": 1.0,
    "auto_partition": True,
    "optimize": "speed",
    "placement_strategy": "cluster",
    "pipeline": "interleaved",
    "contiguous": True,
}

# Every key SMP v1 (1.12.1 schema, plus the 1.13-1.15 additions) accepts; see SMP812's page.
KNOWN_KEYS: frozenset[str] = frozenset(
    {
        "pipeline_parallel_degree",
        "partitions",
        "tensor_parallel_degree",
        "microbatches",
        "pipeline",
        "horovod",
        "ddp",
        "sharded_data_parallel_degree",
        "sdp_reduce_bucket_size",
        "sdp_param_persistence_threshold",
        "sdp_max_live_parameters",
        "sdp_hierarchical_allgather",
        "sdp_gradient_clipping",
        "_sharded_data_parallelism_config",
        "ddp_port",
        "ddp_dist_backend",
        "contiguous",
        "placement_strategy",
        "optimize",
        "auto_partition",
        "default_partition",
        "prescaled_batch",
        "memory_weight",
        "active_microbatches",
        "fast_mode",
        "static_mode",
        "fp16",
        "bf16",
        "fp16_params",
        "tensor_parallel_seed",
        "offload_activations",
        "_shard_offloaded_activations",
        "shard_optimizer_state",
        "delayed_parameter_initialization",
        "skip_tracing",
        "activation_loading_horizon",
        "task_level_activation_loading_horizon",
        "herring",
        "_match_weights",
        "_fp32_grad_accumulation",
        "checkpoint_attentions",
        "load_partition",
        "partition_file",
    }
)

# The TensorFlow flavour (SMP 1.0-1.4.0, the only releases in TensorFlow containers): its
# documented keys, from the TensorFlow ``smp.init`` docstring and the SDK parameters page.
# ``xla`` is TensorFlow's own (absent from the PyTorch schema); ``partitions`` is the only name
# of the pipeline degree (``pipeline_parallel_degree`` came with PyTorch SMP 1.6); tensor
# parallelism, sharded data parallelism, fp16/bf16 and ``ddp`` do not exist in TensorFlow.
# ``load_partition``, ``partition_file`` and ``fork`` are internal (the container tests pass
# ``"fork": False`` to a TensorFlow ``smp.init``).
TF_KNOWN_KEYS: frozenset[str] = frozenset(
    {
        "partitions",
        "microbatches",
        "pipeline",
        "optimize",
        "placement_strategy",
        "auto_partition",
        "default_partition",
        "contiguous",
        "horovod",
        "xla",
        "load_partition",
        "partition_file",
        "fork",
    }
)

# Defaults of the TensorFlow flavour, from the SDK parameters page. ``optimize`` is left out:
# the page says "memory", the library's schema "speed".
TF_LIBRARY_DEFAULTS: Mapping[str, Value] = {
    "pipeline_parallel_degree": 1,
    "microbatches": 1,
    "pipeline": "interleaved",
    "placement_strategy": "cluster",
    "auto_partition": True,
    "contiguous": True,
    "horovod": False,
    "xla": False,
}

# What the TensorFlow flavour has instead of the PyTorch-only settings, whatever a
# configuration writes (a PyTorch key there is SMP812's finding).
TF_FIXED: Mapping[str, Value] = {
    "tensor_parallel_degree": 1,
    "sharded_data_parallel_degree": 1,
    "prescaled_batch": False,
    "ddp": False,
}

# SMP v2's configuration (``torch.sagemaker``): the nine parameters of its reference page
# ("SMP v2 core feature configuration parameters"), the same nine the SageMaker SDK's typed
# ``sagemaker.modules.distributed.SMP`` accepts, and the documented defaults (``random_seed``
# has none).
V2_KNOWN_KEYS: frozenset[str] = frozenset(
    {
        "hybrid_shard_degree",
        "sm_activation_offloading",
        "activation_loading_horizon",
        "fsdp_cache_flush_warnings",
        "allow_empty_shards",
        "tensor_parallel_degree",
        "context_parallel_degree",
        "expert_parallel_degree",
        "random_seed",
    }
)
V2_LIBRARY_DEFAULTS: Mapping[str, Value] = {
    "hybrid_shard_degree": 0,
    "sm_activation_offloading": True,
    "activation_loading_horizon": 2,
    "fsdp_cache_flush_warnings": True,
    "allow_empty_shards": False,
    "tensor_parallel_degree": 1,
    "context_parallel_degree": 1,
    "expert_parallel_degree": 1,
}

# Settings of the launch rather than of the library, which a launcher states and
# ``[tool.smpfix.job]`` may declare: the instance type and count, processes per host, the
# container's framework (``pytorch`` unless a TensorFlow estimator says ``tensorflow``) and
# version (``framework_version``), which decide the library version, and ``smp_version`` to
# state the library version itself.
LAUNCH_KEYS: frozenset[str] = frozenset(
    {
        "instance_type",
        "instance_count",
        "processes_per_host",
        "framework",
        "framework_version",
        "smp_version",
    }
)

# Settings of smpfix itself, for what it cannot read from code: ``model_parameters`` gives the
# memory plan the model's size (``smpfix.plan``). Never a library key: the library rejects it.
SMPFIX_KEYS: frozenset[str] = frozenset({"model_parameters"})

_ALIASES = {"partitions": "pipeline_parallel_degree"}


def known_keys(flavour: Flavour) -> frozenset[str]:
    """The configuration keys the library of ``flavour`` accepts."""
    return TF_KNOWN_KEYS if flavour is Flavour.TENSORFLOW else KNOWN_KEYS


def library_defaults(flavour: Flavour) -> Mapping[str, Value]:
    """What the library of ``flavour`` uses for a key a complete configuration leaves out."""
    return TF_LIBRARY_DEFAULTS if flavour is Flavour.TENSORFLOW else LIBRARY_DEFAULTS


def framework_flavour(value: object) -> Optional[Flavour]:
    """The ``framework`` launch setting (``"tensorflow"``, ``"pytorch"``) as a flavour."""
    return next(
        (
            flavour
            for flavour in Flavour
            if isinstance(value, str) and value.strip().lower() == flavour.value
        ),
        None,
    )


class Tri(str, enum.Enum):
    ON = "on"
    OFF = "off"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Feature:
    """A derived feature: which setting decides it and how a message names it."""

    key: str
    setting: str
    title: str

    @property
    def condition(self) -> str:
        """When the feature is on, in the words of its setting: ``tensor_parallel_degree > 1``,
        ``fp16 = true`` (``--show-job`` spells its keys out with it)."""
        return (
            f"{self.setting} > 1" if self.setting in _DEGREE_SETTINGS else f"{self.setting} = true"
        )

    def state_of(self, value: Value) -> Tri:
        if isinstance(value, bool) or self.setting not in _DEGREE_SETTINGS:
            return Tri.ON if value is True else Tri.OFF
        if isinstance(value, (int, float)):
            return Tri.ON if value > 1 else Tri.OFF
        return Tri.UNKNOWN


_DEGREE_SETTINGS = {
    "tensor_parallel_degree",
    "pipeline_parallel_degree",
    "sharded_data_parallel_degree",
    "microbatches",
    "context_parallel_degree",
    "expert_parallel_degree",
}

FEATURES: Mapping[str, Feature] = {
    f.key: f
    for f in (
        Feature("TP", "tensor_parallel_degree", "tensor parallelism"),
        Feature("PP", "pipeline_parallel_degree", "pipeline parallelism"),
        Feature("SDP", "sharded_data_parallel_degree", "sharded data parallelism"),
        Feature("MB", "microbatches", "microbatching (microbatches > 1)"),
        Feature("OSS", "shard_optimizer_state", "optimizer state sharding"),
        Feature("FP16", "fp16", "fp16 training"),
        Feature("BF16", "bf16", "bf16 training"),
        Feature("DDP", "ddp", "ddp"),
        Feature("PRESCALED", "prescaled_batch", "prescaled batch"),
        Feature(
            "DELAYED_INIT", "delayed_parameter_initialization", "delayed parameter initialization"
        ),
        Feature("HVD", "horovod", 'Horovod data parallelism (`"horovod": True`)'),
        Feature("XLA", "xla", "the `xla` setting"),
        Feature("CP", "context_parallel_degree", "context parallelism"),
        Feature("EP", "expert_parallel_degree", "expert parallelism"),
        Feature("SM_OFFLOAD", "sm_activation_offloading", "SMP activation offloading"),
    )
}
# The features of an SMP v2 job (what ``--show-job`` lists for one).
_V2_FEATURES = ("TP", "CP", "EP", "SM_OFFLOAD")
# The first SMP v2 release with a feature, from when its key arrived (``v2_key_history``): a v2
# job with it on runs at least this.
V2_FEATURE_SINCE: Mapping[str, Version] = {
    history.short: history.since for history in V2_KEY_HISTORY.values()
}

# What the TensorFlow flavour does not have: off whatever a configuration says.
_PYTORCH_ONLY_FEATURES = frozenset(
    {"TP", "SDP", "OSS", "FP16", "BF16", "DDP", "PRESCALED", "DELAYED_INIT"}
)
# The features a flavour's jobs can have (what ``--show-job`` lists).
_FEATURES_OF: Mapping[Flavour, tuple[str, ...]] = {
    Flavour.PYTORCH: tuple(key for key in FEATURES if key not in ("XLA", *_V2_FEATURES[1:])),
    Flavour.TENSORFLOW: tuple(
        key for key in FEATURES if key not in _PYTORCH_ONLY_FEATURES and key not in _V2_FEATURES
    ),
}


@dataclass(frozen=True)
class Setting:
    key: str
    value: Value
    source: str


@dataclass(frozen=True)
class Evidence:
    """Something in the script that shows a feature is in use, e.g. ``smp.tensor_parallelism()``."""

    feature: str
    description: str
    line: int
    strong: bool = True


class Role(str, enum.Enum):
    """What kind of source a ``DeclaredJob`` is: it decides how the ``smp.init`` dict merges."""

    STATED = "stated"  # --job, [tool.smpfix.job], the API
    LAUNCHER = "launcher"  # a SageMaker estimator that starts the script
    INIT_DICT = "init dict"  # the script's own smp.init({...}) dict


class InitDict(str, enum.Enum):
    """Whether the script's ``smp.init({...})`` dict configures the library (module docstring)."""

    APPLIES = "applies"
    IGNORED = "ignored"
    UNCERTAIN = "uncertain"


@dataclass(frozen=True)
class DeclaredJob:
    """One source's settings, e.g. the ``[tool.smpfix.job]`` table, with the source's name.

    ``unknown`` names keys this source sets to a value smpfix cannot see (a launcher's
    ``"microbatches": args.mb``): they stay UNKNOWN and hide lower-precedence sources, since
    at run time this source's value wins. A launcher also says whether it sets
    ``SMP_MANUAL_INIT=1`` (``manual_init``) and why it starts SMP v2 rather than v1 (``smp_v2``).
    """

    source: str
    settings: Mapping[str, Value]
    complete: bool = True
    unknown: frozenset[str] = frozenset()
    # Keys among ``unknown`` that several launchers of one script set to different values.
    conflicting: frozenset[str] = frozenset()
    role: Role = Role.STATED
    manual_init: bool = False
    smp_v2: Optional[str] = None
    # Settings the source offers but does not make: a launcher's commented-out
    # ``# "fp16": True,`` (``smpfix.job.offers``), with where it is written.
    offered: Mapping[str, Setting] = field(default_factory=dict)
    # The branch test of a launcher in a branch its file's own values do not take, else "":
    # the whole job is one the code offers, not one it runs.
    untaken: str = ""

    @property
    def configures(self) -> bool:
        """Whether the source says anything of the configuration: a launch chain that starts
        the script with ``python`` or ``torchrun`` and no ``SM_HP_MP_PARAMETERS`` does not
        (the script's own ``smp.init`` dict configures it)."""
        return self.complete or bool(self.settings or self.unknown or self.offered)

    @classmethod
    def stated(cls, source: str, settings: Mapping[str, Value]) -> DeclaredJob:
        """A job a person states (``--job``, ``[tool.smpfix.job]``, the API): a whole
        configuration when it states any library setting; launch settings alone
        (``--job smp_version=1.9``) leave the library's settings as they were."""
        return cls(
            source,
            settings,
            complete=any(normalize_key(key) not in LAUNCH_KEYS for key in settings),
        )


@dataclass(frozen=True)
class FeatureState:
    """A feature's state for one job and why. An UNKNOWN feature with ``offered`` set is one
    nothing enables but the code offers (a commented-out launcher value): findings that need it
    are hints that name the offer (``Rule.report``)."""

    feature: Feature
    state: Tri
    source: str
    value: Optional[Value] = None
    offered: bool = False

    def condition(self) -> str:
        """Words for a message: "tensor parallelism is enabled (pyproject.toml ...)" or "if ..."."""
        title = self.feature.title
        if self.state is Tri.ON:
            return f"{title} is enabled ({self.source})"
        if self.state is Tri.OFF:
            return f"{title} is disabled ({self.source})"
        return f"if {title} is enabled"


def normalize_key(key: str) -> str:
    return _ALIASES.get(key, key)


@dataclass(frozen=True)
class JobFacts:
    """The settings and feature states for one script."""

    settings: Mapping[str, Setting] = field(default_factory=dict)
    evidence: tuple[Evidence, ...] = ()
    # Keys set by a source to a value smpfix cannot resolve, with that source.
    unknown: Mapping[str, str] = field(default_factory=dict)
    # Keys among ``unknown`` whose source is several launchers that disagree on them.
    conflicting: frozenset[str] = frozenset()
    # The library version the job runs, when a source states it (``smpfix.job.versions``).
    smp_version: Optional[SmpVersion] = None
    # Whether the script's smp.init({...}) dict configures the library, and why.
    init_dict: InitDict = InitDict.APPLIES
    init_dict_reason: str = ""
    # Whether importing the library initialises it (a SageMaker launch of 1.12 or later without
    # SMP_MANUAL_INIT=1), which decides whether library calls before smp.init() work; and why.
    on_import: Tri = Tri.UNKNOWN
    on_import_reason: str = "no launcher of this script is known"
    # Why the job runs SMP v2 (``torch.sagemaker``), to which no v1 rule applies; None for v1.
    smp_v2: Optional[str] = None
    # Settings a source offers but does not make (``DeclaredJob.offered``), by key.
    offered: Mapping[str, Setting] = field(default_factory=dict)
    # Why the whole job is only offered (every launcher of the script sits in a branch its
    # file's own values do not take), else "": what breaks there is a hint.
    offered_job: str = ""

    # Which flavour of the library the job runs: the script's, else a declared ``framework``.
    flavour: Flavour = Flavour.PYTORCH

    @classmethod
    def resolve(
        cls,
        declared: Sequence[DeclaredJob],
        evidence: Sequence[Evidence] = (),
        flavour: Optional[Flavour] = None,
        script_v2: Optional[str] = None,
    ) -> JobFacts:
        """Merge sources given highest precedence first; see the module docstring.

        ``flavour`` is the script's (a TensorFlow script runs the TensorFlow library whatever
        a launcher says); without it, the first source that declares a ``framework`` decides.
        ``script_v2`` says why the script itself is SMP v2 (it imports ``torch.sagemaker``),
        which makes the job SMP v2 when no source says so: its settings then take SMP v2's
        defaults and its version SMP v2's containers.
        """
        if flavour is None:
            stated = (framework_flavour(job.settings.get("framework")) for job in declared)
            flavour = next((found for found in stated if found is not None), Flavour.PYTORCH)
        others = [job for job in declared if job.role is not Role.INIT_DICT]
        dicts = [job for job in declared if job.role is Role.INIT_DICT]
        smp_v2 = _smp_v2(declared) or script_v2
        base = cls._merge(others, evidence, flavour, smp_v2 is not None)
        on_import, why = base.initialises_on_import(others)
        launchers = [job for job in others if job.role is Role.LAUNCHER]
        if launchers and all(job.untaken for job in launchers):
            base = replace(
                base,
                offered_job=f"{launchers[0].source}: the launcher's own values do not take"
                f" the branch `{launchers[0].untaken}`",
            )
        if not dicts or smp_v2 is not None:
            return replace(base, smp_v2=smp_v2, on_import=on_import, on_import_reason=why)
        use, reason = base.init_dict_use(others)
        if use is InitDict.IGNORED:
            merged = base
        elif use is InitDict.UNCERTAIN:
            # Either the dict's values or the defaults: the keys only the dict sets are unknown.
            hidden = [
                replace(job, settings={}, unknown=frozenset(job.settings) | job.unknown)
                for job in dicts
            ]
            merged = cls._merge([*others, *hidden], evidence, flavour)
        else:
            merged = cls._merge(declared, evidence, flavour)
        return replace(
            merged,
            init_dict=use,
            init_dict_reason=reason,
            smp_v2=smp_v2,
            on_import=on_import,
            on_import_reason=why,
        )

    def initialises_on_import(self, declared: Sequence[DeclaredJob]) -> tuple[Tri, str]:
        """Whether importing the library initialises it for a script started by ``declared``.
        Under a known SageMaker launcher with model parallelism enabled, SMP 1.12 initialises
        the library when it is imported, from the launcher's parameters alone, and a later
        ``smp.init(...)`` returns at once; SMP 1.7 has no such code, ``SMP_MANUAL_INIT=1`` turns
        it off, and the TensorFlow flavour never does it (library source, 1.7 and 1.12.1)."""
        if self.flavour is Flavour.TENSORFLOW:
            return Tri.OFF, "the TensorFlow flavour never initialises itself on import"
        launcher = next(
            (job for job in declared if job.role is Role.LAUNCHER and job.complete), None
        )
        if launcher is None:
            started = next(
                (job for job in declared if job.role is Role.LAUNCHER and not job.configures), None
            )
            if started is not None:
                return Tri.UNKNOWN, (
                    f"{started.source} starts it without SM_HP_MP_PARAMETERS, so its"
                    " smp.init({...}) configures the library"
                )
            return Tri.UNKNOWN, "no launcher of this script is known"
        if launcher.manual_init:
            return Tri.OFF, f"{launcher.source} sets SMP_MANUAL_INIT=1"
        if self.version_applies(FIRST_WITH_AUTO_INIT, None) is Tri.ON:
            version = (
                self.smp_version.describe() if self.smp_version is not None else "SMP 1.12 or later"
            )
            return (
                Tri.ON,
                f"under {launcher.source}, {version} initialises itself on import from the"
                " launcher's parameters",
            )
        if self.version_applies(None, LAST_WITHOUT_AUTO_INIT) is Tri.ON:
            assert self.smp_version is not None
            return Tri.OFF, f"{self.smp_version.describe()} does not initialise itself on import"
        return Tri.UNKNOWN, (
            f"under {launcher.source}, SMP 1.12 and later initialise on import, SMP 1.7 and"
            " earlier do not, and this job's version is not known to be either"
        )

    def init_dict_use(self, declared: Sequence[DeclaredJob]) -> tuple[InitDict, str]:
        """Whether an ``smp.init({...})`` dict in a script started by ``declared`` configures
        the library: not when the library initialised itself on import
        (``initialises_on_import``)."""
        state, reason = self.initialises_on_import(declared)
        if state is Tri.ON:
            return (
                InitDict.IGNORED,
                f"{reason}, so smp.init({{...}}) returns at once (unless SMP_MANUAL_INIT=1)",
            )
        if state is Tri.OFF or not any(
            job.role is Role.LAUNCHER and job.complete for job in declared
        ):
            return InitDict.APPLIES, reason
        return InitDict.UNCERTAIN, f"{reason}: the dict counts only on the releases that do not"

    @classmethod
    def _merge(
        cls,
        declared: Sequence[DeclaredJob],
        evidence: Sequence[Evidence],
        flavour: Flavour,
        v2: bool = False,
    ) -> JobFacts:
        settings: dict[str, Setting] = {}
        unknown: dict[str, str] = {}
        conflicting: set[str] = set()
        complete_source: Optional[str] = None
        for job in declared:
            for raw_key in job.unknown:
                key = normalize_key(raw_key)
                if key not in settings and key not in unknown:
                    unknown[key] = job.source
                    if raw_key in job.conflicting:
                        conflicting.add(key)
            for key, value in job.settings.items():
                key = normalize_key(key)
                if key not in unknown:
                    settings.setdefault(key, Setting(key, value, job.source))
            if job.complete and complete_source is None:
                complete_source = job.source
        if complete_source is not None:
            defaults = V2_LIBRARY_DEFAULTS if v2 else library_defaults(flavour)
            for key, value in defaults.items():
                if key not in unknown:
                    settings.setdefault(
                        key, Setting(key, value, f"library default; not set in {complete_source}")
                    )
        offered: dict[str, Setting] = {}
        for job in declared:
            for key, setting in job.offered.items():
                offered.setdefault(normalize_key(key), setting)
        return cls(
            settings=settings,
            evidence=tuple(evidence),
            unknown=unknown,
            conflicting=frozenset(conflicting),
            smp_version=_smp_version(declared, flavour, v2),
            flavour=flavour,
            offered=offered,
        )

    def value(self, key: str) -> Optional[Value]:
        setting = self.settings.get(normalize_key(key))
        return setting.value if setting is not None else None

    def feature(self, key: str) -> FeatureState:
        feature = FEATURES[key]
        if self.flavour is Flavour.TENSORFLOW and key in _PYTORCH_ONLY_FEATURES:
            return FeatureState(
                feature, Tri.OFF, "the TensorFlow flavour of the library has no such feature"
            )
        setting = self.settings.get(feature.setting)
        if setting is not None:
            state = FeatureState(
                feature, feature.state_of(setting.value), setting.source, setting.value
            )
        elif feature.setting in self.unknown:
            state = FeatureState(feature, Tri.UNKNOWN, self.why_unknown(feature.setting))
        else:
            evidence = next(
                (item for item in self.evidence if item.feature == key and item.strong), None
            )
            if evidence is not None:
                return FeatureState(
                    feature,
                    Tri.ON,
                    f"script evidence: {evidence.description} at line {evidence.line}",
                )
            state = FeatureState(feature, Tri.UNKNOWN, "not set in any known source")
        return self._available(state)

    def _available(self, state: FeatureState) -> FeatureState:
        """``state`` where nothing can turn the feature on: OFF when the job's library release
        predates the feature; a default-off feature a launcher offers in a commented-out line
        is UNKNOWN, but only offered. A feature that is ON stays ON (a release too old for it
        is a configuration finding, not a reason to doubt the configuration)."""
        feature = state.feature
        if state.state is Tri.ON:
            return state
        since = FEATURE_SINCE.get(feature.key) if self.smp_v2 is None else None
        version = self.smp_version
        if since is not None and version is not None and version.before(since):
            return FeatureState(
                feature,
                Tri.OFF,
                f"{version.describe()} predates {feature.title} (SMP {_text(since)})",
            )
        offer = self.offered.get(feature.setting)
        setting = self.settings.get(feature.setting)
        unset = setting is None and feature.setting not in self.unknown
        default = setting is not None and setting.source.startswith("library default")
        if offer is not None and (default or unset):
            if feature.state_of(offer.value) is Tri.ON:
                return FeatureState(
                    feature,
                    Tri.UNKNOWN,
                    f"only offered: {offer.source}",
                    offered=True,
                )
        return state

    def why_unknown(self, key: str) -> str:
        source = self.unknown[key]
        if key in self.conflicting:
            return f"{source} set it to different values"
        if self.init_dict is InitDict.UNCERTAIN and source.startswith("smp.init"):
            return (
                f"set only in {source}, which counts only if the library does not initialise"
                " itself on import"
            )
        return f"set in {source} to a value smpfix cannot resolve"

    def version_floor(self) -> Optional[tuple[Version, str]]:
        """The oldest library version the job can run, implied by the features it has on (an
        SMP v2 job runs SMP 2.0 at least, and later with the features that came later)."""
        floor: Optional[tuple[Version, str]] = None
        if self.smp_v2 is not None:
            floor = (FIRST_V2, f"the job runs SMP v2 ({self.smp_v2})")
        for key, since in (V2_FEATURE_SINCE if self.smp_v2 is not None else FEATURE_SINCE).items():
            state = self.feature(key)
            if state.state is Tri.ON and (floor is None or since > floor[0]):
                floor = (since, f"{state.feature.title} is enabled ({state.source})")
        return floor

    def version_applies(
        self,
        since: Optional[Version],
        until: Optional[Version],
        version: Optional[SmpVersion] = None,
        implied: Optional[Version] = None,
    ) -> Tri:
        """Whether advice that holds for SMP ``since``..``until`` holds for this job.

        The job may run any release from a floor (what the features it has on imply, and
        ``implied``: what the code or configuration the advice is about uses exists only from
        there) up; when its version is known, from that version's oldest release (raised to the
        floor) to its newest. ON when every such release is in range. With the version known,
        OFF otherwise: a container that shipped releases on both sides of a bound may run the
        one the advice is wrong for, and a stated version is taken at its word. Unknown, OFF
        when no release above the floor is in range and UNKNOWN when some are. A floor above
        every release the version allows is a mistake in the job, not a reason to doubt the
        version: the version decides then.
        """
        if since is None and until is None:
            return Tri.ON
        version = version or self.smp_version
        floor = self.version_floor()
        low: Optional[Version] = floor[0] if floor is not None else None
        if implied is not None and (low is None or compare(implied, low) > 0):
            low = implied
        if version is None:
            applies = range_applies(low, None, since, until)
            return Tri.UNKNOWN if applies is None else (Tri.ON if applies else Tri.OFF)
        if low is None or compare(low, version.version) < 0 or compare(low, version.latest) > 0:
            low = version.version
        return Tri.ON if range_applies(low, version.latest, since, until) else Tri.OFF

    def describe(self) -> dict[str, Any]:
        """A JSON-friendly view: every setting and feature with its source (``--show-job``)."""
        version = self.smp_version
        return {
            "flavour": self.flavour.value,
            "smp_version": None
            if version is None
            else {"value": version.text, "source": version.source},
            "smp_v2": self.smp_v2,
            "init_dict": {"use": self.init_dict.value, "why": self.init_dict_reason}
            if self.init_dict_reason
            else None,
            "initialises_on_import": {"state": self.on_import.value, "why": self.on_import_reason},
            "settings": {
                key: {"value": s.value, "source": s.source}
                for key, s in sorted(self.settings.items())
            },
            "unknown": {key: self.why_unknown(key) for key in sorted(self.unknown)},
            "features": {
                key: {
                    "state": "offered" if state.offered else state.state.value,
                    "source": state.source,
                }
                for key in (_V2_FEATURES if self.smp_v2 is not None else _FEATURES_OF[self.flavour])
                for state in [self.feature(key)]
            },
            "evidence": [
                {"feature": e.feature, "what": e.description, "line": e.line, "strong": e.strong}
                for e in self.evidence
            ],
        }


def _smp_v2(declared: Sequence[DeclaredJob]) -> Optional[str]:
    """Why the job runs SMP v2, from the first source that says so (a launcher,
    ``smpfix.job.smp_v2``; a stated job, ``versions.stated_v2``), or None."""
    for job in declared:
        reason = job.smp_v2 or (
            stated_v2(job.settings, job.source) if job.role is Role.STATED else None
        )
        if reason is not None:
            return reason
    return None


def _smp_version(
    declared: Sequence[DeclaredJob], flavour: Flavour = Flavour.PYTORCH, v2: bool = False
) -> Optional[SmpVersion]:
    """The library version from the highest-precedence source that states one.

    A source states it by ``smp_version`` itself or by the container (``framework_version``,
    read as a TensorFlow version when the source's ``framework`` says ``tensorflow``, or when
    it names none and the job is a TensorFlow one).
    """
    for job in declared:
        if "smp_version" in job.settings:
            found = explicit_version(job.settings["smp_version"], job.source)
        elif "framework_version" in job.settings:
            framework = framework_flavour(job.settings.get("framework")) or flavour
            read = (
                tensorflow_job_version
                if framework is Flavour.TENSORFLOW
                else (smp_v2_job_version if v2 else pytorch_job_version)
            )
            found = read(job.settings["framework_version"], job.source)
        else:
            continue
        if found is not None:
            return found
    return None


def parse_value(text: str) -> Value:
    """A ``--job`` value: ``true``/``false``, an int, a float, or else the string itself."""
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    for convert in (int, float):
        try:
            return convert(text)  # type: ignore[operator,no-any-return]
        except ValueError:
            pass
    return text
