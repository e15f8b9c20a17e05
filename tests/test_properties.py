"""Invariants over generated SMP scripts (the Ruff test harness' guarantees, as properties).

- every fix leaves code that parses, and fixing converges: a second pass changes nothing;
- a file with no findings is byte-identical after ``--apply``; CRLF files stay CRLF;
- the library's local name does not change what is found;
- each pitfall planted in a script is found.

``SMPFIX_HYPOTHESIS_PROFILE=thorough`` runs many more examples than the CI default.
"""

from __future__ import annotations

import os
import random

import libcst as cst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from smp_scripts import render

from smpfix.api import check_source, fix_source

settings.register_profile(
    "ci", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "thorough", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("SMPFIX_HYPOTHESIS_PROFILE", "ci"))

JOBS = st.sampled_from(
    [
        {},
        {"tensor_parallel_degree": 4},
        {"tensor_parallel_degree": 1},
        {"tensor_parallel_degree": 8, "microbatches": 4},
    ]
)


@given(rng=st.randoms(use_true_random=False), job=JOBS, unsafe=st.booleans())
def test_fixes_parse_and_converge(rng: random.Random, job: dict, unsafe: bool) -> None:
    script = render(rng)
    first = fix_source(script.text, "train.py", job=job, unsafe=unsafe)
    assert not first.errors, first.errors
    cst.parse_module(first.text)
    second = fix_source(first.text, "train.py", job=job, unsafe=unsafe)
    assert second.text == first.text
    assert second.applied == 0


@given(rng=st.randoms(use_true_random=False), job=JOBS)
def test_file_without_findings_is_untouched(rng: random.Random, job: dict) -> None:
    script = render(rng, pitfalls={"SMP101": False, "SMP301": False})
    assert check_source(script.text, "train.py", job=job) == []
    assert fix_source(script.text, "train.py", job=job, unsafe=True).text == script.text


@given(rng=st.randoms(use_true_random=False))
def test_crlf_stays_crlf(rng: random.Random) -> None:
    script = render(rng, newline="\r\n", pitfalls={"SMP101": True, "SMP301": True})
    fixed = fix_source(script.text, "train.py", job={"tensor_parallel_degree": 4}).text
    assert fixed != script.text
    assert fixed.count("\n") == fixed.count("\r\n")


@given(
    seed=st.integers(0, 2**32 - 1),
    aliases=st.lists(st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True), min_size=2, max_size=3),
)
def test_alias_does_not_change_findings(seed: int, aliases: list) -> None:
    reserved = {
        "smp",
        "torch",
        "nn",
        "F",
        "os",
        "math",
        "argparse",
        "args",
        "model",
        "optimizer",
        "loader",
        "dataset",
        "data",
        "target",
        "epoch",
        "loss",
        "output",
        "main",
        "parse_args",
        "train_step",
        "parser",
        "block",
        "h",
        "x",
        "self",
        "vocab",
        "hidden",
        "layers",
        "range",
        "print",
        "super",
        "if",
        "in",
        "is",
        "or",
        "and",
        "not",
        "for",
        "def",
        "del",
        "as",
        "class",
        "else",
        "elif",
        "try",
        "with",
        "while",
        "from",
        "pass",
        "None",
        "True",
        "False",
        "return",
        "lambda",
        "yield",
        "global",
        "assert",
        "break",
        "import",
        "async",
        "await",
        "raise",
        "finally",
        "except",
        "continue",
        "nonlocal",
        "make_dataset",
        "DataLoader",
        "GPT",
        "Net",
        "Model",
        "TinyTransformer",
        "_",
    }
    spellings = ["smp", *(a for a in aliases if a not in reserved)]
    results = []
    for alias in spellings:
        script = render(random.Random(seed), alias=alias, newline="\n", indent="    ")
        results.append(
            sorted(
                (f.code, f.start.line, f.severity.value)
                for f in check_source(script.text, "train.py")
            )
        )
    assert all(result == results[0] for result in results)


@given(rng=st.randoms(use_true_random=False))
def test_planted_pitfalls_are_found(rng: random.Random) -> None:
    script = render(rng)
    found = {
        f.code for f in check_source(script.text, "train.py", job={"tensor_parallel_degree": 4})
    }
    assert script.expected_rules <= found
