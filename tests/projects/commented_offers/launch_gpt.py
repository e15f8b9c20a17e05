"""Launch GPT-2 with pipeline parallelism; the commented lines are for larger models."""

from sagemaker.pytorch import PyTorch

smp_parameters = {
    "partitions": 2,
    "microbatches": 4,
    "ddp": True,
    # "shard_optimizer_state": True,
    # Try more microbatches if activations do not fit.
    # "fp16": not sure yet,
}

estimator = PyTorch(
    entry_point="train_gpt.py",
    source_dir="scripts",
    framework_version="1.12.0",
    py_version="py38",
    instance_count=1,
    instance_type="ml.p4d.24xlarge",
    distribution={
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": smp_parameters}},
        "mpi": {"enabled": True, "processes_per_host": 8},
    },
)
estimator.fit()
