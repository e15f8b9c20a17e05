"""Fine-tunes a ResNet-50 on the flowers data set with two pipeline stages and two-way tensor
parallelism on one ml.p3.16xlarge, optimizer state sharded across the data-parallel pair.

Run from the repository root: python launch_flowers.py --bucket my-bucket
"""

import argparse

import sagemaker
from sagemaker.pytorch import PyTorch

parser = argparse.ArgumentParser()
parser.add_argument("--bucket", required=True)
parser.add_argument("--role", default=None)
cli = parser.parse_args()

role = cli.role or sagemaker.get_execution_role()

hyperparameters = {
    "epochs": 12,
    "batch-size": 64,
    "lr": 0.05,
    "shard_optimizer_state": 1,
    "skip_full_optimizer": 1,
}

smp_parameters = {
    "partitions": 2,
    "microbatches": 4,
    "pipeline": "interleaved",
    "tensor_parallel_degree": 2,  # expect: SMP808 hint
    "shard_optimizer_state": True,
    "ddp": True,
}

estimator = PyTorch(
    entry_point="train.py",
    source_dir="src",
    role=role,
    instance_type="ml.p3.16xlarge",
    instance_count=1,
    framework_version="1.10.2",
    py_version="py38",
    hyperparameters=hyperparameters,
    distribution={
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": smp_parameters}},
        "mpi": {"enabled": True, "processes_per_host": 8},
    },
    debugger_hook_config=False,
    disable_profiler=True,
    base_job_name="flowers-smp",
)
estimator.fit({"train": f"s3://{cli.bucket}/flowers/train", "val": f"s3://{cli.bucket}/flowers/val"})
