"""Rule pages are documentation and tests at once: they cannot drift from the rules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import run_cli

from smpfix.api import check_source, fix_source
from smpfix.job.jobfacts import parse_value
from smpfix.rules.pages import (
    SECTIONS,
    all_pages,
    for_readers,
    page_sources,
    read_page,
    render_page,
)
from smpfix.rules.registry import all_rules
from smpfix.rules.rule import FixAvailability, Rule, TensorParallelism

RULES = {rule.code: rule for rule in all_rules()}
SOURCES = page_sources()
PAGES = all_pages()


def test_every_rule_has_a_page_and_every_page_a_rule() -> None:
    assert set(SOURCES) == set(RULES)


@pytest.mark.parametrize("code", sorted(RULES))
def test_page_has_every_section(code: str) -> None:
    headings = re.findall(r"^## (.+)$", SOURCES[code], re.MULTILINE)
    assert headings == list(SECTIONS), f"{code}.md's sections must be {list(SECTIONS)}"
    page = PAGES[code]
    missing = [section for section in SECTIONS if not page.sections.get(section, "").strip()]
    assert not missing, f"{code}.md lacks sections {missing}"


_GENERATED = re.compile(
    r"^(\*\*Tensor parallelism:\*\* this rule|All SMP v1 versions\.|SMP [\d.]+ (and later|and"
    r" earlier|to [\d.]+)\.)",
    re.MULTILINE,
)


@pytest.mark.parametrize("code", sorted(RULES))
def test_page_source_leaves_to_the_rule_what_the_rule_declares(code: str) -> None:
    """The title, the range in words and the tensor-parallelism line come from the class."""
    found = _GENERATED.search(SOURCES[code])
    assert found is None, f"{code}.md repeats {found.group(0)!r}: the rule's class says it"


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


def test_explain_prints_no_test_directive() -> None:
    """Issue 24: ``explain`` printed ``<!-- job: ... -->`` and the other comments the pages'
    tests read; a file directive becomes the caption of the block it names."""
    for code in ("SMP002", "SMP102", "SMP900"):
        printed = run_cli("explain", code)
        assert printed.code == 0
        assert "<!--" not in printed.stdout, code
    assert "`train.py`:\n\n```python\nimport torch.sagemaker" in run_cli("explain", "SMP002").stdout


@pytest.mark.parametrize("code", sorted(RULES))
def test_readers_see_no_comment_and_tests_still_read_the_directives(code: str) -> None:
    assert "<!--" not in (read_page(code) or "<!--")
    # The tests read the rendered page, directives included (``all_pages``).
    assert for_readers(render_page(RULES[code], SOURCES[code])) == read_page(code)


def test_for_readers_drops_directive_lines_and_captions_files() -> None:
    page = (
        "## Example\n<!-- job: tensor_parallel_degree=4 -->\n<!-- fix: unsafe -->\n"
        "```python\nx\n```\n\n<!-- file: scripts/train.py -->\n```python\ny\n```\n"
        "  <!-- note -->\nText.\n"
    )
    assert for_readers(page) == (
        "## Example\n```python\nx\n```\n\n`scripts/train.py`:\n\n```python\ny\n```\nText.\n"
    )
    assert PAGES["SMP102"].job_settings("Example") == {"tensor_parallel_degree": "4"}


class _Probe(Rule):
    code, name, since, until = "SMP998", "probe", (1, 10), None
    tensor_parallelism = TensorParallelism.DEGREE


def test_a_page_is_rendered_with_what_its_rule_declares() -> None:
    source = (
        "## When it applies\nPyTorch scripts.\n\n## Versions\nThe API arrived then.\n\n"
        "## Source\nThe docs.\n"
    )
    assert (
        render_page(_Probe, source) == "# SMP998 probe\n\n## When it applies\nPyTorch scripts.\n\n"
        "**Tensor parallelism:** this rule depends on the rank topology, so on "
        "`tensor_parallel_degree` alone, whether or not modules are marked.\n\n"
        "## Versions\nSMP 1.10 and later. The API arrived then.\n\n## Source\nThe docs.\n"
    )
    goes_on = source.replace(
        "PyTorch scripts.\n", "PyTorch scripts.\n\n<!-- tensor parallelism --> (a tag).\n"
    ).replace("The API arrived then.\n", "")
    rendered = render_page(_Probe, goes_on)
    assert (
        "whether or not modules are marked (a tag).\n\n## Versions\nSMP 1.10 and later.\n\n"
        in rendered
    )
    with pytest.raises(ValueError, match="title comes from the rule"):
        render_page(_Probe, "# SMP998 probe\n\n" + source)


def test_pages_docs_and_messages_cite_what_a_user_can_read() -> None:
    """The pages once cited "catalog P40" and the like, an internal research catalog no user
    can see; they cite the developer guide, the SDK documentation, the release notes and the
    library source instead. The rules' messages and the code's docstrings too."""
    root = Path(__file__).resolve().parent.parent
    texts = {
        **{f"rules/{code}.md": text for code, text in page_sources().items()},
        **{str(path.relative_to(root)): path.read_text("utf-8") for path in root.glob("docs/*.md")},
        "README.md": (root / "README.md").read_text("utf-8"),
        **{
            str(path.relative_to(root)): path.read_text("utf-8")
            for path in (root / "smpfix").rglob("*.py")
        },
    }
    assert [name for name, text in texts.items() if "catalog" in text.lower()] == []
