"""Telling an SMP v2 job from an SMP v1 job, so that no v1 rule or fix touches a v2 job.

SMP v2 (``torch.sagemaker``) is a different library with a different API; a v1 rule on it is
noise at best, and a v1 fix breaks it (adding ``"ddp": True`` to a v2 configuration). A launcher
starts SMP v2 when any of these holds:

- ``distribution["torch_distributed"]`` is present and not disabled: v2 jobs start through
  ``torchrun``, v1 jobs through ``mpirun``;
- the container is PyTorch 2.0.1 or later (``framework_version`` or an ``image_uri`` tag) and
  the ``distribution`` has a ``modelparallel`` block: SMP v1 ended with 1.15 in the PyTorch
  2.0.0 container, and SMP v2's first release came with 2.0.1. ``"2.0.0"`` is therefore v1
  unless another sign says v2, and so is ``"2.0"`` (the SDK resolves it to a 2.0 patch, which
  may be either);
- the ``image_uri`` names the SMP v2 image (``smdistributed-modelparallel:``);
- the ``parameters`` hold a setting only v2 has (``hybrid_shard_degree``, ...);
- the script it starts imports ``torch.sagemaker`` (checked where the script is read).

A stated job (``--job``, ``[tool.smpfix.job]``) is v2 when it names ``smp_version`` 2 or later,
or a PyTorch ``framework_version`` of 2.0.1 or later (``versions.stated_v2``).

"""

from __future__ import annotations

from typing import Optional

from smpfix.job.config_keys import V2_KEYS
from smpfix.job.framework_versions import pytorch_version
from smpfix.job.launcher import Launcher
from smpfix.job.versions import FIRST_V2_PYTORCH, compare

_V2_IMAGE = "smdistributed-modelparallel:"


def launcher_v2(launcher: Launcher, where: str) -> Optional[str]:
    """Why the launcher starts SMP v2 (``where`` names it), or None for an SMP v1 launcher."""
    distribution = launcher.distribution
    if distribution is not None and distribution.is_dict:
        torch_distributed = distribution.get("torch_distributed")
        if torch_distributed is not None:
            enabled = torch_distributed.get("enabled") if torch_distributed.is_dict else None
            if enabled is None or enabled.plain() is not False:
                return f"`torch_distributed` is enabled in {where} (SMP v2 starts through torchrun)"
    image = launcher.literal("image_uri")
    if isinstance(image, str) and _V2_IMAGE in image:
        return f"{where} uses the SMP v2 image"
    if launcher.modelparallel is None:
        return None
    version = pytorch_version(launcher)
    if version is not None and compare(version.version, FIRST_V2_PYTORCH) >= 0:
        return (
            f"{version.written} in {where} is a PyTorch container with SMP v2"
            " (v1 ended with PyTorch 2.0.0)"
        )
    parameters = launcher.parameters
    if parameters is not None and parameters.is_dict:
        found = sorted(key for key in parameters.value if key in V2_KEYS)
        if found:
            return f"{where} sets `{found[0]}`, a setting of SMP v2"
    return None
