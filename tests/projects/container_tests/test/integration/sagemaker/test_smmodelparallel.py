"""Integration tests: the model parallel MNIST script on SageMaker, on the image under test."""

import os

import pytest
from sagemaker.pytorch import PyTorch

RESOURCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "resources")
MNIST_PATH = os.path.join(RESOURCES, "mnist")
DEFAULT_TIMEOUT = 60


@pytest.mark.integration("smmodelparallel")
@pytest.mark.parametrize("instance_type", ["ml.p3.16xlarge"])
def test_smmodelparallel_mnist_multigpu(ecr_image, instance_type, sagemaker_session):
    estimator_parameters = {
        "entry_point": "smp_pt_mnist.py",
        "role": "SageMakerRole",
        "source_dir": MNIST_PATH,
        "instance_count": 1,
        "instance_type": instance_type,
        "hyperparameters": {"assert-losses": 1, "amp": 1, "ddp": 1, "data-dir": "data/training", "num-microbatches": 4},
        "distribution": {
            "smdistributed": {
                "modelparallel": {
                    "enabled": True,
                    "parameters": {"partitions": 2, "microbatches": 4, "optimize": "speed", "pipeline": "interleaved", "ddp": True},
                }
            },
            "mpi": {"enabled": True, "processes_per_host": 8},
        },
    }
    pytorch = PyTorch(image_uri=ecr_image, sagemaker_session=sagemaker_session, **estimator_parameters)
    pytorch.fit(job_name=sagemaker_session.unique_name("test-pt-smdmp"))
