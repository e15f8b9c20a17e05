"""Rendering ``smpfix plan``: a rich table with a paragraph per configuration, or JSON.

The table gives one row per configuration: its number, the instance, the parameter count and
the per-GPU split against the GPU, and the verdict; where it is written and the script it runs
head its paragraph under the table (a column of paths would wrap inside them on an 80-column
terminal), with the verdict, its reason, where the parameter count came from, the assumptions,
and the changes that make a job fit. JSON is a list with one object per configuration
(``PlannedConfiguration.to_json``). ``smpfix plan --model`` renders ``WhatFits``: the first
five configurations that fit, and the ``distribution`` argument of the first.

Every text that comes from the user's files or settings is escaped: ``[tool.smpfix.job]`` is
rich markup otherwise, and would vanish from the output.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from smpfix.plan.results import MemoryPlan, MemorySplit, PlannedConfiguration, WhatFits
from smpfix.plan.verdict import Verdict

SHOWN_OPTIONS = 5

_STYLES = {
    Verdict.FITS: "green",
    Verdict.TIGHT: "yellow",
    Verdict.MAY_NOT_FIT: "yellow",
    Verdict.DOES_NOT_FIT: "bold red",
    Verdict.DEPENDS: "yellow",
    Verdict.UNKNOWN: "dim",
}


def render_plan_json(configurations: Sequence[PlannedConfiguration]) -> str:
    return (
        json.dumps([configuration.to_json() for configuration in configurations], indent=2) + "\n"
    )


def _console(buffer: io.StringIO, color: bool, width: Optional[int]) -> Any:
    from rich.console import Console

    return Console(
        file=buffer,
        force_terminal=color,
        no_color=not color,
        width=width or max(shutil.get_terminal_size((120, 24)).columns, 80),
        highlight=False,
        color_system="standard" if color else None,
    )


def _table(title: str) -> Any:
    from rich import box
    from rich.table import Table

    return Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )


def _finished(buffer: io.StringIO) -> str:
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())


def render_plan_table(
    configurations: Sequence[PlannedConfiguration], color: bool, width: Optional[int] = None
) -> str:
    from rich.markup import escape

    buffer = io.StringIO()
    console = _console(buffer, color, width)
    if not configurations:
        console.print(
            escape(
                "No launcher configuration found (and no job declared with --job or"
                " [tool.smpfix.job])."
            )
        )
        return _finished(buffer)
    table = _table("Per-GPU memory plan (GiB, estimated)")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("instance", no_wrap=True)
    for name in ("params", "states", "activ.", "other", "total/GPU"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    for number, configuration in enumerate(configurations, 1):
        plan = configuration.plan
        split = plan.per_gpu
        table.add_row(
            str(number),
            escape(plan.instance_type or "-"),
            _count(plan.parameters),
            _gib(split.model_states if split else None),
            _gib(split.activations if split else None),
            _gib(split.other if split else None),
            _total(plan),
            f"[{_STYLES[plan.verdict]}]{plan.verdict.value}[/]",
        )
    console.print(table)
    for number, configuration in enumerate(configurations, 1):
        if number > 1:
            console.print()
        _details(console, number, configuration)
    return _finished(buffer)


def render_what_fits_json(found: WhatFits) -> str:
    return json.dumps(found.to_json(), indent=2) + "\n"


def render_what_fits_table(found: WhatFits, color: bool, width: Optional[int] = None) -> str:
    """The model and cluster, the per-GPU table of the first five configurations that fit,
    and the ``distribution`` argument of the first."""
    from rich.markup import escape

    buffer = io.StringIO()
    console = _console(buffer, color, width)
    console.print(
        escape(
            f"{found.model}: {_count(found.parameters)} parameters on {found.nodes} x"
            f" {found.instance_type} ({found.gpu}), SMP {found.library}"
        )
    )
    for assumption in found.assumptions:
        console.print(f"  - {escape(assumption)}")
    console.print()
    if not found.options:
        console.print(
            "[bold red]Nothing fits[/]: no configuration smpfix tries fits on this cluster;"
            " use more instances, an instance type with more GPU memory, or a shorter sequence."
        )
        return _finished(buffer)
    shown = found.options[:SHOWN_OPTIONS]
    table = _table(
        f"What fits, best first ({len(shown)} of {len(found.options)}; GiB per GPU of"
        f" {found.gpu_memory_gib:.0f})"
    )
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("configuration", ratio=1, overflow="fold")
    for name in ("states", "activ.", "total", "band"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    for number, option in enumerate(shown, 1):
        split = option.per_gpu
        table.add_row(
            str(number),
            escape(option.configuration),
            _gib(split.model_states),
            _gib(split.activations),
            _gib(split.total),
            f"{option.low:.0f}-{option.high:.0f}",
            f"[{_STYLES[option.verdict]}]{option.verdict.value}[/]",
        )
    console.print(table)
    console.print("distribution for #1 (the estimator's `distribution` argument):")
    console.print(escape(python_literal(shown[0].distribution)), soft_wrap=True)
    return _finished(buffer)


def python_literal(value: Any, indent: int = 0) -> str:
    """``value`` (dicts, lists, strings, numbers, booleans) as Python source to paste into a
    launcher, one key per line, four spaces per level: narrow enough for 80 columns."""
    pad = " " * (indent + 4)
    if isinstance(value, Mapping) and value:
        items = [
            f"{pad}{key!r}: {python_literal(item, indent + 4)}," for key, item in value.items()
        ]
        return "{\n" + "\n".join(items) + "\n" + " " * indent + "}"
    if isinstance(value, (list, tuple)) and value:
        items = [f"{pad}{python_literal(item, indent + 4)}," for item in value]
        return "[\n" + "\n".join(items) + "\n" + " " * indent + "]"
    return repr(value)


def where(configuration: PlannedConfiguration) -> str:
    shown = (
        os.path.relpath(configuration.filename)
        if os.path.isabs(configuration.filename)
        else configuration.filename
    )
    shown = configuration.filename if shown.startswith("..") else shown
    if configuration.row is None:
        return shown
    cell = f":cell {configuration.cell}" if configuration.cell is not None else ""
    return f"{shown}{cell}:{configuration.row}"


def _count(parameters: Optional[int]) -> str:
    if parameters is None:
        return "unknown"
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if parameters >= size:
            return f"{parameters / size:.2f}{suffix}"
    return str(parameters)


def _gib(value: Optional[float]) -> str:
    return f"{value:.1f}" if value is not None else "?"


def _total(plan: MemoryPlan) -> str:
    if plan.gpu_memory_gib is None:
        return "?/?"
    total = f"{plan.per_gpu.total:.1f}" if plan.per_gpu is not None else "?"
    lower = ">=" if plan.per_gpu is not None and plan.per_gpu.activations is None else ""
    return f"{lower}{total}/{plan.gpu_memory_gib:.0f}"


def _split(split: MemorySplit, share: Optional[float]) -> str:
    """The estimate in words; ``share`` is of the GPU it was estimated for, which for a
    suggested bigger instance type is that type's GPU, not the job's."""
    share_text = f" ({share:.0%} of the GPU)" if share is not None else ""
    activations = f"{split.activations:.1f}" if split.activations is not None else "?"
    return (
        f"{split.total:.1f} GiB{share_text}: model states {split.model_states:.1f}, activations "
        f"{activations}, other {split.other:.1f}"
    )


def _details(console: object, number: int, configuration: PlannedConfiguration) -> None:
    from rich.markup import escape

    plan = configuration.plan
    out = console.print  # type: ignore[attr-defined]
    headline = (
        f"{number}. [bold]{escape(where(configuration))}[/] -> {escape(plan.script or '?')}: "
        f"[{_STYLES[plan.verdict]}]{plan.verdict.value}[/]"
    )
    if plan.per_gpu is not None:
        gpu = plan.gpu_memory_gib
        headline += f", {_split(plan.per_gpu, plan.per_gpu.total / gpu if gpu else None)}"
    out(headline)
    if plan.reason:
        out(f"  {escape(plan.reason)}")
    if plan.parameters is not None:
        out(f"  parameters: {plan.parameters:,} from {escape(plan.parameters_source)}")
    for assumption in plan.assumptions:
        out(f"  - {escape(assumption)}")
    if plan.suggestions:
        out("  to make it fit:")
        for change in plan.suggestions:
            out(f"  * {escape(change.change)}: {_split(change.per_gpu, change.share)}")
