"""SMP826: a model-parallel job on an instance type or container the library does not support.

The library runs on CUDA GPUs only: ``smp.init`` sets the CUDA device of each rank, so a CPU,
Trainium or Inferentia instance cannot start it. The developer guide lists the instance types
it supports (ml.p3.16xlarge, ml.p3dn.24xlarge, ml.p4d.24xlarge, ml.p4de.24xlarge,
ml.g4dn.12xlarge); other GPU instances are untested. The library ships only in particular
PyTorch and TensorFlow training containers (catalog section 1.3): another ``framework_version``
starts a container without it, and the script fails to import it.
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
            f"instance_type {name!r} has no CUDA GPU: the model parallelism library runs one"
            " process per GPU and `smp.init()` sets each rank's CUDA device, so the job fails at"
            " start-up, after the instances are up. Use a GPU instance the library supports"
            f" ({supported}).",
            Severity.ERROR,
        )
        return
    instance = INSTANCE_TYPES.get(name)
    if instance is None or instance.smp_v1_supported:
        return
    yield ConfigProblem(
        located,
        f"instance_type {name!r} ({instance.gpus} × {instance.gpu_model}) is not one the model"
        f" parallelism library supports: the developer guide lists {supported}. The job may fail,"
        " or run without the tested set-up (the library's kernels, EFA networking); use a"
        " supported type.",
        Severity.WARNING,
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
        f"{framework} {version.text} ({version.written}): no {framework} training container of that"
        f" version ships the model parallelism library (SMP v1 shipped in the {framework}"
        f" containers {shipped}), so the script cannot import `smdistributed.modelparallel` and the"
        " job fails at start-up. Use a container version that ships it.",
        Severity.WARNING,
    )
