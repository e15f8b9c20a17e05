"""Fine-tunes GPT-J 6B on two ml.p4d.24xlarge: tensor parallel degree 8 inside each node,
two data-parallel replicas across the nodes."""

import sagemaker
from sagemaker.pytorch import PyTorch

session = sagemaker.Session()
role = sagemaker.get_execution_role()
bucket = session.default_bucket()

TENSOR_PARALLEL_DEGREE = 8

distribution = {
    "smdistributed": {
        "modelparallel": {
            "enabled": True,
            "parameters": {
                "ddp": True,
                "tensor_parallel_degree": TENSOR_PARALLEL_DEGREE,
                "pipeline_parallel_degree": 1,
                "microbatches": 1,
                "fp16": True,
                "delayed_parameter_initialization": True,
                "placement_strategy": "cluster",
            },
        }
    },
    "mpi": {"enabled": True, "processes_per_host": 8, "custom_mpi_options": "-x NCCL_DEBUG=WARN -x FI_PROVIDER=efa"},
}

estimator = PyTorch(
    entry_point="finetune_gptj.py",
    source_dir="scripts",
    role=role,
    instance_type="ml.p4d.24xlarge",
    instance_count=2,
    framework_version="1.12.1",
    py_version="py38",
    volume_size=400,
    checkpoint_s3_uri=f"s3://{bucket}/gptj-finetune/checkpoints",
    hyperparameters={
        "model_name_or_path": "EleutherAI/gpt-j-6B",
        "dataset_name": "wikitext",
        "dataset_config_name": "wikitext-103-raw-v1",
        "block_size": 2048,
        "per_device_train_batch_size": 4,
        "learning_rate": 2e-05,
        "max_steps": 2000,
        "save_steps": 500,
    },
    distribution=distribution,
    debugger_hook_config=False,
)

if __name__ == "__main__":
    estimator.fit({"weights": f"s3://{bucket}/gpt-j-6B/hf"})
