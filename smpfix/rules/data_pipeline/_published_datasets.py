"""Built-in datasets whose split sizes are published: how many samples a call returns.

``torchvision.datasets.MNIST(root, train=True)`` always holds the 60000 training images and
``tf.keras.datasets.mnist.load_data()`` always returns 60000 training and 10000 test
samples, whatever the root or cache path: the files are the published ones. Knowing that
lets a rule do the arithmetic of the last batch instead of guessing. Only datasets whose
split is chosen by a literal are known; a split from a variable, or a subset chosen by other
parameters (STL10's ``folds``), is not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

import libcst as cst

from smpfix.base.calls import argument
from smpfix.base.literals import UNKNOWN
from smpfix.program.facts import FileFacts

_MNIST = {True: 60000, False: 10000}
_CIFAR = {True: 50000, False: 10000}
# EMNIST (Cohen et al. 2017, table II): split -> (train, test).
_EMNIST = {
    "byclass": (697932, 116323),
    "bymerge": (697932, 116323),
    "balanced": (112800, 18800),
    "letters": (124800, 20800),
    "digits": (240000, 40000),
    "mnist": (60000, 10000),
}


@dataclass(frozen=True)
class _TrainFlag:
    """A dataset whose ``train`` flag (second positional, default True) picks the split."""

    sizes: Mapping[bool, int]


@dataclass(frozen=True)
class _Split:
    """A dataset whose ``split`` string (second positional, default ``"train"``) picks it."""

    sizes: Mapping[str, int]
    default: Optional[str] = "train"


TORCHVISION: Mapping[str, Any] = {
    "MNIST": _TrainFlag(_MNIST),
    "FashionMNIST": _TrainFlag(_MNIST),
    "KMNIST": _TrainFlag(_MNIST),
    "CIFAR10": _TrainFlag(_CIFAR),
    "CIFAR100": _TrainFlag(_CIFAR),
    "SVHN": _Split({"train": 73257, "test": 26032, "extra": 531131}),
    "STL10": _Split({"train": 5000, "test": 8000, "unlabeled": 100000, "train+unlabeled": 105000}),
}

# Keras datasets: name -> (train, test) sample counts and the elements of one image.
KERAS: Mapping[str, tuple[int, int, int]] = {
    "mnist": (60000, 10000, 28 * 28),
    "fashion_mnist": (60000, 10000, 28 * 28),
    "cifar10": (50000, 10000, 32 * 32 * 3),
    "cifar100": (50000, 10000, 32 * 32 * 3),
}
_KERAS_PREFIXES = ("tensorflow.keras.datasets.", "keras.datasets.")


@dataclass(frozen=True)
class Published:
    """A split of a published dataset: its sample count, and its name for a message."""

    count: int
    name: str


def torchvision_split(call: cst.Call, facts: FileFacts) -> Optional[Published]:
    """``datasets.MNIST(root, train=False)`` -> 10000 samples, "the MNIST test split"."""
    qualified = facts.qualified_name(call.func) or ""
    if not qualified.startswith("torchvision.datasets."):
        return None
    name = qualified.rsplit(".", 1)[1]
    if name == "EMNIST":
        return _emnist(call, facts)
    kind = TORCHVISION.get(name)
    if isinstance(kind, _TrainFlag):
        train = _literal(call, facts, "train", 1, True)
        if not isinstance(train, bool):
            return None
        return Published(kind.sizes[train], f"the {name} {'training' if train else 'test'} split")
    if isinstance(kind, _Split):
        if name == "STL10" and _literal(call, facts, "folds", 2, None) is not None:
            return None  # one fold of the training images
        split = _literal(call, facts, "split", 1, kind.default)
        if not isinstance(split, str) or split not in kind.sizes:
            return None
        return Published(kind.sizes[split], f"the {name} {split!r} split")
    return None


def _emnist(call: cst.Call, facts: FileFacts) -> Optional[Published]:
    split = _literal(call, facts, "split", 1, None)
    train = _literal(call, facts, "train", None, True)
    if split not in _EMNIST or not isinstance(train, bool):
        return None
    return Published(
        _EMNIST[split][0 if train else 1],
        f"the EMNIST {split!r} {'training' if train else 'test'} split",
    )


def keras_dataset(call: cst.Call, facts: FileFacts) -> Optional[str]:
    """``"mnist"`` for ``tf.keras.datasets.mnist.load_data(...)`` (any import form)."""
    qualified = facts.qualified_name(call.func) or ""
    for prefix in _KERAS_PREFIXES:
        if qualified.startswith(prefix) and qualified.endswith(".load_data"):
            name = qualified[len(prefix) : -len(".load_data")]
            return name if name in KERAS else None
    return None


def _literal(
    call: cst.Call, facts: FileFacts, keyword: str, position: Optional[int], default: Any
) -> Any:
    found = argument(call, keyword, position)
    if found is None:
        return UNKNOWN if any(arg.star for arg in call.args) else default
    return facts.literal(found.value)
