"""Where smpfix's CPU time goes on one tree: the real ``smpfix check``, run in this process, timed
by phase.

    python benchmarks/phases.py DIR [OUT]    # one JSON object (CPU seconds), or appended to OUT

Runs ``smpfix check --no-cache --workers 1 --exit-zero --no-color DIR`` (its output thrown
away) through the command's own entry point, after wrapping the engine's functions with
timers, so every file goes the way the command sends it: notebooks through the notebook
path (their code cells joined and masked, then parsed), launchers through the launcher
index, helper modules through ``LocalModules`` when a rule asks for them. The wrappers are
installed as each module is first imported (a hook on the import system), so the command's
lazy imports stay as lazy as they are without the benchmark.

Each phase's time is its own: time spent in a nested timed function is counted in that
function's phase (a parse inside the launcher index is ``parse``, an import inside a rule is
``imports``). The phases, plus ``start-up`` (the interpreter and this script's imports,
before the command starts) and ``other`` (what no wrapper covers: the command line,
configuration, gluing the steps), add up to ``total``, this process's CPU time (user +
system) when the command ends. The wrappers are called a few thousand times, which costs
milliseconds; ``benchmarks/run.py`` runs this beside the plain command, in the same rounds,
and shows both.

- ``imports``: importing modules (first import only), wherever it happens;
- ``discover``: walking the tree (``discovery.discover``, also the launcher search's walk);
- ``read``, ``prefilter``, ``decode``: bytes, the ``smdistributed`` byte test, bytes to text;
- ``notebooks``: the notebook path besides parsing (JSON, masking magics, joining cells,
  the check that every cell parses, mapping findings back to cells);
- ``nesting``: the nesting guard that runs before LibCST's parser (``base.nesting``);
- ``parse``: ``libcst.parse_module``;
- ``index``: building the node index (``walker.NodeIndex``); ``facts``: ``facts.collect``;
- ``launchers``: the launcher index and linking (``runner.with_project``), besides the
  parsing and reading it does;
- ``rules``: the analysis of each file besides the other phases: the rules' walk and what
  they work out, findings, suppressions;
- ``modules``: loading the project files an analysis reads besides its own
  (``LocalModules``): the helper modules the rules follow, and the script (with its helpers)
  a launcher's check looks into; besides their reading, parse, index and facts, which are
  shown in those phases and, in ``within``, as done for ``modules``;
- ``plan``: the memory plan behind SMP831, besides the modules it loads;
- ``positions``: line and column of what is reported; ``report``: rendering the output.

``within`` says how much of each phase ran on behalf of ``launchers``, ``modules`` or
``plan``, as a path of them: ``parse`` within ``modules`` is the files parsed because a rule
asked for them (a helper module, or the script a launcher starts), within ``launchers`` the
launchers parsed to link them to their scripts. Such a parse is kept for the file's own
check (``SHARED_STORE``, within its memory budget), so it is not a second parse.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any, Callable, Optional

PHASES = (
    "start-up",
    "imports",
    "discover",
    "read",
    "prefilter",
    "decode",
    "notebooks",
    "nesting",
    "parse",
    "index",
    "facts",
    "launchers",
    "rules",
    "modules",
    "plan",
    "positions",
    "report",
    "other",
)
# Phases whose nested work is also shown as done on their behalf (``within``).
CONTEXTS = ("launchers", "modules", "plan")

# module -> (attribute path, phase): wrapped as soon as the module is first imported.
WRAPPED: dict[str, tuple[tuple[str, str], ...]] = {
    "libcst": (("parse_module", "parse"),),
    "smpfix.engine.discovery": (("discover", "discover"),),
    "smpfix.base.source": (("read_bytes", "read"), ("read", "read"), ("decode", "decode")),
    "smpfix.engine.prefilter": (("may_involve_smp", "prefilter"),),
    "smpfix.engine.notebook_analysis": (("check_notebook", "notebooks"),),
    "smpfix.base.nesting": (("refusal", "nesting"),),
    "smpfix.base.walker": (("NodeIndex.__init__", "index"),),
    "smpfix.program.facts": (("collect", "facts"),),
    "smpfix.engine.runner": (("with_project", "launchers"),),
    "smpfix.engine.analysis": (("_analyze_file", "rules"),),
    "smpfix.program.project.local_modules": (("ModuleStore.load", "modules"),),
    "smpfix.rules.job_config.smp831_job_exceeds_gpu_memory": (
        ("JobExceedsGpuMemory.check_with_code", "plan"),
    ),
    "smpfix.base.positions": (
        ("Positions.__init__", "positions"),
        ("Positions.span", "positions"),
        ("Positions.position", "positions"),
        ("Positions.line_span", "positions"),
        ("Positions.line_text", "positions"),
    ),
    "smpfix.cli": (("_finish", "report"),),
}


class Clock:
    """Exclusive CPU time per (phase, context): on every entry and exit, the time since the
    last one is charged to the phase on top of the stack."""

    def __init__(self) -> None:
        self.own: dict[tuple[str, str], float] = defaultdict(float)
        self.stack: list[tuple[str, str]] = []
        # Until ``main`` starts: the interpreter's start-up and this script's own imports.
        self.started = self.last = time.process_time()

    def _charge(self) -> None:
        now = time.process_time()
        self.own[self.stack[-1] if self.stack else ("other", "")] += now - self.last
        self.last = now

    def enter(self, phase: str) -> None:
        self._charge()
        outer = self.stack[-1][1] if self.stack else ""
        if phase in CONTEXTS and not outer.endswith(phase):
            outer = f"{outer}/{phase}" if outer else phase
        self.stack.append((phase, outer))

    def leave(self) -> None:
        self._charge()
        self.stack.pop()

    def result(self) -> dict[str, Any]:
        self._charge()
        total = time.process_time()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        phases = dict.fromkeys(PHASES, 0.0)
        within: dict[str, dict[str, float]] = {}
        for (phase, context), seconds in self.own.items():
            phases[phase] += seconds
            if context and context.rsplit("/", 1)[-1] != phase:
                within.setdefault(phase, {}).setdefault(context, 0.0)
                within[phase][context] += seconds
        phases["start-up"] = self.started
        return {
            "phases": phases,
            "within": within,
            "total": total,
            "rusage_total": usage.ru_utime + usage.ru_stime,
        }


CLOCK = Clock()


def timed(work: Callable[..., Any], phase: str) -> Callable[..., Any]:
    """``work`` charging its own time to ``phase``; a generator function is timed at each step."""
    if inspect.isgeneratorfunction(work):

        @functools.wraps(work)
        def steps(*args: Any, **kwargs: Any) -> Iterator[Any]:
            generator = work(*args, **kwargs)
            while True:
                CLOCK.enter(phase)
                try:
                    item = next(generator)
                except StopIteration:
                    return
                finally:
                    CLOCK.leave()
                yield item

        return steps

    @functools.wraps(work)
    def call(*args: Any, **kwargs: Any) -> Any:
        CLOCK.enter(phase)
        try:
            return work(*args, **kwargs)
        finally:
            CLOCK.leave()

    return call


def _wrap(module: Any, path: str, phase: str) -> None:
    owner = module
    *outer, name = path.split(".")
    for part in outer:
        owner = getattr(owner, part)
    setattr(owner, name, timed(getattr(owner, name), phase))


def _hook_imports() -> None:
    """Time first imports, and wrap each module of ``WRAPPED`` before anyone imports from it."""
    bootstrap = sys.modules["_frozen_importlib"]
    find_and_load = bootstrap._find_and_load

    def timed_find_and_load(name: str, import_: Any) -> Any:
        CLOCK.enter("imports")
        try:
            module = find_and_load(name, import_)
        finally:
            CLOCK.leave()
        for path, phase in WRAPPED.pop(name, ()):
            _wrap(module, path, phase)
        return module

    bootstrap._find_and_load = timed_find_and_load


def main(root: str, output: Optional[str] = None) -> None:
    saved_out, saved_err = os.dup(1), os.dup(2)

    def report() -> None:
        result = CLOCK.result()
        result["unwrapped"] = sorted(WRAPPED)  # modules the command never imported
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved_out, 1)
        os.dup2(saved_err, 2)
        text = json.dumps(result)
        if output is None:
            os.write(1, (text + "\n").encode())
        else:
            with open(output, "a", encoding="utf-8") as handle:
                handle.write(text + "\n")

    # The command ends with os._exit once its atexit handlers ran; this one runs last.
    atexit.register(report)
    CLOCK.started = CLOCK.last = time.process_time()
    _hook_imports()
    sys.argv = [
        "smpfix",
        "check",
        "--no-cache",
        "--workers",
        "1",
        "--exit-zero",
        "--no-color",
        root,
    ]
    sink = os.open(os.devnull, os.O_WRONLY)
    os.dup2(sink, 1)
    os.dup2(sink, 2)
    try:
        from smpfix import cli

        cli.run()
    except SystemExit:
        raise
    except BaseException:
        os.dup2(saved_err, 2)
        raise


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
