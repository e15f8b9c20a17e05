"""Pre-trains Mixtral 8x7B with SMP v2 expert parallelism on eight p4d.24xlarge instances.

The experts are split over pairs of GPUs (`expert_parallel_degree` 2), and FSDP shards what
each pair holds over the 32 GPUs that hold the same experts. The backend is SMDDP, chosen in
the script from a hyperparameter.
"""

import os
from datetime import datetime

import sagemaker
from sagemaker.pytorch import PyTorch

session = sagemaker.session.Session()
role = sagemaker.get_execution_role()
output = f"s3://{session.default_bucket()}/mixtral-moe"

instance_count = 8
expert_parallel_degree = 2

hyperparameters = {
    "hidden_width": 4096,
    "num_layers": 32,
    "num_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "num_local_experts": 8,
    "max_context_width": 2048,
    "train_batch_size": 2,
    "max_steps": 5000,
    "lr": 1e-4,
    "checkpoint_freq": 500,
    "distributed_backend": "smddp",
    "moe_load_balancing": "sinkhorn",
    "activation_checkpointing": 1,
}

estimator = PyTorch(
    entry_point="train.py",
    source_dir=os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts"),
    role=role,
    instance_type="ml.p4d.24xlarge",
    instance_count=instance_count,
    framework_version="2.4.1",
    py_version="py311",
    hyperparameters=hyperparameters,
    checkpoint_s3_uri=f"{output}/checkpoints",
    output_path=output,
    distribution={
        "torch_distributed": {"enabled": True},
        "smdistributed": {
            "modelparallel": {
                "enabled": True,
                "parameters": {
                    "hybrid_shard_degree": 32,
                    "expert_parallel_degree": expert_parallel_degree,
                    "sm_activation_offloading": False,
                },
            }
        },
    },
    base_job_name=f"mixtral-ep{expert_parallel_degree}",
    max_run=3 * 24 * 3600,
)

if __name__ == "__main__":
    estimator.fit({"train": f"{output}/data/train"}, job_name=f"mixtral-{datetime.now():%Y%m%d-%H%M}", wait=False)
