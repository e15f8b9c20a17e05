"""Values: which definitions reach a use, where a value goes, what a call receives, what a name or
number holds.

May import the program's facts, steps and project modules, ``smpfix.job`` and ``smpfix.base``."""
