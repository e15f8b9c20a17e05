"""Launch the CIFAR-10 training job on two p4d instances.

The training script under source/ is a torchrun-style DistributedDataParallel script; this
launcher nevertheless asks SageMaker for the model parallelism library.
"""

import sagemaker
from sagemaker.pytorch import PyTorch

ROLE = sagemaker.get_execution_role()
BUCKET = "s3://example-training-bucket/cifar10"

mpi_options = "-verbose --mca orte_base_help_aggregate 0 "
smp_parameters = {
    "ddp": True,
    "fp16": True,
    "prescaled_batch": True,
    "tensor_parallel_degree": 2,
}

hyperparameters = {
    "epochs": 30,
    "batch-size": 128,
    "lr": 0.1,
    "checkpoint-dir": "/opt/ml/checkpoints",
}

estimator = PyTorch(
    source_dir="source",
    entry_point="train.py",
    role=ROLE,
    instance_type="ml.p4d.24xlarge",
    instance_count=2,
    volume_size=200,
    py_version="py39",
    framework_version="1.13.1",
    hyperparameters=hyperparameters,
    checkpoint_s3_uri=f"{BUCKET}/checkpoints",  # expect: SMP827 warning
    distribution={
        "smdistributed": {
            "modelparallel": {
                "enabled": True,  # expect: SMP832 error
                "parameters": smp_parameters,
            }
        },
        "mpi": {
            "enabled": True,
            "processes_per_host": 8,
            "custom_mpi_options": mpi_options,
        },
    },
)

if __name__ == "__main__":
    estimator.fit({"train": f"{BUCKET}/train", "test": f"{BUCKET}/test"})
