"""SMP201: a loader that keeps a last, smaller batch feeds ``smp.step``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.edits import AppendElement, NodeEdit, ReplaceNode
from smpfix.base.findings import Applicability, Severity
from smpfix.base.flavour import BOTH
from smpfix.base.parents import ParentIndex
from smpfix.fixes.arguments import append_arguments
from smpfix.job.groups import data_parallelism
from smpfix.job.jobfacts import FeatureState, Tri
from smpfix.program.data.dataloaders import (
    DATALOADER_POSITIONS,
    is_dataloader,
    is_distributed_sampler,
)
from smpfix.program.data.step_feeds import StepFeeds
from smpfix.program.flow.call_arguments import (
    CallArguments,
    Passed,
    call_arguments,
    unpacked_dict_literal,
)
from smpfix.program.flow.script_numbers import ResolvedNumber
from smpfix.program.paths.branches import Reach
from smpfix.program.tensorflow.datasets import is_tf_dataset
from smpfix.rules.data_pipeline._dataset_sizes import DatasetSizes, Samples
from smpfix.rules.rule import FixAvailability, PendingFix, Rule, TensorParallelism
from smpfix.rules.titles import snippet

# Where the drop keyword sits among the positional parameters.
_TORCH_DROP_LAST = 8
_TF_DROP_REMAINDER = {"batch": 1, "padded_batch": 3}


@dataclass(frozen=True)
class _Batching:
    """A batching call that may keep a last partial batch, and how to make it drop it."""

    call: cst.Call
    keyword: str
    # ``drop_last=False`` in the call, or in a ``**`` dict it unpacks.
    explicit_false: Optional[Passed]
    tensorflow: bool
    # The call unpacks a literal dict (``**kwargs``), which smpfix read.
    unpacks: bool = False


@dataclass(frozen=True)
class _LastBatch:
    """The arithmetic of the last batch, when the samples and the batch size are known."""

    samples: Samples
    batch: ResolvedNumber

    @property
    def sizes(self) -> list[int]:
        """The possible sizes of the last batch (0: the batches come out even)."""
        return sorted({n % self.batch.value for n in self.samples.counts})

    @property
    def batch_counts(self) -> set[int]:
        return {-(-n // self.batch.value) for n in self.samples.counts}

    def words(self) -> str:
        """ "`datasets.MNIST(...)` holds 60000 samples (...); 60000 samples in batches of 64 leave a
        last batch of 32"."""
        counts = " or ".join(str(n) for n in sorted(self.samples.counts))
        per_rank = " per rank" if self.samples.per_rank else ""
        sizes = " or ".join(str(size) for size in self.sizes)
        batch = f" ({self.batch.how})" if self.batch.how else ""
        how = "; ".join(self.samples.how)
        return (
            f"{how}; {counts} samples{per_rank} in batches of {self.batch.value}{batch} leave a"
            f" last batch of {sizes}"
        )


class LastBatchNotDropped(Rule):
    flavours = BOTH
    summary = (
        "A `DataLoader` without `drop_last=True` (or a `tf.data` `.batch()` without"
        " `drop_remainder=True`) feeds `smp.step`; its last, smaller batch cannot be split into"
        " microbatches."
    )
    fix_availability = FixAvailability.SOMETIMES_SAFE
    depends_on = ("MB",)
    tensor_parallelism = TensorParallelism.NONE

    def leave_Module(self, node: cst.Module) -> None:
        if not self.program.facts.step_functions and not self._has_fit_call():
            return
        candidates = [
            found
            for call in self.program.facts.call_order
            if (found := self._candidate(call)) is not None
        ]
        if not candidates:
            return
        index = self.program.parents
        self._sizes = DatasetSizes(self.program.file, self.program.numbers, self._runs)
        loaders = StepFeeds(self.program.file)
        datasets = StepFeeds(self.program.file, datasets=True)
        for batching in candidates:
            feed = (datasets if batching.tensorflow else loaders).feed_of(batching.call)
            if feed is not None:
                self._flag(batching, feed, index)

    def _runs(self, node: cst.CSTNode) -> bool:
        return self.program.branches.reach(node).reach is not Reach.NEVER

    def _has_fit_call(self) -> bool:
        return any(
            type(c.func) is cst.Attribute and c.func.attr.value == "fit"
            for c in self.program.facts.call_order
        )

    # -- candidates -------------------------------------------------------------------------
    def _candidate(self, call: cst.Call) -> Optional[_Batching]:
        func = call.func
        loader = is_dataloader(call, self.program.facts)
        if not loader and not (
            type(func) is cst.Attribute and func.attr.value in _TF_DROP_REMAINDER
        ):
            return None  # most calls are neither: tested before their arguments are read
        arguments = call_arguments(call, self.program.facts)
        if arguments is None:
            return None  # `*args`, or a `**` dict smpfix cannot read, may set the keyword
        if loader:
            return self._torch_candidate(arguments)
        if arguments.unpacked or any(arg.star for arg in call.args):
            return None
        if type(func) is cst.Attribute:
            if self._is_dataset(func.value, set()) and not self._repeats_forever(
                func.value, call, set()
            ):
                return self._missing(
                    arguments,
                    "drop_remainder",
                    _TF_DROP_REMAINDER[func.attr.value],
                    tensorflow=True,
                )
        return None

    def _torch_candidate(self, arguments: CallArguments) -> Optional[_Batching]:
        batch_sampler = arguments.passed("batch_sampler", DATALOADER_POSITIONS["batch_sampler"])
        if any(self.program.facts.literal(value) is not None for value in batch_sampler.values):
            return None  # drop_last is the batch sampler's own setting
        batch_size = arguments.passed("batch_size", 1)
        if any(self.program.facts.literal(value) is None for value in batch_size.values):
            return None  # batch_size=None: the loader yields single samples, never a partial batch
        return self._missing(arguments, "drop_last", _TORCH_DROP_LAST, tensorflow=False)

    def _missing(
        self, arguments: CallArguments, keyword: str, position: int, *, tensorflow: bool
    ) -> Optional[_Batching]:
        """The call, when the keyword is absent or literally False; None when set or unknowable."""
        passed = arguments.passed(keyword, position)
        if passed.absent:
            return _Batching(arguments.call, keyword, None, tensorflow, bool(arguments.unpacked))
        value = passed.certain
        if value is not None and self.program.facts.literal(value) is False:
            return _Batching(arguments.call, keyword, passed, tensorflow, bool(arguments.unpacked))
        return None

    def _is_dataset(self, expr: cst.BaseExpression, seen: set[str]) -> bool:
        """Is ``expr`` a ``tf.data`` pipeline
        (``tf.data.Dataset.from_tensor_slices(...).map(f)``)?"""
        return is_tf_dataset(expr, self.program.facts, seen)

    def _repeats_forever(self, expr: cst.BaseExpression, batch: cst.Call, seen: set[str]) -> bool:
        """Was the pipeline ``.repeat()``-ed without a count before ``batch``? Then no remainder
        exists."""
        if type(expr) is cst.Call and type(expr.func) is cst.Attribute:
            if expr.func.attr.value == "repeat" and self._unbounded(expr):
                return True
            return self._repeats_forever(expr.func.value, batch, seen)
        if type(expr) is cst.Name and expr.value not in seen:
            seen.add(expr.value)
            return any(
                type(a.value) is cst.Call
                and self.program.order.runs_before(a.value, batch)
                and self._repeats_forever(a.value, batch, seen)
                for a in self.program.facts.assignments.get(expr.value, ())
            )
        return False

    def _unbounded(self, repeat: cst.Call) -> bool:
        count = argument(repeat, "count", 0)
        return count is None or self.program.facts.literal(count.value) in (None, -1)

    def _same_batch_count(self, call: cst.Call, index: ParentIndex) -> bool:
        """Every data-parallel rank runs as many batches: the loader shards with a
        ``DistributedSampler`` (it pads every rank to the same length), or it does not shard at
        all (every rank reads the whole dataset)."""
        if self._shards_evenly(call):
            return True
        loaders = self.program.training_loaders
        return loaders.may_be_unsharded(call) and loaders.unsharded(call)

    def _shards_evenly(self, call: cst.Call) -> bool:
        """A ``DistributedSampler`` pads every rank to the same length, so batch counts match."""
        arguments = call_arguments(call, self.program.facts)
        sampler = (
            arguments.passed("sampler", DATALOADER_POSITIONS["sampler"]).certain
            if arguments is not None
            else None
        )
        return sampler is not None and is_distributed_sampler(
            self.program.facts.names.value(sampler), self.program.facts
        )

    # -- the arithmetic ---------------------------------------------------------------------
    def _last_batch(self, batching: _Batching) -> Optional[_LastBatch]:
        """How many samples one rank's loader (or dataset) holds per epoch and in what batches."""
        call = batching.call
        if batching.tensorflow:
            assert type(call.func) is cst.Attribute
            samples = self._sizes.samples(call.func.value)
            size = argument(call, "batch_size", 0)
            batch = self.program.numbers.resolve(size.value) if size is not None else None
        else:
            samples = self._sizes.loader_samples(call)
            arguments = call_arguments(call, self.program.facts)
            passed = arguments.passed("batch_size", 1) if arguments is not None else None
            if passed is None:
                return None
            given = passed.certain
            batch = (
                ResolvedNumber(1, "the DataLoader default")
                if passed.absent
                else self.program.numbers.resolve(given)
                if given is not None
                else None
            )
        if samples is None or batch is None or batch.value < 1:
            return None
        return _LastBatch(samples, batch)

    def _split_verdict(self, last: _LastBatch, mb: FeatureState) -> Optional[tuple[Severity, str]]:
        """With the last batch known: None when it provably splits, else the severity and the
        arithmetic in words."""
        if not any(last.sizes):
            return None  # the batches come out even: no smaller last batch exists
        microbatches = self.program.numbers.microbatches()
        assumed = last.batch.assumed
        if microbatches is not None and microbatches.value > 1:
            count = microbatches.value
            if last.batch.value % count:
                return None  # every batch fails to split, not only the last: SMP802's finding
            failing = [size for size in last.sizes if size % count]
            if not failing:
                return None
            assumed = assumed or microbatches.assumed
            source = (
                f"; microbatches is {count}: {microbatches.how}"
                if microbatches.how and (assumed or mb.state is not Tri.ON)
                else ""
            )
            text = (
                f"{last.words()}, which {count} microbatches cannot split ({failing[0]} % {count} ="
                f" {failing[0] % count}{source})"
            )
            severity = Severity.ERROR if mb.state is Tri.ON and not assumed else Severity.WARNING
        else:
            common = math.gcd(last.batch.value, *last.sizes)
            text = f"{last.words()}, which splits only if microbatches divides {common}"
            severity = Severity.WARNING
        if assumed:
            text += (
                " (no launcher of this script is among the checked paths: if the job passes other"
                " values as hyperparameters, check those)"
            )
        return severity, text

    # -- reporting --------------------------------------------------------------------------
    def _fix(self, batching: _Batching, index: ParentIndex, safe: bool) -> Optional[PendingFix]:
        keyword = batching.keyword
        applicability = Applicability.SAFE if safe else Applicability.UNSAFE
        if batching.explicit_false is not None:
            written = batching.explicit_false.written
            if written is None:
                return None  # the dict may feed other loaders (evaluation) too: a person decides
            edits: tuple[NodeEdit, ...] = (ReplaceNode(written.value, "True"),)
            return PendingFix(applicability, f"Set `{keyword}=True`", edits)
        if batching.unpacks:
            return self._fix_unpacking(batching, applicability)
        insertion = append_arguments(batching.call, [f"{keyword}=True"])
        if insertion is None:
            return None
        return PendingFix(applicability, f"Add `{keyword}=True`", (insertion,))

    def _fix_unpacking(
        self, batching: _Batching, applicability: Applicability
    ) -> Optional[PendingFix]:
        """A loader that unpacks a dict: the key goes into the dict display it comes from, so it
        is never passed twice (``DataLoader(ds, **kwargs, drop_last=True)`` raises TypeError once
        ``kwargs`` gains ``drop_last``); unsafe when other calls unpack that dict too, or when
        there is no display to add it to."""
        keyword = batching.keyword
        literal = unpacked_dict_literal(batching.call, self.program.facts)
        if literal is None:
            insertion = append_arguments(batching.call, [f"{keyword}=True"])
            if insertion is None:
                return None
            return PendingFix(
                Applicability.UNSAFE,
                f"Add `{keyword}=True` (review: if the unpacked dict ever holds `{keyword}`, the"
                " call raises TypeError for the keyword passed twice)",
                (insertion,),
            )
        entry = f'"{keyword}": True'
        edit: NodeEdit = (
            AppendElement(literal.display, (entry,))
            if literal.display.elements
            else ReplaceNode(literal.display, "{" + entry + "}")
        )
        if literal.only_here:
            return PendingFix(applicability, f"Add `{entry}` to the unpacked dict", (edit,))
        return PendingFix(
            Applicability.UNSAFE,
            f"Add `{entry}` to the unpacked dict (review: other calls unpack it too)",
            (edit,),
        )

    def _flag(self, batching: _Batching, feed: str, index: ParentIndex) -> None:
        mb = self.feature("MB")
        keyword = batching.keyword
        code = self.program.code_for(batching.call.func)
        if type(batching.call.func) is cst.Attribute and len(code) > 40:
            code = f".{batching.call.func.attr.value}"
        called = snippet(f"{code}(...)", 30)
        if batching.tensorflow:
            kept_what = "the dataset's last, smaller batch"
            reach = f"the dataset reaches {feed}"
        else:
            kept_what = "the last, smaller batch of every epoch"
            reach = f"its batches reach {feed}"
        if batching.explicit_false is not None:
            kept = f"`{keyword}=False`" + (
                " in the dict it unpacks" if batching.explicit_false.from_dict else ""
            )
        else:
            kept = f"no `{keyword}=True`" + (
                ", in the call or the dict it unpacks" if batching.unpacks else ""
            )
        evidence = [f"`{code}(...)` keeps {kept_what} ({kept}) and {reach}"]
        error = "" if batching.tensorflow else " (`TensorSplitError`)"
        split = (
            "`smp.step` splits every batch into `microbatches` equal parts, so a last batch whose"
            f" size is not a multiple of the microbatch count fails to split{error} at the end of"
            " an epoch."
        )
        job_facts: tuple[FeatureState, ...] = (mb,)
        last = self._last_batch(batching)
        if mb.state is Tri.OFF:
            dp = data_parallelism(self.program.job)
            if dp.state is Tri.OFF or (
                not batching.tensorflow and self._same_batch_count(batching.call, index)
            ):
                return
            if last is not None and len(last.batch_counts) == 1:
                return  # every rank holds as many samples, so runs as many batches
            severity = Severity.HINT
            title = f"{called} keeps a last, smaller batch: ranks may run unequal batch counts"
            explanation = (
                "Without microbatching the split cannot fail, but with more than one"
                " data-parallel rank, ranks whose data shards differ in size run different"
                " numbers of batches and the gradient allreduce of the extra step waits"
                " forever. Give every data-parallel rank the same number of batches: equal"
                " shards (a `DistributedSampler`) and"
                f" `{keyword}=True`."
            )
            job_facts = (mb, dp)
        else:
            explanation = f"{split} Pass `{keyword}=True`."
            if last is not None:
                verdict = self._split_verdict(last, mb)
                if verdict is None:
                    return  # the arithmetic says every last batch splits
                severity, arithmetic = verdict
                evidence.append(arithmetic)
                title = f"{called} keeps a last batch that may not split into microbatches"
                if severity is Severity.ERROR:
                    title = f"{called} keeps a last batch that does not split into microbatches"
            elif mb.state is Tri.ON:
                severity = Severity.ERROR
                title = f"{called} keeps the last, smaller batch: `smp.step` fails to split it"
            else:
                severity = Severity.WARNING
                title = f"{called} keeps a last, smaller batch: fails to split if microbatches > 1"
        fix = self._fix(batching, index, safe=mb.state is Tri.ON)
        self.report(
            batching.call,
            title,
            explanation=explanation,
            evidence=evidence,
            severity=severity,
            fix=fix,
            job_facts=job_facts,
        )
