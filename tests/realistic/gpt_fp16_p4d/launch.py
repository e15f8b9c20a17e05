"""Fine-tunes a 1.3B GPT-2 style model with tensor and pipeline parallelism on two p4d nodes."""

import sagemaker
from sagemaker.pytorch import PyTorch

role = sagemaker.get_execution_role()
session = sagemaker.Session()

hyperparameters = {
    "max_steps": 2000,
    "train_batch_size": 8,
    "val_batch_size": 4,
    "seq_length": 1024,
    "lr": 0.00015,
    "warmup_steps": 100,
    "num_layers": 24,
    "hidden_width": 2048,
    "num_heads": 16,
    "fp16": 1,
    "checkpoint_freq": 500,
}

smp_parameters = {
    "tensor_parallel_degree": 2,  # expect: SMP808 hint
    "pipeline_parallel_degree": 2,
    "microbatches": 4,
    "ddp": True,
    "fp16": True,
    "auto_partition": True,
    "optimize": "speed",
}

estimator = PyTorch(
    entry_point="train_gpt.py",
    source_dir="code",
    role=role,
    instance_type="ml.p4d.24xlarge",
    instance_count=2,
    framework_version="1.13.1",
    py_version="py39",
    hyperparameters=hyperparameters,
    checkpoint_s3_uri=f"s3://{session.default_bucket()}/gpt-fp16/checkpoints",  # expect: SMP827 warning
    distribution={
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": smp_parameters}},
        "mpi": {"enabled": True, "processes_per_host": 8},
    },
)

if __name__ == "__main__":
    estimator.fit({"train": f"s3://{session.default_bucket()}/datasets/openwebtext"})
