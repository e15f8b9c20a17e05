"""BERT-large sentiment fine-tuning: pipeline of two, data parallel over the rest."""

import sagemaker
from sagemaker.pytorch import PyTorch

bucket = sagemaker.Session().default_bucket()

estimator = PyTorch(
    entry_point="finetune.py",
    source_dir="code",
    role=sagemaker.get_execution_role(),
    instance_type="ml.p4d.24xlarge",
    instance_count=2,
    framework_version="1.13.1",
    py_version="py39",
    hyperparameters={"epochs": 3, "batch-size": 16, "lr": 2e-5},
    debugger_hook_config=False,
    distribution={
        "smdistributed": {
            "modelparallel": {
                "enabled": True,
                "parameters": {
                    "pipeline_parallel_degree": 2,
                    "microbatches": 4,
                    "ddp": True,
                    "placement_strategy": "cluster",
                },
            }
        },
        "mpi": {"enabled": True, "processes_per_host": 8},
    },
)
estimator.fit({"data": f"s3://{bucket}/sst2/tokenized"})
