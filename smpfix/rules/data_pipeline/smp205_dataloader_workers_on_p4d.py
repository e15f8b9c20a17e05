"""SMP205: ``DataLoader`` worker processes on ml.p4d instances, where the library needs
``num_workers=0``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import libcst as cst

from smpfix.base.edits import ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.base.imports import dotted_name
from smpfix.program.data.dataloaders import is_dataloader
from smpfix.program.flow.call_arguments import call_arguments
from smpfix.program.flow.command_line import script_argument
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet

# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, ...)
_NUM_WORKERS_POSITION = 5
# Arguments PyTorch refuses with num_workers=0 (ValueError): setting 0 alone would break the call.
_NEEDS_WORKERS = ("persistent_workers", "prefetch_factor", "multiprocessing_context")
_HF_ARGUMENTS = ("TrainingArguments", "Seq2SeqTrainingArguments")


@dataclass(frozen=True)
class _Workers:
    """A worker count a call receives: its value, the node to point at, how smpfix knows it."""

    value: int
    node: cst.BaseExpression
    how: str
    literal: bool


class DataloaderWorkersOnP4d(Rule):
    summary = (
        "On ml.p4d instances the library requires `num_workers=0` in the PyTorch `DataLoader`."
    )
    fix_availability = FixAvailability.SAFE
    default_severity = Severity.WARNING
    runs_on_helper_modules = True
    tensor_parallelism = TensorParallelism.NONE

    def leave_Module(self, node: cst.Module) -> None:
        instance = self.program.job.value("instance_type")
        if not isinstance(instance, str) or not instance.startswith("ml.p4d"):
            return
        documented = instance.startswith("ml.p4d.")
        setting = self.program.job.settings.get("instance_type")
        source = setting.source if setting is not None else "the job"
        for call in self.program.facts.call_order:
            keyword, position = self._worker_argument(call)
            if keyword is None:
                continue
            workers = self._workers(call, keyword, position)
            if workers is None or workers.value == 0:
                continue
            self._flag(call, keyword, workers, instance, source, documented)

    def _worker_argument(self, call: cst.Call) -> tuple[Optional[str], Optional[int]]:
        if is_dataloader(call, self.program.facts):
            return "num_workers", _NUM_WORKERS_POSITION
        qualified = self.program.facts.qualified_name(call.func) or ""
        if qualified.startswith("transformers.") and qualified.endswith(_HF_ARGUMENTS):
            return "dataloader_num_workers", None
        return None, None

    def _workers(self, call: cst.Call, keyword: str, position: Optional[int]) -> Optional[_Workers]:
        """The worker count the call certainly receives: spelled in the call, or through a
        ``**kwargs`` dict the script builds (``kwargs.update({"num_workers": 1})``)."""
        arguments = call_arguments(call, self.program.facts)
        passed = arguments.passed(keyword, position) if arguments is not None else None
        given = passed.certain if passed is not None else None
        if given is None:
            return None  # not passed (the default is 0), or passed only on some paths
        assert passed is not None
        literal = passed.written is not None and type(given) is cst.Integer
        value = self.program.facts.literal(given)
        if _is_count(value):
            if passed.from_dict:
                how = " (set in the `**` dict the call unpacks)"
            else:
                how = "" if literal else f" (`{self._code(given)}` is {value})"
            return _Workers(int(value), given, how, literal)
        dotted = dotted_name(given) or ""
        if dotted.count(".") == 1 and self.program.facts.qualified_name(given) is None:
            found = script_argument(dotted.split(".")[1], self.program.file, self.program.modules)
            if found is not None and _is_count(found.value):
                return _Workers(
                    int(found.value), given, f" (`{dotted}` is {found.value}: {found.how})", False
                )
        return None

    def _code(self, node: cst.CSTNode) -> str:
        return " ".join(self.program.code_for(node).split())

    def _flag(
        self,
        call: cst.Call,
        keyword: str,
        workers: _Workers,
        instance: str,
        source: str,
        documented: bool,
    ) -> None:
        where = "the `DataLoader`" if keyword == "num_workers" else "the Trainer's data loaders"
        setting = snippet(f"{keyword}={workers.value}", 30)
        if documented:
            title = f"{setting} on {instance}: the guide requires `num_workers=0` there"
            why = (
                "The developer guide says that on ml.p4d instances you must set the data loader's"
                " `num_workers=0` for the model parallelism library."
            )
            severity = Severity.WARNING
        else:
            title = f"{setting} on {instance}: ml.p4d needs `num_workers=0`, likely here too"
            why = (
                "The developer guide requires `num_workers=0` on ml.p4d instances; ml.p4de is the"
                " same hardware with more memory, so the requirement likely holds there too."
            )
            severity = Severity.HINT
        self.report(
            workers.node,
            title,
            explanation=f"{why} Set `{keyword}=0`.",
            evidence=(
                f"`{keyword}={workers.value}`{workers.how} starts worker processes for {where}",
                f"the job runs on {instance} ({source})",
            ),
            severity=severity,
            fix=self._fix(call, keyword, workers),
        )

    def _fix(self, call: cst.Call, keyword: str, workers: _Workers) -> Optional[PendingFix]:
        """``num_workers=N`` -> ``0`` where the call spells a literal. Safe: the loader yields the
        same batches (random augmentations draw from the main process's generator instead), unless
        the call also passes an argument PyTorch refuses without workers."""
        if not workers.literal:
            return None
        arguments = call_arguments(call, self.program.facts)
        if arguments is None or (
            keyword == "num_workers"
            and any(not arguments.passed(name).absent for name in _NEEDS_WORKERS)
        ):
            return None
        return PendingFix(
            Applicability.SAFE, f"Set `{keyword}=0`", (ReplaceNode(workers.node, "0"),)
        )


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
