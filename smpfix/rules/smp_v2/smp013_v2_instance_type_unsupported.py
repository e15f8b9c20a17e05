"""SMP013: an SMP v2 job on an instance type SMP v2 does not support."""

from __future__ import annotations

import re
from collections.abc import Iterator

from smpfix.base.findings import Severity
from smpfix.rules.config_rule import ConfigProblem, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism
from smpfix.rules.smp_v2._config import V2ConfigRule

# The instance types the SMP v2 documentation lists ("Supported instance types").
SUPPORTED = ("ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge")
# GPU instance families (``ml.p3``, ``ml.g5``): the SMP v2 image has a GPU build only.
_GPU = re.compile(r"^ml\.[pg]\d")


class V2InstanceTypeUnsupported(V2ConfigRule):
    summary = (
        "An SMP v2 job on an instance type outside the documented P4d, P4de and P5: without a"
        " GPU the SDK finds no SMP v2 image; on other GPUs the library is not supported."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.NONE

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        if view.launcher is None:
            return
        located = view.launcher.keyword("instance_type")
        name = located.plain() if located is not None else None
        if not isinstance(name, str) or not name.startswith("ml.") or name in SUPPORTED:
            return
        if not _GPU.match(name):
            yield ConfigProblem(
                located,
                f"SMP v2 runs on GPUs, and `{name}` has none: the SDK finds no image for the job",
                Severity.ERROR,
                explanation=(
                    "The SMP v2 image (`pytorch-smp` in the SageMaker SDK) is built for `gpu`"
                    " alone, so the SDK finds no image for this job. Use ml.p4d.24xlarge,"
                    " ml.p4de.24xlarge or ml.p5.48xlarge."
                ),
            )
            return
        yield ConfigProblem(
            located,
            f"`{name}` is not an instance type SMP v2 supports",
            Severity.WARNING,
            explanation=(
                "The SMP v2 documentation lists ml.p4d.24xlarge, ml.p4de.24xlarge and"
                " ml.p5.48xlarge, whose A100 and H100 GPUs its kernels are built and tested for."
                " Use one of those, or expect the library to fail or fall back where it needs"
                " them."
            ),
        )
