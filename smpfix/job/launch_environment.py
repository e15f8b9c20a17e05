"""Environment variables a launcher sets for the training processes, and where it sets them.

Tuning variables such as ``SMDDP_AG_SCRATCH_BUFFER_SIZE_BYTES`` or ``SMP_NCCL_THROTTLE_LIMIT``
reach the ranks two ways: the estimator's ``environment={...}`` dict, and ``-x NAME=VALUE``
flags in ``distribution["mpi"]["custom_mpi_options"]`` (which the SageMaker training toolkit
splits on whitespace and appends to ``mpirun``). The options string is often built piece by
piece (``opts += "-x ..."``); two pieces joined without a space glue a flag to the previous
value (``...=8192-x SMDDP_...``). ``glued_joins`` finds those joins, and the flags are read as
the string would be once the space is in place, so one missing space is one finding.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Optional

from smpfix.job.launcher import Launcher, Located


@dataclass(frozen=True)
class LaunchVariable:
    """``name=value`` as a launcher sets it; ``at`` is what a finding about it points at."""

    name: str
    value: Any
    at: Located
    where: str


@dataclass(frozen=True)
class GluedJoin:
    """Two literal pieces of an options string joined without whitespace before a flag."""

    left: Located
    right: Located


def glued_joins(options: Located) -> list[GluedJoin]:
    """Joins in a string built from literals where a piece starting with ``-`` follows a piece
    that does not end in whitespace (``"-verbose" + "-x A=1"``). A piece ending in ``=`` is a
    value being built (``"-x LIMIT=" + "-1"``), not a missing space."""
    pieces = [piece for piece in options.pieces if isinstance(piece.plain(), str) and piece.plain()]
    found = []
    for left, right in zip(pieces, pieces[1:]):
        before, after = left.plain(), right.plain()
        if after.startswith("-") and not before[-1].isspace() and not before.endswith("="):
            found.append(GluedJoin(left, right))
    return found


def spaced_text(options: Located) -> Optional[str]:
    """The options string with a space at every glued join (what the author meant), or None."""
    if not isinstance(options.plain(), str):
        return None
    if not options.pieces:
        return str(options.plain())
    glued = {id(join.right) for join in glued_joins(options)}
    return "".join(
        (" " if id(piece) in glued else "") + str(piece.plain())
        for piece in options.pieces
        if isinstance(piece.plain(), str)
    )


def custom_mpi_options(launcher: Launcher) -> Optional[Located]:
    mpi = launcher.mpi
    return mpi.get("custom_mpi_options") if mpi is not None else None


def launch_variables(launcher: Launcher) -> Iterator[LaunchVariable]:
    """Every variable set in ``environment`` or with ``-x NAME=VALUE``, in that order."""
    environment = launcher.keyword("environment")
    if environment is not None and isinstance(environment.value, dict):
        for name, located in environment.value.items():
            yield LaunchVariable(name, located.plain(), located, "`environment`")
    options = custom_mpi_options(launcher)
    text = spaced_text(options) if options is not None else None
    if options is None or text is None:
        return
    tokens = text.split()
    for flag, setting in zip(tokens, tokens[1:]):
        name, equals, value = setting.partition("=")
        if flag == "-x" and equals and name:
            yield LaunchVariable(
                name, value, _piece_with(options, f"{name}="), "`custom_mpi_options` (`-x`)"
            )


@dataclass(frozen=True)
class McaParameter:
    """``--mca NAME VALUE`` in ``custom_mpi_options``; ``at`` is the literal piece that names it."""

    name: str
    value: str
    at: Located


_MCA_FLAGS = ("-mca", "--mca", "-gmca", "--gmca")


def mca_parameters(options: Located) -> list[McaParameter]:
    """The Open MPI parameters set with ``--mca NAME VALUE``, in order, read as the toolkit
    splits the string (with a space at every glued join)."""
    text = spaced_text(options)
    if text is None:
        return []
    tokens = text.split()
    found: list[McaParameter] = []
    for index, flag in enumerate(tokens[:-2]):
        if flag in _MCA_FLAGS:
            name = tokens[index + 1]
            found.append(
                McaParameter(
                    name,
                    tokens[index + 2],
                    _piece_with(options, name, last=sum(p.name == name for p in found) > 0),
                )
            )
    return found


def _piece_with(options: Located, text: str, last: bool = False) -> Located:
    """The literal piece of ``options`` that contains ``text`` (the last such piece with
    ``last``), else the whole value."""
    for piece in reversed(options.pieces) if last else options.pieces:
        value = piece.plain()
        if isinstance(value, str) and text in value and piece.node is not None:
            return Located(value, piece.node, piece.node)
    return options


def integer(value: Any) -> Optional[int]:
    """The value as the library reads it with ``int(...)``; None when that would fail."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def sets_manual_init(launcher: Launcher) -> bool:
    """The launcher sets ``SMP_MANUAL_INIT=1`` for the job (``environment`` or ``-x``): the library
    then waits for the script's ``smp.init()`` instead of initialising on import."""
    return any(
        variable.name == "SMP_MANUAL_INIT" and str(variable.value).strip() == "1"
        for variable in launch_variables(launcher)
    )
