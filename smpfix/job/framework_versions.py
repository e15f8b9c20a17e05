"""Which PyTorch or TensorFlow container a launcher asks for, and so which SMP v1 releases it runs.

Rules never compare container versions themselves: they declare the library versions their
advice holds for (``smpfix.job.versions``), and this module only reads the container. The
version comes from the estimator's literal ``framework_version`` (``pytorch_version`` for
the Hugging Face estimator), else from the tag of a literal ``image_uri`` of a PyTorch training
image; for the TensorFlow estimator, its ``framework_version`` or a TensorFlow training image.
Anything else is unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from smpfix.base.flavour import Flavour
from smpfix.job.launcher import Launcher
from smpfix.job.versions import SmpVersion, pytorch_job_version, tensorflow_job_version

_IMAGE_TAG = re.compile(r"pytorch-training:(\d+)\.(\d+)(?:\.(\d+))?")
# The SMP v2 image, tagged with its PyTorch version (release notes:
# ``smdistributed-modelparallel:2.4.1-gpu-py311-cu121``).
_SMP_V2_IMAGE_TAG = re.compile(r"smdistributed-modelparallel:(\d+)\.(\d+)(?:\.(\d+))?")
_TF_IMAGE_TAG = re.compile(r"tensorflow-training:(\d+)\.(\d+)(?:\.(\d+))?")
_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?$")


@dataclass(frozen=True)
class FrameworkVersion:
    """A version as written (``(1, 13)`` for ``"1.13"``) and where it was written."""

    version: tuple[int, ...]
    written: str

    @property
    def text(self) -> str:
        return ".".join(str(part) for part in self.version)


def pytorch_version(launcher: Launcher) -> Optional[FrameworkVersion]:
    """The PyTorch version of the container the launcher starts, when it says so literally."""
    keyword = (
        "pytorch_version" if "huggingface" in launcher.estimator.lower() else "framework_version"
    )
    framework = launcher.literal(keyword)
    if isinstance(framework, str) and (
        "pytorch" in launcher.estimator.lower() or keyword == "pytorch_version"
    ):
        match = _VERSION.match(framework.strip())
        if match:
            return FrameworkVersion(_parts(match), f"{keyword}={framework!r}")
    image = launcher.literal("image_uri")
    if isinstance(image, str):
        match = _IMAGE_TAG.search(image) or _SMP_V2_IMAGE_TAG.search(image)
        if match:
            return FrameworkVersion(_parts(match), "the image_uri tag")
    return None


def tensorflow_version(launcher: Launcher) -> Optional[FrameworkVersion]:
    """The TensorFlow version of the container a TensorFlow launcher starts, when it says so
    literally."""
    framework = launcher.literal("framework_version")
    if isinstance(framework, str) and "tensorflow" in launcher.estimator.lower():
        match = _VERSION.match(framework.strip())
        if match:
            return FrameworkVersion(_parts(match), f"framework_version={framework!r}")
    image = launcher.literal("image_uri")
    if isinstance(image, str):
        match = _TF_IMAGE_TAG.search(image)
        if match:
            return FrameworkVersion(_parts(match), "the image_uri tag")
    return None


def launcher_flavour(launcher: Launcher) -> Flavour:
    """The library flavour the launched container runs: TensorFlow for the TensorFlow
    estimator (``sagemaker.tensorflow.TensorFlow``) or a TensorFlow training image, else PyTorch."""
    if "tensorflow" in launcher.estimator.lower():
        return Flavour.TENSORFLOW
    image = launcher.literal("image_uri")
    if isinstance(image, str) and _TF_IMAGE_TAG.search(image):
        return Flavour.TENSORFLOW
    return Flavour.PYTORCH


def launcher_smp_version(launcher: Launcher, where: str) -> Optional[SmpVersion]:
    """The SMP release in the container the launcher starts (``where`` names the launcher)."""
    version = pytorch_version(launcher)
    if version is not None:
        return pytorch_job_version(version.text, f"{version.written} in {where}")
    version = tensorflow_version(launcher)
    if version is not None:
        return tensorflow_job_version(version.text, f"{version.written} in {where}")
    return None


def _parts(match: re.Match[str]) -> tuple[int, ...]:
    return tuple(int(part) for part in match.groups() if part is not None)
