"""What a name holds in a training loop: an optimizer, a scheduler, a data loader, ...

Several rules ask it: which ``.step()`` is the optimizer's (it must run once per batch),
which step arguments are a ``DataLoader`` or a ``Sampler`` (the library only warns about
them). ``object_kind`` answers from the assignments the file makes, so it is precise;
``looks_like_optimizer`` also accepts the names people give optimizers and schedulers
(``optimizer``, ``self.opt``, ``lr_scheduler``), for receivers that arrive as parameters.
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from smpfix.base.imports import dotted_name
from smpfix.program.facts import FileFacts

OPTIMIZER = "optimizer"
SCHEDULER = "learning-rate scheduler"
DATALOADER = "DataLoader"
DATASET = "Dataset"
SAMPLER = "Sampler"
GRAD_SCALER = "gradient scaler"

_SCHEDULER_PREFIXES = (
    "torch.optim.lr_scheduler.",
    "transformers.get_",
    "transformers.optimization.get_",
)
_DATALOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
_SAMPLER_PREFIXES = (
    "torch.utils.data.",
    "torch.utils.data.sampler.",
    "torch.utils.data.distributed.",
)
_DATASET_PREFIXES = ("torchvision.datasets.", "torchtext.datasets.")
_DATASET_FUNCTIONS = frozenset({"datasets.load_dataset", "datasets.load_from_disk"})
_TORCH_DATASET_BASES = (
    "torch.utils.data.Dataset",
    "torch.utils.data.IterableDataset",
    "torch.utils.data.dataset.Dataset",
    "torch.utils.data.dataset.IterableDataset",
)
_GRAD_SCALERS = (
    "torch.cuda.amp.GradScaler",
    "torch.amp.GradScaler",
    "smdistributed.modelparallel.torch.amp.GradScaler",
)

_OPTIMIZER_WORDS = re.compile(
    r"(^|_)(opt|optim|optimizer|optimiser|sched|scheduler|lr_scheduler|lr_sched)(_|$)|optimizer|scheduler",
    re.IGNORECASE,
)


def _constructor_kind(facts: FileFacts, value: cst.BaseExpression) -> Optional[str]:
    if type(value) is not cst.Call:
        return None
    if (
        facts.is_optimizer_constructor(value)
        or facts.smp_member(value.func) == "DistributedOptimizer"
    ):
        return OPTIMIZER
    qualified = facts.qualified_name(value.func) or ""
    if qualified.startswith(_SCHEDULER_PREFIXES):
        return SCHEDULER
    if qualified in _DATALOADERS:
        return DATALOADER
    if qualified.startswith(_SAMPLER_PREFIXES) and qualified.endswith("Sampler"):
        return SAMPLER
    if qualified.startswith(_DATASET_PREFIXES) or qualified in _DATASET_FUNCTIONS:
        return DATASET
    if qualified in _GRAD_SCALERS:
        return GRAD_SCALER
    if type(value.func) is cst.Name and _is_local_dataset_class(facts, value.func.value):
        return DATASET
    return None


def _is_local_dataset_class(facts: FileFacts, name: str, depth: int = 0) -> bool:
    cls = facts.classes.get(name)
    if cls is None or depth > 5:
        return False
    for base in cls.bases:
        qualified = facts.qualified_name(base.value)
        if qualified in _TORCH_DATASET_BASES:
            return True
        if type(base.value) is cst.Name and _is_local_dataset_class(
            facts, base.value.value, depth + 1
        ):
            return True
    return False


def object_kind(facts: FileFacts, expr: cst.BaseExpression) -> Optional[str]:
    """The kind of object ``expr`` is, when the file builds it visibly; None otherwise.

    A name counts when every assignment of it in the file builds the same kind.
    """
    direct = _constructor_kind(facts, expr)
    if direct is not None:
        return direct
    if type(expr) is not cst.Name:
        return None
    if expr.value in facts.optimizer_names():
        return OPTIMIZER
    assignments = facts.assignments.get(expr.value, ())
    kinds = {_constructor_kind(facts, assignment.value) for assignment in assignments}
    if len(kinds) == 1:
        return kinds.pop()
    return None


def looks_like_optimizer(facts: FileFacts, expr: cst.BaseExpression) -> bool:
    """An optimizer, scheduler or gradient scaler by construction, or by its name."""
    if object_kind(facts, expr) in (OPTIMIZER, SCHEDULER, GRAD_SCALER):
        return True
    dotted = dotted_name(expr)
    if dotted is None or facts.qualified_name(expr) is not None:
        return False
    last = dotted.rsplit(".", 1)[-1]
    return bool(_OPTIMIZER_WORDS.search(last)) or "scaler" in last.lower()
