"""Writing code the way the file already writes it: references to the library, added arguments,
rewritten rank calls.

May import ``smpfix.program``, ``smpfix.job`` and ``smpfix.base``; rules use it to build their fixes
and messages.
"""
