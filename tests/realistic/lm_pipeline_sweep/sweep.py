"""Launches the pipeline-parallel language model: a baseline, a sweep of microbatch counts, and a
run on two instances. Run from this folder after uploading the token shards."""

import time

import sagemaker
from sagemaker.pytorch import PyTorch

session = sagemaker.Session()
role = sagemaker.get_execution_role()
bucket = session.default_bucket()
stamp = time.strftime("%Y%m%d-%H%M%S")

inputs = {
    "train": f"s3://{bucket}/lm/tokens/train",
    "validation": f"s3://{bucket}/lm/tokens/validation",
}
hyperparameters = {
    "train_batch_size": 32,
    "val_batch_size": 32,
    "context": 512,
    "layers": 24,
    "hidden": 1024,
    "max_steps": 20000,
}

# Eight pipeline stages fill one ml.p3.16xlarge: one replica.
smp_parameters = {
    "pipeline_parallel_degree": 8,
    "microbatches": 8,
    "placement_strategy": "cluster",
    "pipeline": "interleaved",
    "optimize": "speed",
    "ddp": True,
}

mpioptions = "-verbose --mca orte_base_help_aggregate 0 "
mpioptions += "--mca btl_vader_single_copy_mechanism none "
mpioptions += "-x NCCL_DEBUG=WARN"

baseline = PyTorch(
    entry_point="train_lm.py",
    source_dir="code",
    role=role,
    instance_type="ml.p3.16xlarge",
    instance_count=1,
    framework_version="1.12.0",
    py_version="py38",
    hyperparameters=hyperparameters,
    checkpoint_s3_uri=f"s3://{bucket}/lm/{stamp}/baseline/checkpoints",
    debugger_hook_config=False,
    distribution={
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": smp_parameters}},
        "mpi": {"enabled": True, "processes_per_host": 8, "custom_mpi_options": mpioptions},
    },
    base_job_name="lm-pp8-baseline",
)
baseline.fit(inputs, wait=False)

# How the number of microbatches changes throughput, all runs at once.
SWEEP_CHECKPOINTS = "s3://lm-experiments/pipeline-sweep/checkpoints"
for microbatches in (4, 16):
    job = PyTorch(
        entry_point="train_lm.py",
        source_dir="code",
        role=role,
        instance_type="ml.p3.16xlarge",
        instance_count=1,
        framework_version="1.12.0",
        py_version="py38",
        hyperparameters={**hyperparameters, "max_steps": 2000},
        checkpoint_s3_uri=SWEEP_CHECKPOINTS,  # expect: SMP830 warning
        debugger_hook_config=False,
        distribution={
            "smdistributed": {"modelparallel": {"enabled": True, "parameters": {**smp_parameters, "microbatches": microbatches}}},
            "mpi": {"enabled": True, "processes_per_host": 8, "custom_mpi_options": mpioptions},
        },
        base_job_name=f"lm-pp8-mb{microbatches}",
    )
    job.fit(inputs, wait=False)

# Two instances: the same pipeline twice, with the optimizer state sharded over the replicas.
scale_out_parameters = {
    "pipeline_parallel_degree": 8,  # expect: SMP822 error
    "microbatches": 8,
    "placement_strategy": "cluster",
    "shard_optimizer_state": True,
}
scale_out = PyTorch(
    entry_point="train_lm.py",
    source_dir="code",
    role=role,
    instance_type="ml.p3.16xlarge",
    instance_count=2,
    framework_version="1.12.0",
    py_version="py38",
    hyperparameters=hyperparameters,
    environment={"SMP_DISABLE_D2D": "1"},  # expect: SMP828 hint
    checkpoint_s3_uri=f"s3://{bucket}/lm/{stamp}/scale-out/checkpoints",
    debugger_hook_config=False,
    distribution={
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": scale_out_parameters}},
        "mpi": {"enabled": True, "processes_per_host": 8, "custom_mpi_options": mpioptions},
    },
    base_job_name="lm-pp8-2x",
)
scale_out.fit(inputs, wait=False)
