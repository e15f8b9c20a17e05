"""Writing fixes back never loses anyone's code.

``source.write_atomic`` writes a temporary file next to the target and renames it over the
target only if the file on disk is still exactly what was read; it keeps encoding, BOM, mode
and owner, refuses read-only files (even as root), and removes its temporary file on any
failure. Discovery never follows a directory link (so loops end), never mistakes a
temporary file for a source, and never writes through a link that leads out of the tree.
"""

from __future__ import annotations

import os
import signal
import stat
import tempfile
import threading
from pathlib import Path

import pytest
from conftest import run_cli
from test_safety_inputs import JOB, SCRIPT, fixed

from smpfix.base import source
from smpfix.engine.discovery import DiscoveredFile, Excluder, discover
from smpfix.engine.runner import RunOptions, check_bytes
from smpfix.rules.registry import rule_names


def _temporaries(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name.startswith(source.TEMP_PREFIX))


def _options(**changes: object) -> RunOptions:
    names = rule_names()
    return RunOptions(
        select=frozenset(names), rule_names=names, declared_jobs=_declared(), apply=True, **changes
    )  # type: ignore[arg-type]


def _declared() -> tuple:
    from smpfix.job.jobfacts import DeclaredJob

    return (DeclaredJob("test", dict(JOB)),)


def test_write_replaces_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    src = source.read(str(path))
    source.write_atomic(src, fixed(SCRIPT))
    assert path.read_text() == fixed(SCRIPT)
    assert _temporaries(tmp_path) == []


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(),
    reason="signal handlers run in the main thread",
)
def test_ctrl_c_during_a_write_takes_effect_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An interrupt between creating the temporary file and removing it once left the file
    behind: it now waits for the write to end, which leaves the fixed file and no temporary."""
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    src = source.read(str(path))
    real_fsync = os.fsync

    def interrupted_fsync(fd: int) -> None:
        real_fsync(fd)
        signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(source.os, "fsync", interrupted_fsync)
    with pytest.raises(KeyboardInterrupt):
        source.write_atomic(src, fixed(SCRIPT))
    assert path.read_text() == fixed(SCRIPT)
    assert _temporaries(tmp_path) == []


def test_a_file_changed_after_reading_is_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    src = source.read(str(path))
    path.write_text(SCRIPT + "# a colleague's edit\n")
    with pytest.raises(source.ConcurrentModification):
        source.write_atomic(src, fixed(SCRIPT))
    assert path.read_text() == SCRIPT + "# a colleague's edit\n"
    assert _temporaries(tmp_path) == []


def test_runner_reports_a_file_changed_between_reading_and_writing(tmp_path: Path) -> None:
    """The runner reads every file before the workers start; an edit made in between wins."""
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    raw = path.read_bytes()
    path.write_text(SCRIPT + "# saved in the editor meanwhile\n")
    result = check_bytes(DiscoveredFile(str(path), explicit=True), raw, _options())
    assert [error.message for error in result.errors] == [
        "file changed on disk since it was read; not overwritten"
    ]
    assert path.read_text() == SCRIPT + "# saved in the editor meanwhile\n"


def test_read_only_files_are_refused_even_for_root(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    path.chmod(0o444)
    with pytest.raises(source.SourceError, match="read-only"):
        source.write_atomic(source.read(str(path)), fixed(SCRIPT))
    assert path.read_text() == SCRIPT
    assert _temporaries(tmp_path) == []


def test_read_only_file_under_apply_is_reported_and_the_others_fixed(tmp_path: Path) -> None:
    locked, free = tmp_path / "locked.py", tmp_path / "free.py"
    locked.write_text(SCRIPT)
    free.write_text(SCRIPT)
    locked.chmod(0o444)
    result = run_cli("--apply", "--no-cache", "--job", "tensor_parallel_degree=4", str(tmp_path))
    assert result.code == 2
    assert f"{locked}:1:1: error: cannot write: file is read-only" in result.stderr
    assert "Traceback" not in result.stderr
    assert locked.read_text() == SCRIPT
    assert free.read_text() == fixed(SCRIPT)


def test_mode_owner_encoding_and_bom_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    text = "# -*- coding: latin-1 -*-\n# entraîné\n" + SCRIPT
    path.write_bytes(text.encode("latin-1"))
    path.chmod(0o751)
    before = path.stat()
    source.write_atomic(source.read(str(path)), fixed(text))
    after = path.stat()
    assert stat.S_IMODE(after.st_mode) == 0o751
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)
    assert path.read_bytes() == fixed(text).encode("latin-1")


def test_text_that_the_encoding_cannot_hold_is_an_error_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_bytes(b"# -*- coding: latin-1 -*-\n" + SCRIPT.encode())
    with pytest.raises(source.SourceError, match="cannot be encoded as iso-8859-1"):
        source.write_atomic(source.read(str(path)), SCRIPT + "# \u2603\n")
    assert _temporaries(tmp_path) == []


def test_a_failed_rename_or_temporary_file_is_an_error_and_cleaned_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    src = source.read(str(path))

    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(source.os, "replace", refuse)
    monkeypatch.setattr(source, "_exchange", refuse)  # the rename, where it is an exchange
    with pytest.raises(source.SourceError, match="cannot write: Permission denied"):
        source.write_atomic(src, fixed(SCRIPT))
    monkeypatch.undo()
    assert path.read_text() == SCRIPT
    assert _temporaries(tmp_path) == []
    monkeypatch.setattr(tempfile, "mkstemp", refuse)  # a folder that is not writable
    with pytest.raises(source.SourceError, match="cannot write: Permission denied"):
        source.write_atomic(src, fixed(SCRIPT))
    assert path.read_text() == SCRIPT


def test_a_killed_runs_temporary_file_is_removed_by_the_next_write(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    stale = tmp_path / ".smpfix-train.py.k1ll3d.tmp"
    stale.write_text("half a file")
    other = tmp_path / ".smpfix-other.py.k1ll3d.tmp"
    other.write_text("another file's")
    source.write_atomic(source.read(str(path)), fixed(SCRIPT))
    assert not stale.exists()
    assert other.exists()
    assert [f.path for f in discover([str(tmp_path)], Excluder([], tmp_path))] == [str(path)]


def test_link_loops_in_a_tree_terminate(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(SCRIPT)
    (tmp_path / "pkg" / "up").symlink_to("..")
    (tmp_path / "pkg" / "itself").symlink_to(".")
    (tmp_path / "a.py").symlink_to("b.py")
    (tmp_path / "b.py").symlink_to("a.py")
    found = sorted(f.path for f in discover([str(tmp_path)], Excluder([], tmp_path)))
    assert found == [
        str(tmp_path / "a.py"),
        str(tmp_path / "b.py"),
        str(tmp_path / "pkg" / "train.py"),
    ]
    result = run_cli("--no-cache", str(tmp_path))
    assert result.code == 2 and "Traceback" not in result.stderr
    assert "a.py:1:1: error: cannot read: Too many levels of symbolic links" in result.stderr


def test_a_link_out_of_the_tree_is_not_written_through_unless_named(tmp_path: Path) -> None:
    outside, tree = tmp_path / "outside", tmp_path / "tree"
    outside.mkdir()
    tree.mkdir()
    target = outside / "shared_train.py"
    target.write_text(SCRIPT)
    link = tree / "train.py"
    link.symlink_to(target)
    (found,) = discover([str(tree)], Excluder([], tree))
    assert not found.writable
    result = run_cli("--apply", "--no-cache", "--job", "tensor_parallel_degree=4", str(tree))
    assert result.code == 2
    assert "not written: it is a link to a file outside the checked tree" in result.stderr
    assert target.read_text() == SCRIPT and link.is_symlink()
    named = run_cli("--apply", "--no-cache", "--job", "tensor_parallel_degree=4", str(link))
    assert named.code == 0, named.stderr
    assert target.read_text() == fixed(SCRIPT) and link.is_symlink()


def test_a_link_to_a_file_in_the_same_tree_is_checked_and_written_once(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "alias.py").symlink_to("train.py")
    found = list(discover([str(tmp_path)], Excluder([], tmp_path)))
    assert len(found) == 1
    result = run_cli(
        "--apply",
        "--no-cache",
        "--workers",
        "2",
        "--job",
        "tensor_parallel_degree=4",
        str(tmp_path),
    )
    assert result.code == 0, result.stderr
    assert (tmp_path / "train.py").read_text() == fixed(SCRIPT)


def test_special_files_with_a_source_name_are_skipped(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "folder.py").mkdir()
    (tmp_path / "to_folder.py").symlink_to("folder.py")
    assert list(discover([str(tmp_path)], Excluder([], tmp_path))) == []
