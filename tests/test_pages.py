"""Rule pages are documentation and tests at once: they cannot drift from the rules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from smpfix.api import check_source, fix_source
from smpfix.job.jobfacts import parse_value
from smpfix.job.versions import range_in_words
from smpfix.rules.pages import SECTIONS, all_pages, read_page
from smpfix.rules.registry import all_rules
from smpfix.rules.rule import FixAvailability

RULES = {rule.code: rule for rule in all_rules()}
PAGES = all_pages()


def test_every_rule_has_a_page_and_every_page_a_rule() -> None:
    assert set(PAGES) == set(RULES)


@pytest.mark.parametrize("code", sorted(RULES))
def test_page_has_every_section(code: str) -> None:
    page = PAGES[code]
    assert page.title == f"{code} {RULES[code].name}"
    missing = [section for section in SECTIONS if not page.sections.get(section, "").strip()]
    assert not missing, f"{code}.md lacks sections {missing}"


@pytest.mark.parametrize("code", sorted(RULES))
def test_page_example_is_flagged_and_fixed_as_shown(code: str, tmp_path: Path) -> None:
    page = PAGES[code]
    example, fixed = page.code_block("Example"), page.code_block("Fixed")
    assert example is not None and fixed is not None, (
        f"{code}.md needs python blocks in Example and Fixed"
    )
    job = {key: parse_value(value) for key, value in page.job_settings("Example").items()}
    # ``<!-- select: SMP301 -->`` enables more rules beside the page's own (SMP900 judges theirs).
    more = re.search(r"<!--\s*select:(.*?)-->", page.sections["Example"])
    select = [code, *(more.group(1).split() if more else [])]
    # ``<!-- file: scripts/train.py -->`` blocks are written beside the example, which is then
    # checked as a launcher of that project.
    path, roots = f"{code}.md", ()
    for name, text in page.other_files("Example").items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
        path, roots = str(tmp_path / "launch.py"), (str(tmp_path),)
    findings = check_source(example, path, select=select, job=job, roots=roots)
    assert findings, f"{code}.md's Example is not flagged by {code}"
    unsafe = "<!-- fix: unsafe -->" in page.sections["Example"]
    result = fix_source(example, path, select=select, job=job, unsafe=unsafe, roots=roots)
    if RULES[code].fix_availability is FixAvailability.NONE or result.text == example:
        assert check_source(fixed, path, select=select, job=job, roots=roots) == [], (
            f"{code}.md's Fixed is still flagged"
        )
    else:
        assert result.text == fixed, f"{code}.md's Fixed is not what --apply produces"


def test_explain_reads_the_page_from_the_installation() -> None:
    assert read_page("SMP101") is not None and read_page("SMP101").startswith("# SMP101")


@pytest.mark.parametrize("code", sorted(RULES))
def test_page_states_the_rules_version_range(code: str) -> None:
    rule = RULES[code]
    first = PAGES[code].sections["Versions"].strip()
    assert first.startswith(range_in_words(rule.since, rule.until)), (
        f"{code}.md's Versions must start with the rule's range"
    )


@pytest.mark.parametrize("code", sorted(RULES))
def test_page_says_how_the_rule_depends_on_tensor_parallelism(code: str) -> None:
    """Each rule is one of: replaced modules (the program's marking), rank topology (the
    degree), both, or neither; its page says which (issue 12)."""
    assert "**Tensor parallelism:** this rule " in PAGES[code].sections["When it applies"], code
