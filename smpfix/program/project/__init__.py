"""The other files of the checked project that one file's analysis looks into: parsed once, shared.

May import ``smpfix.program.facts``, ``smpfix.job`` and ``smpfix.base``."""
