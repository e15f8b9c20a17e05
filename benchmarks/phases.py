"""Where smpfix's time goes on one tree: each phase of ``smpfix check``, run in one process.

Called by ``benchmarks/run.py`` (``python benchmarks/phases.py DIR``); prints one JSON object
of seconds per phase. The phases are the engine's own functions called one after the other,
as the runner calls them for each file, so their sum is the single-process cost of a cold
check (the command itself spreads ``parse`` to ``report`` over the cores):

- discover: walking the tree (``discovery.discover``);
- read: reading every file's bytes; prefilter: the ``smdistributed`` byte test;
- decode: bytes to text, for the files that pass the prefilter;
- parse: ``libcst.parse_module``;
- facts: indexing the tree and collecting the file's facts (``facts.collect``);
- rules: the rest of the analysis: every rule in one walk, findings, suppressions;
- positions: line/column of what was found (``Positions.span`` during the analysis, timed apart);
- report: rendering the default (``full``) output.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

T = TypeVar("T")


def main(root: str) -> dict[str, float]:
    start = time.perf_counter()
    import libcst as cst

    from smpfix.base import positions as positions_module
    from smpfix.base import source
    from smpfix.base.findings import FileResult
    from smpfix.base.walker import indexed
    from smpfix.engine import prefilter
    from smpfix.engine.analysis import AnalysisOptions, analyze_module
    from smpfix.engine.discovery import Excluder, discover
    from smpfix.job.project import Project
    from smpfix.program.facts import collect
    from smpfix.report import ReportOptions, render
    from smpfix.rules.registry import all_rules

    phases = dict.fromkeys(
        (
            "import",
            "discover",
            "read",
            "prefilter",
            "decode",
            "parse",
            "facts",
            "rules",
            "positions",
            "report",
        ),
        0.0,
    )
    options = AnalysisOptions(
        select=frozenset(rule.code for rule in all_rules()), project=Project.of((root,))
    )
    phases["import"] = time.perf_counter() - start

    span = positions_module.Positions.span

    def timed_span(self: Any, node: Any) -> tuple[int, int]:
        began = time.perf_counter()
        try:
            return span(self, node)
        finally:
            phases["positions"] += time.perf_counter() - began

    positions_module.Positions.span = timed_span  # type: ignore[method-assign]

    def timed(phase: str, work: Callable[..., T], *args: Any) -> T:
        began = time.perf_counter()
        value = work(*args)
        phases[phase] += time.perf_counter() - began
        return value

    tasks = timed("discover", lambda: list(discover([root], Excluder([], Path(root)))))
    results = []
    for task in tasks:
        raw = timed("read", Path(task.path).read_bytes)
        if not timed("prefilter", prefilter.may_involve_smp, raw):
            continue
        text = timed("decode", source.decode, task.path, raw).text
        try:
            module = timed("parse", cst.parse_module, text)
        except cst.ParserSyntaxError:
            continue

        began = time.perf_counter()
        with indexed(module):
            collect(module)
        facts = time.perf_counter() - began
        located = phases["positions"]
        began = time.perf_counter()
        analysis = analyze_module(module, text, task.path, options)
        whole = time.perf_counter() - began
        # The analysis indexes the tree and collects the facts itself, and locates what it
        # found: those parts are counted in their own phases.
        phases["facts"] += facts
        phases["rules"] += max(0.0, whole - facts - (phases["positions"] - located))
        results.append(
            FileResult(
                task.path,
                findings=analysis.findings,
                errors=analysis.errors,
                text=text if analysis.findings else None,
            )
        )
    timed("report", render, results, "full", ReportOptions())
    return phases


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
