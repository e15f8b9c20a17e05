"""smpfix: find and fix misuses of SageMaker's model parallelism library (v1) before launch."""

__version__ = "0.2.0"
