"""SMP830: concurrent model-parallel jobs that share one ``checkpoint_s3_uri``.

SageMaker syncs ``checkpoint_local_path`` with ``checkpoint_s3_uri`` both ways: a job starts by
downloading what is under the URI and uploads its checkpoints there. The model-parallel
troubleshooting guide warns that reusing one URI across training jobs running at the same
time slows checkpoint loading, and the official GPT-2 notebook adds that unrelated runs sharing
a path may conflict. Reusing a URI on purpose, to resume a finished job, is what the same
notebook recommends, so a single estimator with a fixed URI is never reported: only
estimators started without waiting (``fit(wait=False)``) while another with the same URI is
started after them, in this file or in a loop.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.findings import Severity
from smpfix.base.walker import Ancestry
from smpfix.job.launcher import Launcher, Located
from smpfix.program.model import Program
from smpfix.rules.config_rule import ConfigProblem, ConfigRule, ConfigView, config_views
from smpfix.rules.rule import FixAvailability, TensorParallelism
from smpfix.rules.titles import snippet

_LOOPS = (cst.For, cst.While)


@dataclass(frozen=True)
class _Started:
    """A ``receiver.fit(..., wait=False)`` call and the loop around it."""

    receiver: cst.BaseExpression
    loop: Optional[cst.CSTNode]


class CheckpointS3UriReuse(ConfigRule):
    summary = (
        "Jobs running at the same time should not share a `checkpoint_s3_uri`; give each its own"
        " prefix."
    )
    fix_availability = FixAvailability.NONE
    default_severity = Severity.WARNING
    tensor_parallelism = TensorParallelism.NONE

    def __init__(self, program: Program, ancestry: Ancestry) -> None:
        super().__init__(program, ancestry)
        self._estimators = {id(call) for call in self.program.facts.estimator_calls}
        # The loop around each estimator call (None outside loops), by the call's id.
        self._loops: dict[int, Optional[cst.CSTNode]] = {}
        self._started: list[_Started] = []

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        """Nothing to say about one configuration alone: the rule compares the launchers of a
        file."""
        return iter(())

    def visit_Call(self, node: cst.Call) -> None:
        loop = self.ancestry.nearest(*_LOOPS)
        if id(node) in self._estimators:
            self._loops[id(node)] = loop
            return
        func = node.func
        if type(func) is not cst.Attribute or func.attr.value != "fit":
            return
        wait = argument(node, "wait", position=1)
        if wait is not None and self.program.facts.literal(wait.value) is False:
            self._started.append(_Started(func.value, loop))

    def leave_Module(self, node: cst.Module) -> None:
        super().leave_Module(node)
        if not self._started:
            return
        by_uri: dict[str, list[tuple[Launcher, Located]]] = {}
        for view in config_views(self.program):
            launcher = view.launcher
            uri = launcher.keyword("checkpoint_s3_uri") if launcher is not None else None
            if (
                launcher is None
                or uri is None
                or not isinstance(uri.plain(), str)
                or not view.modelparallel_enabled
            ):
                continue
            jobs = by_uri.setdefault(uri.plain(), [])
            if all(job.call is not launcher.call for job, _ in jobs):
                jobs.append((launcher, uri))
        for value, jobs in by_uri.items():
            self._report_shared(value, jobs)

    def _report_shared(self, value: str, jobs: list[tuple[Launcher, Located]]) -> None:
        running = False
        for launcher, uri in jobs:
            started = self._started_without_waiting(launcher.call)
            anchor = uri.anchor
            if anchor is None:
                running = running or started is not None
                continue
            if running:
                self._report(
                    anchor,
                    value,
                    "another estimator earlier in this file, started with `fit(wait=False)`, uses"
                    " it",
                )
            elif (
                started is not None
                and started.loop is not None
                and started.loop is self._loops.get(id(launcher.call))
            ):
                self._report(
                    anchor,
                    value,
                    "every iteration of this loop starts a job with `fit(wait=False)`, and they"
                    " all use it",
                )
            running = running or started is not None

    def _started_without_waiting(self, call: cst.Call) -> Optional[_Started]:
        for started in self._started:
            receiver = started.receiver
            if receiver is call:
                return started
            if type(receiver) is cst.Name:
                if any(
                    assignment.value is call
                    for assignment in self.program.facts.assignments.get(receiver.value, ())
                ):
                    return started
        return None

    def _report(self, anchor: cst.CSTNode, value: str, who: str) -> None:
        self.report(
            anchor,
            f"checkpoint_s3_uri {snippet(repr(value), 40)[1:-1]} is shared by jobs running at once",
            explanation=(
                "SageMaker downloads what is under the URI when a job starts and uploads"
                " checkpoints there, so concurrent jobs read and overwrite each other's"
                " checkpoints, and checkpoint loading slows (model-parallel troubleshooting"
                " guide). Give each job its own prefix (for example with the job name or a"
                " timestamp); reuse a URI only to resume a finished job."
            ),
            evidence=(f"{who} while running at the same time",),
            severity=Severity.WARNING,
        )
