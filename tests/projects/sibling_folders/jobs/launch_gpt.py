"""Start src/gpt/train.py on two p4d instances; run from the project root."""

import sagemaker
from sagemaker.pytorch import PyTorch

SMP_PARAMETERS = {
    "tensor_parallel_degree": 4,
    "pipeline_parallel_degree": 1,
    "microbatches": 4,
    "ddp": True,
}

estimator = PyTorch(
    entry_point="train.py",
    source_dir="src/gpt",
    role=sagemaker.get_execution_role(),
    instance_type="ml.p4d.24xlarge",
    instance_count=2,
    framework_version="1.13.1",
    py_version="py39",
    hyperparameters={"batch-size": 8},
    distribution={
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": SMP_PARAMETERS}},
        "mpi": {"enabled": True, "processes_per_host": 8},
    },
)
estimator.fit({"train": "s3://my-bucket/gpt/tokens/"})
