"""Which parameter of a ``def`` receives which argument of a call of it.

Rules follow a value into a function (the wrapped model passed as ``train_step(model, x)``
reaches the parameter ``model``) and back out (a statement moved out of the step must name
what the caller passed). Binding follows Python's rules for positional and keyword
arguments; a call that unpacks ``*args`` or ``**kwargs`` cannot be bound statically.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

import libcst as cst


def bind_arguments(
    function: cst.FunctionDef, call: cst.Call
) -> Optional[Mapping[str, cst.BaseExpression]]:
    """Parameter name -> argument expression for ``call`` of ``function``; None if unknowable.

    Parameters left to their defaults are absent from the result.
    """
    params = function.params
    positional = [param.name.value for param in (*params.posonly_params, *params.params)]
    keyword_ok = {param.name.value for param in (*params.params, *params.kwonly_params)}
    bound: dict[str, cst.BaseExpression] = {}
    index = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is not None:
            name = arg.keyword.value
            if name not in keyword_ok:
                return None
            bound[name] = arg.value
            continue
        if index >= len(positional):
            return None
        bound[positional[index]] = arg.value
        index += 1
    return bound


def argument_parameter(
    function: cst.FunctionDef, call: cst.Call, argument: cst.BaseExpression
) -> Optional[str]:
    """The parameter of ``function`` that ``argument`` (an argument of ``call``) is bound to."""
    bound = bind_arguments(function, call)
    if bound is None:
        return None
    for name, value in bound.items():
        if value is argument:
            return name
    return None
