"""Starts GPT pre-training with pipeline and tensor parallelism, fp16 and sharded optimizer state."""

import sagemaker
from sagemaker.pytorch import PyTorch

role = sagemaker.get_execution_role()

smp_parameters = {
    "pipeline_parallel_degree": 2,
    "tensor_parallel_degree": 2,
    "microbatches": 4,
    "ddp": True,
    "fp16": True,
    "shard_optimizer_state": True,
    "prescaled_batch": False,  # expect: SMP808 hint
    "placement_strategy": "cluster",
}

estimator = PyTorch(
    entry_point="train.py",
    source_dir="src",
    role=role,
    instance_type="ml.p4d.24xlarge",
    instance_count=2,
    framework_version="1.12.1",
    py_version="py38",
    checkpoint_s3_uri="s3://my-bucket/gpt/checkpoints",
    hyperparameters={
        "train-batch-size": 16,
        "max-steps": 20000,
        "save-every": 1000,
        "activation-checkpointing": 1,
    },
    distribution={
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": smp_parameters}},
        "mpi": {"enabled": True, "processes_per_host": 8},
    },
    debugger_hook_config=False,
)

if __name__ == "__main__":
    estimator.fit({"train": "s3://my-bucket/gpt/data/train", "test": "s3://my-bucket/gpt/data/test"})
