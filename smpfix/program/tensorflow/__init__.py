"""The TensorFlow flavour: Horovod, Keras models and metrics, ``tf.data`` pipelines, distributed
models of other files.

May import the program's paths, ranks, order, flow, facts, steps and project modules, ``smpfix.job``
and ``smpfix.base``.
"""
