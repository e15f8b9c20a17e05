"""SMP826: a model-parallel job on an instance type or container the library does not support.

The library runs on CUDA GPUs only: ``smp.init`` sets the CUDA device of each rank, so a CPU,
Trainium or Inferentia instance cannot start it. The developer guide lists the instance types
it supports (ml.p3.16xlarge, ml.p3dn.24xlarge, ml.p4d.24xlarge, ml.p4de.24xlarge,
ml.g4dn.12xlarge); other GPU instances are untested. The A10G ``ml.g5`` family is not on that
list, but AWS's own SMP v1 notebooks (``training/distributed_training/pytorch/model_parallel/
gpt-j/smp-train-gptj-sharded-data-parallel-tp.ipynb`` in aws/amazon-sagemaker-examples)
recommend ``ml.g5.12xlarge``, ``ml.g5.24xlarge`` and ``ml.g5.48xlarge``, so it is only advice.
The library ships only in particular
PyTorch and TensorFlow training containers (developer guide, supported frameworks; release
notes): another ``framework_version`` starts a container without it, and the script fails
to import it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

from smpfix.base.findings import Severity
from smpfix.job.framework_versions import FrameworkVersion, pytorch_version, tensorflow_version
from smpfix.job.instances import INSTANCE_TYPES
from smpfix.job.launcher import Launcher
from smpfix.job.versions import pytorch_container_smp, tensorflow_container_smp
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism

# SageMaker instance families without a CUDA GPU (general purpose, compute, memory, burstable,
# Trainium, Inferentia).
_NO_CUDA = ("ml.c", "ml.m", "ml.r", "ml.t", "ml.trn", "ml.inf")
# GPU families off the developer guide's list that AWS's own SMP v1 notebooks recommend.
_USED_BY_AWS = ("ml.g5.",)
SUPPORTED = tuple(name for name, instance in INSTANCE_TYPES.items() if instance.smp_v1_supported)


class UnsupportedInstanceOrImage(ConfigRule):
    summary = (
        "SMP v1 needs a CUDA GPU instance of the supported types and a training container that"
        " ships the library."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.NONE

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        launcher = view.launcher
        # SMP v2 launchers (torch_distributed, PyTorch 2.0.1 or later) never get here
        # (config_views).
        if launcher is None or not view.modelparallel_enabled:
            return
        yield from _instance(view)
        problem = _container(launcher)
        if problem is not None:
            yield problem


def _instance(view: ConfigView) -> Iterator[ConfigProblem]:
    assert view.launcher is not None
    located = view.launcher.keyword("instance_type")
    name = located.plain() if located is not None else None
    if located is None or not isinstance(name, str) or name.startswith("local"):
        return
    supported = ", ".join(SUPPORTED)
    if name.startswith(_NO_CUDA) and name not in INSTANCE_TYPES:
        yield ConfigProblem(
            located,
            f"instance_type {name!r} has no CUDA GPU: the job fails at start-up",
            Severity.ERROR,
            explanation=(
                "The model parallelism library runs one process per GPU and `smp.init()` sets"
                " each rank's CUDA device, so the job fails at start-up, after the instances are"
                f" up. Use a GPU instance the library supports ({supported})."
            ),
        )
        return
    instance = INSTANCE_TYPES.get(name)
    if instance is None or instance.smp_v1_supported:
        return
    gpus = f"{instance.gpus} × {instance.gpu_model}"
    if name.startswith(_USED_BY_AWS):
        yield ConfigProblem(
            located,
            f"instance_type {name!r} is off the supported list, though AWS's own notebooks use it",
            Severity.HINT,
            explanation=(
                f"The developer guide lists {supported}; {name} ({gpus}) is not among them, but"
                " AWS's own SMP v1 notebooks recommend the ml.g5 family (the GPT-J notebook"
                " offers ml.g5.12xlarge, ml.g5.24xlarge and ml.g5.48xlarge), so nothing is known"
                " to break. A supported type is the set-up AWS tested, with the library's"
                " kernels and EFA networking; keep this one if it trains as you expect."
            ),
        )
        return
    yield ConfigProblem(
        located,
        f"instance_type {name!r} is not one the library supports: the job may fail",
        Severity.WARNING,
        explanation=(
            f"{name} ({gpus}) is not an instance type the model parallelism library supports:"
            f" the developer guide lists {supported}. The job may fail, or run without the"
            " tested set-up (the library's kernels, EFA networking); use a supported type."
        ),
    )


def _container(launcher: Launcher) -> Optional[ConfigProblem]:
    """A literal ``framework_version`` (or training image tag) whose container ships no SMP v1
    release."""
    torch = pytorch_version(launcher)
    if torch is not None:
        if pytorch_container_smp(torch.version) is not None:
            return None
        return _no_library(
            launcher,
            torch,
            "PyTorch",
            "1.6.0 to 2.0.0 (1.8.1, 1.10.2, 1.11.0, 1.12.1, 1.13.1, 2.0.0, ...)",
        )
    tensorflow = tensorflow_version(launcher)
    if tensorflow is not None and tensorflow_container_smp(tensorflow.version) is None:
        return _no_library(
            launcher, tensorflow, "TensorFlow", "2.3.0 to 2.6.0 (2.3.1, 2.4.1, 2.5.1, 2.6.0)"
        )
    return None


def _no_library(
    launcher: Launcher, version: FrameworkVersion, framework: str, shipped: str
) -> ConfigProblem:
    keyword = (
        "image_uri" if version.written == "the image_uri tag" else version.written.split("=", 1)[0]
    )
    return ConfigProblem(
        launcher.keyword(keyword),
        f"{framework} {version.text} container does not ship the model parallelism library",
        Severity.WARNING,
        explanation=(
            f"No {framework} training container of that version ships the model parallelism"
            f" library (SMP v1 shipped in the {framework} containers {shipped}), so the script"
            " cannot import `smdistributed.modelparallel` and the job fails at start-up. Use a"
            " container version that ships it."
        ),
        evidence=(f"{framework} {version.text}, from {version.written}",),
    )
