"""Starts the review-classifier job: two ml.p3.16xlarge instances, two pipeline stages per replica.

Horovod averages gradients across the eight model replicas; the library starts it itself
because the configuration says so.
"""

import argparse

import sagemaker
from sagemaker.tensorflow import TensorFlow

parser = argparse.ArgumentParser()
parser.add_argument("--bucket", default="my-ml-bucket")
parser.add_argument("--wait", action="store_true")
cli = parser.parse_args()

role = sagemaker.get_execution_role()
session = sagemaker.Session()

smp_parameters = {
    "partitions": 2,
    "microbatches": 4,
    "pipeline": "interleaved",
    "optimize": "memory",
    "placement_strategy": "cluster",
    "horovod": True,
}
distribution = {
    "smdistributed": {"modelparallel": {"enabled": True, "parameters": smp_parameters}},
    "mpi": {
        "enabled": True,
        "processes_per_host": 8,
        "custom_mpi_options": "-verbose -x orte_base_help_aggregate=0 -x NCCL_DEBUG=WARN",
    },
}

estimator = TensorFlow(
    entry_point="train.py",
    source_dir="src",
    role=role,
    sagemaker_session=session,
    instance_type="ml.p3.16xlarge",
    instance_count=2,
    framework_version="2.4.1",
    py_version="py37",
    hyperparameters={"epochs": 3, "batch-size": 32, "seq-len": 256, "vocab-size": 32000},
    distribution=distribution,
    checkpoint_s3_uri=f"s3://{cli.bucket}/reviews/checkpoints",
    debugger_hook_config=False,
    base_job_name="reviews-smp-tf",
)

estimator.fit(
    {
        "train": f"s3://{cli.bucket}/reviews/tfrecords/train",
        "validation": f"s3://{cli.bucket}/reviews/tfrecords/validation",
    },
    wait=cli.wait,
)
