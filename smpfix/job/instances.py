"""SageMaker instance types: GPUs per instance, GPU model, bf16 support (Amazon EC2 instance types).

Unknown or unlisted types give None, and rules that need the GPU count then stay UNKNOWN
rather than guess.

The host memory is given for the types SMP v2 documents (P4d, P4de, P5; its supported
instance types), where FSDP's CPU offload puts the model states: 1,152 GiB on
``p4d.24xlarge`` and ``p4de.24xlarge`` and 2,048 GiB (2 TiB) on ``p5.48xlarge`` (Amazon EC2
P4 and P5 instance pages, "Instance Memory"; the Amazon EC2 instance type guide's accelerated
computing specifications). Other types leave it unknown, and nothing is said about it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class InstanceType:
    name: str
    gpus: int
    gpu_memory_mib: int
    gpu_model: str
    smp_v1_supported: bool
    efa: bool
    host_memory_gib: Optional[int] = None  # the instance's memory (RAM), where documented

    @property
    def bf16(self) -> bool:
        """bf16 needs Ampere or newer (A100, A10G, H100); V100, T4 and K80 lack it."""
        return self.gpu_model.split()[0] in ("A100", "A10G", "H100")


def _family(
    names: str,
    gpus: int,
    memory: int,
    model: str,
    supported: bool = False,
    efa: bool = False,
    host_gib: Optional[int] = None,
) -> dict[str, InstanceType]:
    return {
        f"ml.{name}": InstanceType(f"ml.{name}", gpus, memory, model, supported, efa, host_gib)
        for name in names.split()
    }


INSTANCE_TYPES: dict[str, InstanceType] = {
    **_family("p2.xlarge", 1, 12288, "K80"),
    **_family("p2.8xlarge", 8, 12288, "K80"),
    **_family("p2.16xlarge", 16, 12288, "K80"),
    **_family("p3.2xlarge", 1, 16384, "V100 16GB"),
    **_family("p3.8xlarge", 4, 16384, "V100 16GB"),
    **_family("p3.16xlarge", 8, 16384, "V100 16GB", supported=True),
    **_family("p3dn.24xlarge", 8, 32768, "V100 32GB", supported=True, efa=True),
    **_family("p4d.24xlarge", 8, 40960, "A100 40GB", supported=True, efa=True, host_gib=1152),
    **_family("p4de.24xlarge", 8, 81920, "A100 80GB", supported=True, efa=True, host_gib=1152),
    **_family("p5.48xlarge", 8, 81920, "H100 80GB", efa=True, host_gib=2048),
    **_family("g4dn.xlarge g4dn.2xlarge g4dn.4xlarge g4dn.8xlarge g4dn.16xlarge", 1, 16384, "T4"),
    **_family("g4dn.12xlarge", 4, 16384, "T4", supported=True),
    **_family("g5.xlarge g5.2xlarge g5.4xlarge g5.8xlarge g5.16xlarge", 1, 24576, "A10G"),
    **_family("g5.12xlarge g5.24xlarge", 4, 24576, "A10G"),
    **_family("g5.48xlarge", 8, 22888, "A10G"),
}


def lookup(name: object) -> Optional[InstanceType]:
    return INSTANCE_TYPES.get(name) if isinstance(name, str) else None
