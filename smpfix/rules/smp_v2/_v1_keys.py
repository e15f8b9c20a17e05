"""SMP v1 keys, and what becomes of each in an SMP v2 configuration.

SMP v2 refuses none of them: the SageMaker SDK checks the values of v1's keys only
(``validate_mp_config``) and hands every key to the job, and SMP v2 reads its own keys and
ignores the rest. The SDK's own GPU training recipes launch the SMP v2 image with v1's
``placement_strategy`` (``_device_get_distribution``, SDK 2.236.0 on), and the distributed
training workshop's Llama 3.1 notebook ran on the PyTorch 2.4.1 SMP image with
``SM_HP_MP_PARAMETERS={"delayed_parameter_initialization":true,"hybrid_shard_degree":8}``. What
such a key costs is what it asked for: a pipeline that is not built, a precision that is not
applied; nothing when SMP v2 or the script does the same thing another way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

# FSDP's wrap and its mixed precision policy, however a script imports them.
_FSDP = (
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_shard",
    "torch.distributed._composable.fsdp.fully_shard",
)
_MIXED_PRECISION = (
    "torch.distributed.fsdp.MixedPrecision",
    "torch.distributed.fsdp.api.MixedPrecision",
    "torch.distributed.fsdp.fully_sharded_data_parallel.MixedPrecision",
    "torch.distributed.fsdp.MixedPrecisionPolicy",
    "torch.distributed._composable.fsdp.MixedPrecisionPolicy",
)


@dataclass(frozen=True)
class V1Setting:
    """One SMP v1 key as SMP v2 sees it.

    ``instead``: what SMP v2 does in its place (the v2 reference's "Upgrade from SMP v1 to SMP
    v2"). ``off``: the values that ask v1 for nothing (its defaults), so that ignoring them
    changes nothing. ``lost``: what a job whose key SMP v2 ignores then does not do, or None
    when SMP v2 does the same anyway (FSDP's data parallelism for ``ddp``). ``done_by``: calls
    in the script, and ``v2_key`` a key beside it, that do in SMP v2 what the key asked for.
    """

    instead: str
    off: tuple[Any, ...] = ()
    lost: Optional[str] = None
    done_by: tuple[str, ...] = ()
    v2_key: Optional[str] = None

    def asks_nothing(self, value: Any) -> bool:
        """The value is one of v1's "off" values (``True`` is not ``1`` here)."""
        return any(type(value) is type(off) and value == off for off in self.off)


_NO_PIPELINE = "SMP v2 has no pipeline parallelism"
_PIPELINE_DETAIL = V1Setting(f"{_NO_PIPELINE}, hence no partitioning or microbatches")
_PRECISION = V1Setting(
    "SMP v2 takes mixed precision from FSDP's `MixedPrecision` policy in the script",
    off=(False,),
    lost="gets no mixed precision from it",
    done_by=_MIXED_PRECISION,
)

V1_ONLY_KEYS: Mapping[str, V1Setting] = {
    "pipeline_parallel_degree": V1Setting(
        f"{_NO_PIPELINE}; shard the model with FSDP (`hybrid_shard_degree`) and"
        " `tensor_parallel_degree` instead",
        off=(1,),
        lost="runs no pipeline",
    ),
    "partitions": V1Setting(
        f"it is v1's pipeline degree, and {_NO_PIPELINE}; shard the model with FSDP"
        " (`hybrid_shard_degree`) and `tensor_parallel_degree` instead",
        off=(1,),
        lost="runs no pipeline",
    ),
    "microbatches": _PIPELINE_DETAIL,
    "active_microbatches": _PIPELINE_DETAIL,
    "pipeline": _PIPELINE_DETAIL,
    "auto_partition": _PIPELINE_DETAIL,
    "default_partition": _PIPELINE_DETAIL,
    "memory_weight": _PIPELINE_DETAIL,
    "contiguous": _PIPELINE_DETAIL,
    "ddp": V1Setting(
        "SMP v2 runs data parallelism through PyTorch FSDP, which the script wraps itself",
        off=(False,),
    ),
    "ddp_port": V1Setting("SMP v2 runs PyTorch FSDP, not v1's DDP wrapper"),
    "ddp_dist_backend": V1Setting(
        "SMP v2 takes the backend from the script's `dist.init_process_group`"
    ),
    "horovod": V1Setting("SMP v2 has no Horovod", off=(False,)),
    "sharded_data_parallel_degree": V1Setting(
        "it is v1's sharded data parallelism; SMP v2 shards with the script's FSDP wrap, over"
        " `hybrid_shard_degree` GPUs",
        off=(0, 1),
        lost="does not shard the model by it",
        done_by=_FSDP,
        v2_key="hybrid_shard_degree",
    ),
    "offload_activations": V1Setting(
        "it is v1's activation offloading; in SMP v2 it is `sm_activation_offloading` together"
        " with PyTorch's `offload_wrapper` in the script",
        off=(False,),
        lost="does not offload activations",
        done_by=("torch.distributed.algorithms._checkpoint.checkpoint_wrapper.offload_wrapper",),
        v2_key="sm_activation_offloading",
    ),
    "delayed_parameter_initialization": V1Setting(
        "in SMP v2 delayed initialisation is `torch.sagemaker.delayed_param.DelayedParamIniter`"
        " in the script",
        off=(False,),
        lost="does not delay initialisation",
        done_by=("torch.sagemaker.delayed_param.DelayedParamIniter",),
    ),
    "tensor_parallel_seed": V1Setting("SMP v2 calls it `random_seed`", v2_key="random_seed"),
    "fp16": _PRECISION,
    "bf16": _PRECISION,
    "fp16_params": _PRECISION,
    "shard_optimizer_state": V1Setting("SMP v2 shards optimizer state with FSDP", off=(False,)),
    "prescaled_batch": V1Setting("SMP v2 has no prescaled batch", off=(False,)),
    "placement_strategy": V1Setting("SMP v2 places ranks itself"),
    "optimize": V1Setting("SMP v2 has no such setting"),
}
