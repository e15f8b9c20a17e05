"""Ranks: rank guards, the ranks a guard lets through, and the rank and size calls an expression
reads.

May import the program's order, flow, facts, steps and project modules, ``smpfix.job`` and
``smpfix.base``.
"""
