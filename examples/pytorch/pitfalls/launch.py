"""Launch train_gpt.py on two ml.p4d.24xlarge instances with tensor parallelism.

This launcher has configuration mistakes smpfix finds; ../correct/launch.py is right.
"""

import sagemaker
from sagemaker.pytorch import PyTorch

session = sagemaker.Session()
role = sagemaker.get_execution_role()

smp_parameters = {
    "tensor_parallel_degree": 6,
    "pipeline_parallel_degree": 1,
    "microbatches": 4,
    "optimize": "speed",
}
smp_options = {"enabled": True, "parameters": smp_parameters}
mpi_options = {
    "enabled": True,
    "processes_per_host": 8,
    "custom_mpi_options": "-verbose -x NCCL_DEBUG=WARN",
}

estimator = PyTorch(
    entry_point="train_gpt.py",
    source_dir=".",
    role=role,
    sagemaker_session=session,
    instance_type="ml.p4d.24xlarge",
    instance_count=2,
    framework_version="1.12.1",
    py_version="py38",
    hyperparameters={"batch-size": 8, "epochs": 1, "save-every": 500},
    distribution={"smdistributed": {"modelparallel": smp_options}, "mpi": mpi_options},
    debugger_hook_config=False,
)
estimator.fit({"train": "s3://my-bucket/gpt/tokens/"})
