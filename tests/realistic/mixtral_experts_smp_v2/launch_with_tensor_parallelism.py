"""A variant someone tried for longer sequences: tensor parallelism on top of the experts."""

import os

from sagemaker.pytorch import PyTorch

estimator = PyTorch(
    entry_point="train.py",
    source_dir=os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts"),
    role="arn:aws:iam::111122223333:role/SageMakerTraining",
    instance_type="ml.p4d.24xlarge",
    instance_count=4,
    framework_version="2.4.1",
    py_version="py311",
    hyperparameters={"max_context_width": 8192, "train_batch_size": 1, "distributed_backend": "nccl"},
    distribution={
        "torch_distributed": {"enabled": True},
        "smdistributed": {
            "modelparallel": {
                "enabled": True,
                "parameters": {
                    "tensor_parallel_degree": 2,
                    "expert_parallel_degree": 4,  # expect: SMP012 error
                    "hybrid_shard_degree": 8,
                    "sm_activation_offloading": False,
                },
            }
        },
    },
)

if __name__ == "__main__":
    estimator.fit(wait=False)
