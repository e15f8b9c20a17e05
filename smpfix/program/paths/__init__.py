"""Which branches a script takes in the job: conditions folded to values, and the verdict on each
node's path.

May import the program's order, flow, facts, steps and project modules, ``smpfix.job`` and
``smpfix.base``.
"""
