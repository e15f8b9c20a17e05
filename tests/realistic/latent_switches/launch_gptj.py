"""Fine-tunes GPT-J with tensor parallelism over eight GPUs; the script's dataclasses hold its
switches, and this job leaves them at their defaults."""

from sagemaker.pytorch import PyTorch

PyTorch(  # expect: SMP827 hint
    entry_point="finetune_gptj.py",
    source_dir="code",
    role="arn:aws:iam::111122223333:role/sagemaker",
    instance_type="ml.p4d.24xlarge",
    instance_count=1,
    framework_version="1.12.0",
    py_version="py38",
    hyperparameters={"model_name": "EleutherAI/gpt-j-6B", "epochs": 1},
    distribution={
        "smdistributed": {
            "modelparallel": {
                "enabled": True,
                "parameters": {"tensor_parallel_degree": 8, "microbatches": 1, "ddp": True},
            }
        },
        "mpi": {"enabled": True, "processes_per_host": 8},
    },
).fit()
