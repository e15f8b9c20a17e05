"""Launch the ViT pipeline-parallel training job on two p3.16xlarge instances."""

import argparse

from sagemaker.pytorch import PyTorch

parser = argparse.ArgumentParser()
parser.add_argument("--role", default="arn:aws:iam::111122223333:role/SageMakerRole")
parser.add_argument("--data", default="s3://my-bucket/imagenet-subset/")
cli = parser.parse_args()

smp_options = {
    "enabled": True,
    "parameters": {
        "pipeline_parallel_degree": 2,
        "microbatches": 4,
        "placement_strategy": "spread",
        "pipeline": "interleaved",
        "optimize": "speed",
        "ddp": True,
        "fp16": True,  # expect: SMP812 error
    },
}

estimator = PyTorch(
    entry_point="train.py",
    source_dir="src",
    role=cli.role,
    framework_version="1.10.2",
    py_version="py38",
    instance_type="ml.p3.16xlarge",
    instance_count=2,
    hyperparameters={"epochs": 3, "batch-size": 32, "lr": 3e-4},
    distribution={
        "smdistributed": {"modelparallel": smp_options},
        "mpi": {"enabled": True, "processes_per_host": 8},
    },
    debugger_hook_config=False,
)
estimator.fit({"train": cli.data})
