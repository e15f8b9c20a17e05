"""Submit the training job with one of several distribution strategies."""

import argparse

from sagemaker.pytorch import PyTorch

SMP_PARAMETERS = {"partitions": 2, "microbatches": 4, "ddp": True}


def submit(hyperparameters, mode):
    common = dict(
        entry_point="train.py",
        source_dir="src",
        framework_version="1.12.0",
        py_version="py38",
        instance_count=1,
        instance_type="ml.p4d.24xlarge",
        hyperparameters=hyperparameters,
    )
    if hyperparameters.get("smp"):
        distribution = {
            "smdistributed": {"modelparallel": {"enabled": True, "parameters": SMP_PARAMETERS}},
            "mpi": {"enabled": True, "processes_per_host": 8},
        }
        estimator = PyTorch(distribution=distribution, **common)
    elif mode == "smp-fp16":
        parameters = dict(SMP_PARAMETERS, fp16=True)
        distribution = {
            "smdistributed": {"modelparallel": {"enabled": True, "parameters": parameters}},
            "mpi": {"enabled": True, "processes_per_host": 8},
        }
        estimator = PyTorch(distribution=distribution, **common)
    else:
        estimator = PyTorch(distribution={"torch_distributed": {"enabled": True}}, **common)
    estimator.fit()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="smp")
    args = parser.parse_args()
    submit({"smp": args.mode == "smp", "epochs": 1}, args.mode)
