"""Launches BERT-large pre-training as a two-stage pipeline on one ml.p3.16xlarge.

Eight GPUs: two pipeline stages, four data-parallel replicas, twelve microbatches.
"""

import sagemaker
from sagemaker.pytorch import PyTorch

session = sagemaker.Session()
role = sagemaker.get_execution_role()
data = f"s3://{session.default_bucket()}/bert/hdf5_lower_case_seq_len_128"

smp_parameters = {
    "optimize": "speed",
    "microbatches": 12,
    "partitions": 2,
    "ddp": True,
    "pipeline": "interleaved",
    "placement_strategy": "cluster",
    "memory_weight": 0.3,
}

hyperparameters = {
    "input_dir": "/opt/ml/input/data/train",
    "output_dir": "/opt/ml/checkpoints",
    "config_file": "bert_config.json",
    "train_batch_size": 48,
    "max_seq_length": 128,
    "max_predictions_per_seq": 20,
    "max_steps": 7038,
    "warmup_proportion": 0.2843,
    "num_steps_per_checkpoint": 200,
    "learning_rate": 0.006,
    "seed": 12439,
    "steps_this_run": 500,
    "do_train": 1,
    "use_sequential": 1,
    "fp16": 1,
    "smp": 1,
    "save_full": 1,
}

estimator = PyTorch(  # expect: SMP827 hint
    entry_point="pretrain_bert.py",
    source_dir="code",
    role=role,
    instance_type="ml.p3.16xlarge",
    instance_count=1,
    volume_size=200,
    framework_version="1.12.0",
    py_version="py38",
    hyperparameters=hyperparameters,
    max_run=3 * 60 * 60,
    distribution={
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": smp_parameters}},
        "mpi": {"enabled": True, "processes_per_host": 8, "custom_mpi_options": "-verbose --mca orte_base_help_aggregate 0"},
    },
)

if __name__ == "__main__":
    estimator.fit({"train": data})
