"""Launches GPT-2 pre-training with tensor, pipeline and optimizer-state parallelism.

Two ml.p4d.24xlarge instances, 16 GPUs: tensor parallel degree 4, pipeline degree 2, so
each model replica spans 8 GPUs and there are two data-parallel replicas.
"""

import os

import sagemaker
from sagemaker.pytorch import PyTorch

session = sagemaker.Session()
role = sagemaker.get_execution_role()
bucket = session.default_bucket()

hyperparameters = {
    "max_steps": 20000,
    "seed": 4217,
    "train_batch_size": 8,
    "val_batch_size": 4,
    "max_context_width": 1024,
    "hidden_width": 1536,
    "num_layers": 36,
    "num_heads": 24,
    "lr": 0.00015,
    "min_lr": 1e-05,
    "lr_decay_iters": 18000,
    "warmup": 0.01,
    "fp16": 1,
    "shard_optimizer_state": 1,
    "skip_full_optimizer": 1,
    "tensor_parallel_degree": 4,
    "pipeline_parallel_degree": 2,
    "microbatches": 4,
    "checkpoint_freq": 1000,
    "save_final_full_model": 1,
    "init_from_hf": 1,
    "use_distributed_transformer": 1,
    "activation_checkpointing": 1,
    "prescaled_batch": 0,
}

smp_parameters = {
    "ddp": True,
    "tensor_parallel_degree": 4,
    "pipeline_parallel_degree": 2,
    "microbatches": 4,
    "placement_strategy": "cluster",
    "pipeline": "interleaved",
    "optimize": "speed",
    "shard_optimizer_state": True,
    "fp16": True,
    "prescaled_batch": False,  # expect: SMP808 hint
}

estimator = PyTorch(
    entry_point="train_gpt.py",
    source_dir="code",
    role=role,
    instance_type="ml.p4d.24xlarge",
    instance_count=2,
    framework_version="1.12.1",
    py_version="py38",
    volume_size=500,
    checkpoint_s3_uri=f"s3://{bucket}/gpt2-tp/checkpoints",
    checkpoint_local_path="/opt/ml/checkpoints",
    hyperparameters=hyperparameters,
    debugger_hook_config=False,
    distribution={
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": smp_parameters}},
        "mpi": {
            "enabled": True,
            "processes_per_host": 8,
            "custom_mpi_options": "-verbose -x NCCL_DEBUG=WARN -x RDMAV_FORK_SAFE=1 -x FI_EFA_USE_DEVICE_RDMA=1",
        },
    },
)

if __name__ == "__main__":
    estimator.fit({"train": f"s3://{bucket}/openwebtext/train", "test": f"s3://{bucket}/openwebtext/val"}, wait=False)
    print(os.environ.get("AWS_REGION", "unknown region"), estimator.latest_training_job.name)
