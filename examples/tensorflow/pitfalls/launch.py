"""Launch train_resnet.py on two ml.p3.16xlarge instances: two pipeline stages, Horovod across replicas.

The TensorFlow containers ship SMP v1 1.0 to 1.4.0; TensorFlow 2.4.1 ships SMP 1.2. This
launcher has configuration mistakes smpfix finds; ../correct/launch.py is right.
"""

import sagemaker
from sagemaker.tensorflow import TensorFlow

session = sagemaker.Session()
role = sagemaker.get_execution_role()

smp_parameters = {
    "partitions": 2,
    "microbatches": 4,
    "pipeline": "interleaved",
    "optimize": "speed",
    "horovod": True,
    "ddp": True,
    "active_microbatches": 2,
}

estimator = TensorFlow(
    entry_point="train_resnet.py",
    source_dir=".",
    role=role,
    sagemaker_session=session,
    instance_type="ml.p3.16xlarge",
    instance_count=2,
    framework_version="2.4.1",
    py_version="py37",
    hyperparameters={"batch-size": 64, "epochs": 10},
    distribution={
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": smp_parameters}},
        "mpi": {"enabled": True, "processes_per_host": 8, "custom_mpi_options": "-verbose -x NCCL_DEBUG=WARN"},
    },
    debugger_hook_config=False,
)
estimator.fit({"train": "s3://my-bucket/images/train/", "test": "s3://my-bucket/images/test/"})
