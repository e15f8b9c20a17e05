"""The seeds' reference configurations are valid: no configuration rule may give them an error
or a warning (a hint is advice, such as SMP827's on the Debugger they leave on).

GPT-2 10B/30B/60B on ml.p4d.24xlarge with tensor parallelism 4 and 8, and GPT-NeoX 20B/65B
with sharded data parallelism 16/32/64, written as launchers in two styles. Every SMP8xx rule
runs on both, so a new configuration rule is held to them without a copy in its folder.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from smpfix.api import check_source
from smpfix.base.findings import Severity
from smpfix.rules.registry import all_rules

FOLDER = Path(__file__).parent / "reference_configs"
SCRIPT = """import smdistributed.modelparallel.torch as smp

smp.init()
"""
CONFIG_RULES = [rule.code for rule in all_rules() if rule.code.startswith("SMP8")]


@pytest.mark.parametrize("path", sorted(FOLDER.glob("*.py")), ids=lambda p: p.name)
def test_reference_configurations_are_quiet(path: Path, tmp_path: Path) -> None:
    # Checked beside the scripts they start (the seeds name them only).
    text = path.read_text(encoding="utf-8")
    for script in re.findall(r'entry_point="([^"/]+)"', text):
        (tmp_path / script).write_text(SCRIPT, encoding="utf-8")
    findings = [
        finding
        for finding in check_source(text, str(tmp_path / path.name), select=CONFIG_RULES)
        if finding.severity is not Severity.HINT
    ]
    assert findings == [], "\n".join(f"{f.code} {f.start.line}: {f.message}" for f in findings)


def test_every_configuration_rule_is_held_to_them() -> None:
    assert len(CONFIG_RULES) == 32
