"""Launch BERT-large pre-training with pipeline parallelism over two partitions."""

import sagemaker
from sagemaker.pytorch import PyTorch

role = sagemaker.get_execution_role()

hyperparameters = {
    "input_dir": "/opt/ml/input/data/train",
    "output_dir": "./checkpoints",
    "config_file": "bert_config.json",
    "bert_model": "bert-large-uncased",
    "train_batch_size": 48,
    "max_seq_length": 128,
    "max_predictions_per_seq": 20,
    "max_steps": 7038,
    "warmup_proportion": 0.2843,
    "num_steps_per_checkpoint": 200,
    "learning_rate": 6e-3,
    "seed": 12439,
    "fp16": 1,
    "do_train": 1,
}

mpi_options = {"enabled": True, "processes_per_host": 8}
smp_options = {
    "enabled": True,
    "parameters": {
        "microbatches": 12,
        "placement_strategy": "spread",
        "pipeline": "interleaved",
        "optimize": "speed",
        "partitions": 2,
        "ddp": True,
    },
}

estimator = PyTorch(
    entry_point="pretrain.py",
    source_dir="bert_example",
    role=role,
    instance_type="ml.p3.16xlarge",
    instance_count=1,
    framework_version="1.6.0",
    py_version="py36",
    hyperparameters=hyperparameters,
    distribution={"smdistributed": {"modelparallel": smp_options}, "mpi": mpi_options},
)
estimator.fit({"train": "s3://my-bucket/bert/hdf5_lower_case_1_seq_len_128/"})
