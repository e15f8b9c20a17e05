"""``--show-job``: what smpfix knows of each file's job, and where each piece came from.

A file's block gives the library version, each feature's state (``TP on``: tensor parallelism
is on) with its source, each setting's value with its source, and the evidence in the script.
A file of which nothing is known (a helper module no launcher, ``[tool.smpfix.job]`` or
``--job`` configures) gets one line instead of a block of "unknown" lines. Under the blocks,
the feature keys printed are spelled out with the setting that decides each (the keys are
also those of the JSON output's ``job_facts``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from smpfix.base.findings import FileResult
from smpfix.job.jobfacts import FEATURES

UNKNOWN = "unknown"


def render_jobs(results: Sequence[FileResult]) -> str:
    lines: list[str] = []
    keys: list[str] = []
    for result in results:
        if result.job is None:
            continue
        if _nothing_known(result.job):
            lines.append(f"{result.path}: job facts: nothing known ({_why(result.job)})")
            continue
        lines.append(f"{result.path}: job facts")
        lines.extend(_block(result.job))
        keys += [key for key in result.job["features"] if key not in keys]
        keys += [
            item["feature"]
            for item in result.job.get("evidence", ())
            if item["feature"] not in keys
        ]
    if keys:
        lines.extend(_legend(keys))
    return "".join(line + "\n" for line in lines)


def _nothing_known(job: Mapping[str, Any]) -> bool:
    return (
        not job.get("smp_version")
        and not job.get("smp_v2")
        and not job.get("init_dict")
        and not job["settings"]
        and not job.get("unknown")
        and not job.get("evidence")
        and all(item["state"] == UNKNOWN for item in job["features"].values())
    )


def _why(job: Mapping[str, Any]) -> str:
    """Why nothing is known, in the words the features give, when they agree."""
    sources = {item["source"] for item in job["features"].values()}
    reason = sources.pop() if len(sources) == 1 else "no source sets any of it"
    return f"SMP version and every feature unknown: {reason}"


def _block(job: Mapping[str, Any]) -> list[str]:
    lines = []
    version = job.get("smp_version")
    flavour = "TensorFlow " if job.get("flavour") == "tensorflow" else ""
    lines.append(
        f"  library      {flavour}SMP {version['value']} ({version['source']})"
        if version
        else f"  library      {flavour}SMP version unknown"
    )
    if job.get("smp_v2"):
        lines.append(
            f"  library      SMP v2: {job['smp_v2']}; the SMP v2 rules (SMP0xx) apply,"
            " no SMP v1 rule"
        )
    init_dict = job.get("init_dict")
    if init_dict:
        lines.append(f"  smp.init     dict {init_dict['use']}: {init_dict['why']}")
    for key, item in job["features"].items():
        lines.append(f"  {key:<12} {item['state']:<8} {item['source']}")
    for key, item in job["settings"].items():
        lines.append(f"  {key} = {json.dumps(item['value'])}  ({item['source']})")
    for key, why in job.get("unknown", {}).items():
        lines.append(f"  {key} unknown: {why}")
    for item in job.get("evidence", ()):
        weight = "shows it is on" if item["strong"] else "shows awareness only"
        lines.append(
            f"  evidence {item['feature']}: {item['what']} at line {item['line']} ({weight})"
        )
    return lines


def _legend(keys: Sequence[str]) -> list[str]:
    """The feature keys spelled out, one a line: ``OSS  optimizer state sharding: on when
    shard_optimizer_state = true``, ``TP  tensor parallelism: on when tensor_parallel_degree
    > 1``."""
    lines = []
    for key in keys:
        feature = FEATURES.get(key)
        if feature is None:
            continue
        words = re.sub(r"\s*\(.*\)$", "", feature.title)
        if words.replace("`", "") in (feature.setting, f"the {feature.setting} setting"):
            lines.append(f"  {key:<12} on when {feature.condition}")
        else:
            lines.append(f"  {key:<12} {words}: on when {feature.condition}")
    return ["Features:", *lines] if lines else []
