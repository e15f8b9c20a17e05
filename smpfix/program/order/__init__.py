"""Execution order: which calls run, in which order and on which branch sides, who calls whom, when
the library is initialised.

May import the program's flow, facts, steps and project modules, ``smpfix.job`` and ``smpfix.base``.
"""
