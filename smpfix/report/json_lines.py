"""``--format json-lines``: one JSON object per finding per line, with ``--format json``'s fields.

Streams well into log pipelines and ``jq -c``; an empty run prints nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from smpfix.base.findings import FileResult
from smpfix.report.json_format import finding_to_dict


def render_json_lines(results: Sequence[FileResult]) -> str:
    return "".join(
        json.dumps(finding_to_dict(f), ensure_ascii=False) + "\n"
        for r in results
        for f in r.findings
    )
