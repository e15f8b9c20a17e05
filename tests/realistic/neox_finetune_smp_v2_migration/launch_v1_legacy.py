"""The team's old SMP v1 launcher, still used for quick experiments: it now starts the ported
script, which imports SMP v2, through mpirun in the PyTorch 1.13.1 container."""

import sagemaker
from sagemaker.pytorch import PyTorch

role = sagemaker.get_execution_role()

legacy = PyTorch(
    entry_point="finetune.py",
    source_dir="src",
    role=role,
    instance_type="ml.p4d.24xlarge",
    instance_count=1,
    framework_version="1.13.1",
    py_version="py39",
    hyperparameters={"model_name": "EleutherAI/gpt-neox-20b", "epochs": 1},
    distribution={  # expect: SMP002 error
        "smdistributed": {
            "modelparallel": {
                "enabled": True,
                "parameters": {"tensor_parallel_degree": 8, "pipeline_parallel_degree": 1, "ddp": True},
            }
        },
        "mpi": {"enabled": True, "processes_per_host": 8},
    },
)

if __name__ == "__main__":
    legacy.fit(wait=False)
