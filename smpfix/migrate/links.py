"""The SMP v2 developer-guide pages a migration item points a person to.

One place for the addresses, so a renamed page is one edit and every item of a report links the
same page for the same topic.
"""

from __future__ import annotations

_GUIDE = "https://docs.aws.amazon.com/sagemaker/latest/dg/"
_REFERENCE = _GUIDE + "distributed-model-parallel-v2-reference.html"

UPGRADE_FROM_V1 = _REFERENCE + "#model-parallel-v2-upgrade-from-v1"
CONFIGURATION = _REFERENCE + "#distributed-model-parallel-v2-reference-init-config"
USE_V2 = _GUIDE + "model-parallel-use-api-v2.html"
SUPPORTED_FRAMEWORKS = _GUIDE + "distributed-model-parallel-support-v2.html"
HYBRID_SHARDING = _GUIDE + "model-parallel-core-features-v2-sharded-data-parallelism.html"
TENSOR_PARALLELISM = _GUIDE + "model-parallel-core-features-v2-tensor-parallelism.html"
MIXED_PRECISION = _GUIDE + "model-parallel-core-features-v2-mixed-precision.html"
DELAYED_PARAMETER_INITIALIZATION = (
    _GUIDE + "model-parallel-core-features-v2-delayed-param-init.html"
)
ACTIVATION_CHECKPOINTING = (
    _GUIDE + "model-parallel-core-features-v2-pytorch-activation-checkpointing.html"
)
ACTIVATION_OFFLOADING = (
    _GUIDE + "model-parallel-core-features-v2-pytorch-activation-offloading.html"
)
CHECKPOINTS = _GUIDE + "model-parallel-core-features-v2-checkpoints.html"
SMDDP = _GUIDE + "model-parallel-core-features-v2-smddp-allgather.html"
