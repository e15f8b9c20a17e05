"""Start the BERT-large fine-tuning job; every setting lives in configs/smp.yaml."""

import sagemaker
import yaml
from sagemaker.pytorch import PyTorch

with open("configs/smp.yaml") as handle:
    config = yaml.safe_load(handle)

instance = config["instance"]
training = config["training"]

estimator = PyTorch(
    entry_point="train.py",
    source_dir="src",
    role=sagemaker.get_execution_role(),
    instance_type=instance["type"],
    instance_count=instance["count"],
    framework_version="1.12.1",
    py_version="py38",
    debugger_hook_config=False,
    hyperparameters={
        "epochs": training["epochs"],
        "batch-size": training["batch_size"],
        "lr": training["learning_rate"],
    },
    distribution={
        "smdistributed": {"modelparallel": config["smp"]},
        "mpi": {"enabled": True, "processes_per_host": instance["processes_per_host"]},
    },
)
estimator.fit({"train": "s3://my-bucket/glue/sst2/train"})
