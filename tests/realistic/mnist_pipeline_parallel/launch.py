"""Starts the MNIST pipeline-parallel job on two p3.16xlarge instances."""

import sagemaker
from sagemaker.pytorch import PyTorch

role = sagemaker.get_execution_role()

mpi_options = {"enabled": True, "processes_per_host": 8}
smp_options = {
    "enabled": True,
    "parameters": {
        "pipeline_parallel_degree": 2,
        "microbatches": 4,
        "placement_strategy": "spread",
        "pipeline": "interleaved",
        "optimize": "speed",
        "ddp": True,
    },
}

estimator = PyTorch(  # expect: SMP827 hint
    entry_point="train_mnist.py",
    source_dir="code",
    role=role,
    instance_type="ml.p3.16xlarge",
    instance_count=2,
    framework_version="1.12.0",
    py_version="py38",
    hyperparameters={"epochs": 5, "batch-size": 64},
    distribution={"smdistributed": {"modelparallel": smp_options}, "mpi": mpi_options},
)

if __name__ == "__main__":
    estimator.fit()
