"""Many files go to a process pool, a few small ones stay in one process; output is the same."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli
from smp_scripts import corpus

from smpfix.engine import runner
from smpfix.engine.discovery import DiscoveredFile
from smpfix.engine.runner import RunOptions, run
from smpfix.rules.registry import rule_names


def _write_corpus(folder: Path, count: int) -> list[Path]:
    paths = []
    for number, script in enumerate(corpus(count, seed=3)):
        path = folder / f"train_{number:02d}.py"
        path.write_bytes(script.text.encode("utf-8"))
        paths.append(path)
    return paths


def test_pool_and_single_process_agree_in_stable_order(tmp_path: Path) -> None:
    _write_corpus(tmp_path, 24)
    pooled = run_cli("check", "--no-cache", "--format", "json", "--workers", "2", str(tmp_path))
    single = run_cli("check", "--no-cache", "--format", "json", "--workers", "1", str(tmp_path))
    assert pooled.code == single.code == 1
    assert pooled.stdout == single.stdout
    concise = run_cli(
        "check", "--no-cache", "--format", "concise", str(tmp_path)
    ).stdout.splitlines()
    files = [line.split(":", 1)[0] for line in concise if line.startswith(str(tmp_path))]
    assert files == sorted(files)


@pytest.mark.parametrize(("count", "pooled"), [(1, False), (3, False), (24, True)])
def test_pool_only_when_it_pays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int, pooled: bool
) -> None:
    paths = _write_corpus(tmp_path, count)
    started: list[int] = []

    class Pool:
        def __init__(self, max_workers: int, **settings: object) -> None:
            started.append(max_workers)

        def __enter__(self) -> Pool:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def map(self, work, jobs, chunksize):  # type: ignore[no-untyped-def]
            return [work(job) for job in jobs]

    monkeypatch.setattr("concurrent.futures.ProcessPoolExecutor", Pool)
    names = rule_names()
    options = RunOptions(select=frozenset(names), rule_names=names, root=tmp_path, jobs=2)
    results = list(run([DiscoveredFile(str(p), explicit=True) for p in reversed(paths)], options))
    assert [r.path for r in results] == sorted(str(p) for p in paths)
    assert bool(started) is pooled
    assert runner._POOL_MIN_FILES >= 2
