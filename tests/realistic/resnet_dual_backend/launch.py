"""Trains ResNet-152 on CIFAR-100 with the model parallelism library (two pipeline stages)."""

import sagemaker
from sagemaker.pytorch import PyTorch

role = sagemaker.get_execution_role()

estimator = PyTorch(  # expect: SMP827 hint
    entry_point="train.py",
    source_dir="src",
    role=role,
    instance_type="ml.p3.16xlarge",
    instance_count=1,
    framework_version="1.12.0",
    py_version="py38",
    hyperparameters={"backend": "smp", "epochs": 30, "batch_size": 128, "amp": 1},
    distribution={
        "smdistributed": {
            "modelparallel": {
                "enabled": True,
                "parameters": {
                    "pipeline_parallel_degree": 2,
                    "microbatches": 8,
                    "ddp": True,
                    "placement_strategy": "cluster",
                },
            }
        },
        "mpi": {"enabled": True, "processes_per_host": 8},
    },
)

if __name__ == "__main__":
    estimator.fit()
