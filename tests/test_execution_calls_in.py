"""The calls of one expression in evaluation order (``smpfix.program.order.execution._calls_in``),
read from the tree's node index: checked against a plain recursive walk of the same
expression, on generated expressions that nest calls in conditional expressions,
comprehensions, lambdas and each other."""

from __future__ import annotations

import libcst as cst
from hypothesis import given, settings
from hypothesis import strategies as st

from smpfix.base.walker import NodeIndex, children, indexed
from smpfix.program.order.execution import Side, _calls_in, execution_order

_LEAVES = st.sampled_from(["a", "b", "1", "x.y", "'s'"])


def _extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.builds(
            lambda f, args: f"{f}({', '.join(args)})",
            st.sampled_from(["f", "g", "m.h", "smp.step"]),
            st.lists(inner, max_size=3),
        ),
        st.builds(lambda e, k: f"f({e}, key={k})", inner, inner),
        st.builds(lambda e, t, o: f"({e} if {t} else {o})", inner, inner, inner),
        st.builds(lambda e, i, c: f"[{e} for v in {i} if {c}]", inner, inner, inner),
        st.builds(lambda k, v, i: f"{{{k}: {v} for v in {i}}}", inner, inner, inner),
        st.builds(lambda e, i: f"({e} for v in {i})", inner, inner),
        st.builds(lambda e: f"(lambda: {e})", inner),
        st.builds(lambda left, right: f"({left} + {right})", inner, inner),
        st.builds(lambda e, i: f"{e}[{i}]", inner, inner),
        st.builds(lambda e: f"(not {e})", inner),
        st.builds(lambda e: f"({e}).method()", inner),
    )


EXPRESSIONS = st.recursive(_LEAVES, _extend, max_leaves=12)

_NOT_RUN = (cst.Lambda, cst.FunctionDef, cst.ClassDef)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


def _recursive(node: cst.CSTNode, sides: tuple[Side, ...], repeated: bool, found: list) -> None:
    """The reference: arguments before their call, a conditional expression's test before
    its sides, nothing under a lambda, everything under a comprehension repeated."""
    if isinstance(node, _NOT_RUN):
        return
    if isinstance(node, cst.IfExp):
        _recursive(node.test, sides, repeated, found)
        _recursive(node.body, (*sides, Side(node, 0)), repeated, found)
        _recursive(node.orelse, (*sides, Side(node, 1)), repeated, found)
        return
    for child in children(node):
        _recursive(child, sides, repeated or isinstance(node, _COMPREHENSIONS), found)
    if isinstance(node, cst.Call):
        found.append((node, sides, repeated))


@settings(max_examples=300, deadline=None)
@given(EXPRESSIONS)
def test_calls_read_from_the_index_match_a_recursive_walk(text: str) -> None:
    expression = cst.parse_expression(text)
    expected: list = []
    _recursive(expression, (), False, expected)
    index = NodeIndex(expression)
    found: list = []
    _calls_in(index.order, index.ends, 0, len(index.order), (), False, found)
    assert found == expected


def test_a_statement_s_calls_are_the_same_inside_and_outside_an_analysis() -> None:
    source = "def main():\n    f(g(a) if c(b) else [h(v) for v in k()], key=lambda: j())\nmain()\n"
    module = cst.parse_module(source)
    outside = [run.call for run in execution_order(module).runs]
    with indexed(module):
        inside = [run.call for run in execution_order(module).runs]
    names = [module.code_for_node(call.func) for call in inside]
    assert inside == outside
    assert names == ["main", "c", "g", "h", "k", "f"]
