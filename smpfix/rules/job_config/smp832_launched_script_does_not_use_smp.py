"""SMP832: a launcher enables the model parallelism library for a script that never loads it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Optional

from smpfix.base.findings import Severity
from smpfix.job.jobfacts import Tri
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.job_config._library_loading import (
    LibraryLoading,
    library_loading,
    torchrun_variables,
)
from smpfix.rules.rule import FixAvailability, TensorParallelism
from smpfix.rules.titles import snippet

_DEGREES = ("pipeline_parallel_degree", "tensor_parallel_degree", "sharded_data_parallel_degree")


class LaunchedScriptDoesNotUseSmp(ConfigRule):
    summary = (
        "The launcher enables `smdistributed.modelparallel`, but the script it starts (and the"
        " project modules it imports) never imports the library nor builds a Hugging Face"
        " `Trainer`: model parallelism does nothing."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        return iter(())

    def check_with_code(self, view: ConfigView) -> Iterator[ConfigProblem]:
        launcher = view.launcher
        mp = launcher.modelparallel if launcher is not None else None
        enabled = mp.get("enabled") if mp is not None and mp.is_dict else None
        if launcher is None or enabled is None or enabled.plain() is not True:
            return
        missing = launcher.missing_script()
        entry = launcher.keyword("entry_point")
        if missing is not None and entry is not None:
            # Nothing to check: the script that would be checked as launched is not there.
            yield ConfigProblem(
                entry,
                f"entry point {snippet(missing, 40)} not found: the job would not start",
                Severity.WARNING,
                explanation=(
                    f"This launcher enables the model parallelism library for `{missing}`, which"
                    " is not there: SageMaker cannot start it (the SDK stops when it uploads the"
                    " source), and smpfix checks no script under this configuration. Name the"
                    " script the job should run."
                ),
            )
            return
        loading = self._loading(view)
        if loading is None or loading.state is not Tri.OFF:
            return
        modules = self.program.modules
        assert modules is not None
        script = os.path.relpath(
            loading.files[0], os.path.dirname(os.path.abspath(self.program.path))
        )
        others = len(loading.files) - 1
        if others:
            where = (
                f"{script} and the {others} project module{'s' if others != 1 else ''} it"
                f" {'imports or starts' if loading.starts else 'imports'} never import"
            )
        else:
            where = f"{script} never imports"
        linked = [
            found for found in (modules.load(path) for path in loading.files) if found is not None
        ]
        variables = torchrun_variables(linked)
        flavour = "tensorflow" if view.tensorflow else "torch"
        if loading.hands_off:
            title = (
                f"model parallelism is enabled, but {snippet(script, 30)} trains with"
                f" {loading.hands_off}, not the library"
            )
            story = (
                f" `smdistributed.modelparallel` and trains with {loading.hands_off}, which never"
                " calls `smp.init()` nor wraps a model in `smp.DistributedModel` (it may import"
                " the library through a transformers model module, and no more):"
                f" SageMaker starts the script with `mpirun`{_processes(view)}, and"
                f" {loading.hands_off} splits the model its own way, so the model-parallel"
                " configuration does nothing."
            )
        else:
            title = (
                f"model parallelism is enabled, but {snippet(script, 30)} never loads the library"
            )
            story = (
                " `smdistributed.modelparallel`, and no Hugging Face `Trainer` (which drives"
                " the library itself) is built: SageMaker starts the script with"
                f" `mpirun`{_processes(view)}, and nothing in it initialises the library, so the"
                " model-parallel configuration does nothing and every process trains the model"
                " exactly as the script wrote it."
            )
        yield ConfigProblem(
            enabled,
            title,
            Severity.ERROR,
            explanation=(
                f"This launcher enables the model parallelism library{_configured(view)}, but"
                f" {where}{story}{_environment(variables)} Adapt the script to"
                f" the library (`import smdistributed.modelparallel.{flavour} as smp`,"
                " `smp.init()`, `smp.DistributedModel`, `@smp.step`), or launch it the way it is"
                " written: remove the `smdistributed` block and start a torchrun script with"
                ' `distribution={"torch_distributed": {"enabled": True}}`.'
            ),
        )

    def _loading(self, view: ConfigView) -> Optional[LibraryLoading]:
        """What the launched script loads, when it is a project file smpfix can read."""
        modules = self.program.modules
        script = view.launcher.script if view.launcher is not None else None
        if (
            modules is None
            or script is None
            or not script.endswith(".py")
            or not modules.project.contains(script)
        ):
            return None
        return library_loading(script, modules.for_importer(script))


def _configured(view: ConfigView) -> str:
    """`` (tensor_parallel_degree 2)``: the degrees that ask for model parallelism."""
    degrees = [
        f"{view.spelled(key)} {value}"
        for key in _DEGREES
        if (value := view.int_value(key)) is not None and value > 1
    ]
    return f" ({', '.join(degrees)})" if degrees else ""


def _processes(view: ConfigView) -> str:
    per_host, hosts = view.launch("processes_per_host"), view.launch("instance_count")
    if isinstance(per_host, int) and isinstance(hosts, int) and not isinstance(per_host, bool):
        return (
            f" as {per_host * hosts} processes ({per_host} per instance on {hosts}"
            f" instance{'s' if hosts != 1 else ''})"
        )
    return " as one process per GPU"


def _environment(variables: dict[str, bool]) -> str:
    """What reading torchrun's variables does under ``mpirun``, which does not set them."""
    failing = [name for name, raises in variables.items() if raises]
    defaulted = [name for name, raises in variables.items() if not raises]
    said = []
    if failing:
        said.append(
            f"it reads {_names(failing)} with `os.environ[...]`, which raises `KeyError` at start"
        )
    if defaulted:
        said.append(
            f"{'and ' if failing else 'it '}reads {_names(defaulted)} with a default, which every"
            " process then takes"
        )
    return (
        f" Under `mpirun`, which does not set torchrun's variables, {', '.join(said)}."
        if said
        else ""
    )


def _names(names: list[str]) -> str:
    return " and ".join(f"`{name}`" for name in names)
