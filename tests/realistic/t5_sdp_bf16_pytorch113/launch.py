"""Fine-tunes FLAN-T5 with sharded data parallelism and bf16 on two p4d.24xlarge instances.

`framework_version="1.13"` is the PyTorch 1.13.1 container, whose library is SMP 1.14 or, in
its later builds, 1.15.
"""

import time

import sagemaker
from sagemaker.pytorch import PyTorch

role = sagemaker.get_execution_role()
session = sagemaker.session.Session()
bucket = session.default_bucket()

instance_type = "ml.p4d.24xlarge"
instance_count = 2
processes_per_host = 8
sharded_data_parallel_degree = 16  # every GPU of both instances holds a shard

hyperparameters = {
    "model_name": "google/flan-t5-xl",
    "max_source_length": 512,
    "max_target_length": 128,
    "train_batch_size": 4,
    "val_batch_size": 8,
    "epochs": 3,
    "lr": 1e-4,
    "weight_decay": 0.0,
    "warmup_steps": 200,
    "checkpoint_freq": 500,
    "activation_checkpointing": 1,
    "resume_from": "/opt/ml/input/data/pretrained",
}

# SMDDP AllGather buffers, multiples of 8192; each flag starts with a space.
mpioptions = "-x NCCL_DEBUG=WARN -x SMDEBUG_LOG_LEVEL=ERROR"
mpioptions += " -x SMDDP_AG_SCRATCH_BUFFER_SIZE_BYTES=8192"
mpioptions += " -x SMDDP_AG_SORT_BUFFER_SIZE_BYTES=8192"

smp_estimator = PyTorch(
    entry_point="finetune.py",
    source_dir="src",
    role=role,
    instance_type=instance_type,
    instance_count=instance_count,
    sagemaker_session=session,
    framework_version="1.13",
    py_version="py39",
    hyperparameters=hyperparameters,
    checkpoint_s3_uri=f"s3://{bucket}/flan-t5-sdp/{int(time.time())}/checkpoints",
    debugger_hook_config=False,
    disable_profiler=True,
    distribution={
        "mpi": {"enabled": True, "processes_per_host": processes_per_host, "custom_mpi_options": mpioptions},
        "smdistributed": {
            "modelparallel": {
                "enabled": True,
                "parameters": {
                    "ddp": True,
                    "skip_tracing": True,
                    "delayed_parameter_initialization": True,
                    "offload_activations": True,
                    "activation_loading_horizon": 4,
                    "sharded_data_parallel_degree": sharded_data_parallel_degree,
                    "bf16": True,
                    # partitions is required by the SageMaker SDK of the time
                    "partitions": 1,
                },
            }
        },
    },
)

if __name__ == "__main__":
    smp_estimator.fit(inputs={"train": f"s3://{bucket}/samsum/train", "val": f"s3://{bucket}/samsum/val", "pretrained": f"s3://{bucket}/flan-t5-xl-smp"})
