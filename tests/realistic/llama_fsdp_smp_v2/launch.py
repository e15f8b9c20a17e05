"""Launches Llama pre-training with SMP v2 (torch.sagemaker) on four p4d.24xlarge instances.

SMP v2 starts through torchrun (`torch_distributed`), takes hybrid sharding and tensor
parallelism in its own `parameters`, and needs neither `mpi` nor `ddp`: none of the SMP v1
checks applies here.
"""

import os
import time

import sagemaker
from sagemaker.pytorch import PyTorch

role = sagemaker.get_execution_role()
session = sagemaker.session.Session()
bucket = session.default_bucket()

model_config = "llama-7b"
instance_type = "ml.p4d.24xlarge"
instance_count = 4

hyperparameters = {
    "model_type": "llama_v2",
    "model_config": model_config,
    "max_context_width": 4096,
    "train_batch_size": 2,
    "val_batch_size": 2,
    "max_steps": 2000,
    "lr": 3e-4,
    "weight_decay": 0.2,
    "beta1": 0.9,
    "beta2": 0.95,
    "warmup": 0.0032,
    "checkpoint_freq": 200,
    "validation_freq": 100,
    "bf16": 1,
    "activation_checkpointing": 1,
    "offload_activations": 1,
    "delayed_param": 1,
    "seed": 12345,
}

# SMP v2 settings: shard across 16 GPUs, replicate across the rest; 2-way tensor parallelism.
smp_parameters = {
    "hybrid_shard_degree": 16,
    "sm_activation_offloading": True,
    "activation_loading_horizon": 2,
    "tensor_parallel_degree": 2,
    "fsdp_cache_flush_warnings": False,
}

base_job_name = f"smp-v2-{model_config}-fsdp-tp{smp_parameters['tensor_parallel_degree']}"
checkpoint_s3_uri = f"s3://{bucket}/{base_job_name}-{int(time.time())}/checkpoints"

estimator = PyTorch(
    entry_point="train.py",
    source_dir=os.path.join(os.getcwd(), "scripts"),
    role=role,
    instance_type=instance_type,
    instance_count=instance_count,
    framework_version="2.2.0",
    py_version="py310",
    hyperparameters=hyperparameters,
    checkpoint_s3_uri=checkpoint_s3_uri,
    distribution={
        "torch_distributed": {"enabled": True},
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": smp_parameters}},
    },
    environment={"NCCL_DEBUG": "WARN", "SMP_NCCL_THROTTLE_LIMIT": "1"},
    base_job_name=base_job_name,
    disable_profiler=True,
    debugger_hook_config=False,
)

if __name__ == "__main__":
    estimator.fit(inputs={"train": f"s3://{bucket}/datasets/c4/train", "val": f"s3://{bucket}/datasets/c4/val"}, wait=False)
