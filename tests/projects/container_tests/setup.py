# A container repository whose pytest integration tests start training scripts from
# test/resources on SageMaker; the paths are built from the test module's __file__.
from setuptools import setup

setup(name="training-containers-tests", version="0.1.0")
