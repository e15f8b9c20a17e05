"""What a TensorFlow training script does around the library: Horovod, Keras objects, step outputs.

The TensorFlow flavour is trained the Keras way: a ``smp.DistributedModel`` subclass, an
``optimizer.get_gradients`` inside ``@smp.step``, the step's per-microbatch results combined
with ``StepOutput`` methods, ``optimizer.apply_gradients`` after the step, Keras metrics fed
the combined tensors, and for hybrid data parallelism Horovod (``horovod.tensorflow``), which
the library initialises itself under ``"horovod": True``. The TensorFlow rules ask these
questions of names resolved through the file's imports, never of spellings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

import libcst as cst

from smpfix.program.facts import FileFacts

_HOROVOD = ("horovod.tensorflow.keras", "horovod.tensorflow")
# What a TensorFlow ``StepOutput`` offers (SDK common API; TensorFlow source).
STEP_OUTPUT_METHODS = frozenset(
    {"outputs", "reduce_mean", "reduce_sum", "concat", "stack", "merge", "accumulate"}
)
# Keras model classes whose instances are plain (not distributed) models.
KERAS_MODELS = frozenset(
    {
        "tensorflow.keras.Model",
        "tensorflow.keras.Sequential",
        "tensorflow.keras.models.Model",
        "tensorflow.keras.models.Sequential",
        "keras.Model",
        "keras.Sequential",
        "keras.models.Model",
        "keras.models.Sequential",
    }
)
_GRADIENT_TAPES = frozenset(
    {
        "tensorflow.GradientTape",
        "tensorflow.autodiff.GradientTape",
        "tensorflow.python.eager.backprop.GradientTape",
    }
)


def horovod_member(facts: FileFacts, node: cst.BaseExpression) -> Optional[str]:
    """``"init"`` for ``hvd.init`` with ``import horovod.tensorflow as hvd`` (or its Keras API)."""
    qualified = facts.qualified_name(node)
    if qualified is None:
        return None
    for module in _HOROVOD:
        if qualified.startswith(module + "."):
            return qualified[len(module) + 1 :]
    return None


def is_gradient_tape(facts: FileFacts, node: cst.BaseExpression) -> bool:
    """``tf.GradientTape`` (any import form) or Horovod's ``DistributedGradientTape``."""
    return (
        facts.qualified_name(node) in _GRADIENT_TAPES
        or horovod_member(facts, node) == "DistributedGradientTape"
    )


def constructed_by(facts: FileFacts, use: cst.Name) -> Optional[cst.Call]:
    """The call the name ``use`` holds where it stands, when one assignment gives it."""
    assignment = facts.names.assignment(use.value, use)
    if assignment is not None and type(assignment.value) is cst.Call:
        return assignment.value
    return None


def is_keras_metric(facts: FileFacts, node: cst.BaseExpression) -> bool:
    """A Keras metric object: a name bound once to ``tf.keras.metrics.<Metric>(...)``."""
    if type(node) is not cst.Name:
        return False
    call = constructed_by(facts, node)
    qualified = facts.qualified_name(call.func) if call is not None else None
    return qualified is not None and qualified.startswith(
        ("tensorflow.keras.metrics.", "keras.metrics.")
    )


def keras_model_base(
    facts: FileFacts, cls: cst.ClassDef, classes: Mapping[str, cst.ClassDef], depth: int = 0
) -> Optional[str]:
    """The Keras model class ``cls`` derives from (``tf.keras.Model``), through local bases."""
    if depth > 6:
        return None
    for base in cls.bases:
        qualified = facts.qualified_name(base.value)
        if qualified in KERAS_MODELS:
            return qualified
        if (
            type(base.value) is cst.Name
            and base.value.value in classes
            and base.value.value not in facts.imports.bindings
        ):
            found = keras_model_base(facts, classes[base.value.value], classes, depth + 1)
            if found is not None:
                return found
    return None
