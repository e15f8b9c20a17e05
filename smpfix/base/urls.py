"""Where smpfix's documentation is published, in one place.

The site is built with MkDocs from ``docs/`` and the rule pages, and served by GitHub Pages of
the project's repository; MkDocs gives each page a directory URL, so a rule's page is
``rules/SMP101/`` under the site. Every output that names a rule's page uses ``rule_url``:
the JSON and JSON-lines ``url``, SARIF's ``helpUri``, the language server's
``codeDescription``.
"""

from __future__ import annotations

DOCS_URL = "https://smpfix.github.io/smpfix/"


def docs_url(page: str = "") -> str:
    """The address of a page of the site, by its path without ``.md`` (``"plan"``)."""
    return f"{DOCS_URL}{page}/" if page else DOCS_URL


def rule_url(code: str) -> str:
    """The address of the page of the rule ``code`` (``SMP101``)."""
    return docs_url(f"rules/{code}")
