"""Submits GPT-2 training with tensor parallelism on the Hugging Face PyTorch 1.10 container.

That container ships SMP 1.7 (1.8 in its Hugging Face build): `fp16` does not exist yet, so
half precision is `fp16_params`, and the checkpoint API is `smp.save`/`smp.load`.
"""


import sagemaker
from sagemaker.huggingface import HuggingFace

role = sagemaker.get_execution_role()
session = sagemaker.session.Session()

instance_type = "ml.p3.16xlarge"
instance_count = 2
processes_per_host = 8

hyperparameters = {
    "max_steps": 5000,
    "seed": 12345,
    "fp16": 1,
    "lr": 0.00015,
    "lr_decay_iters": 125000,
    "min_lr": 0.00001,
    "warmup": 0.01,
    "logging_freq": 10,
    "max_context_width": 1024,
    "hidden_width": 768,
    "num_layers": 12,
    "num_heads": 12,
    "train_batch_size": 4,
    "val_batch_size": 4,
    "tensor_parallel_degree": 4,
    "pipeline_parallel_degree": 1,
    "shard_optimizer_state": 1,
    "prescaled_batch": 0,
    "checkpoint_freq": 1000,
}

# Memory over throughput: one tensor-parallel NCCL call in flight at a time.
mpioptions = "-x NCCL_DEBUG=WARN -x SMDEBUG_LOG_LEVEL=ERROR "
mpioptions += "-x SMP_DISABLE_D2D=1 -x SMP_D2D_GPU_BUFFER_SIZE_BYTES=1 -x SMP_NCCL_THROTTLE_LIMIT=1 "
mpioptions += "-x FI_EFA_USE_DEVICE_RDMA=1 -x FI_PROVIDER=efa -x RDMAV_FORK_SAFE=1"

smp_estimator = HuggingFace(
    entry_point="train_gpt.py",
    source_dir="code",
    role=role,
    instance_type=instance_type,
    instance_count=instance_count,
    sagemaker_session=session,
    transformers_version="4.17",
    pytorch_version="1.10",
    py_version="py38",
    hyperparameters=hyperparameters,
    debugger_hook_config=False,
    disable_profiler=True,
    distribution={
        "mpi": {
            "enabled": True,
            "process_per_host": processes_per_host,  # expect: SMP812 error
            "custom_mpi_options": mpioptions,
        },
        "smdistributed": {
            "modelparallel": {
                "enabled": True,
                "parameters": {
                    "ddp": True,
                    "tensor_parallel_degree": 4,
                    # partitions is required by the SageMaker SDK of the time
                    "partitions": 1,
                    "shard_optimizer_state": True,
                    "prescaled_batch": False,
                    "fp16_params": True,
                    "optimize": "speed",
                    "auto_partition": True,
                    "default_partition": 0,
                },
            }
        },
    },
)

if __name__ == "__main__":
    smp_estimator.fit(inputs={"train": "s3://my-bucket/openwebtext/train", "test": "s3://my-bucket/openwebtext/val"}, logs=True)
