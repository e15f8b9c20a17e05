"""SMP021: a tensor, expert or context parallel degree above 1 with no ``tsm.transform``."""

from __future__ import annotations

import libcst as cst

from smpfix.job.versions import FIRST_V2
from smpfix.rules.rule import FixAvailability, Rule, TensorParallelism
from smpfix.rules.scope import FileScope, Library
from smpfix.rules.smp_v2._script import V2Calls, first_argument

_DEGREES = {
    "tensor_parallel_degree": "tensor parallelism",
    "expert_parallel_degree": "expert parallelism",
    "context_parallel_degree": "context parallelism",
}
# How many levels of project imports below the script are searched for the transform.
_DEPTH = 3


class ParallelDegreeWithoutTransform(Rule):
    summary = (
        "The job sets a tensor, expert or context parallel degree above 1, but the script wraps"
        " a model it builds with FSDP without `torch.sagemaker.transform`: the degree does"
        " nothing."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.DEGREE
    library = Library.V2
    scope = FileScope.SMP_V2
    since = FIRST_V2

    def leave_Module(self, node: cst.Module) -> None:
        job = self.program.job
        degrees = [
            (key, value, job.settings[key].source)
            for key in _DEGREES
            if key in job.settings
            for value in (job.value(key),)
            if isinstance(value, int) and not isinstance(value, bool) and value > 1
        ]
        calls = self.program.file.answer(V2Calls)
        wraps = [wrap for wrap in calls.fsdp if self._built_here(wrap)]
        if not degrees or not wraps or self._transforms():
            return
        key, value, _ = degrees[0]
        self.report(
            wraps[0],
            f"`{key}` {value} does nothing: the FSDP-wrapped model never goes through"
            " `tsm.transform`",
            explanation=(
                f"SMP v2 applies {_DEGREES[key]} only to a model that `tsm.transform` has"
                f" converted, so the degree {value} does nothing: the model is not split, and the"
                " memory the job was sized for is not saved. Convert the model before the FSDP"
                " wrap: `model = tsm.transform(model)`; or set the degree to 1."
            ),
            evidence=(
                *(f"the job sets `{k}` {v} ({s})" for k, v, s in degrees),
                "this script wraps its model with FSDP and never calls `torch.sagemaker.transform`"
                " (nor do the project modules it imports)",
            ),
        )

    def _built_here(self, wrap: cst.Call) -> bool:
        """The wrapped model is built in this file (``FSDP(build())``, or a name every
        definition of which is a call here), not handed in from code smpfix may not see (a
        framework's ``self.model``, a function's parameter), which may have transformed it."""
        model = first_argument(wrap)
        if type(model) is cst.Call:
            return True
        if type(model) is not cst.Name:
            return False
        reaching = self.program.names.reaching(model.value, wrap).assignments
        return bool(reaching) and all(type(found.value) is cst.Call for found in reaching)

    def _transforms(self) -> bool:
        """Whether the script or a project module it imports calls ``tsm.transform``."""
        if self.program.file.answer(V2Calls).transforms:
            return True
        modules = self.program.modules
        if modules is None:
            return False
        return any(
            linked.answer(V2Calls).transforms
            for linked in modules.imported_closure(self.program.file, _DEPTH)
        )
