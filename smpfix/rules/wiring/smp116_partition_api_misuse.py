"""SMP116: ``smp.partition`` / ``smp.set_partition`` used where they fail or do nothing."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.findings import Severity
from smpfix.job.jobfacts import InitDict, Tri
from smpfix.program.facts import FileFacts
from smpfix.program.order.execution import ExecutionOrder
from smpfix.program.order.initialisation import init_dict_keys
from smpfix.program.steps import step_bodies
from smpfix.rules.rule import Rule, TensorParallelism

_MEMBERS = ("partition", "set_partition")
_POSITION = {"partition": 0, "set_partition": 1}
_KEYWORD = {"partition": "index", "set_partition": "partition"}


class PartitionApiMisuse(Rule):
    summary = (
        "Manual partitioning needs `auto_partition: False`, an index below the pipeline degree, and"
        " `set_partition` between the wrap and the first step."
    )
    depends_on = ("PP",)
    tensor_parallelism = TensorParallelism.NONE

    @classmethod
    def precondition(cls, facts: FileFacts) -> bool:
        return any(item.feature == "PP" for item in facts.evidence)

    def leave_Module(self, node: cst.Module) -> None:
        order: Optional[ExecutionOrder] = None
        forward_like = self._forward_like()
        parents = self.program.parents
        for call in self.program.facts.library_calls(*_MEMBERS):
            member = self.program.facts.smp_member(call.func)
            assert member is not None
            if self._ignored(call, member) or self._out_of_range(call, member):
                continue
            if member == "set_partition":
                order = order or self.program.order
                self._set_partition_order(order, call)
            elif self.feature("PP").state is not Tri.OFF and any(
                ancestor in forward_like for ancestor in parents.ancestors(call)
            ):
                message = (
                    "`smp.partition(...)` here wraps code that runs the model, not code that builds"
                    " it: the context assigns the modules *created* inside it to a partition, so it"
                    " has no effect in a `forward` or a step function. Put it around the"
                    " construction of the submodules (in `__init__`)."
                )
                self.report(
                    call,
                    "`smp.partition(...)` around code that runs the model, not code that builds it",
                    explanation=message,
                    severity=Severity.WARNING,
                )

    def _forward_like(self) -> frozenset[cst.FunctionDef]:
        found = set(step_bodies(self.program.steps))
        for cls in self.program.facts.classes.values():
            found.update(
                s for s in cls.body.body if type(s) is cst.FunctionDef and s.name.value == "forward"
            )
        return frozenset(found)

    def _ignored(self, call: cst.Call, member: str) -> bool:
        """``auto_partition`` is known to be on: the call is ignored (silently, for
        ``smp.partition``)."""
        value = self.program.job.value("auto_partition")
        setting = self.program.job.settings.get("auto_partition")
        source = setting.source if setting is not None else "the job"
        if value is not True or self.feature("PP").state is Tri.OFF:
            # With one pipeline stage every module is on partition 0 either way.
            return False
        if (
            self.program.job.init_dict is not InitDict.IGNORED
            and source.startswith("library default")
            and "auto_partition" in init_dict_keys(self.program.facts)
        ):
            # The script's dict sets the key to a value smpfix cannot read (`not
            # args.manual_partition`),
            # and the library may use that dict: not known. (Under a launch that initialises on
            # import, the dict is ignored and the default stands.)
            return False
        effect = (
            "silently does nothing"
            if member == "partition"
            else "is ignored with a warning in the log"
        )
        dict_ignored = ""
        if self.program.job.init_dict is InitDict.IGNORED and "auto_partition" in init_dict_keys(
            self.program.facts
        ):
            dict_ignored = (
                " The script's own `smp.init` dict sets `auto_partition`, but"
                f" {self.program.job.init_dict_reason}."
            )
        message = (
            f"`smp.{member}(...)` {effect}: `auto_partition` is True ({source}), so the library"
            " places every module "
            f'itself.{dict_ignored} To partition by hand, set `"auto_partition": False` and a'
            ' `"default_partition"` '
            "in the launcher's modelparallel parameters."
        )
        self.report(
            call,
            f"`smp.{member}(...)` {effect}: `auto_partition` is True",
            explanation=message,
            evidence=(f"`auto_partition` is True ({source})",),
            severity=Severity.WARNING,
        )
        return True

    def _out_of_range(self, call: cst.Call, member: str) -> bool:
        """A literal partition index outside ``0 .. pipeline_parallel_degree - 1`` (auto_partition
        off)."""
        if self.program.job.value("auto_partition") is not False:
            return False
        degree = self.program.job.value("pipeline_parallel_degree")
        given = argument(call, _KEYWORD[member], _POSITION[member])
        if not isinstance(degree, int) or isinstance(degree, bool) or given is None:
            return False
        index = self.program.facts.literal(given.value)
        if not isinstance(index, int) or isinstance(index, bool) or 0 <= index < degree:
            return False
        pp = self.feature("PP")
        message = (
            f"Partition {index} does not exist: the pipeline has {degree} partitions ({pp.source}),"
            f" numbered 0 to {degree - 1}, and `smp.{member}` raises InvalidPartitionIDError. Use"
            f" an index below {degree}."
        )
        self.report(
            call,
            f"partition {index} does not exist in a pipeline of {degree}: InvalidPartitionIDError",
            explanation=message,
            job_facts=(pp,),
        )
        return True

    def _set_partition_order(self, order: ExecutionOrder, call: cst.Call) -> None:
        """``smp.set_partition`` needs the ``smp.DistributedModel`` and must come before the first
        step."""
        steps = self.program.facts.step_functions
        is_model = lambda run: self.program.facts.is_smp_call(run.call, "DistributedModel")  # noqa: E731
        is_step = lambda run: type(run.call.func) is cst.Name and run.call.func.value in steps  # noqa: E731
        for run in order.runs_of(call):
            if order.before(run, is_step):
                message = (
                    "`smp.set_partition(...)` runs after a step function has run: the model was"
                    " partitioned at the first step, and the library raises"
                    " StepFunctionCalledError. Call it between `smp.DistributedModel` and the first"
                    " step."
                )
                self.report(
                    call,
                    "`smp.set_partition(...)` after the first step: StepFunctionCalledError",
                    explanation=message,
                )
                return
            if not order.before(run, is_model) and order.after(run, is_model):
                message = (
                    "`smp.set_partition(...)` runs before `smp.DistributedModel`: it records the"
                    " partition on the library's model, which does not exist yet, and fails with"
                    " AttributeError. Call it after the wrap (or use `with smp.partition(i):`"
                    " around the submodule's construction)."
                )
                self.report(
                    call,
                    "`smp.set_partition(...)` after the first step: StepFunctionCalledError",
                    explanation=message,
                )
                return
