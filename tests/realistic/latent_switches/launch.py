"""Launches the BERT pre-training script as a two-stage pipeline with tensor parallelism.

The script evaluates when run with its defaults (``--do_train 0``); this job trains.
"""

from sagemaker.pytorch import PyTorch

smp_parameters = {
    "partitions": 2,
    "microbatches": 4,
    "tensor_parallel_degree": 2,  # expect: SMP808 hint
    "pipeline": "interleaved",
    "ddp": True,
}

PyTorch(  # expect: SMP827 hint
    entry_point="pretrain.py",
    source_dir="code",
    role="arn:aws:iam::111122223333:role/sagemaker",
    instance_type="ml.p3.16xlarge",
    instance_count=1,
    framework_version="1.12.0",
    py_version="py38",
    hyperparameters={"do_train": 1, "smp": 1, "shard_optimizer_state": 0, "epochs": 2},
    distribution={
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": smp_parameters}},
        "mpi": {"enabled": True, "processes_per_host": 8},
    },
).fit()
