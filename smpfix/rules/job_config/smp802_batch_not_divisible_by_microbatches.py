"""SMP802: the batch a step function receives must split into ``microbatches`` equal parts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.findings import Severity
from smpfix.base.flavour import BOTH
from smpfix.base.literals import dict_entries
from smpfix.base.parents import ParentIndex
from smpfix.job.jobfacts import InitDict, Tri
from smpfix.job.linking import LinkedScript
from smpfix.program.dataloaders import DATALOADER_POSITIONS, bound_value, is_dataloader
from smpfix.program.facts import FileFacts
from smpfix.program.script_arguments import (
    CommandLineArgument,
    argument_value,
    assigned_attributes,
    command_line_arguments,
)
from smpfix.program.step_feeds import StepFeeds
from smpfix.program.tf_datasets import is_tf_dataset
from smpfix.rules.rule import FixAvailability, Rule

_TF_BATCHING = ("batch", "padded_batch")
_MAX_DEPTH = 6


@dataclass(frozen=True)
class Resolved:
    """A number and, in words, where it came from (empty for a literal written in place).
    ``assumed``: it rests on an argparse default and no launcher of the script is known, so
    the job may still pass another value as a hyperparameter."""

    value: int
    how: str
    assumed: bool = False


@dataclass(frozen=True)
class _Batching:
    """A batch-size argument (None: the loader's default of 1) of a loader or dataset call."""

    call: cst.Call
    size: Optional[cst.Arg]
    tensorflow: bool


class BatchNotDivisibleByMicrobatches(Rule):
    code = "SMP802"
    name = "batch-not-divisible-by-microbatches"
    flavours = BOTH
    summary = "The batch size of a loader that feeds `smp.step` must be a multiple of `microbatches`."
    fix_availability = FixAvailability.NONE
    depends_on = ("MB",)

    def leave_Module(self, node: cst.Module) -> None:
        candidates = [found for call in self.facts.call_order if (found := self._candidate(call)) is not None]
        if not candidates:
            return
        microbatches = self._microbatches()
        if microbatches is None or microbatches.value <= 1:
            return
        index = ParentIndex(node)
        loaders, datasets = StepFeeds(self.facts, index), StepFeeds(self.facts, index, datasets=True)
        for batching in candidates:
            feed = (datasets if batching.tensorflow else loaders).feed_of(batching.call)
            if feed is None:
                continue
            if batching.size is not None and _is_parameter(batching.size.value, index.scope_of(batching.call)):
                continue  # a parameter of the enclosing function: its callers decide
            batch = Resolved(1, "the DataLoader default") if batching.size is None else self._resolve(batching.size.value, 0)
            if batch is None or batch.value <= 0 or batch.value % microbatches.value == 0:
                continue
            self._flag(batching, batch, microbatches, feed)

    # -- where batches are made ---------------------------------------------------------------
    def _candidate(self, call: cst.Call) -> Optional[_Batching]:
        if any(arg.star for arg in call.args):
            return None  # `*args` / `**kwargs` may set the batch size
        if is_dataloader(call, self.facts):
            if argument(call, "batch_sampler", DATALOADER_POSITIONS["batch_sampler"]) is not None:
                return None  # the sampler decides the batch size
            return _Batching(call, argument(call, "batch_size", 1), tensorflow=False)
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _TF_BATCHING and is_tf_dataset(func.value, self.facts):
            size = argument(call, "batch_size", 0)
            return _Batching(call, size, tensorflow=True) if size is not None else None
        return None

    # -- the numbers --------------------------------------------------------------------------
    def _microbatches(self) -> Optional[Resolved]:
        """``microbatches`` from the job; an ``smp.init`` entry like ``args.microbatches`` is read
        through argparse when no other source states the value."""
        setting = self.job.settings.get("microbatches")
        if setting is not None and _is_int(setting.value) and not setting.source.startswith("library default"):
            return Resolved(int(setting.value), setting.source)
        if "microbatches" in self.job.unknown:
            return None
        # Only a dict the library reads decides (jobfacts: import-time initialisation ignores it).
        written = self._init_entry("microbatches") if self.job.init_dict is InitDict.APPLIES else None
        if written is not None:
            resolved = self._resolve(written, 0)
            if resolved is not None:
                return Resolved(resolved.value, f"the smp.init({{...}}) dict: {resolved.how}", resolved.assumed)
            return None
        if setting is not None and _is_int(setting.value):
            return Resolved(int(setting.value), setting.source)
        return None

    def _init_entry(self, key: str) -> Optional[cst.BaseExpression]:
        call = self.facts.init_config_call
        config = argument(call, "config", 0) if call is not None else None
        if config is None:
            return None
        entry = dict_entries(bound_value(config.value, self.facts)).get(key)
        return entry.value if entry is not None else None

    def _resolve(self, expr: cst.BaseExpression, depth: int) -> Optional[Resolved]:
        """An int expression: a literal, a name bound once, ``args.x`` through argparse,
        ``smp.tp_size()`` from the job, and products of those."""
        if depth > _MAX_DEPTH:
            return None
        written = expr
        expr = bound_value(expr, self.facts)
        value = self.facts.literal(expr)
        if _is_int(value):
            return Resolved(value, "" if expr is written else f"`{self._code(written)}` = {value}")
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
            found = self._argument(expr.attr.value)
            if found is not None:
                return Resolved(found.value, f"`{self._code(expr)}` = {found.value}, {found.how}", found.assumed)
        if isinstance(expr, cst.Call) and not expr.args and self.facts.smp_member(expr.func) == "tp_size":
            setting = self.job.settings.get("tensor_parallel_degree")
            if setting is not None and _is_int(setting.value):
                return Resolved(int(setting.value), f"`smp.tp_size()` = tensor_parallel_degree {setting.value} ({setting.source})")
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
            left, right = self._resolve(expr.left, depth + 1), self._resolve(expr.right, depth + 1)
            if left is not None and right is not None:
                how = "; ".join(part for part in (left.how, right.how) if part)
                return Resolved(left.value * right.value, how, left.assumed or right.assumed)
        return None

    def _argument(self, dest: str) -> Optional[Resolved]:
        if dest in assigned_attributes(self.facts):
            return None
        found = argument_value(dest, self._command_line(), self._launchers())
        if found is None or not _is_int(found.value):
            return None
        return Resolved(int(found.value), found.how, found.default and not self._launchers())

    def _command_line(self) -> dict[str, list[CommandLineArgument]]:
        files: list[FileFacts] = [self.facts]
        modules = self.context.modules
        if modules is not None:
            files += [linked.facts for linked in modules.imported_modules(self.facts)]
        return command_line_arguments(files)

    def _launchers(self) -> Sequence[LinkedScript]:
        modules = self.context.modules
        return modules.project.launchers_of(self.context.path) if modules is not None else ()

    def _code(self, node: cst.CSTNode) -> str:
        code = " ".join(self.context.code_for(node).split())
        return code if len(code) <= 40 else code[:37] + "..."

    # -- reporting ----------------------------------------------------------------------------
    def _flag(self, batching: _Batching, batch: Resolved, microbatches: Resolved, feed: str) -> None:
        mb = microbatches.value
        remainder = batch.value % mb
        lower, upper = batch.value - remainder, batch.value - remainder + mb
        suggestion = f"{upper}" if lower <= 0 else f"{lower} or {upper}"
        if batching.size is None:
            what = f"`{self._code(batching.call.func)}(...)` has no batch_size, so its batches hold 1 sample"
        else:
            origin = f" ({batch.how})" if batch.how else ""
            what = f"This batch size is {batch.value}{origin}"
        prescaled = ""
        state = self.job.settings.get("prescaled_batch")
        if state is not None and state.value is True:
            prescaled = (
                " With prescaled_batch, this is the batch of a whole tensor-parallel group (tensor_parallel_degree × "
                "the per-rank batch), and it is this batch that is split."
            )
        error = "" if batching.tensorflow else " (TensorSplitError)"
        assumed = ""
        if batch.assumed or microbatches.assumed:
            assumed = (
                " (No launcher of this script is among the checked paths: if the job passes other values as "
                "hyperparameters, check those.)"
            )
        self.report(
            batching.size if batching.size is not None else batching.call.func,
            f"{what}, and microbatches is {mb} ({microbatches.how}): {batch.value} % {mb} = {remainder}. The batches reach "
            f"{feed}, and `smp.step` splits every batch into {mb} equal microbatches along its first dimension, so the "
            f"first step fails{error} after the instances are up.{prescaled} Use a batch size that is a multiple of "
            f"{mb} ({suggestion}), or change microbatches.{assumed}",
            severity=Severity.WARNING if assumed else Severity.ERROR,
            job_facts=tuple(feature for feature in (self.feature("MB"),) if feature.state is Tri.ON),
        )


def _is_parameter(expr: cst.BaseExpression, scope: cst.CSTNode) -> bool:
    if not isinstance(expr, cst.Name) or not isinstance(scope, cst.FunctionDef):
        return False
    params = scope.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    every += [star for star in (params.star_arg, params.star_kwarg) if isinstance(star, cst.Param)]
    return any(param.name.value == expr.value for param in every)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
