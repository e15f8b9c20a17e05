"""Which version of the library (SMP v1) a job runs, and which versions a rule holds for.

Advice can be right for one library version and crash another: ``fp16`` replaced
``fp16_params`` in 1.10, so telling a job on an older container to use ``fp16`` breaks it.
Rules that depend on the version declare the range they hold for (``since``/``until``, both
inclusive, compared on as many parts as the bound has: ``until=(1, 3)`` includes 1.3.2).

The version a job runs comes, highest precedence first, from an explicit ``smp_version``
(``--job smp_version=1.9``, ``[tool.smpfix] smp-version``, ``[tool.smpfix.job]``), else from the
container a launcher or ``[tool.smpfix.job]`` names (``framework_version``, ``image_uri``):
each SageMaker PyTorch or TensorFlow training container ships one SMP v1 release, and where
several shipped in one container over time the oldest is assumed (catalog section 1.3, the
library's release notes). Otherwise the version is unknown, and a version-specific finding is
at most a hint.

Features also bound the version from below: a job with tensor parallelism on runs at least
1.6, one with sharded data parallelism at least 1.11. A rule for old versions only (``until``
below that bound) therefore stays silent on such a job even when its version is not stated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

Version = tuple[int, ...]

# PyTorch training container -> the oldest SMP v1 release it shipped with.
_PYTORCH_CONTAINERS: Mapping[Version, Version] = {
    (1, 6, 0): (1, 1),
    (1, 7, 1): (1, 2),
    (1, 8, 0): (1, 3),
    (1, 8, 1): (1, 6),
    (1, 9, 0): (1, 4),
    (1, 9, 1): (1, 4),
    (1, 10, 0): (1, 5),
    (1, 10, 2): (1, 7),
    (1, 11, 0): (1, 9),
    (1, 12, 0): (1, 10),
    (1, 12, 1): (1, 13),
    (1, 13, 1): (1, 14),
    (2, 0, 0): (1, 15),
}

# TensorFlow training container -> the oldest SMP v1 release it shipped with.
_TENSORFLOW_CONTAINERS: Mapping[Version, Version] = {
    (2, 3, 0): (1, 0),
    (2, 3, 1): (1, 0),
    (2, 4, 1): (1, 2),
    (2, 5, 0): (1, 4),
    (2, 5, 1): (1, 4),
    (2, 6, 0): (1, 4),
}

# The first library version with each job feature (catalog section 1.3): a job that has the
# feature on runs at least this version.
FEATURE_SINCE: Mapping[str, Version] = {
    "TP": (1, 6),
    "OSS": (1, 6),
    "PRESCALED": (1, 6),
    "DELAYED_INIT": (1, 6),
    "FP16": (1, 10),
    "SDP": (1, 11),
    "BF16": (1, 11),
}

_VERSION = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?\s*$")


def parse_version(value: object) -> Optional[Version]:
    """``"1.12.1"`` -> ``(1, 12, 1)``; ``1.9`` (a float from TOML or ``--job``) -> ``(1, 9)``."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    match = _VERSION.match(str(value))
    return tuple(int(part) for part in match.groups() if part is not None) if match else None


def text(version: Version) -> str:
    return ".".join(str(part) for part in version)


def _container_smp(table: Mapping[Version, Version], framework: Version) -> Optional[Version]:
    if framework in table:
        return table[framework]
    # "1.12" names no patch release: the oldest container of that minor version decides.
    candidates = [smp for container, smp in table.items() if container[: len(framework)] == framework]
    return min(candidates) if candidates else None


def pytorch_container_smp(framework: Version) -> Optional[Version]:
    """The oldest SMP v1 release in the PyTorch training container ``framework``."""
    return _container_smp(_PYTORCH_CONTAINERS, framework)


def tensorflow_container_smp(framework: Version) -> Optional[Version]:
    """The oldest SMP v1 release in the TensorFlow training container ``framework``."""
    return _container_smp(_TENSORFLOW_CONTAINERS, framework)


def compare(version: Version, bound: Version) -> int:
    """-1, 0 or 1, comparing only as many parts as ``bound`` has (1.3.2 equals the bound 1.3)."""
    head = version[: len(bound)] + (0,) * max(0, len(bound) - len(version))
    return (head > bound) - (head < bound)


def in_range(version: Version, since: Optional[Version], until: Optional[Version]) -> bool:
    return (since is None or compare(version, since) >= 0) and (until is None or compare(version, until) <= 0)


def describe_range(since: Optional[Version], until: Optional[Version]) -> str:
    """How ``smpfix rules`` and the pages name a rule's range: ``1.10+``, ``<=1.3``, ``1.6-1.14``, ``all``."""
    if since is None and until is None:
        return "all"
    if until is None:
        assert since is not None
        return f"{text(since)}+"
    if since is None:
        return f"<={text(until)}"
    return f"{text(since)}-{text(until)}"


def range_in_words(since: Optional[Version], until: Optional[Version]) -> str:
    """The first sentence of a rule page's "Versions" section: ``SMP 1.10 and later.``"""
    if since is None and until is None:
        return "All SMP v1 versions."
    if until is None:
        assert since is not None
        return f"SMP {text(since)} and later."
    if since is None:
        return f"SMP {text(until)} and earlier."
    return f"SMP {text(since)} to {text(until)}."


@dataclass(frozen=True)
class SmpVersion:
    """The library version a job runs, and how smpfix knows it."""

    version: Version
    source: str

    @property
    def text(self) -> str:
        return text(self.version)

    def describe(self) -> str:
        return f"SMP {self.text} ({self.source})"


def explicit_version(value: object, source: str) -> Optional[SmpVersion]:
    """An ``smp_version`` setting."""
    version = parse_version(value)
    return SmpVersion(version, source) if version is not None else None


def pytorch_job_version(value: object, source: str) -> Optional[SmpVersion]:
    """The version in the PyTorch container a ``framework_version`` setting names."""
    framework = parse_version(value)
    smp = pytorch_container_smp(framework) if framework is not None else None
    if smp is None:
        return None
    return SmpVersion(smp, f"PyTorch {value} container, {source}")


def tensorflow_job_version(value: object, source: str) -> Optional[SmpVersion]:
    """The version in the TensorFlow container a TensorFlow launcher's ``framework_version`` names."""
    framework = parse_version(value)
    smp = tensorflow_container_smp(framework) if framework is not None else None
    if smp is None:
        return None
    return SmpVersion(smp, f"TensorFlow {value} container, {source}")
