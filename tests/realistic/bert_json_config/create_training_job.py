"""Starts the BERT fine-tuning job; the account settings and the parallelism live in config.json.

Run it from this folder: ``python create_training_job.py``.
"""

import json

import sagemaker
from sagemaker.pytorch import PyTorch

with open("config.json") as f:
    config = json.loads(f.read())  # expect: SMP818 warning

session = sagemaker.Session()
distribution = {
    "smdistributed": {"modelparallel": config["smp_options"]},
    "mpi": config["mpi_options"],
}

estimator = PyTorch(
    entry_point="train.py",
    source_dir="src",
    role=config["aws"]["role"],
    sagemaker_session=session,
    instance_type="ml.p3.16xlarge",
    instance_count=2,
    framework_version="1.12.1",
    py_version="py38",
    hyperparameters=config["hyperparameters"],
    distribution=distribution,
    debugger_hook_config=False,
)
estimator.fit({"train": config["data"]["train"]})
