"""A name's value: what the expression a name stands for is, where the file says.

``bound_value`` follows a name to the value it was assigned, through names assigned from
names (``loader = train_loader``), as long as each is assigned exactly once.
"""

from __future__ import annotations

import libcst as cst

from smpfix.program.facts import FileFacts


def bound_value(expr: cst.BaseExpression, facts: FileFacts) -> cst.BaseExpression:
    """``expr``, or the value of the name it is, when the file assigns that name once."""
    seen = 0
    while isinstance(expr, cst.Name) and seen < 5:
        assignment = facts.single_assignment(expr.value)
        if assignment is None or assignment.value is expr:
            break
        expr = assignment.value
        seen += 1
    return expr
