"""Every rule's fixtures, as specifications.

``tests/fixtures/<CODE>/`` holds:

- ``bad_*.py``: code the rule must flag, with ``# expect: <CODE> [severity]`` on each line
  where a finding starts; nothing else may be reported by that rule;
- ``bad_*.fixed.py``: the exact text ``--apply`` produces (``--unsafe-fixes`` when the bad
  file says ``# smpfix-fix: unsafe``); without it, fixes must leave the file unchanged;
- ``ok_*.py``: correct code the rule must not flag (the false-positive traps).

``# smpfix-job: key=value ...`` at the top sets the job the fixture is checked under;
``# smpfix-select: SMP301 ...`` enables more rules beside the folder's (their findings must
be expected too), for rules such as SMP900 that judge what other rules report;
``# smpfix-root: .`` checks the fixture inside a project rooted at that folder, so that a
launcher fixture's ``entry_point`` can name a script beside it (SMP832's ``scripts/``).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from conftest import (
    FIXTURES,
    expected_findings,
    fixture_job,
    fixture_roots,
    fixture_select,
    fixture_unsafe,
)

from smpfix.api import check_source, fix_source
from smpfix.rules.registry import all_rules

CODES = [rule.code for rule in all_rules()]


def _cases(prefix: str) -> list[Path]:
    return sorted(
        p for p in FIXTURES.glob(f"SMP*/{prefix}_*.py") if not p.name.endswith(".fixed.py")
    )


@pytest.mark.parametrize("code", CODES)
def test_every_rule_has_hits_and_traps(code: str) -> None:
    folder = FIXTURES / code
    assert folder.is_dir(), f"{code} has no fixture folder"
    assert list(folder.glob("bad_*.py")), f"{code} has no bad_*.py fixture"
    assert list(folder.glob("ok_*.py")), f"{code} has no ok_*.py trap"


@pytest.mark.parametrize("path", _cases("bad"), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_bad_fixture_findings(path: Path) -> None:
    code = path.parent.name
    text = path.read_text(encoding="utf-8")
    expected = expected_findings(text)
    assert expected, f"{path} has no # expect: markers"
    findings = check_source(
        text,
        str(path),
        select=[code, *fixture_select(text)],
        job=fixture_job(text),
        roots=fixture_roots(path, text),
    )
    got = sorted((f.start.line, f.code) for f in findings)
    assert got == sorted((e.line, e.code) for e in expected), "\n".join(
        f"{f.start.line}: {f.message}" for f in findings
    )
    # Several findings may share a line with different severities: match them as a multiset.
    remaining = Counter((f.start.line, f.code, f.severity.value) for f in findings)
    for item in expected:
        if item.severity is not None:
            key = (item.line, item.code, item.severity)
            messages = "\n".join(f.message for f in findings if f.start.line == item.line)
            assert remaining[key] > 0, (
                f"line {item.line}: no {item.code} {item.severity}:\n{messages}"
            )
            remaining[key] -= 1


@pytest.mark.parametrize("path", _cases("bad"), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_bad_fixture_fixed_text(path: Path) -> None:
    code = path.parent.name
    text = path.read_text(encoding="utf-8")
    job = fixture_job(text)
    unsafe = fixture_unsafe(text)
    select = [code, *fixture_select(text)]
    result = fix_source(
        text, str(path), select=select, job=job, unsafe=unsafe, roots=fixture_roots(path, text)
    )
    assert not result.errors, result.errors
    fixed_path = path.with_name(path.stem + ".fixed.py")
    if fixed_path.exists():
        assert result.text == fixed_path.read_text(encoding="utf-8")
        assert result.text != text
    else:
        assert result.text == text, (
            f"{path}: fixes changed the text but there is no {fixed_path.name}"
        )
    again = fix_source(
        result.text,
        str(path),
        select=select,
        job=job,
        unsafe=unsafe,
        roots=fixture_roots(path, text),
    )
    assert again.text == result.text, "fixes did not converge: a second run changed the text again"


@pytest.mark.parametrize("path", _cases("ok"), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_ok_fixture_is_quiet(path: Path) -> None:
    code = path.parent.name
    text = path.read_text(encoding="utf-8")
    assert not expected_findings(text), f"{path}: ok_ fixtures carry no # expect: markers"
    findings = check_source(
        text,
        str(path),
        select=[code, *fixture_select(text)],
        job=fixture_job(text),
        roots=fixture_roots(path, text),
    )
    assert findings == [], "\n".join(f"{f.start.line}: {f.message}" for f in findings)
