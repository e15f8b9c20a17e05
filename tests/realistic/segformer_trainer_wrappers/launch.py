"""Starts the segmentation fine-tuning job: two pipeline stages per replica, eight GPUs."""

import sagemaker
from sagemaker.pytorch import PyTorch

session = sagemaker.Session()
role = sagemaker.get_execution_role()

smp_parameters = {
    "partitions": 2,
    "microbatches": 4,
    "pipeline": "interleaved",
    "optimize": "speed",
    "ddp": True,
}

estimator = PyTorch(
    entry_point="train.py",
    source_dir="src",
    role=role,
    instance_type="ml.p4d.24xlarge",
    instance_count=1,
    framework_version="1.12.0",
    py_version="py38",
    hyperparameters={
        "backend": "smp",
        "epochs": 20,
        "batch-size": 8,
        "lr": 6e-5,
        "checkpoint-dir": "/opt/ml/checkpoints",
    },
    checkpoint_s3_uri=f"s3://{session.default_bucket()}/segformer/checkpoints",
    debugger_hook_config=False,
    distribution={
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": smp_parameters}},
        "mpi": {"enabled": True, "processes_per_host": 8},
    },
)

estimator.fit({"train": f"s3://{session.default_bucket()}/ade20k/train"})
