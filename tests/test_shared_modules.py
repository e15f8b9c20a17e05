"""Helper modules that several scripts import are parsed once per process and shared, and a
change to one is seen by every script that reads it, in one process and through the cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli
from test_data_rules_cross_file import DATA_UNSHARDED, TRAIN

from smpfix.engine import analysis
from smpfix.engine.analysis import AnalysisOptions, analyze
from smpfix.job.project import Project
from smpfix.program.project import local_modules
from smpfix.program.project.local_modules import ModuleStore

SHARDED = DATA_UNSHARDED.replace("shuffle=True,", "sampler=make_sampler(dataset),")


def _project(root: Path) -> list[Path]:
    scripts = [root / "train_a.py", root / "train_b.py"]
    for script in scripts:
        script.write_text(TRAIN, encoding="utf-8")
    (root / "data.py").write_text(DATA_UNSHARDED, encoding="utf-8")
    return scripts


def _hints(script: Path) -> list[str]:
    options = AnalysisOptions(
        select=frozenset({"SMP204"}), project=Project.of((str(script.parent),))
    )
    found = analyze(script.read_text(encoding="utf-8"), str(script), options).findings
    return [f"{Path(f.path).name}:{f.start.line}" for f in found]


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """A fresh shared store, counting the helper parses and the scripts' own parses."""
    counts = {"helper": 0, "own": 0}
    helper_parse, own_parse = local_modules.parse_file, analysis.parse

    def count_helper(*args: object) -> object:
        counts["helper"] += 1
        return helper_parse(*args)  # type: ignore[arg-type]

    def count_own(*args: object) -> object:
        counts["own"] += 1
        return own_parse(*args)  # type: ignore[arg-type]

    store = ModuleStore()
    monkeypatch.setattr(local_modules, "SHARED_STORE", store)
    monkeypatch.setattr(analysis, "SHARED_STORE", store)
    monkeypatch.setattr(local_modules, "parse_file", count_helper)
    monkeypatch.setattr(analysis, "parse", count_own)
    return counts


def test_a_helper_is_parsed_once_for_every_script_that_imports_it(
    tmp_path: Path, counted: dict[str, int]
) -> None:
    first, second = _project(tmp_path)
    assert _hints(first) == _hints(second) == ["data.py:6"]
    assert counted == {"helper": 1, "own": 2}
    # Checked as a file of its own, the helper reuses that parse.
    data = tmp_path / "data.py"
    options = AnalysisOptions(select=frozenset({"SMP204"}), project=Project.of((str(tmp_path),)))
    analyze(data.read_text(encoding="utf-8"), str(data), options)
    assert counted == {"helper": 1, "own": 2}


def test_an_edited_helper_is_parsed_again(tmp_path: Path, counted: dict[str, int]) -> None:
    first, second = _project(tmp_path)
    assert _hints(first) == ["data.py:6"]
    (tmp_path / "data.py").write_text(SHARDED, encoding="utf-8")
    assert _hints(second) == [] and _hints(first) == []
    assert counted["helper"] == 2


def test_a_store_keeps_at_most_its_budget(tmp_path: Path) -> None:
    store = ModuleStore(budget=len(DATA_UNSHARDED) + 10)
    for name in ("one.py", "two.py"):
        (tmp_path / name).write_text(DATA_UNSHARDED, encoding="utf-8")
        assert store.load(str(tmp_path / name)) is not None
    assert store.parsed(str(tmp_path / "one.py"), DATA_UNSHARDED) is None  # the older one went
    assert store.parsed(str(tmp_path / "two.py"), DATA_UNSHARDED) is not None
    assert store.parsed(str(tmp_path / "two.py"), SHARDED) is None  # another text: not this parse


def test_a_changed_helper_invalidates_every_cached_script_that_read_it(tmp_path: Path) -> None:
    _project(tmp_path)
    cache = tmp_path / "cache"

    def run() -> list[str]:
        done = run_cli(
            "check",
            "--select",
            "SMP204",
            "--format",
            "json",
            "--cache-dir",
            str(cache),
            str(tmp_path),
        )
        return sorted(
            f"{Path(f['filename']).name}:{f['location']['row']}" for f in json.loads(done.stdout)
        )

    assert run() == ["data.py:6"]
    assert run() == ["data.py:6"]  # from the cache
    (tmp_path / "data.py").write_text(SHARDED, encoding="utf-8")
    assert run() == []
    (tmp_path / "data.py").write_text(DATA_UNSHARDED, encoding="utf-8")
    assert run() == ["data.py:6"]
