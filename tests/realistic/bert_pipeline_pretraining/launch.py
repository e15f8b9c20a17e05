"""Starts BERT-large pretraining on two p3.16xlarge instances: two pipeline stages per model
replica, so 16 GPUs give 8 data-parallel replicas."""

import sagemaker
from sagemaker.pytorch import PyTorch

role = sagemaker.get_execution_role()
session = sagemaker.Session()
bucket = session.default_bucket()

mpi_options = "-verbose --mca orte_base_help_aggregate 0 -x NCCL_DEBUG=WARN"

smp_parameters = {
    "partitions": 2,
    "microbatches": 8,
    "pipeline": "interleaved",
    "optimize": "speed",
    "placement_strategy": "cluster",
    "ddp": True,
}

hyperparameters = {
    "input_dir": "/opt/ml/input/data/train",
    "output_dir": "/opt/ml/checkpoints",
    "config_file": "bert_config.json",
    "train_batch_size": 64,
    "eval_batch_size": 32,
    "max_seq_length": 128,
    "max_predictions_per_seq": 20,
    "learning_rate": 6e-3,
    "warmup_proportion": 0.2843,
    "max_steps": 7038,
    "steps_per_checkpoint": 200,
    "seed": 12439,
}

estimator = PyTorch(
    entry_point="pretrain_bert.py",
    source_dir="code",
    role=role,
    instance_type="ml.p3.16xlarge",
    instance_count=2,
    framework_version="1.12.0",
    py_version="py38",
    volume_size=200,
    hyperparameters=hyperparameters,
    checkpoint_s3_uri=f"s3://{bucket}/bert-pretraining/checkpoints",  # expect: SMP827 warning
    distribution={
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": smp_parameters}},
        "mpi": {"enabled": True, "processes_per_host": 8, "custom_mpi_options": mpi_options},
    },
    max_run=24 * 60 * 60,
)

if __name__ == "__main__":
    estimator.fit({"train": f"s3://{bucket}/bert-pretraining/hdf5/phase1"}, wait=False)
