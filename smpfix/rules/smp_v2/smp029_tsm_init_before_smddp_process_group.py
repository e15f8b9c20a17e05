"""SMP029: ``tsm.init()`` before ``dist.init_process_group`` with the SMDDP backend."""

from __future__ import annotations

import libcst as cst

from smpfix.base.findings import Severity
from smpfix.job.versions import FIRST_V2
from smpfix.rules.rule import FixAvailability, Rule, TensorParallelism
from smpfix.rules.scope import FileScope, Library
from smpfix.rules.smp_v2._config import TSM_INIT
from smpfix.rules.smp_v2._script import INIT_PROCESS_GROUP, calls_of, smddp_backend
from smpfix.rules.titles import snippet


class TsmInitBeforeSmddpProcessGroup(Rule):
    summary = (
        '`tsm.init()` runs before `dist.init_process_group(backend="smddp")`: SMP v2 with'
        " SMDDP needs the SMDDP process group first, then the SMP initialisation."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.NONE
    library = Library.V2
    scope = FileScope.SMP_V2
    since = FIRST_V2

    def leave_Module(self, node: cst.Module) -> None:
        facts = self.program.facts
        inits = list(calls_of(facts, {TSM_INIT}))
        if not inits:
            return
        for group in calls_of(facts, {INIT_PROCESS_GROUP}):
            backend = smddp_backend(self.program.facts, group)
            if backend is None:
                continue
            init = next((i for i in inits if self._runs_first(i, group)), None)
            if init is None:
                continue
            known = backend == "smddp"
            evidence = (
                ('the process group\'s backend is "smddp"',)
                if known
                else (
                    "the script imports `smdistributed.dataparallel.torch.torch_smddp`; the"
                    " backend is a value smpfix cannot read",
                )
            )
            self.report(
                init,
                "`tsm.init()` runs before the SMDDP process group is initialised"
                if known
                else "`tsm.init()` runs before `init_process_group`, whose backend may be smddp",
                severity=Severity.ERROR if known else Severity.WARNING,
                explanation=(
                    "To use SMP v2 with the SMDDP library, the developer guide initialises"
                    " PyTorch Distributed with the SMDDP backend first and runs the SMP"
                    " initialisation after it, as the official v2 example does. Initialise the"
                    " SMDDP process group before `tsm.init()`."
                ),
                evidence=(
                    *evidence,
                    f"{snippet(self.program.code_for(group), 60)} runs after `tsm.init()`",
                ),
            )

    def _runs_first(self, init: cst.Call, group: cst.Call) -> bool:
        """``init`` runs before ``group``. When the top of the file reaches both, the order the
        script runs them in (through calls of its own functions: a module-level ``tsm.init()``
        written after ``def main()`` still runs before the ``main()`` call at the bottom);
        otherwise, as written: in one function, first on a path that runs both, or at the top
        of the module, which runs before any function it defines."""
        order = self.program.order
        groups, inits = order.runs_of(group), order.runs_of(init)
        if groups and inits:
            return any(order.before(run, lambda other: other.call is init) for run in groups)
        parents = self.program.parents
        if parents.scope_of(init) is parents.scope_of(group):
            return order.runs_before(init, group)
        return parents.scope_of(init) is parents.module and order.runs_before(init, group)
