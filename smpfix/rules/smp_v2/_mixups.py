"""What the SageMaker SDK does with a launcher, in the terms the v1/v2 mix-up rules need.

The SDK (``image_uris.get_training_image_uri``) picks the SMP v2 image
(``smdistributed-modelparallel``, from ``pytorch-smp.json``) only when the ``distribution``
holds both ``torch_distributed`` and an enabled ``smdistributed.modelparallel``; otherwise it
picks the plain ``pytorch-training`` image of the ``framework_version``, which has SMP v1 up to
PyTorch 2.0.0 (SMP 1.15.0 was the last v1 release) and no SMP library after it, and never has
SMP v2. An ``image_uri`` is used as given. The estimator starts the script through torchrun
when ``torch_distributed`` is enabled, through mpirun when ``mpi`` is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from smpfix.job.framework_versions import FrameworkVersion, pytorch_version
from smpfix.job.launcher import Launcher, Located
from smpfix.job.versions import FIRST_V2_PYTORCH, compare
from smpfix.program.model import Program
from smpfix.rules.config_rule import ConfigView
from smpfix.rules.launched_code import launched_code

_V2_IMAGE = "smdistributed-modelparallel:"


@dataclass(frozen=True)
class Image:
    """The container a launcher gets, as far as the library in it goes."""

    smp_v2: bool
    # How the launcher names it: ``framework_version="2.2.0"``, the image_uri, ...
    written: str
    # The PyTorch version of a ``pytorch-training`` image, when the launcher names one.
    framework: Optional[FrameworkVersion] = None

    @property
    def has_v1(self) -> Optional[bool]:
        """Whether the image has SMP v1; None when its version is unknown."""
        if self.smp_v2:
            return False
        if self.framework is None:
            return None
        return compare(self.framework.version, FIRST_V2_PYTORCH) < 0


def image(launcher: Launcher) -> Image:
    """The image the SDK starts this launcher's job in."""
    uri = launcher.literal("image_uri")
    if isinstance(uri, str) and uri:
        return Image(_V2_IMAGE in uri, f"the image_uri `{uri}`", pytorch_version(launcher))
    distribution = launcher.distribution
    if (
        distribution is not None
        and distribution.is_dict
        and distribution.get("torch_distributed") is not None
        and launcher.modelparallel is not None
        and _enabled(launcher.modelparallel) is not False
    ):
        return Image(True, "the SMP v2 image (`torch_distributed` beside `modelparallel`)")
    framework = pytorch_version(launcher)
    written = (
        f"the `pytorch-training` image of {framework.written}"
        if framework is not None
        else "the `pytorch-training` image"
    )
    return Image(False, written, framework)


def torchrun(launcher: Launcher) -> Optional[Located]:
    """The ``torch_distributed`` block when it is enabled (the script runs under torchrun)."""
    distribution = launcher.distribution
    block = distribution.get("torch_distributed") if distribution is not None else None
    return block if block is not None and _enabled(block) is True else None


def mpirun(launcher: Launcher) -> Optional[Located]:
    """The ``mpi`` block when it is enabled and ``torch_distributed`` is not."""
    block = launcher.mpi
    if block is None or _enabled(block) is not True or torchrun(launcher) is not None:
        return None
    return block


def _enabled(block: Located) -> Optional[bool]:
    enabled = block.get("enabled") if block.is_dict else None
    if enabled is None:
        return None
    value = enabled.plain()
    return value if isinstance(value, bool) else None


@dataclass(frozen=True)
class ScriptLibraries:
    """Which SMP the launched script (with the project modules it imports) imports."""

    script: str
    v1: bool
    v2: bool
    tensorflow: bool


def script_libraries(program: Program, view: ConfigView) -> Optional[ScriptLibraries]:
    """What the script a launcher starts imports, when smpfix can read it."""
    code = launched_code(program, view)
    if code is None or not code.files:
        return None
    return ScriptLibraries(
        code.script,
        any(facts.imports_smp for facts in code.files),
        any(facts.imports_smp_v2 for facts in code.files),
        any(facts.imports_smp_tf for facts in code.files),
    )


def modelparallel_enabled(launcher: Launcher) -> bool:
    """The launcher enables ``smdistributed.modelparallel`` (``"enabled": True``)."""
    mp = launcher.modelparallel
    return mp is not None and _enabled(mp) is True
