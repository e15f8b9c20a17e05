"""A project tells which paths are its files (the modules an import may load) exactly as the
file system would, from one listing per folder it looks in: an import is looked for in every
search folder, mostly in folders that do not exist."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from smpfix.job.project import Project


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "project"
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (root / "pkg" / "data.py").write_text("", encoding="utf-8")
    (root / "pkg" / "sub" / "deep.py").write_text("", encoding="utf-8")
    (root / "model.py").write_text("", encoding="utf-8")
    (root / "folder.py").mkdir()  # a folder whose name ends in .py is no module file
    (root / "link.py").symlink_to(root / "model.py")
    (root / "broken.py").symlink_to(root / "missing.py")
    (root / "linked_pkg").symlink_to(root / "pkg", target_is_directory=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "other.py").write_text("", encoding="utf-8")
    return root, outside


def _asked(root: Path, outside: Path) -> list[str]:
    names = ["model", "pkg/data", "pkg/__init__", "pkg/sub/deep", "folder", "link", "broken"]
    names += ["linked_pkg/data", "missing", "torch/nn/functional", "pkg/missing", "model/x"]
    paths = [str(root / f"{name}.py") for name in names]
    paths += [str(root / "pkg" / "sub" / ".." / "data.py"), str(outside / "other.py")]
    return paths + [str(root), str(root / "pkg")]


def test_a_path_is_a_file_of_the_project_exactly_when_the_file_system_says_so(
    tmp_path: Path,
) -> None:
    root, outside = _tree(tmp_path)
    project = Project.of((str(root),))
    for path in _asked(root, outside):
        assert project.holds_file(path) == (os.path.isfile(path) and project.contains(path)), path


def test_a_project_that_is_one_file_holds_that_file(tmp_path: Path) -> None:
    root, outside = _tree(tmp_path)
    project = Project.of((str(root / "model.py"),))
    assert project.holds_file(str(root / "model.py"))
    assert not project.holds_file(str(root / "pkg" / "data.py"))


def test_each_folder_is_listed_at_most_once_and_missing_folders_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, outside = _tree(tmp_path)
    listed: list[str] = []
    scandir = os.scandir

    def counting(path: str) -> object:
        listed.append(path)
        return scandir(path)

    monkeypatch.setattr(os, "scandir", counting)
    project = Project.of((str(root),))
    for module in ("torch", "torch.nn", "transformers.models.gpt2", "numpy", "pkg.data", "model"):
        for candidate in project.module_candidates(str(root / "train.py"), module):
            project.holds_file(candidate)
    assert sorted(listed) == sorted({str(root), str(root / "pkg")})


def test_a_folder_that_cannot_be_listed_is_asked_about_path_by_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = _tree(tmp_path)
    scandir = os.scandir

    def refusing(path: str) -> object:
        if path == str(root / "pkg"):  # a folder with execute but no read permission
            raise PermissionError(13, "Permission denied", path)
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    project = Project.of((str(root),))
    assert project.holds_file(str(root / "pkg" / "data.py"))
    assert not project.holds_file(str(root / "pkg" / "missing.py"))
    assert not project.holds_file(str(root / "pkg" / "sub"))


def test_a_package_importing_itself_absolutely_is_found_from_the_folder_that_holds_it(
    tmp_path: Path,
) -> None:
    # A src/ layout: `src/training/main.py` says `from training.distributed import ...`, which
    # works only with `src` on the path; an unrelated top-level name is not looked for there.
    root = tmp_path / "project"
    (root / "src" / "training").mkdir(parents=True)
    (root / "src" / "training" / "distributed.py").write_text("", encoding="utf-8")
    (root / "src" / "helpers.py").write_text("", encoding="utf-8")
    project = Project.of((str(root),))
    script = str(root / "src" / "training" / "main.py")
    found = [
        candidate
        for candidate in project.module_candidates(script, "training.distributed")
        if project.holds_file(candidate)
    ]
    assert found == [str(root / "src" / "training" / "distributed.py")]
    assert not any(
        project.holds_file(candidate) for candidate in project.module_candidates(script, "helpers")
    )


def test_a_module_of_a_package_imports_its_siblings_through_the_package(tmp_path: Path) -> None:
    """``from training.loop import f`` in ``src/training/main.py`` works only with ``src`` on the
    path (``python -m training.main`` from ``src``): the folder holding the package is searched
    after the importer's own, before the project roots."""
    root = tmp_path / "project"
    package = root / "src" / "training"
    package.mkdir(parents=True)
    for name in ("__init__.py", "main.py", "loop.py"):
        (package / name).write_text("", encoding="utf-8")
    (root / "script.py").write_text("", encoding="utf-8")
    project = Project.of((str(root),))
    assert project.search_dirs(str(package / "main.py")) == [
        str(package),
        str(root / "src"),
        str(root),
    ]
    assert project.search_dirs(str(root / "script.py")) == [str(root)]
    assert str(package / "loop.py") in project.module_candidates(
        str(package / "main.py"), "training.loop"
    )
