"""A release: the version, the changelog and the snippets that pin it agree (issue 24).

The pre-commit and GitHub Actions snippets of the README and the docs pin the tag of a
release (``vX.Y.Z``, an annotated tag on the release commit, as CHANGELOG.md says); a pin
to any other revision names a tag that does not exist."""

from __future__ import annotations

import re
from pathlib import Path

import smpfix

ROOT = Path(__file__).resolve().parent.parent
# ``rev: v0.2.0`` (pre-commit) and ``smpfix@v0.2.0`` (pip from Git, in Actions).
_PIN = re.compile(r"(?:\brev:\s*|smpfix(?:\.git)?@)(?P<rev>v?\d+\.\d+\.\d+\S*?)[\"'\s]")


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_pinned_revision_is_this_version_tag() -> None:
    pins = [
        (path.name, match.group("rev"))
        for path in _documents()
        for match in _PIN.finditer(path.read_text(encoding="utf-8"))
    ]
    assert len(pins) >= 2, "the README shows a pre-commit and an Actions snippet"
    assert {rev for _, rev in pins} == {f"v{smpfix.__version__}"}, pins


def test_the_changelog_has_a_dated_section_for_this_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    version = re.escape(smpfix.__version__)
    assert re.search(rf"^## \[{version}\] - \d{{4}}-\d{{2}}-\d{{2}}$", text, re.MULTILINE)
    assert "git tag -a v" in text, "the changelog says how a release is tagged"


def test_the_version_is_what_the_command_reports() -> None:
    from click.testing import CliRunner

    from smpfix.cli import main

    out = CliRunner().invoke(main, ["--version"]).output
    assert out.strip() == f"smpfix {smpfix.__version__}"
