"""Moving a launcher's SMP v1 configuration to SMP v2, where each value was written.

An SMP v1 job starts through ``mpirun`` (``distribution["mpi"]``) with
``smdistributed.modelparallel`` parameters of v1; an SMP v2 job starts through ``torchrun``
(``distribution["torch_distributed"]``) in the SMP v2 container, with v2's parameters. The
mapping follows AWS's "upgrade from SMP v1" page and v2's configuration reference:

- ``mpi`` becomes ``torch_distributed: {"enabled": True}``; torchrun starts one process per
  GPU, which is what ``processes_per_host`` said on the instances SMP supports (anything
  else, and any ``custom_mpi_options``, is left to a person with a ``TODO``);
- ``sharded_data_parallel_degree`` becomes ``hybrid_shard_degree``, ``tensor_parallel_seed``
  becomes ``random_seed``, ``offload_activations`` becomes ``sm_activation_offloading`` with
  v1's ``activation_loading_horizon`` of 4 written out (v2's default is 2);
  ``tensor_parallel_degree`` and ``activation_loading_horizon`` stay;
- keys v2 does not have are dropped, each with an item saying why, when the pipeline degree
  and microbatches are 1; a pipeline degree above 1 blocks the job (v2 has no pipeline
  parallelism), and so does a TensorFlow estimator (v2 is PyTorch only);
- ``framework_version`` becomes the newest PyTorch with an SMP v2 image in the SageMaker SDK
  (``image_uri_config/pytorch-smp.json`` aliases PyTorch 2.4.1 to SMP 2.7.0, built for
  py311), ``py_version`` with it.

Values are those the launcher reader resolved (``smpfix.job.launcher``: names, dict updates,
subscript assignments); a value it could not resolve is a scaffold item, never a guess.
Nothing is rewritten as a whole: each edit replaces one key, entry or keyword, so comments and
formatting stay.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional, Union

import libcst as cst

from smpfix.base.imports import ImportTable
from smpfix.base.literals import UNKNOWN
from smpfix.base.parents import ParentIndex
from smpfix.base.positions import Positions
from smpfix.job.framework_versions import launcher_flavour
from smpfix.job.instances import lookup
from smpfix.job.launcher import Launcher, Located, find_launchers
from smpfix.job.smp_v2 import launcher_v2
from smpfix.migrate import links
from smpfix.migrate.entries import EntryEditor
from smpfix.migrate.items import MigrationItem, Outcome
from smpfix.migrate.text_edits import TextEdit

# The newest PyTorch the SageMaker SDK (8326c23) starts SMP v2 with: ``pytorch-smp.json``'s
# ``version_aliases`` map "2.4.1" to SMP 2.7.0, whose image is built for py311 only, and
# ``fw_utils.TORCH_DISTRIBUTED_GPU_SUPPORTED_FRAMEWORK_VERSIONS`` ends with "2.4.1".
V2_FRAMEWORK_VERSION = "2.4.1"
V2_PY_VERSION = "py311"
V2_SMP_RELEASE = "2.7.0"
# v1's default horizon (``activation_loading_horizon``); v2's is 2.
V1_ACTIVATION_LOADING_HORIZON = 4
# The instance types SMP v2 documents (P4d, P4de, P5): torchrun starts one process per GPU.
_V2_INSTANCES = ("ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge")

RENAMED = {
    "sharded_data_parallel_degree": "hybrid_shard_degree",
    "offload_activations": "sm_activation_offloading",
    "tensor_parallel_seed": "random_seed",
}
KEPT = frozenset({"tensor_parallel_degree", "activation_loading_horizon"})
_PIPELINE_KEYS = ("pipeline_parallel_degree", "partitions")

# Why a v1 key has no place in v2's parameters; a key not listed here gets the general reason.
_DROPPED_BECAUSE = {
    "pipeline_parallel_degree": "v2 has no pipeline parallelism, and 1 is what v2 runs",
    "partitions": "v2 has no pipeline parallelism, and 1 is what v2 runs",
    "microbatches": "v2 has no microbatches; one batch per step is what 1 meant",
    "ddp": "v2 always runs data parallelism (FSDP over torch.distributed)",
    "fp16": "v2 takes mixed precision from the script's FSDP wrap (MixedPrecision)",
    "bf16": "v2 takes mixed precision from the script's FSDP wrap (MixedPrecision)",
    "fp16_params": "v2 takes mixed precision from the script's FSDP wrap (MixedPrecision)",
    "shard_optimizer_state": "FSDP always shards the optimizer state",
    "delayed_parameter_initialization": "v2 initialises parameters late in the script",
    "horovod": "v2 runs on torch.distributed only",
    "ddp_port": "torchrun chooses the rendezvous port",
    "ddp_dist_backend": "v2 runs on NCCL (or SMDDP) through torch.distributed",
    "prescaled_batch": "v2's tensor parallelism reads one batch per tensor-parallel group",
    "checkpoint_attentions": "v2 checkpoints activations with PyTorch's"
    " apply_activation_checkpointing in the script",
}
# The v2 page that says where a v1 setting went; the upgrade page for the others.
_PAGES = {
    "sharded_data_parallel_degree": links.HYBRID_SHARDING,
    "sdp_max_live_parameters": links.HYBRID_SHARDING,
    "tensor_parallel_seed": links.TENSOR_PARALLELISM,
    "offload_activations": links.ACTIVATION_OFFLOADING,
    "fp16": links.MIXED_PRECISION,
    "bf16": links.MIXED_PRECISION,
    "fp16_params": links.MIXED_PRECISION,
    "delayed_parameter_initialization": links.DELAYED_PARAMETER_INITIALIZATION,
    "checkpoint_attentions": links.ACTIVATION_CHECKPOINTING,
    "ddp_dist_backend": links.SMDDP,
    "prescaled_batch": links.TENSOR_PARALLELISM,
}
_PIPELINE_ONLY = "a setting of v1's pipeline and partitioning engine, which v2 does not have"
_SDP_ONLY = "a setting of v1's sharded data parallelism; FSDP has its own"


@dataclass(frozen=True)
class LaunchMigration:
    """One estimator call's move to v2: its edits of the launcher code and its items."""

    launcher: Launcher
    line: int
    script: Optional[str]
    edits: tuple[TextEdit, ...]
    items: tuple[MigrationItem, ...]

    @property
    def blocking(self) -> bool:
        return any(item.blocking for item in self.items)


def migrate_launchers(
    module: cst.Module,
    code: str,
    path: str,
    shown: str,
    stated: Optional[Mapping[str, Any]] = None,
) -> list[LaunchMigration]:
    """The SMP v1 estimator calls of one launcher (``code`` parsed as ``module``; a notebook's
    joined cells), each with the edits that move it to v2. ``shown`` names the file in items;
    ``stated`` are the settings of the stated job (``--job``, ``[tool.smpfix.job]``), which
    answer for a value the launcher does not write literally.

    Estimators without model parallelism, and those already on v2, are left alone.
    """
    found = [
        launcher
        for launcher in find_launchers(module, ImportTable.of_module(module), path)
        if launcher.modelparallel is not None and launcher_v2(launcher, shown) is None
    ]
    if not found:
        return []
    writer = _Writer(code, Positions(module, code), ParentIndex(module), shown, stated or {})
    return [writer.launch(launcher) for launcher in found]


_Entry = Union[cst.DictElement, cst.Arg]


class _Writer:
    """Edits and items for the launchers of one file; knows where each node is written."""

    def __init__(
        self,
        code: str,
        positions: Positions,
        parents: ParentIndex,
        shown: str,
        stated: Mapping[str, Any],
    ):
        self.text = EntryEditor(code, positions, parents)
        self.stated = stated
        self.shown = shown
        self.items: list[MigrationItem] = []

    # -- one estimator -----------------------------------------------------------------------
    def launch(self, launcher: Launcher) -> LaunchMigration:
        self.text.restart()
        self.items = []
        line = self.line_of(launcher.call)
        if launcher_flavour(launcher).value == "tensorflow":
            self.item(
                launcher.call,
                Outcome.REPORT,
                "tensorflow",
                "SMP v2 supports PyTorch only: a TensorFlow job cannot move to v2; keep it on"
                " SMP v1 or port the model to PyTorch FSDP",
                links.SUPPORTED_FRAMEWORKS,
                blocking=True,
            )
            return LaunchMigration(launcher, line, launcher.script, (), tuple(self.items))
        self.parameters(launcher)
        self.launch_settings(launcher)
        self.container(launcher)
        self.instance(launcher)
        return LaunchMigration(
            launcher, line, launcher.script, self.text.finished(), tuple(self.items)
        )

    def parameters(self, launcher: Launcher) -> None:
        parameters = launcher.parameters
        mp = launcher.modelparallel
        if parameters is None:
            return
        if parameters.source_file is not None or not parameters.is_dict:
            where = (
                f"the file {parameters.source_file}"
                if parameters.source_file is not None
                else "a value smpfix cannot read"
            )
            self.item(
                parameters.anchor or (mp.anchor if mp is not None else None) or launcher.call,
                Outcome.REPORT,
                "parameters",
                f"the modelparallel parameters come from {where}: rename and drop its v1 keys"
                " by hand (sharded_data_parallel_degree -> hybrid_shard_degree, ...)",
                links.CONFIGURATION,
            )
            return
        values: dict[str, Located] = parameters.value
        pipeline = next((values[key] for key in _PIPELINE_KEYS if key in values), None)
        degree = pipeline.plain() if pipeline is not None else None
        if degree is UNKNOWN:
            degree = self.stated.get("pipeline_parallel_degree")
        if pipeline is not None and _above_one(degree):
            self.item(
                self.anchor(pipeline),
                Outcome.REPORT,
                "pipeline-parallelism",
                f"pipeline parallelism (pipeline degree {degree}) has no SMP v2"
                " equivalent: v2 shards the model with FSDP (hybrid_shard_degree) and tensor"
                " parallelism; choose the sharding degree with `smpfix plan`, then remove"
                " smp.step microbatches and smp.partition from the script",
                links.UPGRADE_FROM_V1,
                blocking=True,
            )
        for key, located in values.items():
            self.parameter(key, located, values)

    def parameter(self, key: str, located: Located, values: dict[str, Located]) -> None:
        value = located.plain()
        if key in KEPT or key in RENAMED.values():
            return
        if key in RENAMED:
            new = RENAMED[key]
            if not self.rename(located, key, new):
                return
            self.item(
                self.anchor(located),
                Outcome.MOVED,
                "configuration",
                f"`{key}` renamed `{new}` (the same setting in v2)",
                _PAGES.get(key, links.CONFIGURATION),
            )
            if (
                key == "offload_activations"
                and value is not False
                and "activation_loading_horizon" not in values
            ):
                if self.insert_after(located, "activation_loading_horizon", "4"):
                    self.item(
                        self.anchor(located),
                        Outcome.MOVED,
                        "activation-offloading",
                        f"`activation_loading_horizon: {V1_ACTIVATION_LOADING_HORIZON}` written"
                        " out: v1's default horizon, v2's default is 2",
                        links.ACTIVATION_OFFLOADING,
                    )
            return
        if key in _PIPELINE_KEYS or key == "microbatches":
            if value is UNKNOWN or not isinstance(value, int):
                value = self.stated.get("pipeline_parallel_degree" if key == "partitions" else key)
            if not isinstance(value, int) or isinstance(value, bool):
                if self.delete(located):
                    self.item(
                        self.anchor(located),
                        Outcome.SCAFFOLD,
                        "pipeline-parallelism",
                        f"`{key}` dropped, but smpfix cannot read its value: v2 has no"
                        " pipeline parallelism or microbatches, so the job must have run with"
                        " 1; check it",
                        links.UPGRADE_FROM_V1,
                    )
                return
            if value > 1 and key == "microbatches":
                if self.delete(located):
                    self.item(
                        self.anchor(located),
                        Outcome.SCAFFOLD,
                        "gradient-accumulation",
                        f"`microbatches: {value}` dropped: v2 has no microbatches; accumulate"
                        f" gradients over {value} smaller batches in the training loop, or"
                        " keep the larger batch if it fits",
                        links.UPGRADE_FROM_V1,
                    )
                return
            if value > 1:
                return  # the blocking item says it
        if not self.delete(located):
            return
        reason = _DROPPED_BECAUSE.get(key) or (
            _SDP_ONLY if key.startswith("sdp_") else _PIPELINE_ONLY
        )
        self.item(
            self.anchor(located),
            Outcome.SCAFFOLD if key == "prescaled_batch" and value is True else Outcome.MOVED,
            "configuration",
            f"`{key}` dropped: {reason}",
            _PAGES.get(key, links.UPGRADE_FROM_V1),
        )

    def launch_settings(self, launcher: Launcher) -> None:
        """``mpi`` to ``torch_distributed``, and what the MPI settings said."""
        distribution = launcher.distribution
        assert distribution is not None
        mpi = launcher.mpi
        if mpi is not None:
            quote = self.text.quote_of(mpi.entry)
            if not self.replace_entry(mpi, "torch_distributed", f"{{{quote}enabled{quote}: True}}"):
                return
            self.item(
                self.anchor(mpi),
                Outcome.MOVED,
                "launch",
                "`mpi` replaced by `torch_distributed`: SMP v2 starts through torchrun",
                links.USE_V2,
            )
            self.mpi_settings(launcher, mpi)
            return
        entries = distribution.value if distribution.is_dict else {}
        last = list(entries.values())[-1] if entries else None
        if last is not None and self.insert_after(
            last,
            "torch_distributed",
            f"{{{self.text.quote_of(last.entry)}enabled{self.text.quote_of(last.entry)}: True}}",
        ):
            self.item(
                self.anchor(last),
                Outcome.MOVED,
                "launch",
                "`torch_distributed` enabled: SMP v2 starts through torchrun",
                links.USE_V2,
            )
            return
        self.item(
            distribution.anchor or launcher.call,
            Outcome.SCAFFOLD,
            "launch",
            "add `torch_distributed: {enabled: True}` to the distribution: SMP v2 starts"
            " through torchrun",
            links.USE_V2,
        )

    def mpi_settings(self, launcher: Launcher, mpi: Located) -> None:
        per_host = mpi.get("processes_per_host")
        instance = lookup(launcher.literal("instance_type"))
        if per_host is not None:
            count = per_host.plain()
            if instance is not None and count == instance.gpus:
                self.item(
                    self.anchor(per_host),
                    Outcome.MOVED,
                    "launch",
                    f"`processes_per_host: {count}` carried over: torchrun starts one process"
                    f" per GPU, {instance.gpus} on {instance.name}",
                    links.USE_V2,
                )
            else:
                self.item(
                    self.anchor(per_host),
                    Outcome.SCAFFOLD,
                    "launch",
                    f"`processes_per_host: {_shown(count)}` was dropped with `mpi`: torchrun"
                    " starts one process per GPU of the instance; check that is what the job"
                    " needs",
                    links.USE_V2,
                )
        options = mpi.get("custom_mpi_options")
        if options is not None:
            self.item(
                self.anchor(options),
                Outcome.SCAFFOLD,
                "launch",
                f"`custom_mpi_options` ({_shown(options.plain())}) dropped with `mpi`: torchrun"
                " takes no MPI options; set what they exported (-x NAME=VALUE) through the"
                " estimator's `environment`",
                links.USE_V2,
            )

    def container(self, launcher: Launcher) -> None:
        """``framework_version`` and ``py_version`` to the newest SMP v2 container."""
        if "huggingface" in launcher.estimator.lower():
            self.item(
                launcher.call,
                Outcome.REPORT,
                "container",
                "the Hugging Face estimator has no SMP v2 image: start the job with"
                f" sagemaker.pytorch.PyTorch(framework_version={V2_FRAMEWORK_VERSION!r},"
                f" py_version={V2_PY_VERSION!r}), transformers in requirements.txt, then run"
                " smpfix migrate again",
                links.SUPPORTED_FRAMEWORKS,
                blocking=True,
            )
            return
        framework = launcher.keyword("framework_version")
        image = launcher.keyword("image_uri")
        if framework is None:
            self.item(
                (image.anchor if image is not None else None) or launcher.call,
                Outcome.SCAFFOLD,
                "container",
                "the job names no framework_version: use the SMP v2 image"
                f" (framework_version={V2_FRAMEWORK_VERSION!r}, py_version={V2_PY_VERSION!r},"
                " or an smdistributed-modelparallel image_uri)",
                links.SUPPORTED_FRAMEWORKS,
            )
            return
        written = framework.plain()
        if not isinstance(written, str) or not self.text.replace_string(
            framework, V2_FRAMEWORK_VERSION
        ):
            self.item(
                framework.anchor or launcher.call,
                Outcome.SCAFFOLD,
                "container",
                f"set framework_version to {V2_FRAMEWORK_VERSION!r} (py_version"
                f" {V2_PY_VERSION!r}): smpfix cannot rewrite the value where it is written",
                links.SUPPORTED_FRAMEWORKS,
            )
            return
        self.item(
            framework.anchor or launcher.call,
            Outcome.MOVED,
            "container",
            f"framework_version {written!r} -> {V2_FRAMEWORK_VERSION!r}: the newest PyTorch"
            f" with an SMP v2 image (SMP {V2_SMP_RELEASE}) in the SageMaker SDK; choose an"
            " older v2 release (2.0.1 to 2.3.1) if the script needs one",
            links.SUPPORTED_FRAMEWORKS,
        )
        py = launcher.keyword("py_version")
        if py is None:
            if self.insert_after(framework, "py_version", f'"{V2_PY_VERSION}"'):
                self.item(
                    framework.anchor or launcher.call,
                    Outcome.MOVED,
                    "container",
                    f"py_version {V2_PY_VERSION!r} added: the Python of the SMP"
                    f" {V2_SMP_RELEASE} image",
                    links.SUPPORTED_FRAMEWORKS,
                )
        elif py.plain() != V2_PY_VERSION:
            if self.text.replace_string(py, V2_PY_VERSION):
                self.item(
                    py.anchor or launcher.call,
                    Outcome.MOVED,
                    "container",
                    f"py_version {_shown(py.plain())} -> {V2_PY_VERSION!r}: the Python of the"
                    f" SMP {V2_SMP_RELEASE} image",
                    links.SUPPORTED_FRAMEWORKS,
                )
            else:
                self.item(
                    py.anchor or launcher.call,
                    Outcome.SCAFFOLD,
                    "container",
                    f"set py_version to {V2_PY_VERSION!r}, the Python of the SMP"
                    f" {V2_SMP_RELEASE} image",
                    links.SUPPORTED_FRAMEWORKS,
                )
        if image is not None:
            self.item(
                image.anchor or launcher.call,
                Outcome.SCAFFOLD,
                "container",
                "image_uri overrides framework_version: point it at the SMP v2 image"
                f" (smdistributed-modelparallel:{V2_FRAMEWORK_VERSION}-gpu-{V2_PY_VERSION}-cu121)"
                " or remove it",
                links.SUPPORTED_FRAMEWORKS,
            )

    def instance(self, launcher: Launcher) -> None:
        located = launcher.keyword("instance_type")
        name = located.plain() if located is not None else None
        if located is None or not isinstance(name, str) or name in _V2_INSTANCES:
            return
        instance = lookup(name)
        if instance is None:
            return
        self.item(
            located.anchor or launcher.call,
            Outcome.REPORT,
            "instance-type",
            f"SMP v2 documents ml.p4d.24xlarge, ml.p4de.24xlarge and ml.p5.48xlarge; {name}"
            " is not among them",
            links.SUPPORTED_FRAMEWORKS,
        )

    # -- where things are written -----------------------------------------------------------
    def item(
        self,
        node: Optional[cst.CSTNode],
        outcome: Outcome,
        topic: str,
        message: str,
        link: str,
        blocking: bool = False,
    ) -> None:
        line = self.line_of(node) if node is not None else 1
        self.items.append(MigrationItem(self.shown, line, outcome, topic, message, link, blocking))

    def line_of(self, node: cst.CSTNode) -> int:
        return self.text.line_of(node)

    def anchor(self, located: Located) -> Optional[cst.CSTNode]:
        return self.text.anchor(located)

    def rename(self, located: Located, key: str, new: str) -> bool:
        done = self.text.rename(located, new)
        if not done:
            self.unwritable(located, f"rename `{key}` to `{new}`")
        return done

    def insert_after(self, located: Located, key: str, value: str) -> bool:
        done = self.text.insert_after(located, key, value)
        if not done:
            self.unwritable(located, f"add `{key}: {value}`")
        return done

    def delete(self, located: Located) -> bool:
        done = self.text.delete(located)
        if not done:
            self.unwritable(located, "drop this key")
        return done

    def replace_entry(self, located: Located, key: str, value: str) -> bool:
        done = self.text.replace_entry(located, key, value)
        if not done:
            self.unwritable(located, f"replace `mpi` with `{key}: {value}`")
        return done

    def unwritable(self, located: Located, what: str) -> None:
        self.item(
            self.anchor(located),
            Outcome.SCAFFOLD,
            "configuration",
            f"{what}: smpfix cannot rewrite it where it is written",
            links.CONFIGURATION,
        )


def _above_one(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 1


def _shown(value: Any) -> str:
    return "a value smpfix cannot read" if value is UNKNOWN else repr(value)
