"""Rule metadata for the CLI (codes, names, fix safety, job dependencies) without running them."""

from __future__ import annotations

from typing import Any, Optional

from smpfix.jobfacts import FEATURES
from smpfix.rule import all_rules


def rule_names() -> dict[str, str]:
    return {rule.code: rule.name for rule in all_rules()}


def rule_table() -> list[dict[str, Any]]:
    return [
        {
            "code": rule.code,
            "name": rule.name,
            "summary": rule.summary,
            "fix": rule.fix_availability.value,
            "default_severity": rule.default_severity.value,
            "depends_on": [FEATURES[key].setting for key in rule.depends_on],
        }
        for rule in all_rules()
    ]


def find_rule(key: str) -> Optional[dict[str, Any]]:
    lowered = key.strip().lower()
    for row in rule_table():
        if row["code"].lower() == lowered or row["name"] == lowered:
            return row
    return None
