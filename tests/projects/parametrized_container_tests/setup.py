from setuptools import setup

setup(name="sagemaker-pytorch-training-tests", packages=[])
