"""SMP828: ``custom_mpi_options`` that set an Open MPI parameter twice, and library variables
that may not reach the other instances.

The SageMaker training toolkit builds the ``mpirun`` command with its own ``-mca`` parameters
and appends the options split on whitespace. Open MPI refuses a parameter listed twice on one
command line ("The following MCA parameter has been listed multiple times"), so repeating one
in the options, or repeating one the toolkit sets, stops the launch. The developer guide names
``btl_vader_single_copy_mechanism`` as such a default, but the toolkit's source does not pass
it and the official MNIST notebook passes it on purpose, so it is only reported when the
options list it twice.

Variables set only in the estimator's ``environment`` reach the processes ``mpirun`` starts on
other instances only if forwarded with ``-x``: the toolkit forwards its own set and the AWS
credentials, and the official examples pass the library's variables with ``-x``. That they
may be missing on remote ranks is inferred from the toolkit, not documented: a hint.
"""

from __future__ import annotations

from collections.abc import Iterator

from smpfix.base.findings import Severity
from smpfix.job.launch_environment import (
    McaParameter,
    custom_mpi_options,
    launch_variables,
    mca_parameters,
)
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism

# ``-mca`` parameters the training toolkit's ``MasterRunner`` passes itself
# (sagemaker-training-toolkit ``mpi.py``).
TOOLKIT_MCA = frozenset(
    {
        "btl_tcp_if_include",
        "oob_tcp_if_include",
        "plm_rsh_no_tree_spawn",
        "pml",
        "btl",
        "orte_abort_on_non_zero_status",
    }
)
# Prefixes of the variables the library, SMDDP and NCCL read in every rank.
_RANK_VARIABLES = ("SMP_", "SMDDP_", "NCCL_")
# Variables the toolkit passes with ``-x`` and a value of its own (``NCCL_DEBUG`` from its
# ``--NCCL_DEBUG`` option): an ``environment`` value is replaced on every rank, not just remote
# ones.
_TOOLKIT_VARIABLES = frozenset({"NCCL_DEBUG", "NCCL_MIN_NRINGS", "NCCL_SOCKET_IFNAME"})


class CustomMpiOptionsProblems(ConfigRule):
    summary = (
        "`custom_mpi_options` must not set an Open MPI parameter twice (or one the toolkit sets);"
        " pass library variables with `-x` on multi-instance jobs."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.NONE

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        launcher = view.launcher
        if launcher is None or not view.modelparallel_enabled:
            return
        options = custom_mpi_options(launcher)
        seen: set[str] = set()
        for parameter in mca_parameters(options) if options is not None else ():
            if parameter.name in seen:
                yield _twice(parameter)
            elif parameter.name in TOOLKIT_MCA:
                yield _toolkit_sets(parameter)
            seen.add(parameter.name)
        yield from _environment_only(view)


def _twice(parameter: McaParameter) -> ConfigProblem:
    return ConfigProblem(
        parameter.at,
        f"`{parameter.name}` is listed twice in custom_mpi_options: mpirun refuses it",
        Severity.ERROR,
        explanation=(
            "It is an Open MPI parameter, and mpirun refuses a parameter listed more than once on"
            ' its command line ("The following MCA parameter has been listed multiple times"), so'
            " the job fails to launch after the instances are up. Keep one `--mca` for it."
        ),
    )


def _toolkit_sets(parameter: McaParameter) -> ConfigProblem:
    return ConfigProblem(
        parameter.at,
        f"`{parameter.name}` in custom_mpi_options: mpirun refuses it if the toolkit passes it too",
        Severity.WARNING,
        explanation=(
            "The SageMaker training toolkit already passes this Open MPI parameter to mpirun"
            " itself: if the container's toolkit does, mpirun refuses the parameter listed twice"
            ' ("The following MCA parameter has been listed multiple times") and the job fails'
            " to launch. Remove it from custom_mpi_options."
        ),
    )


def _environment_only(view: ConfigView) -> Iterator[ConfigProblem]:
    count = view.launch("instance_count")
    if not isinstance(count, int) or isinstance(count, bool) or count <= 1:
        return
    assert view.launcher is not None
    options = custom_mpi_options(view.launcher)
    if options is not None and not isinstance(options.plain(), str):
        return  # what the options forward is unknown
    variables = list(launch_variables(view.launcher))
    forwarded = {variable.name for variable in variables if variable.where != "`environment`"}
    for variable in variables:
        if (
            variable.where != "`environment`"
            or variable.name in forwarded
            or variable.name in _TOOLKIT_VARIABLES
        ):
            continue
        if not variable.name.startswith(_RANK_VARIABLES):
            continue
        yield ConfigProblem(
            variable.at,
            f"{variable.name} is set only in `environment`: remote ranks may not see it",
            Severity.HINT,
            explanation=(
                "mpirun starts the ranks of the other instances over SSH, and the SageMaker"
                " training toolkit forwards only its own variables to them, so they may not see"
                f" it. Pass it in `custom_mpi_options` as `-x {variable.name}=<value>`, as the"
                " official examples do."
            ),
            evidence=(f"instance_count {count}",),
        )
