"""The data pipeline: DataLoaders, samplers, which loaders feed a training step, and whether each
rank gets its own data.

May import the program's paths, ranks, order, flow, facts, steps and project modules, ``smpfix.job``
and ``smpfix.base``.
"""
