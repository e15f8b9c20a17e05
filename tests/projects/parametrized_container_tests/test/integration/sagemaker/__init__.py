"""Helpers shared by the SageMaker integration tests: they build and run the estimator."""

from sagemaker.pytorch import PyTorch


def invoke_pytorch_estimator(ecr_image, sagemaker_session, estimator_parameter, job_name=None):
    if "environment" not in estimator_parameter:
        estimator_parameter["environment"] = {"AWS_REGION": sagemaker_session.boto_region_name}
    pytorch = PyTorch(image_uri=ecr_image, sagemaker_session=sagemaker_session, **estimator_parameter)
    pytorch.fit(job_name=job_name)
    return pytorch
