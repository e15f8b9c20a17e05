"""How many samples a dataset expression holds (``smpfix.rules.data_pipeline._dataset_sizes``).

Each case binds ``probe(...)`` to the expression asked about; the answer is the set of
possible counts, or None when the length is not knowable.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst
import pytest
from conftest import parsed

from smpfix.base.walker import iter_nodes
from smpfix.job.jobfacts import DeclaredJob, JobFacts
from smpfix.program.flow.script_numbers import ScriptNumbers
from smpfix.rules.data_pipeline._dataset_sizes import DatasetSizes

TORCH = (
    "import torch\nfrom torch.utils.data import DataLoader, DistributedSampler, Subset,"
    " random_split\nfrom torchvision import datasets\n"
)
KERAS = "import numpy as np\nimport tensorflow as tf\n"


def _counts(source: str, job: Optional[dict] = None, loader: bool = False) -> Optional[set[int]]:
    file = parsed(source)
    module = file.module
    facts_job = JobFacts.resolve([DeclaredJob.stated("test", job)] if job else [])
    sizes = DatasetSizes(
        file,
        ScriptNumbers(file, facts_job, None),
        lambda node: True,
    )
    probe = next(
        node
        for node in iter_nodes(module)
        if isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name)
        and node.func.value == "probe"
    )
    expr = probe.args[0].value
    if loader:
        assert isinstance(expr, cst.Call)
        found = sizes.loader_samples(expr)
    else:
        found = sizes.samples(expr)
    return set(found.counts) if found is not None else None


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ('probe(datasets.MNIST("../data", train=True, download=True))', {60000}),
        ('probe(datasets.MNIST("../data", False))', {10000}),
        ("probe(datasets.FashionMNIST(root))", {60000}),
        ("probe(datasets.CIFAR100(root, train=False))", {10000}),
        ('probe(datasets.SVHN(root, split="test"))', {26032}),
        ("probe(datasets.STL10(root))", {5000}),
        ("probe(datasets.STL10(root, folds=3))", None),
        ('probe(datasets.EMNIST(root, split="balanced", train=False))', {18800}),
        ("probe(datasets.EMNIST(root, split=name))", None),
        ("probe(datasets.MNIST(root, train=args.train))", None),
        ("probe(datasets.ImageFolder(root))", None),
    ],
)
def test_torchvision_splits(code: str, expected: Optional[set[int]]) -> None:
    assert _counts(TORCH + code) == expected


def test_assignments_that_reach_the_use_decide() -> None:
    source = (
        TORCH
        + """
def main(args):
    if args.local_rank == 0:
        data = datasets.MNIST(root, train=True, download=True)
    data = datasets.MNIST(root, train=True, download=False)
    test = datasets.MNIST(root, train=False)
    probe(data)
"""
    )
    assert _counts(source) == {60000}
    either = (
        TORCH
        + """
def main(args):
    if args.eval:
        data = datasets.MNIST(root, train=False)
    else:
        data = datasets.CIFAR10(root)
    probe(data)
"""
    )
    assert _counts(either) == {10000, 50000}
    unknown_on_one_path = (
        TORCH
        + """
def main(args):
    data = datasets.MNIST(root)
    if args.split:
        data = SplitDataset(data, partitions=parts)
    probe(data)
"""
    )
    assert _counts(unknown_on_one_path) is None
    parameter = TORCH + "def make(data):\n    probe(data)\n"
    assert _counts(parameter) is None


def test_a_path_the_job_never_takes_is_left_out() -> None:
    source = (
        TORCH
        + """
def main():
    data = datasets.MNIST(root)
    if smp.dp_size() > 1:
        data = SplitDataset(data, partitions=parts)
    probe(data)
"""
    )
    file = parsed(source)
    module, facts = file.module, file.facts
    split = next(
        a.value
        for a in facts.assignments["data"]
        if isinstance(a.value, cst.Call) and "Split" in module.code_for_node(a.value)
    )
    sizes = DatasetSizes(
        file,
        ScriptNumbers(file, JobFacts.resolve([]), None),
        lambda node: node is not split,
    )
    probe = next(
        n
        for n in iter_nodes(module)
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == "probe"
    )
    found = sizes.samples(probe.args[0].value)
    assert found is not None and found.counts == {60000}


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("probe(Subset(datasets.MNIST(root), range(1000)))", {1000}),
        ("idx = list(range(0, 50, 2))\nprobe(Subset(full, idx))", {25}),
        ("probe(Subset(full, [1, 2, 3]))", {3}),
        ("probe(Subset(full, indices))", None),
        ("d = datasets.MNIST(root)\nprobe(Subset(d, range(len(d) - 100)))", {59900}),
        ("train, val = random_split(datasets.MNIST(root), [55000, 5000])\nprobe(val)", {5000}),
        ("train, val = random_split(datasets.MNIST(root), [0.9, 0.1])\nprobe(train)", {54000}),
        (
            "a, b, c = random_split(datasets.MNIST(root, train=False), [0.3, 0.3, 0.4])\nprobe(a)",
            {3000},
        ),
        ("a, b = random_split(datasets.STL10(root), [0.3331, 0.6669])\nprobe(a)", {1666}),
        ("train, val = random_split(datasets.MNIST(root), [50000, 5000])\nprobe(val)", None),
        (
            (
                "probe(torch.utils.data.ConcatDataset([datasets.MNIST(r), datasets.MNIST(r,"
                " train=False)]))"
            ),
            {70000},
        ),
    ],
)
def test_torch_subsets_and_splits(code: str, expected: Optional[set[int]]) -> None:
    assert _counts(TORCH + code) == expected


@pytest.mark.parametrize(
    ("code", "job", "expected"),
    [
        ("probe(DataLoader(datasets.MNIST(root), batch_size=64))", None, {60000}),
        (
            "kwargs = {'batch_size': 64}\nprobe(DataLoader(datasets.MNIST(root), **kwargs))",
            None,
            {60000},
        ),
        (
            (
                "d = datasets.CIFAR10(root)\ns = DistributedSampler(d, num_replicas=8,"
                " rank=r)\nprobe(DataLoader(d, sampler=s))"
            ),
            None,
            {6250},
        ),
        (
            (
                "d = datasets.MNIST(root, train=False)\ns = DistributedSampler(d, num_replicas=3,"
                " rank=r)\nprobe(DataLoader(d, sampler=s))"
            ),
            None,
            {3334},
        ),
        (
            (
                "d = datasets.MNIST(root, train=False)\nprobe(DataLoader(d,"
                " sampler=DistributedSampler(d, 3, r, drop_last=True)))"
            ),
            None,
            {3333},
        ),
        (
            (
                "d = datasets.MNIST(root)\ns = DistributedSampler(d, num_replicas=smp.dp_size(),"
                " rank=smp.dp_rank())\nprobe(DataLoader(d, sampler=s))"
            ),
            {"instance_count": 2, "processes_per_host": 8, "pipeline_parallel_degree": 2},
            {7500},
        ),
        (
            (
                "d = datasets.MNIST(root)\ns = DistributedSampler(d, num_replicas=smp.dp_size(),"
                " rank=smp.dp_rank())\nprobe(DataLoader(d, sampler=s))"
            ),
            None,
            None,
        ),
        (
            "d = datasets.MNIST(root)\nprobe(DataLoader(d, sampler=DistributedSampler(d)))",
            {"instance_count": 1, "processes_per_host": 7},
            {8572},
        ),
        (
            "d = datasets.MNIST(root)\nprobe(DataLoader(d, sampler=DistributedSampler(d)))",
            None,
            None,
        ),
        (
            (
                "d = datasets.MNIST(root)\nprobe(DataLoader(d,"
                " sampler=torch.utils.data.RandomSampler(d)))"
            ),
            None,
            {60000},
        ),
        (
            (
                "d = datasets.MNIST(root)\nprobe(DataLoader(d,"
                " sampler=torch.utils.data.RandomSampler(d, True, 100)))"
            ),
            None,
            None,
        ),
        ("d = datasets.MNIST(root)\nprobe(DataLoader(d, sampler=custom))", None, None),
    ],
)
def test_what_one_rank_s_loader_walks(
    code: str, job: Optional[dict], expected: Optional[set[int]]
) -> None:
    source = TORCH + "import smdistributed.modelparallel.torch as smp\n" + code
    assert _counts(source, job, loader=True) == expected


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (
            (
                "(x_train, y_train), (x_test, y_test) ="
                " tf.keras.datasets.mnist.load_data()\nprobe(x_train)"
            ),
            {60000},
        ),
        (
            (
                "(x_train, y_train), (x_test, y_test) ="
                " tf.keras.datasets.cifar10.load_data()\nprobe(y_test)"
            ),
            {10000},
        ),
        (
            "train, test = tf.keras.datasets.fashion_mnist.load_data()\nx, y = test\nprobe(x)",
            {10000},
        ),
        ("probe(tf.keras.datasets.mnist.load_data()[0][1])", {60000}),
        (
            (
                "(x, y), _ = tf.keras.datasets.mnist.load_data()\nx, y = x / 255.0, y\nx = x[...,"
                " tf.newaxis]\nprobe(x)"
            ),
            {60000},
        ),
        ("(x, y), _ = tf.keras.datasets.mnist.load_data()\nprobe(x[:1000])", {1000}),
        ("(x, y), _ = tf.keras.datasets.mnist.load_data()\nprobe(x[-500:])", {500}),
        ("(x, y), _ = tf.keras.datasets.mnist.load_data()\nprobe(x[::7])", {8572}),
        ("(x, y), _ = tf.keras.datasets.mnist.load_data()\nprobe(x[0])", None),
        (
            (
                "(x, y), _ = tf.keras.datasets.mnist.load_data()\nprobe(x.reshape(-1, 28, 28,"
                " 1).astype('float32'))"
            ),
            {60000},
        ),
        ("(x, y), _ = tf.keras.datasets.mnist.load_data()\nprobe(x.reshape(-1, 14, 14))", None),
        (
            "(x, y), _ = tf.keras.datasets.mnist.load_data()\nprobe(x.reshape(x.shape[0], 784))",
            {60000},
        ),
        ("(x, y), _ = tf.keras.datasets.mnist.load_data()\nprobe(np.expand_dims(x, -1))", {60000}),
        ("(x, y), _ = tf.keras.datasets.mnist.load_data()\nprobe(x * other)", None),
        ("x = np.load(path)\nprobe(x)", None),
    ],
)
def test_keras_arrays(code: str, expected: Optional[set[int]]) -> None:
    assert _counts(KERAS + code) == expected


@pytest.mark.parametrize(
    ("code", "job", "expected"),
    [
        (
            (
                "probe(tf.data.Dataset.from_tensor_slices((x, y)).shuffle(10000,"
                " seed=1).map(f).prefetch(2))"
            ),
            None,
            {60000},
        ),
        ("probe(tf.data.Dataset.from_tensor_slices({'image': x, 'label': y}))", None, {60000}),
        ("probe(tf.data.Dataset.from_tensor_slices((x, y)).take(1000))", None, {1000}),
        ("probe(tf.data.Dataset.from_tensor_slices((x, y)).skip(59000).repeat(2))", None, {2000}),
        ("probe(tf.data.Dataset.from_tensor_slices((x, y)).repeat())", None, None),
        ("probe(tf.data.Dataset.from_tensor_slices((x, y)).filter(f))", None, None),
        ("probe(tf.data.Dataset.from_tensor_slices((x, y)).shard(7, 0))", None, {8572}),
        (
            "probe(tf.data.Dataset.from_tensor_slices((x, y)).shard(7, smp.dp_rank()))",
            None,
            {8571, 8572},
        ),
        (
            "probe(tf.data.Dataset.from_tensor_slices((x, y)).shard(smp.dp_size(), smp.dp_rank()))",
            {"instance_count": 1, "processes_per_host": 8, "pipeline_parallel_degree": 2},
            {15000},
        ),
        (
            "probe(tf.data.Dataset.from_tensor_slices((x, y)).shard(smp.dp_size(), smp.dp_rank()))",
            None,
            None,
        ),
        ("probe(tf.data.Dataset.range(100))", None, {100}),
        (
            "probe(tf.data.Dataset.zip((tf.data.Dataset.range(10), tf.data.Dataset.range(20))))",
            None,
            {10},
        ),
        (
            "ds = tf.data.Dataset.from_tensor_slices((x, y))\nds = ds.shuffle(100)\nprobe(ds)",
            None,
            {60000},
        ),
    ],
)
def test_tf_data_pipelines(code: str, job: Optional[dict], expected: Optional[set[int]]) -> None:
    source = (
        KERAS + "import smdistributed.modelparallel.tensorflow as smp\n(x, y), _ ="
        " tf.keras.datasets.mnist.load_data()\n" + code
    )
    assert _counts(source, job) == expected


def test_a_dataset_changed_in_place_is_unknown() -> None:
    source = (
        TORCH + "train_set = datasets.MNIST(root)\ntrain_set.data ="
        " train_set.data[:1000]\nprobe(train_set)\n"
    )
    assert _counts(source) is None
    targets = (
        TORCH
        + "test_set = datasets.MNIST(root, train=False)\ntest_set.targets[:] = 0\nprobe(test_set)\n"
    )
    assert _counts(targets) is None
