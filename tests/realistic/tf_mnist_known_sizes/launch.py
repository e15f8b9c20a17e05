"""Launch the TensorFlow MNIST job: two partitions, two microbatches, one instance."""

from sagemaker.tensorflow import TensorFlow

estimator = TensorFlow(  # expect: SMP827 hint
    entry_point="mnist_pipeline.py",
    source_dir="code",
    role="arn:aws:iam::111122223333:role/SageMakerRole",
    instance_type="ml.p3.16xlarge",
    instance_count=1,
    framework_version="2.6.0",
    py_version="py38",
    hyperparameters={"epochs": 3},
    distribution={
        "smdistributed": {
            "modelparallel": {
                "enabled": True,
                "parameters": {
                    "partitions": 2,
                    "microbatches": 2,
                    "pipeline": "interleaved",
                    "optimize": "memory",
                },
            }
        },
        "mpi": {"enabled": True, "processes_per_host": 2},
    },
)
estimator.fit()
