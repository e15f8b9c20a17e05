"""The objects a training script builds and hands to the library: the wrapped model and optimizer,
their classes, contexts and checkpoints.

May import the program's paths, ranks, order, flow, facts, steps and project modules, ``smpfix.job``
and ``smpfix.base``.
"""
