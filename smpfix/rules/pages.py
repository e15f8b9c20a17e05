"""The rule pages (``rules/<CODE>.md``): ``smpfix explain`` prints them, tests run their examples.

In a wheel the pages are shipped as ``smpfix/_pages``; in a source checkout or an editable
install they are read from the repository's ``rules/`` folder beside the package.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

# Where the pages are published (SARIF's ``helpUri``, the language server's ``codeDescription``).
PAGES_URL = "https://github.com/smpfix/smpfix/blob/main/rules"

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


def page_url(code: str) -> str:
    return f"{PAGES_URL}/{code}.md"


def read_page(code: str) -> Optional[str]:
    try:
        return page_path(code).read_text(encoding="utf-8")
    except OSError:
        return None


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


def all_pages() -> dict[str, Page]:
    return {
        path.stem: parse_page(path.stem, path.read_text(encoding="utf-8"))
        for path in sorted(pages_dir().glob("SMP*.md"))
    }
