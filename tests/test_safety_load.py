"""Load: a tree of 5,000 files is checked with bounded memory and without leaking descriptors.

Most files are unrelated Python (the byte-level prefilter skips them after one read), some
are SMP scripts that get analyzed in the worker pool. The run happens in this process, so
its open file descriptors can be counted before and after; peak memory is printed (run
``pytest -s`` to see it), not asserted, apart from a generous check that a second run of the
same tree does not keep growing the process.
"""

from __future__ import annotations

import os
import random
import resource
from pathlib import Path

import pytest
from smp_scripts import render

from smpfix.engine.discovery import Excluder, discover
from smpfix.engine.runner import RunOptions, run
from smpfix.job.jobfacts import DeclaredJob
from smpfix.rules.registry import rule_names

FILES = 5000
SMP_SCRIPTS = 80


def _unrelated_module(rng: random.Random, index: int) -> str:
    functions = []
    for number in range(rng.randint(2, 8)):
        body = "\n".join(
            f"    value_{k} = arg * {rng.randint(1, 99)} + {k}" for k in range(rng.randint(1, 6))
        )
        functions.append(
            f'def function_{index}_{number}(arg):\n    """Helper {number}."""\n{body}\n    return'
            " arg\n"
        )
    return f'"""Module {index}."""\nimport math\nimport os\n\n\n' + "\n\n".join(functions)


def _tree(root: Path) -> None:
    rng = random.Random(5000)
    for index in range(FILES):
        folder = root / f"package_{index % 50}" / f"sub_{index % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        if index % (FILES // SMP_SCRIPTS) == 0:
            text = render(rng).text
        else:
            text = _unrelated_module(rng, index)
        (folder / f"module_{index}.py").write_text(text)


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def _resident_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors through /proc")
def test_five_thousand_files_bounded_memory_no_descriptor_leak(tmp_path: Path) -> None:
    _tree(tmp_path)
    names = rule_names()
    options = RunOptions(
        select=frozenset(names),
        rule_names=names,
        declared_jobs=(DeclaredJob("load test", {"tensor_parallel_degree": 4}),),
        root=tmp_path,
        jobs=2,
    )
    tasks = list(discover([str(tmp_path)], Excluder([], tmp_path)))
    assert len(tasks) == FILES
    before = _open_descriptors()
    results = list(run(tasks, options))
    after_first = _resident_bytes()
    results_again = list(run(tasks, options))
    after_second = _resident_bytes()
    after = _open_descriptors()
    assert len(results) == len(results_again) == FILES
    assert not [error for result in results for error in result.errors]
    analyzed = sum(1 for result in results if result.findings)
    own_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    worker_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        f"\nload: {FILES} files, {analyzed} with findings; peak memory: main process {own_peak:.0f}"
        f" MiB, largest worker {worker_peak:.0f} MiB; resident after the second run"
        f" {after_second / 2**20:.0f} MiB"
    )
    assert analyzed >= SMP_SCRIPTS // 2
    assert after <= before, f"file descriptors leaked: {before} open before, {after} after"
    assert after_second - after_first < 256 * 2**20, (
        "a second run of the same tree kept growing the process"
    )
