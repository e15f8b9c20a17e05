"""The documentation site (``mkdocs.yml``, built by ``mkdocs build --strict`` in CI): a page per
rule and an index generated from the rules, the README as its home page, links that work both
on GitHub and on the site (issue 24)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from smpfix.rules.registry import all_rules, rule_table
from smpfix.rules.site import (
    families,
    generated_pages,
    home_page,
    rule_index,
    rules_nav,
    site_links,
)

ROOT = Path(__file__).resolve().parent.parent
CODES = [rule.code for rule in all_rules()]
PAGES = generated_pages()


def test_every_rule_has_a_page_on_the_site_without_test_directives() -> None:
    assert set(PAGES) == {"rules/index.md", *(f"rules/{code}.md" for code in CODES)}
    for code in CODES:
        page = PAGES[f"rules/{code}.md"]
        assert page.startswith(f"# {code} "), code
        assert "<!--" not in page, code


def test_the_index_lists_each_rule_once_by_family_with_what_the_rules_declare() -> None:
    index = rule_index()
    for row in rule_table():
        lines = [line for line in index.splitlines() if line.startswith(f"| [{row['code']}]")]
        assert len(lines) == 1, row["code"]
        cells = [cell.strip() for cell in lines[0].strip("|").split(" | ")]
        assert cells[:6] == [
            f"[{row['code']}]({row['code']}.md)",
            f"`{row['name']}`",
            row["default_severity"],
            row["fix"],
            row["versions"],
            ", ".join(row["flavours"]),
        ]
    headings = re.findall(r"^## (SMP\dxx)", index, re.MULTILINE)
    assert headings == sorted(headings) and len(headings) == len(families()) >= 9


def test_every_rule_is_in_the_navigation_under_its_family() -> None:
    listed = [
        path
        for section in rules_nav()
        for entries in section.values()
        for entry in entries
        for path in entry.values()
    ]
    assert listed == [f"rules/{code}.md" for code in sorted(CODES, key=_family_order)]


def _family_order(code: str) -> int:
    return next(i for i, family in enumerate(families()) if code in family.codes)


@pytest.mark.parametrize(
    ("path", "link", "on_site"),
    [
        ("README.md", "docs/usage.md", "usage.md"),
        ("README.md", "docs/job.md#launchers-and-notebooks", "job.md#launchers-and-notebooks"),
        ("README.md", "rules/", "rules/index.md"),
        ("README.md", "rules/SMP831.md", "rules/SMP831.md"),
        ("README.md", "#severities", "#severities"),
        (
            "README.md",
            "ARCHITECTURE.md",
            "https://github.com/smpfix/smpfix/blob/main/ARCHITECTURE.md",
        ),
        ("README.md", "https://example.com/x.md", "https://example.com/x.md"),
        ("docs/usage.md", "../rules/", "rules/index.md"),
        ("docs/usage.md", "../rules/SMP301.md", "rules/SMP301.md"),
        ("docs/usage.md", "plan.md#smp-v2-jobs", "plan.md#smp-v2-jobs"),
        ("docs/usage.md", "../README.md", "index.md"),
        ("rules/SMP831.md", "../docs/plan.md", "../plan.md"),
        ("rules/SMP831.md", "SMP101.md", "SMP101.md"),
    ],
)
def test_a_link_between_markdown_files_points_where_its_target_is_on_the_site(
    path: str, link: str, on_site: str
) -> None:
    assert site_links(f"See [it]({link}).\n", path) == f"See [it]({on_site}).\n"


def test_links_in_code_blocks_are_left_as_written() -> None:
    text = (
        "```bash\nsmpfix server  # see [In the editor](docs/editor.md)\n```\n[e](docs/editor.md)\n"
    )
    assert site_links(text, "README.md") == text.replace("[e](docs/editor.md)", "[e](editor.md)")


def test_the_home_page_is_the_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    home = home_page(readme)
    assert home.splitlines()[0] == readme.splitlines()[0] == "# smpfix"
    assert "](docs/usage.md)" in readme and "](docs/usage.md)" not in home


def test_the_site_is_configured_for_its_address_and_every_page_of_docs() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "\nsite_url: https://smpfix.github.io/smpfix/\n" in config
    assert "\ndocs_dir: docs\n" in config and "name: material" in config
    assert "\n  - mkdocs_hooks.py\n" in config
    in_nav = set(re.findall(r"^\s+- [^:\n]+: (\S+\.md)$", config, re.MULTILINE))
    assert {path.name for path in (ROOT / "docs").glob("*.md")} | {"index.md"} <= in_nav
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'docs = ["mkdocs>=1.6", "mkdocs-material>=9.5"]' in pyproject
    assert "mkdocs build --strict" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
