"""The result cache: reused only while nothing a result came from has changed, never harmful.

In-process runs (``jobs=1``) count how often the analysis actually ran; the command-line
tests run the installed ``smpfix`` as a user would.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli, smpfix_command

from smpfix.base.findings import FileResult
from smpfix.engine import cache, runner
from smpfix.engine.discovery import DiscoveredFile
from smpfix.engine.runner import RunOptions, run
from smpfix.job.jobfacts import DeclaredJob
from smpfix.job.project import Project
from smpfix.rules.registry import rule_names

BAD = """import smdistributed.modelparallel.torch as smp
import torch

smp.init()
model = GPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
model = smp.DistributedModel(model)
if smp.dp_rank() == 0:
    smp.save(model.local_state_dict(), "m.pt", partial=True)
optimizer = smp.DistributedOptimizer(optimizer)
"""

CLEAN = """import smdistributed.modelparallel.torch as smp

smp.init()
model = smp.DistributedModel(GPT())
"""


def _options(root: Path, **changes: object) -> RunOptions:
    names = rule_names()
    settings: dict = {
        "select": frozenset(names),
        "rule_names": names,
        "root": root,
        "jobs": 1,
        "cache_dir": root / ".smpfix_cache",
        "project": Project.of((str(root),)),
        **changes,
    }
    return RunOptions(**settings)


def _check(paths: list[Path], options: RunOptions) -> list[FileResult]:
    return list(run([DiscoveredFile(str(p), explicit=True) for p in paths], options))


@pytest.fixture(autouse=True)
def stable_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process runs key the cache by a fixed engine: a source file of smpfix edited while
    the tests run (a development checkout) must not turn an expected hit into a miss."""
    monkeypatch.setattr(cache, "engine_fingerprint", lambda: "test-engine")


@pytest.fixture
def analyses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths analyzed (not served from the cache), in order."""
    seen: list[str] = []
    original = runner.check_bytes

    def counting(
        task: DiscoveredFile, raw: bytes, options: RunOptions, reached: bool = False
    ) -> FileResult:
        seen.append(task.path)
        return original(task, raw, options, reached)

    monkeypatch.setattr(runner, "check_bytes", counting)
    return seen


def _shape(results: list[FileResult]) -> list[tuple]:
    return [
        (r.path, [(f.code, f.start, f.end, f.message, f.fix) for f in r.findings], r.errors, r.text)
        for r in results
    ]


def test_unchanged_file_is_served_from_the_cache(tmp_path: Path, analyses: list[str]) -> None:
    script = tmp_path / "train.py"
    script.write_text(BAD, encoding="utf-8")
    options = _options(tmp_path)
    first = _check([script], options)
    second = _check([script], options)
    assert analyses == [str(script)]
    assert first[0].findings and _shape(first) == _shape(second)
    assert second[0].text == BAD


def test_changed_content_settings_or_job_miss(tmp_path: Path, analyses: list[str]) -> None:
    script = tmp_path / "train.py"
    script.write_text(BAD, encoding="utf-8")
    options = _options(tmp_path)
    _check([script], options)
    script.write_text(CLEAN, encoding="utf-8")
    assert _check([script], options)[0].findings == ()
    _check([script], _options(tmp_path, select=frozenset({"SMP101"})))
    _check(
        [script],
        _options(tmp_path, declared_jobs=(DeclaredJob("test", {"tensor_parallel_degree": 4}),)),
    )
    assert len(analyses) == 4


def test_sibling_module_is_a_dependency(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text("class GPT:\n    pass\n", encoding="utf-8")
    script = tmp_path / "train.py"
    script.write_text("import model\n" + BAD.replace("GPT()", "model.GPT()"), encoding="utf-8")
    options = _options(tmp_path)
    result = _check([script], options)[0]
    assert str(tmp_path / "model.py") in result.dependencies
    store = cache.ResultCache.open(tmp_path / ".smpfix_cache")
    raw = script.read_bytes()
    key = store.key(str(script), raw, runner._cache_settings(str(script), options))
    assert key is not None and store.load(key, str(script), raw) is not None
    (tmp_path / "model.py").write_text("class GPT:\n    layers = 2\n", encoding="utf-8")
    assert store.load(key, str(script), raw) is None


def test_corrupt_entries_are_ignored_and_rewritten(tmp_path: Path, analyses: list[str]) -> None:
    script = tmp_path / "train.py"
    script.write_text(BAD, encoding="utf-8")
    options = _options(tmp_path)
    expected = _shape(_check([script], options))
    entries = list((tmp_path / ".smpfix_cache" / cache.FORMAT).glob("*.json"))
    assert len(entries) == 1
    for garbage in (
        b"",
        b"{not json",
        b"[]",
        json.dumps({"digest": 1}).encode(),
        entries[0].read_bytes()[:40],
        b"\xff\xfe",
    ):
        entries[0].write_bytes(garbage)
        assert _shape(_check([script], options)) == expected
        assert json.loads(entries[0].read_bytes())["result"]["path"] == str(script)
    entry = json.loads(entries[0].read_bytes())
    entry["result"]["findings"][0]["start"] = "line one"
    entries[0].write_text(json.dumps(entry), encoding="utf-8")
    assert _shape(_check([script], options)) == expected
    assert len(analyses) == 8


def test_unwritable_cache_is_not_an_error(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(BAD, encoding="utf-8")
    (tmp_path / "blocked").write_text("a file where the cache folder should be", encoding="utf-8")
    results = _check([script], _options(tmp_path, cache_dir=tmp_path / "blocked"))
    assert results[0].findings and not results[0].errors


def _hammer(directory: str, rounds: int) -> int:
    store = cache.ResultCache(Path(directory), "engine")
    raw = b"import smdistributed\n"
    key = store.key("train.py", raw, {"codes": ["SMP101"]})
    assert key is not None
    wrong = 0
    for number in range(rounds):
        store.store(key, FileResult("train.py", errors=()), dependencies=())
        loaded = store.load(key, "train.py", raw)
        wrong += loaded is not None and loaded != FileResult("train.py")
        if number % 7 == 0:
            cache.clean(directory)
    return wrong


def test_concurrent_writers_readers_and_cleaners(tmp_path: Path) -> None:
    context = multiprocessing.get_context(
        "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    )
    with context.Pool(4) as pool:
        assert pool.starmap(_hammer, [(str(tmp_path / "c"), 150)] * 4) == [0, 0, 0, 0]


def test_concurrent_command_runs_agree(tmp_path: Path) -> None:
    for number in range(12):
        (tmp_path / f"train_{number}.py").write_text(BAD if number % 2 else CLEAN, encoding="utf-8")
    command = [
        *smpfix_command(),
        "check",
        "--format",
        "json",
        "--cache-dir",
        str(tmp_path / "cache"),
        str(tmp_path),
    ]
    runs = [
        subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "NO_COLOR": "1"},
        )
        for _ in range(3)
    ]
    outputs = [run.communicate(timeout=300) for run in runs]
    assert all(run.returncode == 1 for run in runs), [err for _, err in outputs]
    assert len({out for out, _ in outputs}) == 1
    again = subprocess.run(command, capture_output=True, timeout=300)
    assert again.stdout == outputs[0][0]


def test_apply_never_skips_a_fix_and_reuses_fix_free_results(
    tmp_path: Path, analyses: list[str]
) -> None:
    bad, clean = tmp_path / "bad.py", tmp_path / "clean.py"
    bad.write_text(BAD, encoding="utf-8")
    clean.write_text(CLEAN, encoding="utf-8")
    _check([bad, clean], _options(tmp_path))
    assert sorted(analyses) == [str(bad), str(clean)]
    analyses.clear()
    applied = _check([bad, clean], _options(tmp_path, apply=True))
    assert analyses == [str(bad)], "a cached result with safe fixes must go through the fix loop"
    assert bad.read_text(encoding="utf-8") != BAD and applied[0].fixed_count > 0
    assert clean.read_text(encoding="utf-8") == CLEAN
    analyses.clear()
    check_after = _check([bad], _options(tmp_path))
    assert analyses == [str(bad)]
    assert all(not cache.has_applicable_fix(result, False) for result in check_after)


def test_diff_with_cached_fixable_result_still_shows_the_diff(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(BAD, encoding="utf-8")
    _check([script], _options(tmp_path))
    result = _check([script], _options(tmp_path, diff=True))[0]
    assert result.new_text is not None and result.new_text != BAD
    assert script.read_text(encoding="utf-8") == BAD


def test_command_line_no_cache_cache_dir_and_clean(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.smpfix]\n", encoding="utf-8")
    (tmp_path / "train.py").write_text(BAD, encoding="utf-8")
    assert run_cli("check", "--no-cache", "train.py", cwd=tmp_path).code == 1
    assert not (tmp_path / ".smpfix_cache").exists()
    first = run_cli("check", "train.py", cwd=tmp_path)
    assert (tmp_path / ".smpfix_cache" / "CACHEDIR.TAG").is_file()
    assert "*" in (tmp_path / ".smpfix_cache" / ".gitignore").read_text(encoding="utf-8")
    assert run_cli("check", "train.py", cwd=tmp_path).stdout == first.stdout
    elsewhere = tmp_path / "elsewhere"
    assert (
        run_cli("check", "--cache-dir", str(elsewhere), "train.py", cwd=tmp_path).stdout
        == first.stdout
    )
    assert list((elsewhere / cache.FORMAT).glob("*.json"))
    (tmp_path / ".smpfix_cache" / "notes.txt").write_text("not ours", encoding="utf-8")
    cleaned = run_cli("clean", cwd=tmp_path)
    assert (
        cleaned.code == 0
        and cleaned.stdout.startswith("Removed ")
        and "holds other files" in cleaned.stdout
    )
    assert sorted(p.name for p in (tmp_path / ".smpfix_cache").iterdir()) == ["notes.txt"]
    assert run_cli("clean", "--cache-dir", str(elsewhere), cwd=tmp_path).code == 0
    assert not elsewhere.exists()
