"""The rule pages (``rules/<CODE>.md``): ``smpfix explain`` prints them, tests run their examples.

In a wheel the pages are shipped as ``smpfix/_pages``; in a source checkout or an editable
install they are read from the repository's ``rules/`` folder beside the package.

A page's source holds what only prose can say; what the rule's class declares is added when
the page is rendered (``render_page``), so it is never written twice:

- the title, ``# SMP206 distributed-sampler-unused``, from the rule's code and name;
- the first sentence of "Versions", the rule's range in words (``range_in_words``), which the
  source's own text in that section follows;
- the last paragraph of "When it applies", ``**Tensor parallelism:** this rule`` and the
  words of its ``tensor_parallelism``, ending with a full stop; or, where the source says
  ``<!-- tensor parallelism -->``, those words in its place, followed by the source's own
  words: ``<!-- tensor parallelism --> (pipeline partitions).``

The tests read the rendered page with the directives its examples are checked under
(``<!-- job: ... -->``, ``all_pages``); its readers (``smpfix explain``, SARIF's rule help, the
documentation site) get it without them (``read_page``, ``for_readers``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from smpfix.job.versions import range_in_words
from smpfix.rules.registry import rule_of
from smpfix.rules.scope import Library

if TYPE_CHECKING:
    from smpfix.rules.rule import Rule

SECTIONS = (
    "What it detects",
    "Why it breaks on a cluster",
    "Example",
    "Fixed",
    "Fix safety",
    "When it applies",
    "Versions",
    "Source",
)


def pages_dir() -> Path:
    package = Path(__file__).resolve().parent.parent  # smpfix/
    shipped = package / "_pages"
    return shipped if shipped.is_dir() else package.parent / "rules"


def page_path(code: str) -> Path:
    return pages_dir() / f"{code}.md"


def page_source(code: str) -> Optional[str]:
    """The page as written, without what the rule's class declares (None if it is missing)."""
    try:
        return page_path(code).read_text(encoding="utf-8")
    except OSError:
        return None


def read_page(code: str) -> Optional[str]:
    """The page of the rule ``code`` as its readers see it (``smpfix explain``, SARIF's rule help,
    the documentation site): rendered, without the directives its tests read (``for_readers``).
    None when there is no such rule or its page is missing."""
    rule = rule_of(code)
    source = page_source(code)
    if rule is None or source is None:
        return None
    return for_readers(render_page(rule, source))


# A directive for the page's tests, alone on its line: ``<!-- job: tensor_parallel_degree=4 -->``
# (the job its example is checked under), ``<!-- fix: unsafe -->``, ``<!-- select: SMP301 -->``,
# ``<!-- file: train.py -->`` (the file the next block is); any other comment alone on a line.
_DIRECTIVE_LINE = re.compile(r"^[ \t]*<!--(?:\s*(?P<kind>[\w-]+):)?(?P<value>.*?)-->[ \t]*\n", re.M)


def for_readers(rendered: str) -> str:
    """A rendered page without the directives its tests read: each directive's line goes,
    except a ``file`` directive, whose file name a reader needs: it becomes the caption of the
    block it names (```` `train.py`: ````)."""

    def replace(match: re.Match[str]) -> str:
        if match.group("kind") == "file":
            return f"`{match.group('value').strip()}`:\n\n"
        return ""

    return _DIRECTIVE_LINE.sub(replace, rendered)


# Where a page's own words go on after the tensor-parallelism words of its rule.
TENSOR_PARALLELISM_GOES_ON = "<!-- tensor parallelism -->"


def render_page(rule: type[Rule], source: str) -> str:
    """The page: the source with the title, the range in words and the tensor-parallelism
    line of ``rule`` added."""
    rendered = f"# {rule.code} {rule.name}\n\n"
    for heading, body in _sections(source):
        if heading == "When it applies":
            body = _with_tensor_parallelism(body, rule)
        elif heading == "Versions":
            words = (
                "Every release of SMP v1 and of SMP v2."
                if rule.library is Library.EITHER and rule.since is None and rule.until is None
                else range_in_words(rule.since, rule.until)
            )
            body = f"{words} {body}" if body.strip() else f"{words}\n{body}"
            table = rule.versions_table()
            if table:
                body = f"{body.rstrip()}\n\n{table.rstrip()}\n\n"
        rendered += f"## {heading}\n{body}"
    return rendered


def _with_tensor_parallelism(body: str, rule: type[Rule]) -> str:
    line = f"**Tensor parallelism:** this rule {rule.tensor_parallelism.words}"
    if TENSOR_PARALLELISM_GOES_ON in body:
        return body.replace(TENSOR_PARALLELISM_GOES_ON, line, 1)
    return f"{body.rstrip()}\n\n{line}.\n\n"


def _sections(source: str) -> list[tuple[str, str]]:
    """The sections of a page source, in order: heading and text (up to the next heading)."""
    found: list[tuple[str, str]] = []
    for line in source.splitlines(keepends=True):
        if line.startswith("## "):
            found.append((line[3:].strip(), ""))
        elif found:
            found[-1] = (found[-1][0], found[-1][1] + line)
        elif line.strip():
            raise ValueError(
                f"a page source starts with its first section, not {line.strip()!r} "
                "(the title comes from the rule)"
            )
    return found


@dataclass(frozen=True)
class Page:
    code: str
    title: str
    sections: dict[str, str]

    def code_block(self, section: str) -> Optional[str]:
        """The first fenced ``python`` block of a section, exactly as written."""
        match = re.search(r"```python\n(.*?)```", self.sections.get(section, ""), re.DOTALL)
        return match.group(1) if match else None

    def other_files(self, section: str) -> dict[str, str]:
        """Blocks marked ``<!-- file: scripts/train.py -->``: files beside the example (the script
        a launcher starts), which it is checked together with."""
        found = re.finditer(
            r"<!--\s*file:\s*(\S+)\s*-->\s*```python\n(.*?)```",
            self.sections.get(section, ""),
            re.DOTALL,
        )
        return {match.group(1): match.group(2) for match in found}

    def job_settings(self, section: str) -> dict[str, str]:
        """``<!-- job: key=value ... -->`` in a section: the job the example is checked under."""
        match = re.search(r"<!--\s*job:(.*?)-->", self.sections.get(section, ""))
        if not match:
            return {}
        return dict(item.split("=", 1) for item in match.group(1).split())


def parse_page(code: str, text: str) -> Page:
    """A rendered page's title and sections."""
    lines = text.splitlines(keepends=True)
    title = lines[0].lstrip("# ").strip() if lines else code
    sections: dict[str, str] = {}
    current: Optional[str] = None
    for line in lines[1:]:
        if line.startswith("## "):
            current = line[3:].strip()
            sections[current] = ""
        elif current is not None:
            sections[current] += line
    return Page(code=code, title=title, sections=sections)


def page_sources() -> dict[str, str]:
    """Every page as written, by code."""
    return {
        path.stem: path.read_text(encoding="utf-8") for path in sorted(pages_dir().glob("SMP*.md"))
    }


def all_pages() -> dict[str, Page]:
    """Every rule's page, rendered and parsed, by code (rules without a page are left out)."""
    pages = {}
    for code, source in page_sources().items():
        rule = rule_of(code)
        if rule is not None:
            pages[code] = parse_page(code, render_page(rule, source))
    return pages
