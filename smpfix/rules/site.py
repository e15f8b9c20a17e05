"""The documentation site's generated pages: one page per rule and the index of the rules.

The site (MkDocs, ``mkdocs.yml`` at the repository's root) is built from ``docs/``, the
README as its home page, and the rule pages, which stay in ``rules/`` as the single source that
``smpfix explain`` reads too. ``mkdocs_hooks.py`` adds the pages made here to the build, so no
copy of a rule page is ever committed; this module knows nothing of MkDocs, so the tests call
it directly.

On the site the README is ``index.md``, ``docs/usage.md`` is ``usage.md`` and ``rules/SMP101.md``
is ``rules/SMP101.md``, served at ``rules/SMP101/``. The Markdown files link each other as they
lie in the repository (so they read on GitHub too); ``site_links`` moves each relative link to
where its target is on the site, and a link to anything else of the repository
(``ARCHITECTURE.md``) to its page on GitHub.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Union

from smpfix.rules.pages import read_page
from smpfix.rules.registry import all_rules, rule_table

REPOSITORY_URL = "https://github.com/smpfix/smpfix/blob/main"

# An inline link's target: ``[words](target)`` or ``[words](target "title")``.
_LINK = re.compile(r"(?P<head>\]\()(?P<target>[^)\s]+)(?P<tail>(?:\s+\"[^\"]*\")?\))")
# A fenced block, whose text is code and keeps its brackets as written.
_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
_RULE_PAGE = re.compile(r"^rules/SMP\d{3}\.md$")


def site_path(repository_path: str) -> str:
    """Where a Markdown file of the repository is on the site (its path under ``docs_dir``):
    ``README.md`` -> ``index.md``, ``docs/usage.md`` -> ``usage.md``, ``rules/SMP101.md`` and
    the rules folder (``rules/``) -> ``rules/SMP101.md`` and ``rules/index.md``; anything else
    is not on the site: its page on GitHub."""
    path = posixpath.normpath(repository_path)
    if path == "README.md":
        return "index.md"
    if path.startswith("docs/") and path.endswith(".md"):
        return path[len("docs/") :]
    if path == "rules":
        return "rules/index.md"
    if _RULE_PAGE.match(path):
        return path
    return f"{REPOSITORY_URL}/{path}"


def site_links(markdown: str, repository_path: str) -> str:
    """``markdown``, the file at ``repository_path`` in the repository, with its relative links
    made to point where their targets are on the site (code blocks are left as written)."""
    here = posixpath.dirname(site_path(repository_path))
    folder = posixpath.dirname(repository_path)

    def moved(match: re.Match[str]) -> str:
        target = match.group("target")
        path, hash_mark, anchor = target.partition("#")
        if not path or re.match(r"^[a-z][a-z0-9+.-]*:", path):
            return match.group(0)
        on_site = site_path(posixpath.join(folder, path))
        if "://" not in on_site:
            on_site = posixpath.relpath(on_site, here or ".")
        return f"{match.group('head')}{on_site}{hash_mark}{anchor}{match.group('tail')}"

    parts, last = [], 0
    for fence in _FENCE.finditer(markdown):
        parts += [_LINK.sub(moved, markdown[last : fence.start()]), fence.group(0)]
        last = fence.end()
    parts.append(_LINK.sub(moved, markdown[last:]))
    return "".join(parts)


def rule_page(code: str) -> str:
    """The site's page of a rule: what ``smpfix explain`` prints, its links moved to the site."""
    page = read_page(code)
    if page is None:
        raise LookupError(f"{code} has no page in rules/")
    return site_links(page, f"rules/{code}.md")


@dataclass(frozen=True)
class Family:
    """A rule family: its package's first paragraph (``SMP2xx: the data pipeline (...)``),
    its short title (before the parenthesis) and its rules' codes, in order."""

    heading: str
    title: str
    codes: tuple[str, ...]


def families() -> tuple[Family, ...]:
    """The rule families as their packages define them (``smpfix/rules/<family>/``), in the
    order of their first codes."""
    import sys

    members: dict[str, list[str]] = {}
    for rule in all_rules():
        members.setdefault(rule.__module__.rpartition(".")[0], []).append(rule.code)
    found = []
    for package, codes in members.items():
        # The family's package, imported with its rules (no import by a name made here).
        doc = sys.modules[package].__doc__ or package
        heading = " ".join(doc.strip().split("\n\n")[0].split()).replace("``", "`")
        title = heading.split(" (")[0].rstrip(".")
        found.append(Family(heading, title, tuple(codes)))
    return tuple(sorted(found, key=lambda family: family.codes[0]))


def rule_index() -> str:
    """``rules/index.md``: every rule by family, with its default severity, fix safety, the SMP
    versions it holds for and the scripts it checks, from the rules themselves (as ``smpfix
    rules`` prints them)."""
    rows = {row["code"]: row for row in rule_table()}
    text = (
        "# Rules\n\n"
        "Every rule of smpfix, by family (`smpfix rules` prints this table, `smpfix explain "
        "CODE` a rule's page). **Severity** is the finding's severity when the job is known; "
        "**fix** says whether `--apply` fixes it (`unsafe`: only with `--unsafe-fixes`); "
        "**versions** are the SMP releases the rule holds for; **scripts** the library flavours "
        "whose scripts it checks. Which scripts each family checks: "
        "[the rule families](../rules.md).\n"
    )
    for family in families():
        text += (
            f"\n## {family.heading}\n\n"
            "| code | name | severity | fix | versions | scripts | what it detects |\n"
            "| --- | --- | --- | --- | --- | --- | --- |\n"
        )
        for code in family.codes:
            row = rows[code]
            cells = [
                f"[{code}]({code}.md)",
                f"`{row['name']}`",
                row["default_severity"],
                row["fix"],
                row["versions"],
                ", ".join(row["flavours"]),
                " ".join(row["summary"].split()),
            ]
            text += "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |\n"
    return text


NavEntry = Union[str, dict[str, "NavEntry"], list["NavEntry"]]


def rules_nav() -> list[NavEntry]:
    """The rule pages in the site's navigation: a section per family, a rule's code and name
    for each page."""
    names = {rule.code: rule.name for rule in all_rules()}
    return [
        {family.title: [{f"{code} {names[code]}": f"rules/{code}.md"} for code in family.codes]}
        for family in families()
    ]


def generated_pages() -> dict[str, str]:
    """Every page the site adds to ``docs/``, by its path on the site: the index of the rules
    and one page per rule."""
    pages = {"rules/index.md": rule_index()}
    for rule in all_rules():
        pages[f"rules/{rule.code}.md"] = rule_page(rule.code)
    return pages


def home_page(readme: str) -> str:
    """The site's home page: the README, its links moved to the site."""
    return site_links(readme, "README.md")
