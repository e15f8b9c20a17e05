"""Fine-tunes GPT-NeoX 20B with SMP v2 on two p4de.24xlarge instances.

Ported from the team's SMP v1 launcher: the torchrun launch and the v2 keys are right, but two
v1 settings came along, and one v2 key is misspelt.
"""

import os

import sagemaker
from sagemaker.pytorch import PyTorch

role = sagemaker.get_execution_role()
bucket = sagemaker.session.Session().default_bucket()

instance_type = "ml.p4de.24xlarge"
instance_count = 2
tensor_parallel_degree = 4
hybrid_shard_degree = 4

smp_parameters = {
    "tensor_parallel_degree": tensor_parallel_degree,
    "hybrid_shard_degree": hybrid_shard_degree,
    "sm_activation_offloading": True,  # expect: SMP014 warning
    "activation_loading_horizn": 4,  # expect: SMP010 error
    "microbatches": 4,  # expect: SMP003 hint
    "ddp": True,  # expect: SMP003 hint
}

hyperparameters = {
    "model_name": "EleutherAI/gpt-neox-20b",
    "max_context_width": 2048,
    "train_batch_size": 4,
    "epochs": 1,
    "lr": 1e-5,
    "grad_clip": 1.0,
    "activation_checkpointing": 1,
    "bf16": 1,
}

estimator = PyTorch(
    entry_point="finetune.py",
    source_dir=os.path.join(os.path.dirname(os.path.abspath(__file__)), "src"),
    role=role,
    instance_type=instance_type,
    instance_count=instance_count,
    framework_version="2.2.0",
    py_version="py310",
    hyperparameters=hyperparameters,
    distribution={
        "torch_distributed": {"enabled": True},
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": smp_parameters}},
    },
    checkpoint_s3_uri=f"s3://{bucket}/neox-20b-finetune/checkpoints",
    disable_profiler=True,
    debugger_hook_config=False,
)

if __name__ == "__main__":
    estimator.fit({"train": f"s3://{bucket}/datasets/alpaca/train"}, wait=False)
