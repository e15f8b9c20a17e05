"""SMP v2 configurations, and the base of the rules that judge them.

An SMP v2 configuration is written in three places: a launcher that starts SMP v2 (its
``smdistributed.modelparallel.parameters``, ``smpfix.job.smp_v2``), the dict a script passes to
``torch.sagemaker.init({...})``, and a JSON file a script names in ``torch.sagemaker.init("...")``
(the v2 reference: "passed to the PyTorch estimator ... or saved as a JSON file"). Each is a
``ConfigView`` with ``v2`` set, judged against SMP v2's nine keys and defaults. A file's own job
does not decide which of its configurations are v2 (a launcher file may start jobs of both
libraries), so the configuration rules of the v2 family run on every file in their scope and
look at its v2 configurations alone.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from typing import ClassVar, Optional

from smpfix.base.flavour import ONLY_PYTORCH
from smpfix.job.framework_versions import pytorch_version
from smpfix.job.launcher import Located, evaluate_argument
from smpfix.job.versions import FIRST_V2, SmpVersion, Version, smp_v2_job_version
from smpfix.program.model import Program
from smpfix.rules.config_rule import ConfigRule, ConfigView, launcher_views, starts_smp_v2
from smpfix.rules.scope import FileScope, Library
from smpfix.rules.smp_v2._mixups import mpirun

# ``torch.sagemaker.init``, however the script imports it.
TSM_INIT = "torch.sagemaker.init"


class V2ConfigRule(ConfigRule):
    """Base of the configuration rules of the SMP v2 family: the views are the file's SMP v2
    configurations, the rule runs whatever the file's own job (``runs_on``), and a finding
    holds from SMP 2.0 on even where the container's release is unknown."""

    library = Library.V2
    flavours = ONLY_PYTORCH
    scope = FileScope.EITHER_LIBRARY
    since: ClassVar[Optional[Version]] = FIRST_V2
    implied: ClassVar[Optional[Version]] = FIRST_V2

    @classmethod
    def runs_on(cls, v2_job: bool) -> bool:
        return True

    def views(self) -> list[ConfigView]:
        """The file's SMP v2 configurations, but for launchers that start the script through
        mpirun: those launch SMP v1 (SMP001 and SMP003 say what is wrong with them)."""
        return [view for view in v2_views(self.program) if not starts_mpirun(view)]


def v2_views(program: Program) -> list[ConfigView]:
    """The file's SMP v2 configurations, once per analysis."""
    return program.answer(V2Views).views


@dataclass(frozen=True)
class V2Views:
    views: list[ConfigView]

    @classmethod
    def of_program(cls, program: Program) -> V2Views:
        views = [
            dataclasses.replace(view, v2=True, smp_version=_v2_version(view))
            for view in launcher_views(program)
            if view.launcher is not None and starts_smp_v2(program, view)
        ]
        views += _init_views(program)
        return cls(views)


def _v2_version(view: ConfigView) -> Optional[SmpVersion]:
    """The SMP v2 releases in the container the launcher names (its ``framework_version`` or
    the SMP v2 image's tag)."""
    assert view.launcher is not None
    version = pytorch_version(view.launcher)
    if version is None:
        return None
    return smp_v2_job_version(version.text, f"{version.written} in {view.where}")


def _init_views(program: Program) -> list[ConfigView]:
    facts = program.facts
    if not facts.imports_smp_v2:
        return []
    views = []
    for call in facts.call_order:
        if facts.qualified_name(call.func) != TSM_INIT:
            continue
        argument = evaluate_argument(program.module, facts.imports, call, program.path)
        if argument is None:
            continue
        if isinstance(argument.value, str):
            argument = _json_file(argument, program.path)
        if argument is None or not isinstance(argument.value, dict):
            continue
        kind = "the tsm.init JSON file" if argument.source_file else "the tsm.init({...}) dict"
        views.append(
            ConfigView(
                "tsm.init",
                kind,
                argument,
                False,
                call,
                smp_version=program.job.smp_version,
                v2=True,
            )
        )
    return views


def _json_file(written: Located, script: str) -> Optional[Located]:
    """``tsm.init("smp_config.json")``: the file's values when it is next to the script (the
    job's working directory is the script's folder); findings point at the call's argument."""
    path = os.path.join(os.path.dirname(os.path.abspath(script)), str(written.value))
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    anchor = written.anchor
    values = {k: Located(v, None, anchor, path) for k, v in data.items() if isinstance(k, str)}
    return Located(values, written.node, written.entry, path)


def starts_mpirun(view: ConfigView) -> bool:
    """The view is a launcher that starts its script through mpirun, as SMP v1 does."""
    return view.launcher is not None and mpirun(view.launcher) is not None
