"""Which version of the library (SMP v1) a job runs, and which versions a rule holds for.

Advice can be right for one library version and crash another: ``fp16`` arrived in 1.10, so
telling a job on an older container to use ``fp16`` breaks it.
Rules that depend on the version declare the range they hold for (``since``/``until``, both
inclusive, compared on as many parts as the bound has: ``until=(1, 3)`` includes 1.3.2).

The version a job runs comes, highest precedence first, from an explicit ``smp_version``
(``--job smp_version=1.9``, ``[tool.smpfix] smp-version``, ``[tool.smpfix.job]``), else from the
container a launcher or ``[tool.smpfix.job]`` names (``framework_version``, ``image_uri``).
Each SageMaker PyTorch or TensorFlow training container shipped SMP v1 releases (the
library's release notes); several releases shipped in one container over
time (the PyTorch 1.13.1 image first had 1.14, later 1.15), so a container names a *range*
of releases, oldest to newest. A ``framework_version`` without a patch number (``"1.13"``)
names the container the SageMaker SDK resolves it to, the newest patch of that minor
version (the SDK's ``version_aliases``: ``"1.8"`` is 1.8.1). Otherwise the version is
unknown, and a version-specific finding is at most a hint.

A rule's advice applies to a job when every release the job may run is inside the rule's
range, and not otherwise: a rule for old releases only (``until``) is judged by the newest
release the container may hold, a rule for new releases (``since``) by the oldest. A container
that shipped releases on both sides of a bound gets no finding (precision first: the job may
run the release the advice is wrong for); ``smp_version`` names the release exactly.

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

# PyTorch training container -> the SMP v1 releases it shipped, oldest and newest (from
# the release notes: 1.11.0 shipped 1.9.0 to 1.10.1, 1.12.0 shipped 1.10.0 and 1.11.0, 1.13.1
# shipped 1.14.0 and 1.15.0; the Hugging Face 1.10.2 container carried 1.8).
_PYTORCH_CONTAINERS: Mapping[Version, tuple[Version, Version]] = {
    (1, 6, 0): ((1, 1), (1, 2)),
    (1, 7, 1): ((1, 2), (1, 2)),
    (1, 8, 0): ((1, 3), (1, 3)),
    (1, 8, 1): ((1, 6), (1, 6)),
    (1, 9, 0): ((1, 4), (1, 4)),
    (1, 9, 1): ((1, 4), (1, 4)),
    (1, 10, 0): ((1, 5), (1, 5)),
    (1, 10, 2): ((1, 7), (1, 8)),
    (1, 11, 0): ((1, 9), (1, 10)),
    (1, 12, 0): ((1, 10), (1, 11)),
    (1, 12, 1): ((1, 13), (1, 13)),
    (1, 13, 1): ((1, 14), (1, 15)),
    (2, 0, 0): ((1, 15), (1, 15)),
}

# TensorFlow training container -> the SMP v1 releases it shipped, oldest and newest.
_TENSORFLOW_CONTAINERS: Mapping[Version, tuple[Version, Version]] = {
    (2, 3, 0): ((1, 0), (1, 1)),
    (2, 3, 1): ((1, 0), (1, 1)),
    (2, 4, 1): ((1, 2), (1, 3)),
    (2, 5, 0): ((1, 4), (1, 4)),
    (2, 5, 1): ((1, 4), (1, 4)),
    (2, 6, 0): ((1, 4), (1, 4)),
}

# The first library version with each job feature (the release notes): a job that has the
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

# Import-time initialisation under the SageMaker launcher: the 1.12.1 library has it, the 1.7
# library has not (the releases between are not published).
FIRST_WITH_AUTO_INIT: Version = (1, 12)
LAST_WITHOUT_AUTO_INIT: Version = (1, 7)

# The first PyTorch container with SMP v2 (``smpfix.job.smp_v2``); SMP v1 ended with 1.15 in
# the 2.0.0 container.
FIRST_V2_PYTORCH: Version = (2, 0, 1)
# The first SMP v2 release: a rule of the SMP v2 family holds from here (``since``), which
# ``smpfix rules`` shows as "2.x".
FIRST_V2: Version = (2, 0)

# The PyTorch version of an SMP v2 container (``framework_version``, the tag of the
# ``smdistributed-modelparallel`` image) -> the SMP v2 releases it shipped, oldest and newest:
# the library's release notes name each release's container, and the SageMaker SDK's
# ``pytorch-smp.json`` resolves a ``framework_version`` to the newest (2.2.0 to SMP 2.3.1).
_SMP_V2_CONTAINERS: Mapping[Version, tuple[Version, Version]] = {
    (2, 0, 1): ((2, 0, 0), (2, 0, 0)),
    (2, 1, 2): ((2, 1, 0), (2, 1, 0)),
    (2, 2, 0): ((2, 2, 0), (2, 3, 1)),
    (2, 3, 1): ((2, 4, 0), (2, 5, 0)),
    (2, 4, 1): ((2, 6, 0), (2, 7, 0)),
    (2, 5, 1): ((2, 8, 0), (2, 8, 0)),
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


def _container_smp(
    table: Mapping[Version, tuple[Version, Version]], framework: Version
) -> Optional[tuple[Version, Version]]:
    if framework in table:
        return table[framework]
    if len(framework) == 2:
        # "1.13" names no patch release: the SageMaker SDK resolves it to the newest patch.
        patches = [container for container in table if container[:2] == framework]
        return table[max(patches)] if patches else None
    return None


def pytorch_container_smp(framework: Version) -> Optional[tuple[Version, Version]]:
    """The oldest and newest SMP v1 releases in the PyTorch training container ``framework``."""
    return _container_smp(_PYTORCH_CONTAINERS, framework)


def first_pytorch_container_with(since: Version) -> Optional[Version]:
    """The PyTorch container from which on every container ships SMP ``since`` or later, for
    "use ``framework_version`` 1.12.0 or later"; None when none does."""
    frameworks = sorted(_PYTORCH_CONTAINERS)
    for index, framework in enumerate(frameworks):
        if all(compare(_PYTORCH_CONTAINERS[later][0], since) >= 0 for later in frameworks[index:]):
            return framework
    return None


def tensorflow_container_smp(framework: Version) -> Optional[tuple[Version, Version]]:
    """The oldest and newest SMP v1 releases in the TensorFlow training container ``framework``."""
    return _container_smp(_TENSORFLOW_CONTAINERS, framework)


def smp_v2_container(framework: Version) -> Optional[tuple[Version, Version]]:
    """The oldest and newest SMP v2 releases in the SMP v2 container of PyTorch ``framework``."""
    return _container_smp(_SMP_V2_CONTAINERS, framework)


def first_smp_v2_container_with(since: Version) -> Optional[Version]:
    """The PyTorch version of the oldest SMP v2 container that shipped SMP ``since`` or later
    (which the SageMaker SDK then picks for it), for "use ``framework_version`` 2.2.0 or
    later"; None when none has."""
    for framework in sorted(_SMP_V2_CONTAINERS):
        if compare(_SMP_V2_CONTAINERS[framework][1], since) >= 0:
            return framework
    return None


def compare(version: Version, bound: Version) -> int:
    """-1, 0 or 1, comparing only as many parts as ``bound`` has (1.3.2 equals the bound 1.3)."""
    head = version[: len(bound)] + (0,) * max(0, len(bound) - len(version))
    return (head > bound) - (head < bound)


def in_range(version: Version, since: Optional[Version], until: Optional[Version]) -> bool:
    return (since is None or compare(version, since) >= 0) and (
        until is None or compare(version, until) <= 0
    )


def describe_range(since: Optional[Version], until: Optional[Version]) -> str:
    """How ``smpfix rules`` and the pages name a rule's range: ``1.10+``, ``<=1.3``,
    ``1.6-1.14``, ``all``."""
    if since is None and until is None:
        return "all"
    if until is None and since == FIRST_V2:
        return "2.x"
    if since is not None and since == until:
        return text(since)
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
    if until is None and since == FIRST_V2:
        return "Every SMP v2 release (2.0 and later)."
    if since is not None and since == until:
        return f"SMP {text(since)} only."
    if until is None:
        assert since is not None
        return f"SMP {text(since)} and later."
    if since is None:
        return f"SMP {text(until)} and earlier."
    return f"SMP {text(since)} to {text(until)}."


def range_applies(
    low: Optional[Version],
    high: Optional[Version],
    since: Optional[Version],
    until: Optional[Version],
) -> Optional[bool]:
    """Whether advice for ``since``..``until`` holds for a job that runs a release between
    ``low`` and ``high`` (None: unbounded): True for every such release, False for none, None
    when some are in the range and some are not."""
    if (since is not None and high is not None and compare(high, since) < 0) or (
        until is not None and low is not None and compare(low, until) > 0
    ):
        return False
    if (since is None or (low is not None and compare(low, since) >= 0)) and (
        until is None or (high is not None and compare(high, until) <= 0)
    ):
        return True
    return None


def wanted_words(since: Optional[Version], until: Optional[Version]) -> str:
    """``1.10 or later``, ``1.14 or earlier``, ``1.6 to 1.14``: the releases a message is about."""
    if since is not None and until is None:
        return f"{text(since)} or later"
    if since is None and until is not None:
        return f"{text(until)} or earlier"
    if since is not None and since == until:
        return text(since)
    return " to ".join(text(v) for v in (since, until) if v is not None)


@dataclass(frozen=True)
class SmpVersion:
    """The library version a job runs, and how smpfix knows it: one release, or the releases a
    container shipped over time (``version`` the oldest, ``newest`` the newest)."""

    version: Version
    source: str
    newest: Optional[Version] = None

    @property
    def latest(self) -> Version:
        return self.newest if self.newest is not None else self.version

    @property
    def text(self) -> str:
        if self.latest != self.version:
            return f"{text(self.version)} or {text(self.latest)}"
        return text(self.version)

    def describe(self) -> str:
        return f"SMP {self.text} ({self.source})"

    def before(self, bound: Version) -> bool:
        """Every release the job may run is older than ``bound``."""
        return compare(self.latest, bound) < 0


def condition(
    version: Optional[SmpVersion], since: Optional[Version], until: Optional[Version]
) -> str:
    """Words for a message about advice for ``since``..``until``: "the job runs SMP 1.13 (...)",
    or "if the job runs SMP 1.14 or earlier" when the version is unknown or the container
    shipped releases on both sides of the bound."""
    if version is None:
        return f"if the job runs SMP {wanted_words(since, until)}"
    if range_applies(version.version, version.latest, since, until) is None:
        return f"if the job runs SMP {wanted_words(since, until)} ({version.describe()})"
    return f"the job runs {version.describe()}"


def leading(words: str) -> str:
    """A condition from ``condition`` opening a sentence: "If the job runs ...," or
    "The job runs ...:"."""
    return words[:1].upper() + words[1:] + ("," if words.startswith("if ") else ":")


def explicit_version(value: object, source: str) -> Optional[SmpVersion]:
    """An ``smp_version`` setting."""
    version = parse_version(value)
    return SmpVersion(version, source) if version is not None else None


def pytorch_job_version(value: object, source: str) -> Optional[SmpVersion]:
    """The releases in the PyTorch container a ``framework_version`` setting names."""
    framework = parse_version(value)
    smp = pytorch_container_smp(framework) if framework is not None else None
    if smp is None:
        return None
    return SmpVersion(smp[0], f"PyTorch {value} container, {source}", smp[1])


def smp_v2_job_version(value: object, source: str) -> Optional[SmpVersion]:
    """The SMP v2 releases in the SMP v2 container a ``framework_version`` setting names."""
    framework = parse_version(value)
    smp = smp_v2_container(framework) if framework is not None else None
    if smp is None:
        return None
    return SmpVersion(smp[0], f"SMP v2 container for PyTorch {value}, {source}", smp[1])


def tensorflow_job_version(value: object, source: str) -> Optional[SmpVersion]:
    """The releases in the TensorFlow container a TensorFlow launcher's ``framework_version``
    names."""
    framework = parse_version(value)
    smp = tensorflow_container_smp(framework) if framework is not None else None
    if smp is None:
        return None
    return SmpVersion(smp[0], f"TensorFlow {value} container, {source}", smp[1])


# Settings of SMP v2 (``torch.sagemaker``) that SMP v1 does not have: a configuration or a
# stated job with one of them is an SMP v2 one (``smpfix.job.smp_v2``, ``stated_v2``).
V2_ONLY_KEYS = frozenset(
    {
        "hybrid_shard_degree",
        "sm_activation_offloading",
        "fsdp_cache_flush_warnings",
        "allow_empty_shards",
        "context_parallel_degree",
        "expert_parallel_degree",
        "random_seed",
    }
)


def stated_v2(settings: Mapping[str, object], source: str) -> Optional[str]:
    """Why a stated job (``--job``, ``[tool.smpfix.job]``) is SMP v2, or None: it names
    ``smp_version`` 2 or later, a PyTorch ``framework_version`` of 2.0.1 or later, or a setting
    only SMP v2 has."""
    version = parse_version(settings.get("smp_version"))
    if version is not None and version[0] >= 2:
        return f"smp_version {settings['smp_version']} ({source})"
    framework = parse_version(settings.get("framework_version"))
    if (
        framework is not None
        and settings.get("framework") != "tensorflow"
        and compare(framework, FIRST_V2_PYTORCH) >= 0
    ):
        return (
            f"framework_version {settings['framework_version']} ({source}) is a PyTorch"
            " container with SMP v2"
        )
    found = sorted(key for key in settings if key in V2_ONLY_KEYS)
    if found:
        return f"{found[0]} ({source}) is a setting of SMP v2"
    return None
