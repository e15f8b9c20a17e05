"""Submit training/run_clm.py with the Hugging Face estimator; paths from this file's folder."""

from pathlib import Path

import sagemaker
from sagemaker.huggingface import HuggingFace

PROJECT = Path(__file__).resolve().parent.parent
CODE_DIR = PROJECT / "training"
ENTRY = "run_clm.py"
INSTANCE = "ml.p4d.24xlarge"
COMMON = {"role": None, "instance_type": INSTANCE, "instance_count": 2}


def make_estimator(role, session):
    return HuggingFace(
        entry_point=ENTRY,
        source_dir=f"{CODE_DIR}",
        transformers_version="4.26.0",
        pytorch_version="1.13.1",
        py_version="py39",
        sagemaker_session=session,
        hyperparameters={"per_device_train_batch_size": 4},
        distribution=DISTRIBUTION,
        **{**COMMON, "role": role},
    )


DISTRIBUTION = {
    "smdistributed": {
        "modelparallel": {
            "enabled": True,
            "parameters": {"tensor_parallel_degree": 8, "partitions": 2, "microbatches": 8, "ddp": True},
        }
    },
    "mpi": {"enabled": True, "processes_per_host": 8},
}

if __name__ == "__main__":
    make_estimator(sagemaker.get_execution_role(), sagemaker.Session()).fit()
