"""SMP113: a PyTorch learning-rate scheduler given the fp16/bf16 ``smp.DistributedOptimizer``
wrapper."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.edits import NodeEdit, ReplaceArgument, ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.fixes.references import smp_reference
from smpfix.job.jobfacts import Tri
from smpfix.program.facts import FileFacts
from smpfix.program.objects.wrapped_optimizer import optimizer_wrap
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism

# Hugging Face's schedule helpers build a ``LambdaLR`` on the optimizer they get.
_HF_SCHEDULE_MODULES = ("transformers.", "transformers.optimization.")


class LrSchedulerOnFp16Wrapper(Rule):
    summary = (
        "Under fp16 or bf16, PyTorch schedulers need the optimizer inside"
        " `smp.DistributedOptimizer`'s wrapper (`optimizer.optimizer`)."
    )
    fix_availability = FixAvailability.SOMETIMES_SAFE
    depends_on = ("FP16", "BF16", "SDP")
    satisfied_by_hf_trainer = True
    since = (1, 10)
    tensor_parallelism = TensorParallelism.NONE

    @classmethod
    def precondition(cls, facts: FileFacts) -> bool:
        return bool(facts.distributed_optimizers)

    def leave_Module(self, node: cst.Module) -> None:
        facts = self.program.facts
        schedulers = [
            call
            for name, calls in facts.calls_by_qualified_name.items()
            if _is_scheduler(name)
            for call in calls
        ]
        for call in sorted(schedulers, key=facts.call_order.__getitem__):
            given = argument(call, "optimizer", 0)
            if given is None or type(given.value) is not cst.Name:
                continue
            if optimizer_wrap(self.program.file, given.value, call) is not None:
                self._flag(node, call, given.value)

    def _flag(self, module: cst.Module, call: cst.Call, optimizer: cst.Name) -> None:
        fp16, bf16, sdp = self.feature("FP16"), self.feature("BF16"), self.feature("SDP")
        on = next((state for state in (fp16, bf16) if state.state is Tri.ON), None)
        scheduler = self.program.code_for(call.func)
        name = optimizer.value
        if on is not None:
            message = (
                f"`{scheduler}` gets `{name}`, the result of `smp.DistributedOptimizer`, and"
                f" {on.condition()}: the "
                "library then returns a mixed-precision wrapper that is not a"
                " `torch.optim.Optimizer`, so the scheduler "
                f'raises TypeError ("... is not an Optimizer") when it is built. Pass the optimizer'
                f" inside the wrapper, "
                f"`{name}.optimizer` (the fp16 guide's form: `{name}.optimizer if"
                f" smp.state.cfg.fp16 else {name}`)."
            )
            precision = "bf16" if on is bf16 else "fp16"
            self.report(
                call,
                f"`{scheduler}` is given the {precision} wrapper `{name}`: TypeError",
                explanation=message,
                fix=self._fix(module, optimizer, precision, safe=True),
                job_facts=(on,),
            )
            return
        if fp16.state is Tri.OFF and bf16.state is Tri.OFF and sdp.state is Tri.OFF:
            return  # the wrapper is the optimizer itself then
        if sdp.state is Tri.ON:
            condition = (
                f"{sdp.condition()}, so `smp.DistributedOptimizer` returns a sharded (DeepSpeed"
                " ZeRO) optimizer"
            )
        else:
            condition = (
                "if fp16 or bf16 training is enabled, `smp.DistributedOptimizer` returns a wrapper"
            )
        message = (
            f"`{scheduler}` gets `{name}`, the result of `smp.DistributedOptimizer`: {condition}"
            " that is not a `torch.optim.Optimizer`, and PyTorch schedulers raise TypeError on it."
            f" The fp16 guide passes `{name}.optimizer if smp.state.cfg.fp16 else {name}`; with"
            " fp16 and bf16 off this is the same object."
        )
        title = (
            f"`{scheduler}` is given the sharded optimizer `{name}`, not a torch optimizer"
            if sdp.state is Tri.ON
            else f"`{scheduler}` is given `{name}`: TypeError if fp16 or bf16 is on"
        )
        self.report(
            call,
            title,
            explanation=message,
            severity=Severity.HINT,
            fix=self._fix(module, optimizer, None, safe=False),
            job_facts=(fp16, bf16, sdp),
        )

    def _fix(
        self, module: cst.Module, optimizer: cst.Name, precision: Optional[str], safe: bool
    ) -> Optional[PendingFix]:
        """``opt`` -> ``opt.optimizer if smp.state.cfg.fp16 else opt`` (the fp16 guide's form;
        ``bf16`` when bf16 is on; both settings when neither is known). Identical when the setting
        is off."""
        reference = smp_reference(self.program.file, "state")
        if reference is None:
            return None
        cfg = f"{reference.text}.cfg"
        test = f"{cfg}.{precision}" if precision else f"({cfg}.fp16 or {cfg}.bf16)"
        name = optimizer.value
        edits: tuple[NodeEdit, ...] = (
            *reference.edits,
            self._replacement(optimizer, f"{name}.optimizer if {test} else {name}"),
        )
        return PendingFix(
            Applicability.SAFE if safe else Applicability.UNSAFE,
            f"Pass `{name}.optimizer` when {test}",
            edits,
        )

    def _replacement(self, optimizer: cst.Name, text: str) -> NodeEdit:
        """The optimizer argument rewritten; the scheduler call wrapped if its line grows too
        long."""
        arg = self.program.parents.parent_of(optimizer)
        call = self.program.parents.parent_of(arg) if type(arg) is cst.Arg else None
        if type(call) is cst.Call:
            return ReplaceArgument(call, optimizer, text)
        return ReplaceNode(optimizer, text)


def _is_scheduler(qualified: str) -> bool:
    if qualified.startswith("torch.optim.lr_scheduler."):
        return True
    name = qualified.rsplit(".", 1)[-1]
    module = qualified[: -len(name)]
    return module in _HF_SCHEDULE_MODULES and name.startswith("get_") and "schedule" in name
