"""Is this expression a ``tf.data`` pipeline?

Rules about TensorFlow batching (``.batch(n)`` without ``drop_remainder``, a batch size that
microbatches do not divide) ask it of the receiver of ``.batch``: a call into ``tf.data`` (or
``tensorflow_datasets.load``), a method chained on one (``ds.shuffle(64).batch(8)``), or a
name the file binds to one.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from smpfix.program.facts import FileFacts


def is_tf_dataset(
    expr: cst.BaseExpression, facts: FileFacts, seen: Optional[set[str]] = None
) -> bool:
    seen = set() if seen is None else seen
    if type(expr) is cst.Call:
        qualified = facts.qualified_name(expr.func) or ""
        if qualified.startswith("tensorflow.data.") or qualified == "tensorflow_datasets.load":
            return True
        return type(expr.func) is cst.Attribute and is_tf_dataset(expr.func.value, facts, seen)
    if type(expr) is cst.Name and expr.value not in seen:
        seen.add(expr.value)
        return any(
            is_tf_dataset(a.value, facts, seen) for a in facts.assignments.get(expr.value, ())
        )
    return False
