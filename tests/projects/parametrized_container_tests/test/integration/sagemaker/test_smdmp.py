"""Model parallel integration tests, one launch per parametrized script."""

import os

import pytest

from . import invoke_pytorch_estimator

RESOURCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "resources")
MNIST_PATH = os.path.join(RESOURCES, "mnist")
GPT2_PATH = os.path.join(RESOURCES, "gpt2")


def _test_smp(ecr_image, sagemaker_session, estimator_parameter):
    invoke_pytorch_estimator(ecr_image, sagemaker_session, estimator_parameter, job_name="smdmp")


@pytest.mark.skip_cpu
@pytest.mark.parametrize("test_script, num_processes", [("smp_pt_mnist.py", 8)])
def test_smdmp_mnist_multigpu(ecr_image, sagemaker_session, test_script, num_processes):
    estimator_parameter = {
        "entry_point": test_script,
        "role": "SageMakerRole",
        "source_dir": MNIST_PATH,
        "instance_count": 1,
        "instance_type": "ml.p3.16xlarge",
        "hyperparameters": {"assert-losses": 1, "data-dir": "data/training", "epochs": 2},
        "distribution": {
            "smdistributed": {
                "modelparallel": {
                    "enabled": True,
                    "parameters": {
                        "partitions": 2,
                        "microbatches": 4,
                        "optimize": "speed",
                        "pipeline": "interleaved",
                        "ddp": True,
                    },
                }
            },
            "mpi": {"enabled": True, "processes_per_host": num_processes},
        },
    }
    _test_smp(ecr_image, sagemaker_session, estimator_parameter)


@pytest.mark.skip_cpu
@pytest.mark.parametrize("test_script, num_processes", [("train_gpt_fp16.py", 8)])
def test_smdmp_gpt2_fp16(ecr_image, sagemaker_session, test_script, num_processes):
    estimator_parameter = {
        "entry_point": test_script,
        "role": "SageMakerRole",
        "source_dir": GPT2_PATH,
        "instance_count": 1,
        "instance_type": "ml.p4d.24xlarge",
        "distribution": {
            "smdistributed": {
                "modelparallel": {
                    "enabled": True,
                    "parameters": {"partitions": 1, "tensor_parallel_degree": 2, "ddp": True, "fp16": True},
                }
            },
            "mpi": {"enabled": True, "processes_per_host": num_processes},
        },
    }
    invoke_pytorch_estimator(ecr_image, sagemaker_session, estimator_parameter)
