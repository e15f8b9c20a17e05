"""SMP030: the SMDDP backend in a job that shards nothing (tensor parallelism only)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.findings import Severity
from smpfix.job.jobfacts import JobFacts, Tri
from smpfix.job.versions import FIRST_V2, Version
from smpfix.rules.rule import FixAvailability, Rule, TensorParallelism
from smpfix.rules.scope import FileScope, Library
from smpfix.rules.smp_v2._script import INIT_PROCESS_GROUP, calls_of, smddp_backend
from smpfix.rules.titles import snippet

# The release whose known issues say the SMDDP backend is not supported in such a job (the SMP
# release notes, v2.0.0); on later releases it is the best-practices page's advice.
UNSUPPORTED_IN: Version = (2, 0, 0)


class SmddpForTensorParallelismOnly(Rule):
    summary = (
        '`dist.init_process_group(backend="smddp")` in an SMP v2 job with `hybrid_shard_degree`'
        " 1 and tensor parallelism: nothing is sharded for SMDDP's AllGather to speed up; the"
        " best-practices page keeps NCCL for such jobs."
    )
    fix_availability = FixAvailability.NONE
    tensor_parallelism = TensorParallelism.DEGREE
    library = Library.V2
    scope = FileScope.SMP_V2
    since = FIRST_V2

    def leave_Module(self, node: cst.Module) -> None:
        degrees = _tensor_parallel_only(self.program.job)
        if degrees is None:
            return
        for group in calls_of(self.program.facts, {INIT_PROCESS_GROUP}):
            if smddp_backend(self.program.facts, group) != "smddp":
                continue
            unsupported = self.program.job.version_applies(UNSUPPORTED_IN, UNSUPPORTED_IN) is Tri.ON
            release = self.version_condition(UNSUPPORTED_IN, UNSUPPORTED_IN)
            self.report(
                group,
                "SMDDP backend in a tensor-parallel-only job (`hybrid_shard_degree` 1): use"
                ' `backend="nccl"`',
                severity=Severity.ERROR if unsupported else Severity.HINT,
                explanation=(
                    "SMDDP speeds up the `AllGather` collective of sharded data parallelism (the"
                    " developer guide's page on SMP v2's compatibility with SMDDP). With"
                    " `hybrid_shard_degree` 1 FSDP shards nothing, so there is nothing for it to"
                    " speed up, and the best-practices page names tensor-parallelism-only jobs"
                    " (`hybrid_shard_degree = 1` and `tensor_parallel_degree > 1`) as the"
                    " exception to turning SMDDP on. On SMP 2.0.0 it is not supported at all: the"
                    " release notes list it as a known issue of that release, which needs"
                    ' `backend = nccl` there. Initialise the process group with `backend="nccl"`,'
                    " or shard with a `hybrid_shard_degree` of 2 or more."
                ),
                evidence=(
                    *degrees,
                    f"{snippet(self.program.code_for(group), 60)} names the SMDDP backend",
                    *((f"{release}: not supported",) if unsupported else ()),
                ),
            )


def _tensor_parallel_only(job: JobFacts) -> Optional[tuple[str, ...]]:
    """The job's settings as evidence when it stated ``hybrid_shard_degree`` 1 and a
    ``tensor_parallel_degree`` above 1, else None. Defaults never count: the library's
    ``hybrid_shard_degree`` 0 lets SMP shard."""
    found = []
    for key, holds in (("hybrid_shard_degree", _is_one), ("tensor_parallel_degree", _above_one)):
        setting = job.settings.get(key)
        if setting is None or setting.source.startswith("library default"):
            return None
        if not holds(setting.value):
            return None
        found.append(f"the job sets `{key}` {setting.value} ({setting.source})")
    return tuple(found)


def _is_one(value: object) -> bool:
    return type(value) is int and value == 1


def _above_one(value: object) -> bool:
    return type(value) is int and value > 1
