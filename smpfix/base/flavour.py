"""The two flavours of SMP v1: one library, two APIs, two configuration schemas.

``import smdistributed.modelparallel.torch as smp`` and
``import smdistributed.modelparallel.tensorflow as smp`` share rank functions and
``smp.step``, but a TensorFlow script has no ``DistributedOptimizer`` or tensor parallelism
and a TensorFlow configuration has its own keys (``xla``, ``horovod``). A script uses one
flavour; a rule handles the flavours it declares (``Rule.flavours``), and a configuration is
judged against its flavour's schema. Imports nothing, so the job layer and the CLI's start-up
may use it.
"""

from __future__ import annotations

import enum


class Flavour(str, enum.Enum):
    PYTORCH = "pytorch"
    TENSORFLOW = "tensorflow"

    @property
    def display(self) -> str:
        return "PyTorch" if self is Flavour.PYTORCH else "TensorFlow"


BOTH = frozenset({Flavour.PYTORCH, Flavour.TENSORFLOW})
ONLY_PYTORCH = frozenset({Flavour.PYTORCH})
ONLY_TENSORFLOW = frozenset({Flavour.TENSORFLOW})
