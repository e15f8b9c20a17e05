"""How many samples a dataset expression holds, when that is knowable.

A rule that knows the dataset's length, the batch size and the microbatch count can do the
arithmetic of the last batch instead of warning about every loader: the official MNIST
example's 60000 training images in batches of 64 leave a last batch of 32, which 4
microbatches split. The length is known from a published dataset
(``smpfix.rules.data_pipeline._published_datasets``), carried through what keeps or sets it:

- names, by the assignments that reach the use (``smpfix.program.names``), also tuple
  targets (``(x_train, y_train), (x_test, y_test) = mnist.load_data()``); an assignment on
  a path the job never takes (``if smp.dp_size() > 1:`` with one data-parallel rank) is left
  out;
- array work that keeps the rows: arithmetic with a number, ``astype``/``reshape(-1, ...)``,
  ``x[..., None]``, ``np.expand_dims``, ``torch.from_numpy``; a slice ``x[:1000]`` keeps what
  Python's slicing keeps;
- PyTorch: ``Subset`` over a sequence whose length is known, ``random_split`` with literal
  lengths or fractions (as PyTorch rounds them), ``ConcatDataset``, ``TensorDataset``;
- ``tf.data``: ``from_tensor_slices``, ``range``, ``zip``, and the methods that keep the count
  (``shuffle``, ``map``, ``prefetch``, ``cache``) or change it by a known rule (``take``,
  ``skip``, ``repeat(n)``, ``shard(k, i)``).

Counts are sets: a value may come from several paths, and a shard ``k`` ways by an unknown
rank leaves ``n // k`` samples on some ranks and one more on others; a rule checks them all.
Anything else (a parameter, a dataset class of the project, a filter, a dataset object whose
attributes the file sets, as in ``train_set.data = train_set.data[:1000]``) is unknown.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Optional, Union

import libcst as cst

from smpfix.base.calls import argument, target_path
from smpfix.job.groups import group_size
from smpfix.program.data.dataloaders import (
    DATALOADER_POSITIONS,
    SAMPLER_POSITIONS,
    SUBSETS,
    WHOLE_DATASET_SAMPLERS,
    is_distributed_sampler,
)
from smpfix.program.facts import FileFacts
from smpfix.program.flow.call_arguments import call_arguments
from smpfix.program.flow.script_numbers import ScriptNumbers
from smpfix.program.project.parsed_file import ParsedFile
from smpfix.program.tensorflow.datasets import is_tf_dataset
from smpfix.rules.data_pipeline._published_datasets import KERAS, keras_dataset, torchvision_split

_MAX_DEPTH = 16
# More possible counts than this is not worth carrying.
_MAX_COUNTS = 8

# Calls whose result has the rows of their first argument.
_SAME_ROWS = frozenset(
    {
        "numpy.array",
        "numpy.asarray",
        "numpy.ascontiguousarray",
        "numpy.float32",
        "torch.tensor",
        "torch.as_tensor",
        "torch.from_numpy",
        "torch.Tensor",
        "torch.FloatTensor",
        "torch.LongTensor",
        "tensorflow.cast",
        "tensorflow.convert_to_tensor",
        "tensorflow.constant",
    }
)
_NEW_ROW_SHAPE = frozenset({"tensorflow.keras.utils.to_categorical", "keras.utils.to_categorical"})
_EXPAND_DIMS = frozenset({"numpy.expand_dims", "tensorflow.expand_dims"})
# Array and tensor methods that keep the rows and the row shape.
_SAME_ROW_METHODS = frozenset(
    {
        "astype",
        "float",
        "double",
        "long",
        "int",
        "half",
        "to",
        "cuda",
        "cpu",
        "copy",
        "contiguous",
        "numpy",
        "clone",
        "detach",
    }
)
# tf.data methods that keep the number of elements.
_SAME_COUNT = frozenset({"shuffle", "map", "prefetch", "cache", "with_options", "ignore_errors"})
_OPERATORS: dict[type, Callable[[int, int], int]] = {
    cst.Add: operator.add,
    cst.Subtract: operator.sub,
    cst.Multiply: operator.mul,
    cst.FloorDivide: operator.floordiv,
}
_RANDOM_SPLIT = frozenset(
    {"torch.utils.data.random_split", "torch.utils.data.dataset.random_split"}
)
_CONCAT = frozenset({"torch.utils.data.ConcatDataset", "torch.utils.data.dataset.ConcatDataset"})
_TENSOR_DATASET = frozenset(
    {"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"}
)


@dataclass(frozen=True)
class Samples:
    """How many samples: the possible counts, and in words how they were found.
    ``row_size``: the elements of one sample of an array, for ``reshape(-1, ...)``."""

    counts: frozenset[int]
    how: tuple[str, ...]
    row_size: Optional[int] = None
    # Divided among the ranks (a sampler, a shard): the counts are one rank's.
    per_rank: bool = False

    def then(self, counts: Iterable[int], step: str, *, per_rank: bool = False) -> Samples:
        return Samples(
            frozenset(counts),
            (*self.how, step) if step else self.how,
            self.row_size,
            self.per_rank or per_rank,
        )


# A value: samples, a tuple of values (``load_data()``, ``random_split``), or unknown.
SampleValue = Union[Samples, tuple["Optional[SampleValue]", ...], None]


class DatasetSizes:
    """Answers ``samples(expr)`` and ``loader_samples(call)`` for one file."""

    def __init__(
        self, file: ParsedFile, numbers: ScriptNumbers, runs: Callable[[cst.CSTNode], bool]
    ) -> None:
        """``runs(node)`` is False when the job never runs ``node`` (its branch is ruled out)."""
        self.file = file
        self.facts = file.facts
        self.flow = file.facts.names
        self.numbers = numbers
        self.runs = runs
        self._altered: Optional[frozenset[str]] = None

    def samples(self, expr: cst.BaseExpression) -> Optional[Samples]:
        value = self._value(expr, 0)
        return value if isinstance(value, Samples) else None

    def loader_samples(self, loader: cst.Call) -> Optional[Samples]:
        """The samples one rank's ``DataLoader`` walks in an epoch: its dataset's, divided by a
        ``DistributedSampler`` (which pads every rank to ``ceil(n / replicas)``)."""
        arguments = call_arguments(loader, self.facts)
        if arguments is None:
            return None
        dataset = arguments.passed("dataset", DATALOADER_POSITIONS["dataset"]).certain
        sampler = arguments.passed("sampler", DATALOADER_POSITIONS["sampler"])
        if dataset is None:
            return None
        if sampler.absent:
            return self.samples(dataset)
        given = sampler.certain
        return self._sampler(given) if given is not None else None

    @property
    def altered(self) -> frozenset[str]:
        """Names whose attributes the file sets (``train_set.data = train_set.data[:1000]``): a
        dataset object changed in place may hold any number of samples."""
        if self._altered is None:
            found: set[str] = set()
            for node in self.file.nodes_of(cst.Assign, cst.AugAssign, cst.AnnAssign):
                targets: list[cst.BaseExpression] = []
                if type(node) is cst.Assign:
                    targets = [target.target for target in node.targets]
                elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
                    targets = [node.target]
                for target in targets:
                    while isinstance(target, (cst.Attribute, cst.Subscript)):
                        if type(target) is cst.Attribute and type(target.value) is cst.Name:
                            found.add(target.value.value)
                        target = target.value
            self._altered = frozenset(found)
        return self._altered

    # -- one expression -------------------------------------------------------------------
    def _value(self, expr: cst.BaseExpression, depth: int) -> SampleValue:
        if depth > _MAX_DEPTH:
            return None
        if type(expr) is cst.Name:
            return self._name(expr, depth)
        if type(expr) is cst.Tuple:
            return tuple(
                self._value(element.value, depth + 1) if type(element) is cst.Element else None
                for element in expr.elements
            )
        if type(expr) is cst.Call:
            return self._call(expr, depth)
        if type(expr) is cst.Subscript:
            return self._subscript(expr, depth)
        if type(expr) is cst.BinaryOperation:
            return self._arithmetic(expr, depth)
        return None

    def _name(self, name: cst.Name, depth: int) -> SampleValue:
        if name.value in self.altered:
            return None
        reaching = self.flow.reaching(name.value, name)
        values: list[SampleValue] = []
        for assignment in reaching.assignments:
            if self.runs(assignment.value):
                values.append(self._value(assignment.value, depth + 1))
        for other in reaching.others:
            if not self.runs(other):
                continue
            if type(other) is not cst.Assign:
                return None
            values.append(self._unpacked(other, name.value, depth))
        return _either(values)

    def _unpacked(self, statement: cst.Assign, name: str, depth: int) -> SampleValue:
        """The part of ``a, (b, c) = value`` that ``name`` takes."""
        for target in statement.targets:
            path = target_path(target.target, name)
            if path is None:
                continue
            value = self._value(statement.value, depth + 1)
            for index in path:
                if not isinstance(value, tuple) or index >= len(value):
                    return None
                value = value[index]
            return value
        return None

    def _call(self, call: cst.Call, depth: int) -> SampleValue:
        published = torchvision_split(call, self.facts)
        if published is not None:
            return Samples(
                frozenset({published.count}),
                (f"`{self._code(call)}` holds {published.count} samples ({published.name})",),
            )
        keras = keras_dataset(call, self.facts)
        if keras is not None:
            return _keras(keras, self._code(call))
        qualified = self.facts.qualified_name(call.func) or ""
        first = _positional(call, 0)
        if qualified in _SAME_ROWS or qualified in _NEW_ROW_SHAPE or qualified in _TENSOR_DATASET:
            value = self._value(first, depth + 1) if first is not None else None
            if isinstance(value, Samples) and qualified in _NEW_ROW_SHAPE:
                return replace(value, row_size=None)
            return value if isinstance(value, Samples) else None
        if qualified in _EXPAND_DIMS:
            axis = argument(call, "axis", 1)
            if first is None or axis is None or self.facts.literal(axis.value) in (0, None):
                return None
            return self._value(first, depth + 1)
        if qualified in SUBSETS:
            indices = argument(call, "indices", 1)
            return self._sequence_length(indices.value, depth) if indices is not None else None
        if qualified in _RANDOM_SPLIT:
            return self._random_split(call, depth)
        if qualified in _CONCAT:
            return self._concat(call, depth)
        if qualified.startswith("tensorflow.data."):
            return self._tf_source(call, qualified, depth)
        if type(call.func) is cst.Attribute:
            return self._method(call, call.func, depth)
        return None

    def _method(self, call: cst.Call, func: cst.Attribute, depth: int) -> SampleValue:
        method = func.attr.value
        if is_tf_dataset(func.value, self.facts):
            return self._tf_method(call, method, self._value(func.value, depth + 1))
        receiver = self._value(func.value, depth + 1)
        if not isinstance(receiver, Samples):
            return None
        if method in _SAME_ROW_METHODS:
            return receiver
        if method in ("reshape", "view"):
            return self._reshape(call, func.value, receiver)
        return None

    def _reshape(self, call: cst.Call, receiver: cst.BaseExpression, array: Samples) -> SampleValue:
        """``x.reshape(-1, 28, 28, 1)`` keeps the rows when one row still holds ``row_size``
        elements; ``x.reshape(x.shape[0], ...)`` keeps them whatever the row shape."""
        shape: Sequence[cst.BaseExpression] = [
            arg.value for arg in call.args if arg.keyword is None and not arg.star
        ]
        if len(shape) == 1 and isinstance(shape[0], (cst.Tuple, cst.List)):
            shape = [element.value for element in shape[0].elements]
        if not shape:
            return None
        if _is_row_count(shape[0], receiver):
            return replace(array, row_size=None)
        if self.facts.literal(shape[0]) != -1 or array.row_size is None:
            return None
        sizes = [self.facts.literal(dimension) for dimension in shape[1:]]
        if not all(isinstance(size, int) and size > 0 for size in sizes):
            return None
        return array if math.prod(sizes) == array.row_size else None

    def _subscript(self, subscript: cst.Subscript, depth: int) -> SampleValue:
        value = self._value(subscript.value, depth + 1)
        elements = [element.slice for element in subscript.slice]
        if isinstance(value, tuple):
            index = (
                self.facts.literal(elements[0].value)
                if len(elements) == 1 and type(elements[0]) is cst.Index
                else None
            )
            return (
                value[index]
                if isinstance(index, int) and -len(value) <= index < len(value)
                else None
            )
        if not isinstance(value, Samples) or not elements:
            return None
        first, rest = elements[0], elements[1:]
        shaped = value if all(_keeps_row(e) for e in rest) else replace(value, row_size=None)
        if type(first) is cst.Index and type(first.value) is cst.Ellipsis:
            return shaped
        if type(first) is not cst.Slice:
            return None
        if first.lower is None and first.upper is None and first.step is None:
            return shaped
        bounds = [self._bound(part) for part in (first.lower, first.upper, first.step)]
        if any(bound is False for bound in bounds):
            return None
        rows = slice(*bounds)  # type: ignore[arg-type]
        counts = {len(range(n)[rows]) for n in value.counts}
        return shaped.then(counts, f"`{self._code(subscript)}` keeps {_counts(counts)}")

    def _bound(self, part: Optional[cst.BaseExpression]) -> Union[int, None, bool]:
        if part is None:
            return None
        found = self.numbers.resolve(part)
        return found.value if found is not None else False

    def _arithmetic(self, operation: cst.BinaryOperation, depth: int) -> SampleValue:
        """``x_train / 255.0``: an array and a number keep the array's rows."""
        left, right = (
            self._value(operation.left, depth + 1),
            self._value(operation.right, depth + 1),
        )
        if isinstance(left, Samples) and (
            right is None and _is_number(operation.right, self.facts)
        ):
            return left
        if isinstance(right, Samples) and (left is None and _is_number(operation.left, self.facts)):
            return right
        return None

    # -- PyTorch wrappers -----------------------------------------------------------------
    def _sequence_length(self, expr: cst.BaseExpression, depth: int) -> SampleValue:
        """The length of a literal list, ``range(...)`` or ``list(range(...))`` (``len(ds)`` read as
        the dataset's)."""
        if isinstance(expr, (cst.List, cst.Tuple)) and not any(
            type(e) is cst.StarredElement for e in expr.elements
        ):
            count = len(expr.elements)
            return Samples(frozenset({count}), (f"the subset's {count} indices",))
        if type(expr) is cst.Name:
            found = self.flow.reaching(expr.value, expr).single
            return (
                self._sequence_length(found.value, depth + 1)
                if found is not None and depth < _MAX_DEPTH
                else None
            )
        if type(expr) is not cst.Call or type(expr.func) is not cst.Name or not expr.args:
            return None
        if expr.func.value in ("list", "tuple") and len(expr.args) == 1:
            return self._sequence_length(expr.args[0].value, depth + 1)
        return self._range(expr, depth) if expr.func.value == "range" else None

    def _range(self, call: cst.Call, depth: int) -> SampleValue:
        """``range(a, b, c)`` (or ``tf.data.Dataset.range``) with known bounds."""
        if len(call.args) > 3 or any(arg.keyword or arg.star for arg in call.args):
            return None
        options = [self._integers(arg.value, depth) for arg in call.args]
        if any(option is None for option in options):
            return None
        counts = {len(range(*combination)) for combination in _combinations(options)}
        return (
            Samples(frozenset(counts), (f"`{self._code(call)}` has {_counts(counts)}",))
            if len(counts) <= _MAX_COUNTS
            else None
        )

    def _integers(self, expr: cst.BaseExpression, depth: int) -> Optional[list[int]]:
        """The possible values of an integer expression; ``len(ds)`` is the dataset's count."""
        if depth > _MAX_DEPTH:
            return None
        if (
            type(expr) is cst.Call
            and type(expr.func) is cst.Name
            and expr.func.value == "len"
            and len(expr.args) == 1
        ):
            inner = self.samples(expr.args[0].value)
            return sorted(inner.counts) if inner is not None else None
        combine = _OPERATORS.get(type(expr.operator)) if type(expr) is cst.BinaryOperation else None
        if type(expr) is cst.BinaryOperation and combine is not None:
            left, right = (
                self._integers(expr.left, depth + 1),
                self._integers(expr.right, depth + 1),
            )
            if (
                left is None
                or right is None
                or (type(expr.operator) is cst.FloorDivide and 0 in right)
            ):
                return None
            return sorted({combine(a, b) for a in left for b in right})
        found = self.numbers.resolve(expr)
        return [found.value] if found is not None else None

    def _random_split(self, call: cst.Call, depth: int) -> SampleValue:
        dataset, lengths = argument(call, "dataset", 0), argument(call, "lengths", 1)
        whole = self._value(dataset.value, depth + 1) if dataset is not None else None
        parts = self.facts.literal(lengths.value) if lengths is not None else None
        if (
            not isinstance(whole, Samples)
            or not isinstance(parts, (list, tuple))
            or len(whole.counts) != 1
        ):
            return None
        total = next(iter(whole.counts))
        sizes = _split_lengths(total, list(parts))
        if sizes is None:
            return None
        return tuple(
            whole.then({size}, f"`random_split` gives part {i + 1} {size} samples")
            for i, size in enumerate(sizes)
        )

    def _concat(self, call: cst.Call, depth: int) -> SampleValue:
        first = _positional(call, 0)
        if not isinstance(first, (cst.List, cst.Tuple)):
            return None
        parts = [self._value(element.value, depth + 1) for element in first.elements]
        if not parts or not all(
            isinstance(part, Samples) and len(part.counts) == 1 for part in parts
        ):
            return None
        total = sum(next(iter(part.counts)) for part in parts if isinstance(part, Samples))
        how = tuple(step for part in parts if isinstance(part, Samples) for step in part.how)
        return Samples(frozenset({total}), (*how, f"`ConcatDataset` joins them: {total} samples"))

    def _sampler(self, expr: cst.BaseExpression) -> Optional[Samples]:
        if type(expr) is cst.Name:
            found = self.flow.reaching(expr.value, expr).single
            if found is None or not self.runs(found.value):
                return None
            expr = found.value
        if type(expr) is not cst.Call:
            return None
        dataset = argument(
            expr, "data_source" if not is_distributed_sampler(expr, self.facts) else "dataset", 0
        )
        whole = self.samples(dataset.value) if dataset is not None else None
        if whole is None:
            return None
        if self.facts.qualified_name(expr.func) in WHOLE_DATASET_SAMPLERS:
            return whole if argument(expr, "num_samples", 2) is None else None
        if not is_distributed_sampler(expr, self.facts):
            return None
        return self._distributed(expr, whole)

    def _distributed(self, sampler: cst.Call, whole: Samples) -> Optional[Samples]:
        replicas_arg = argument(sampler, "num_replicas", SAMPLER_POSITIONS["num_replicas"])
        if replicas_arg is not None and self.facts.literal(replicas_arg.value) is not None:
            found = self.numbers.resolve(replicas_arg.value)
            replicas, how = (
                (found.value, found.how or str(found.value)) if found is not None else (None, "")
            )
        else:
            world = group_size("size", self.numbers.job)  # torch.distributed's world: every process
            replicas, how = (
                (world.value, f"the world size {world.value} ({world.how})")
                if world is not None
                else (None, "")
            )
        drop = argument(sampler, "drop_last", 5)
        dropping = self.facts.literal(drop.value) if drop is not None else False
        if replicas is None or replicas < 1 or not isinstance(dropping, bool):
            return None
        if dropping:
            counts = {n // replicas for n in whole.counts}
            step = (
                f"a `DistributedSampler` over {replicas} replicas ({how}) with `drop_last=True`"
                f" gives every rank {_counts(counts)}"
            )
        else:
            counts = {-(-n // replicas) for n in whole.counts}
            step = (
                f"a `DistributedSampler` over {replicas} replicas ({how}) pads every rank to"
                f" {_counts(counts)}"
            )
        return whole.then(counts, step, per_rank=True)

    # -- tf.data ----------------------------------------------------------------------------
    def _tf_source(self, call: cst.Call, qualified: str, depth: int) -> SampleValue:
        method = qualified.rsplit(".", 1)[1]
        first = _positional(call, 0)
        if first is None:
            return None
        if method == "from_tensor_slices":
            return _any_rows(self._components(first, depth))
        if method == "range":
            return self._range(call, depth)
        if method == "zip":
            parts = self._components(first, depth)
            counts = [part for part in parts if isinstance(part, Samples)]
            if (
                len(counts) != len(parts)
                or not counts
                or any(len(part.counts) != 1 for part in counts)
            ):
                return None
            smallest = min(next(iter(part.counts)) for part in counts)
            return counts[0].then({smallest}, f"`Dataset.zip` stops at the shortest: {smallest}")
        return None

    def _components(self, expr: cst.BaseExpression, depth: int) -> list[SampleValue]:
        """The tensors of ``(x, y)`` or ``{"x": x}``, each as a value."""
        if isinstance(expr, (cst.Tuple, cst.List)):
            return [self._value(element.value, depth + 1) for element in expr.elements]
        if type(expr) is cst.Dict:
            return [
                self._value(element.value, depth + 1)
                for element in expr.elements
                if type(element) is cst.DictElement
            ]
        value = self._value(expr, depth + 1)
        return list(value) if isinstance(value, tuple) else [value]

    def _tf_method(self, call: cst.Call, method: str, dataset: SampleValue) -> SampleValue:
        if not isinstance(dataset, Samples):
            return None
        if method in _SAME_COUNT:
            return dataset
        if method in ("take", "skip", "repeat"):
            found = argument(call, "count", 0)
            count = self.numbers.resolve(found.value) if found is not None else None
            if count is None:
                return None
            if method == "take":
                counts = {n if count.value < 0 else min(n, count.value) for n in dataset.counts}
            elif method == "skip":
                counts = {0 if count.value < 0 else max(n - count.value, 0) for n in dataset.counts}
            elif count.value >= 0:
                counts = {n * count.value for n in dataset.counts}
            else:
                return None  # repeats forever
            return dataset.then(counts, f"`.{method}({count.value})` leaves {_counts(counts)}")
        if method == "shard":
            return self._shard(call, dataset)
        return None

    def _shard(self, call: cst.Call, dataset: Samples) -> SampleValue:
        """``.shard(k, i)`` keeps elements ``i, i + k, ...``: ``ceil((n - i) / k)``; with ``i``
        unknown, ``n // k`` on some ranks and one more on others."""
        shards, index = argument(call, "num_shards", 0), argument(call, "index", 1)
        ways = self.numbers.resolve(shards.value) if shards is not None else None
        if ways is None or ways.value < 1 or index is None:
            return None
        which = self.numbers.resolve(index.value)
        counts: set[int] = set()
        for n in dataset.counts:
            if which is not None:
                counts.add(len(range(which.value, n, ways.value)))
            else:
                counts |= {n // ways.value, -(-n // ways.value)}
        shown = ways.how or str(ways.value)
        return dataset.then(
            counts,
            f"`.shard` {ways.value} ways ({shown}) leaves a rank {_counts(counts)}",
            per_rank=True,
        )

    def _code(self, node: cst.CSTNode) -> str:
        return self.numbers.code(node)


def _keras(name: str, code: str) -> SampleValue:
    train, test, row = KERAS[name]

    def part(count: int, split: str, row_size: int) -> Samples:
        return Samples(frozenset({count}), (f"`{code}` returns {count} {split} samples",), row_size)

    return (
        (part(train, "training", row), part(train, "training", 1)),
        (part(test, "test", row), part(test, "test", 1)),
    )


def _either(values: Sequence[SampleValue]) -> SampleValue:
    """The value of a name that several assignments may give: every count any of them gives."""
    if not values or not all(isinstance(value, Samples) for value in values):
        return values[0] if len(values) == 1 else None
    # In a stable order whatever order the assignments were found in, so messages do not vary.
    samples = sorted(
        (value for value in values if isinstance(value, Samples)),
        key=lambda value: (sorted(value.counts), value.how),
    )
    counts = frozenset().union(*(value.counts for value in samples))
    if len(counts) > _MAX_COUNTS:
        return None
    how = tuple(dict.fromkeys(step for value in samples for step in value.how))
    rows = {value.row_size for value in samples}
    return Samples(
        counts,
        how,
        rows.pop() if len(rows) == 1 else None,
        any(value.per_rank for value in samples),
    )


def _any_rows(parts: Sequence[SampleValue]) -> SampleValue:
    """The rows of tensors that must agree (``from_tensor_slices((x, y))``): any one known."""
    known = [part for part in parts if isinstance(part, Samples)]
    if not known or len({part.counts for part in known}) != 1:
        return None
    return replace(known[0], row_size=None)


def _split_lengths(total: int, parts: Sequence[object]) -> Optional[list[int]]:
    """``random_split``'s lengths: integers that sum to the dataset, or fractions that sum to 1,
    floored, with the remainder spread one by one from the first part (as PyTorch does)."""
    integers = [part for part in parts if isinstance(part, int) and not isinstance(part, bool)]
    if integers and len(integers) == len(parts):
        return integers if sum(integers) == total else None
    fractions = [part for part in parts if isinstance(part, float) and 0 <= part <= 1]
    if not fractions or len(fractions) != len(parts) or not math.isclose(sum(fractions), 1):
        return None
    sizes = [math.floor(total * part) for part in fractions]
    for i in range(total - sum(sizes)):
        sizes[i % len(sizes)] += 1
    return sizes


def _positional(call: cst.Call, position: int) -> Optional[cst.BaseExpression]:
    found = argument(call, "\0", position)
    return found.value if found is not None else None


def _keeps_row(element: cst.BaseSlice) -> bool:
    """``None``/``tf.newaxis``, ``:`` and ``...`` keep what one row holds."""
    if type(element) is cst.Slice:
        return element.lower is None and element.upper is None and element.step is None
    value = element.value  # type: ignore[attr-defined]
    if isinstance(value, (cst.Ellipsis,)) or (type(value) is cst.Name and value.value == "None"):
        return True
    return type(value) is cst.Attribute and value.attr.value == "newaxis"


def _is_row_count(expr: cst.BaseExpression, array: cst.BaseExpression) -> bool:
    """``x.shape[0]`` (or ``len(x)``) of the array being reshaped, as its first dimension."""
    if (
        type(expr) is cst.Call
        and type(expr.func) is cst.Name
        and expr.func.value == "len"
        and len(expr.args) == 1
    ):
        return expr.args[0].value.deep_equals(array)
    if (
        type(expr) is cst.Subscript
        and type(expr.value) is cst.Attribute
        and expr.value.attr.value == "shape"
    ):
        index = expr.slice[0].slice if len(expr.slice) == 1 else None
        return (
            type(index) is cst.Index
            and type(index.value) is cst.Integer
            and index.value.value == "0"
            and expr.value.value.deep_equals(array)
        )
    return False


def _is_number(expr: cst.BaseExpression, facts: FileFacts) -> bool:
    value = facts.literal(expr)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _combinations(options: Sequence[Optional[list[int]]]) -> list[tuple[int, ...]]:
    found: list[tuple[int, ...]] = [()]
    for option in options:
        found = [(*prefix, value) for prefix in found for value in option or ()]
    return found


def _counts(counts: Iterable[int]) -> str:
    ordered = sorted(set(counts))
    shown = " or ".join(str(n) for n in ordered)
    return f"{shown} sample{'s' if ordered != [1] else ''}"
