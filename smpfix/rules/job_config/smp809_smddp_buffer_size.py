"""SMP809: the SMDDP AllGather buffer variables: sizes, where they have effect, how they are
passed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

import libcst as cst

from smpfix.base.edits import ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.base.flavour import ONLY_PYTORCH
from smpfix.base.literals import UNKNOWN
from smpfix.base.walker import iter_nodes
from smpfix.job.launch_environment import (
    GluedJoin,
    LaunchVariable,
    custom_mpi_options,
    glued_joins,
    integer,
    launch_variables,
)
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView, config_views
from smpfix.rules.rule import FixAvailability, PendingFix, TensorParallelism
from smpfix.rules.titles import snippet

BUFFER_VARIABLES = ("SMDDP_AG_SCRATCH_BUFFER_SIZE_BYTES", "SMDDP_AG_SORT_BUFFER_SIZE_BYTES")
_GRANULE = 8192
_SMDDP_INSTANCE = "ml.p4d.24xlarge"
# The release that brought SMDDP collectives (and with them these variables) to the library.
SMDDP_SINCE = (1, 13)


class SmddpBufferSize(ConfigRule):
    flavours = ONLY_PYTORCH
    summary = (
        "`SMDDP_AG_SCRATCH_BUFFER_SIZE_BYTES` / `SMDDP_AG_SORT_BUFFER_SIZE_BYTES` must be multiples"
        " of 8192, matter only where SMDDP collectives run, and `-x` flags added to"
        " `custom_mpi_options` need a separating space."
    )
    fix_availability = FixAvailability.SAFE
    tensor_parallelism = TensorParallelism.CONFIGURED
    finding_ranges = {"buffer sizes": (SMDDP_SINCE, None)}

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        if view.launcher is None:
            return
        for variable in launch_variables(view.launcher):
            if variable.name in BUFFER_VARIABLES:
                yield from _buffer(variable, view)

    def leave_Module(self, node: cst.Module) -> None:
        super().leave_Module(node)
        if not self.program.facts.estimator_calls or not config_views(self.program):
            return  # no SMP v1 launcher here (an SMP v2 one gets no v1 rule)
        joins: dict[int, GluedJoin] = {}
        for view in config_views(self.program):
            options = custom_mpi_options(view.launcher) if view.launcher is not None else None
            for join in glued_joins(options) if options is not None else ():
                joins.setdefault(id(join.right.node), join)
        direct = _direct_operands(node) if joins else set()
        for join in joins.values():
            if join.right.node is not None:
                title, explanation = _glued_message(join)
                self.report(
                    join.right.node,
                    title,
                    explanation=explanation,
                    severity=Severity.WARNING,
                    fix=_space_fix(join, direct),
                )
        for statement, target in _strings_added_to_dicts(self):
            self.report(
                statement,
                f'`{target} += "..."` adds a string to a dict: TypeError at launch',
                explanation=(
                    f"`{target}` is a dict, so adding a string to it raises TypeError when the"
                    " launcher runs, and the MPI flags never reach the job: they belong in the"
                    f' options string, `{target}["custom_mpi_options"]`, each flag starting with a'
                    f' space. Write `{target}["custom_mpi_options"] += " -x NAME=VALUE"`.'
                ),
                severity=Severity.ERROR,
            )


def _strings_added_to_dicts(rule: ConfigRule) -> Iterator[tuple[cst.AugAssign, str]]:
    """``mpi_options += "-x ..."`` where ``mpi_options`` is bound (once) to a dict display: the
    documentation's own sample does this."""
    for statement in rule.program.facts.statements:
        if type(statement) is not cst.SimpleStatementLine:
            continue
        for small in statement.body:
            if not (
                type(small) is cst.AugAssign
                and type(small.operator) is cst.AddAssign
                and type(small.target) is cst.Name
            ):
                continue
            added = rule.program.facts.literal(small.value)
            bound = rule.program.facts.names.assignment(small.target.value, small.target)
            flags = isinstance(added, str) and ("-x" in added or "--mca" in added)
            if (
                flags
                and bound is not None
                and isinstance(rule.program.facts.literal(bound.value), dict)
            ):
                yield small, small.target.value


def _glued_message(join: GluedJoin) -> tuple[str, str]:
    """The title and explanation of a finding about a piece glued to the one before it."""
    before, after = str(join.left.plain()), str(join.right.plain())
    glued = f"{before[-12:]}{after[:12]}".replace("\n", " ")
    flag = snippet(after.split()[0], 20)
    return (
        f"custom_mpi_options piece {flag} is joined to the previous one without a space",
        f"Joined, the two pieces give '…{glued}…': the SageMaker toolkit splits the options on"
        " whitespace, so mpirun receives one mangled token (the previous value runs into the"
        " flag) and the variable is not set, or the job fails to launch. Start the piece with a"
        " space.",
    )


def _space_fix(join: GluedJoin, direct: set[int]) -> Optional[PendingFix]:
    """Insert a space at the start of the right-hand literal, when it is a plain string literal
    written in the ``+`` or ``+=`` itself (one bound to a name may be used elsewhere too)."""
    node = join.right.node
    if type(node) is not cst.SimpleString or id(node) not in direct:
        return None
    text = f"{node.prefix}{node.quote} {node.raw_value}{node.quote}"
    return PendingFix(Applicability.SAFE, "Insert the missing space", (ReplaceNode(node, text),))


def _direct_operands(module: cst.Module) -> set[int]:
    """The expressions written as operands of a ``+`` or as the value of a ``+=``."""
    found: set[int] = set()
    for child in iter_nodes(module):
        if type(child) is cst.BinaryOperation and type(child.operator) is cst.Add:
            found.update((id(child.left), id(child.right)))
        elif type(child) is cst.AugAssign and type(child.operator) is cst.AddAssign:
            found.add(id(child.value))
    return found


def _buffer(variable: LaunchVariable, view: ConfigView) -> Iterator[ConfigProblem]:
    if variable.value is UNKNOWN:
        return
    where = f"{variable.name} is set in {variable.where}"
    reasons = _no_effect(view)
    if reasons:
        # Where SMDDP collectives cannot run, the value does not matter: that is the one finding.
        yield ConfigProblem(
            variable.at,
            f"{variable.name} has no effect in this job",
            Severity.HINT,
            explanation=(
                "SMDDP AllGather collectives run only with sharded data parallelism on more than"
                " one ml.p4d.24xlarge instance (SMP 1.13 or later, without tensor parallelism,"
                ' ddp_dist_backend not "nccl"). Remove it, or change the job.'
            ),
            evidence=(where, f"this job has {'; '.join(reasons)}"),
        )
        return
    size = integer(variable.value)
    if size is None:
        yield ConfigProblem(
            variable.at,
            f"{variable.name} {snippet(repr(variable.value), 20)} is not a whole number of bytes",
            Severity.ERROR,
            explanation=(
                "SMDDP accepts multiples of 8192 (the default is"
                f" {16 * 1024 * 1024 if 'SCRATCH' in variable.name else 128 * 1024 * 1024}). Write"
                " the size in bytes."
            ),
            evidence=(where,),
            since=SMDDP_SINCE,
            implied=SMDDP_SINCE,
        )
        return
    if size % _GRANULE:
        lower, upper = size // _GRANULE * _GRANULE, (size // _GRANULE + 1) * _GRANULE
        nearest = f"{upper}" if lower <= 0 else f"{lower} or {upper}"
        yield ConfigProblem(
            variable.at,
            f"{variable.name} {size} is not a multiple of 8192",
            Severity.ERROR,
            explanation=(
                f"SMDDP accepts only multiples of 8192 for its AllGather buffers. Use {nearest}."
            ),
            evidence=(where, f"{size} = {size // _GRANULE} × 8192 + {size % _GRANULE}"),
            since=SMDDP_SINCE,
            implied=SMDDP_SINCE,
        )


def _no_effect(view: ConfigView) -> list[str]:
    """Why SMDDP collectives cannot run in this job (only reasons smpfix knows for certain)."""
    reasons = []
    count = view.launch("instance_count")
    if isinstance(count, int) and not isinstance(count, bool) and count <= 1:
        reasons.append(f"instance_count {count}")
    instance = view.launch("instance_type")
    if isinstance(instance, str) and instance != _SMDDP_INSTANCE:
        reasons.append(f"instance_type {instance!r}")
    sdp = view.int_value("sharded_data_parallel_degree")
    if sdp is not None and sdp <= 1:
        reasons.append(f"sharded_data_parallel_degree {sdp} (sharding off)")
    tp = view.int_value("tensor_parallel_degree")
    if tp is not None and tp > 1:
        reasons.append(f"tensor_parallel_degree {tp} (sharding with tensor parallelism uses NCCL)")
    if view.value("ddp_dist_backend") == "nccl":
        reasons.append('ddp_dist_backend "nccl"')
    version = view.smp_version
    if version is not None and version.before(SMDDP_SINCE):
        reasons.append(f"{version.describe()}, older than 1.13, which brought SMDDP collectives")
    return reasons
