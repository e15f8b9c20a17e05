"""Rendering ``smpfix plan``: a rich table with a paragraph per configuration, or JSON.

The table gives one row per configuration: where it is written, the script, the instance,
the parameter count and the per-GPU split against the GPU, and the verdict. Under it, each
configuration's verdict with its reason, where the parameter count came from, the
assumptions, and the changes that make a job fit. JSON is a list with one object per
configuration (``PlannedConfiguration.to_json``).
"""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Sequence
from typing import Optional

from smpfix.plan.results import MemoryPlan, MemorySplit, PlannedConfiguration
from smpfix.plan.verdict import Verdict

_STYLES = {
    Verdict.FITS: "green",
    Verdict.TIGHT: "yellow",
    Verdict.DOES_NOT_FIT: "bold red",
    Verdict.DEPENDS: "yellow",
    Verdict.UNKNOWN: "dim",
}


def render_plan_json(configurations: Sequence[PlannedConfiguration]) -> str:
    return (
        json.dumps([configuration.to_json() for configuration in configurations], indent=2) + "\n"
    )


def render_plan_table(
    configurations: Sequence[PlannedConfiguration], color: bool, width: Optional[int] = None
) -> str:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    buffer = io.StringIO()
    width = width or max(shutil.get_terminal_size((120, 24)).columns, 80)
    console = Console(
        file=buffer,
        force_terminal=color,
        no_color=not color,
        width=width,
        highlight=False,
        color_system="standard" if color else None,
    )
    if not configurations:
        console.print(
            "No launcher configuration found (and no job declared with --job or [tool.smpfix.job])."
        )
        return buffer.getvalue()
    table = Table(title="Per-GPU memory plan (GiB, estimated)", title_justify="left")
    for name in ("configuration", "instance"):
        table.add_column(name, overflow="fold")
    for name in ("params", "states", "activ.", "other", "total/GPU"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("verdict", overflow="fold")
    for configuration in configurations:
        plan = configuration.plan
        split = plan.per_gpu
        table.add_row(
            escape(f"{where(configuration)} -> {plan.script or '?'}"),
            plan.instance_type or "-",
            _count(plan.parameters),
            _gib(split.model_states if split else None),
            _gib(split.activations if split else None),
            _gib(split.other if split else None),
            _total(plan),
            f"[{_STYLES[plan.verdict]}]{plan.verdict.value}[/]",
        )
    console.print(table)
    for configuration in configurations:
        console.print()
        _details(console, configuration)
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())


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


def _split(split: MemorySplit, gpu: Optional[float]) -> str:
    share = f" ({split.total / gpu:.0%} of the GPU)" if gpu else ""
    activations = f"{split.activations:.1f}" if split.activations is not None else "?"
    return (
        f"{split.total:.1f} GiB{share}: model states {split.model_states:.1f}, activations "
        f"{activations}, other {split.other:.1f}"
    )


def _details(console: object, configuration: PlannedConfiguration) -> None:
    from rich.markup import escape

    plan = configuration.plan
    out = console.print  # type: ignore[attr-defined]
    headline = (
        f"[bold]{escape(where(configuration))}[/] -> {escape(plan.script or '?')}: "
        f"[{_STYLES[plan.verdict]}]{plan.verdict.value}[/]"
    )
    if plan.per_gpu is not None:
        headline += f", {_split(plan.per_gpu, plan.gpu_memory_gib)}"
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
            out(f"  * {escape(change.change)}: {_split(change.per_gpu, plan.gpu_memory_gib)}")
