"""SMP813: a configuration value of the wrong Python type, which the library refuses.

The library compares ``type(value)`` with its schema (``ConfigParam._set_value``), so ``5e8``
is not an int, ``1`` is not a float and ``True`` is not a count. Launcher values travel as
JSON, which keeps ``5e8`` a float (``500000000.0``). The fix writes the same number in the
type the schema wants, and only when that number is exactly the one written.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Iterator, Mapping
from typing import Any, Optional

import libcst as cst

from smpfix.base.findings import Applicability, Severity
from smpfix.base.literals import UNKNOWN
from smpfix.job.config_entries import value_in_entry
from smpfix.job.jobfacts import KNOWN_KEYS, TF_KNOWN_KEYS
from smpfix.job.key_history import key_history
from smpfix.job.launcher import Located
from smpfix.rules.config_rule import ConfigFix, ConfigProblem, ConfigRule, ConfigView
from smpfix.rules.rule import FixAvailability, TensorParallelism
from smpfix.rules.titles import snippet

_INT_KEYS = frozenset(
    {
        "pipeline_parallel_degree",
        "partitions",
        "tensor_parallel_degree",
        "sharded_data_parallel_degree",
        "microbatches",
        "active_microbatches",
        "default_partition",
        "ddp_port",
        "sdp_reduce_bucket_size",
        "sdp_param_persistence_threshold",
        "sdp_max_live_parameters",
        "tensor_parallel_seed",
        "activation_loading_horizon",
        "task_level_activation_loading_horizon",
    }
)
_FLOAT_KEYS = frozenset({"sdp_gradient_clipping", "memory_weight"})
_STR_KEYS = frozenset(
    {"pipeline", "ddp_dist_backend", "placement_strategy", "optimize", "partition_file"}
)

# The schema's types (1.12 ``config.yaml``, and the TensorFlow flavour's ``xla``); every other key
# is a bool.
EXPECTED_TYPES: Mapping[str, tuple[type, ...]] = {
    **{key: (bool,) for key in KNOWN_KEYS | TF_KNOWN_KEYS},
    **{key: (int,) for key in _INT_KEYS},
    **{key: (float,) for key in _FLOAT_KEYS},
    **{key: (str,) for key in _STR_KEYS},
    "_sharded_data_parallelism_config": (str, type(None)),
}


class ConfigValueWrongType(ConfigRule):
    summary = (
        "A configuration value whose Python type the library's schema rejects (`5e8` for an int,"
        " `1` for a float)."
    )
    fix_availability = FixAvailability.SAFE
    tensor_parallelism = TensorParallelism.CONFIGURED

    @classmethod
    def check(cls, view: ConfigView) -> Iterator[ConfigProblem]:
        parameters = view.parameters
        if parameters is None or not parameters.is_dict:
            return
        for key, located in parameters.value.items():
            # A key of the other flavour is SMP812's finding; its type is beside the point.
            expected = EXPECTED_TYPES.get(key) if _has_key(view, key) else None
            value = located.plain()
            if expected is None or value is UNKNOWN or type(value) in expected:
                continue
            yield _problem(view, key, located, value, expected[0])


def _has_key(view: ConfigView, key: str) -> bool:
    """The key is in the schema of some release the job may run: a key of the other flavour,
    or one newer than every release the job may run, is SMP812's finding."""
    if key not in view.known_keys:
        return False
    history = None if view.tensorflow or view.v2 else key_history(key)
    version = view.smp_version
    return history is None or version is None or history.known_by(version) is not False


def _problem(
    view: ConfigView, key: str, located: Located, value: Any, wanted: type
) -> ConfigProblem:
    found = type(value).__name__
    text = _converted(located, value, wanted)
    title = (
        f"{snippet(key)} is {snippet(_shown(located, value), 20)} ({found}), not"
        f" {_a(wanted, short=True)}"
    )
    explanation = (
        f"The library's schema wants {_a(wanted)} here: it compares `type(value)` and stops at"
        f" start-up with \"Config parameter {key} type needs to be one of ['{wanted.__name__}']."
        f' Found: {found}.", after the instances are up.'
    )
    if isinstance(value, float) and wanted is int and view.kind == "launcher":
        explanation += (
            " A launcher's values reach the job as JSON, which keeps a float a float (5e8 becomes"
            " 500000000.0)."
        )
    if text is not None:
        explanation += f" Write `{text}`."
    elif isinstance(value, bool) and wanted in (int, float):
        explanation += (
            f" A bool is not a number to the library; write the {wanted.__name__} you mean."
        )
    elif value is None:
        explanation += " Leave the key out to get the library's default."
    else:
        explanation += f" Write {_a(wanted)}."
    target = value_in_entry(located)
    fix = (
        ConfigFix(Applicability.SAFE, f"Write `{text}`", replace=((target, text),))
        if text is not None and target is not None
        else None
    )
    if view.schema_unpublished and view.smp_version is not None:
        # The job's release predates the oldest published schema, whose types these are.
        return ConfigProblem(
            located,
            title,
            Severity.WARNING,
            fix,
            explanation=explanation,
            evidence=(
                "these are the types of the 1.12 schema, the oldest published one; this job runs"
                f" {view.smp_version.describe()}, whose schema is not published",
            ),
        )
    return ConfigProblem(located, title, Severity.ERROR, fix, explanation=explanation)


def _converted(located: Located, value: Any, wanted: type) -> Optional[str]:
    """The literal of type ``wanted`` with exactly the value written, or None when there is none."""
    if isinstance(value, bool):
        return None
    if wanted is bool:
        return {0: "False", 1: "True"}.get(value) if isinstance(value, int) else None
    number = _exact(located, value)
    if number is None:
        return None
    if wanted is int:
        return str(int(number)) if number == number.to_integral_value() else None
    if wanted is float:
        as_float = float(number)
        return (
            repr(as_float)
            if math.isfinite(as_float) and decimal.Decimal(as_float) == number
            else None
        )
    return None


def _exact(located: Located, value: Any) -> Optional[decimal.Decimal]:
    """The number as written (``5e8`` from its token, ``"4"`` from the string), or None."""
    if isinstance(value, str):
        text = value.strip()
    elif isinstance(value, (int, float)):
        text = _number_text(located.node) or repr(value)
    else:
        return None
    if len(text) > 64:  # no setting is that long; converting it could take minutes
        return None
    try:
        number = decimal.Decimal(text.replace("_", ""))
    except decimal.InvalidOperation:
        return None
    # "1e999999999" is short, but int() of it would build a billion digits.
    return number if number.is_finite() and abs(number.adjusted()) <= 64 else None


def _number_text(node: Optional[cst.CSTNode]) -> Optional[str]:
    if isinstance(node, (cst.Integer, cst.Float)):
        return node.value
    if type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus:
        inner = _number_text(node.expression)
        return f"-{inner}" if inner is not None else None
    return None


def _shown(located: Located, value: Any) -> str:
    """The value as it was written (``5e8``, ``'7'``), else its repr."""
    node = located.node
    if type(node) is cst.SimpleString:
        return node.value
    return _number_text(node) or repr(value)


def _a(wanted: type, short: bool = False) -> str:
    if wanted is bool:
        return "a bool" if short else "a bool (True or False)"
    return {int: "an int", float: "a float", str: "a string"}[wanted]
