"""MkDocs hooks (``mkdocs.yml``): the pages generated from the rules and the README.

The generating is ``smpfix.rules.site``'s; here it is only handed to MkDocs: ``on_config``
adds a navigation section per rule family, ``on_files`` the generated pages (the README as
``index.md``, ``rules/index.md`` and one page per rule), ``on_page_markdown`` moves the links
of the pages of ``docs/`` to where their targets are on the site.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

from smpfix.rules.site import generated_pages, home_page, rules_nav, site_links

ROOT = Path(__file__).resolve().parent


def on_config(config: Any) -> Any:
    for entry in config["nav"] or []:
        if isinstance(entry, dict) and "Rules" in entry:
            entry["Rules"] = [*entry["Rules"], *rules_nav()]
    return config


def on_files(files: Files, config: Any) -> Files:
    pages = {"index.md": home_page((ROOT / "README.md").read_text(encoding="utf-8"))}
    pages.update(generated_pages())
    for path, text in pages.items():
        files.append(File.generated(config, path, content=text))
    return files


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.generated_by is None:
        return site_links(markdown, f"docs/{page.file.src_uri}")
    return markdown
