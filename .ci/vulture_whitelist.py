"""Names vulture cannot see used (`.ci/run` checks for dead code with vulture).

Each is reached from outside the project's own code; a name here counts as used wherever it
is defined, so keep the list to what the comments explain. The rule classes are not listed:
`.ci/run` asks the registry for them.
"""

# ruff: noqa
# mypy: ignore-errors

# The public API (README "Python API").
list_rules

# smpfix.base.positions.PositionRecorder: LibCST's CodegenState hooks, called by codegen.
_.add_indent_tokens
_.add_token
_.pop_trailing_newline
_.before_codegen
_.after_codegen
_.record_syntactic_position

# Protocols named only in a TypeVar's bound, a string: `ParsedFile.answer` and `Program.answer`.
PerFile
PerProgram

# Parameters a caller's signature requires: `__exit__(*exc_info)`, click's `--stdio` option,
# and the tests' stand-ins for `Pool.map(..., chunksize)` and `os.replace(*args, **kwargs)`.
exc_info
stdio
chunksize
kwargs

# tests/test_execution_order.py: names the run an unpacking skips, for the reader.
init_a

# smpfix.job.shell_launcher: settings of a shlex.shlex lexer, read by the standard library.
_.whitespace_split
_.commenters

# smpfix.base.parse: the hook LibCST's dataclass constructors call on every node.
_.__post_init__
