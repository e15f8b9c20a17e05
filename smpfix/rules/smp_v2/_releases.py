"""SMP v2 keys newer than the release a configuration runs (SMP010's per-release findings).

A key is judged against the releases the job may run (``ConfigView.smp_version``: a stated
``smp_version``, or the releases of the SMP v2 container its ``framework_version`` or image
names) and the release the key arrived in (``smpfix.job.v2_key_history``):

- every release the job may run predates the key: an error. The release does not have the
  feature, so the job either stops when ``tsm.init()`` reads the key or runs without it;
- the container shipped releases on both sides of the arrival, and the SageMaker SDK picks the
  release from the ``framework_version``: a hint. The SDK resolves a ``framework_version`` to
  the newest release it knows, so the job runs one with the key on an SDK as new as the
  feature's documents ask for, and one without on an older SDK; the hint says which SDK;
- the same with the version read from an image tag: a warning ("if"), since nothing but the
  image decides which release it holds;
- the release is unknown: nothing.
"""

from __future__ import annotations

from typing import Optional

from smpfix.base.findings import Severity
from smpfix.job.framework_versions import pytorch_version
from smpfix.job.launcher import Located
from smpfix.job.v2_key_history import V2_KEY_HISTORY, V2KeyHistory, v2_key_history
from smpfix.job.versions import SmpVersion, first_smp_v2_container_with, range_applies, text
from smpfix.rules.config_rule import ConfigProblem, ConfigView
from smpfix.rules.titles import snippet


def absent_from_every_release(view: ConfigView, key: str) -> bool:
    """No release the configuration may run has ``key`` (its values are then beside the
    point: the key itself is the finding)."""
    history = v2_key_history(key)
    version = view.smp_version
    return (
        history is not None
        and version is not None
        and range_applies(version.version, version.latest, history.since, None) is False
    )


def release_problem(view: ConfigView, key: str, located: Located) -> Optional[ConfigProblem]:
    """The finding for ``key`` when a release the configuration may run does not have it."""
    history = v2_key_history(key)
    version = view.smp_version
    if history is None or version is None:
        return None
    known = range_applies(version.version, version.latest, history.since, None)
    if known is True:
        return None
    evidence = (
        f"this job runs {version.describe()}",
        f"`{key}` is a parameter of SMP {history.releases}, per {history.source}",
    )
    if known is False:
        return _missing(key, located, history, version, evidence)
    if _picked_by_sdk(view):
        return _sdk_dependent(key, located, history, version, evidence)
    since = text(history.since)
    return ConfigProblem(
        located,
        f"{snippet(key)} arrived in SMP {since}; this image may hold SMP {text(version.version)}",
        Severity.WARNING,
        explanation=(
            f"If the image runs a release older than {since}, it has no {history.feature}: the"
            f" job stops when `tsm.init()` reads `{key}`, or runs without {history.feature}."
            f" Use an image of SMP {since} or later{_container_advice(history, ', or ')}."
        ),
        evidence=evidence,
    )


def _missing(
    key: str,
    located: Located,
    history: V2KeyHistory,
    version: SmpVersion,
    evidence: tuple[str, ...],
) -> ConfigProblem:
    since = text(history.since)
    where = _container_advice(history, " (", ")")
    return ConfigProblem(
        located,
        f"{snippet(key)} is not a parameter of SMP {version.text}: it arrived in {since}",
        Severity.ERROR,
        explanation=(
            f"SMP {version.text} has no {history.feature}, so the job stops when `tsm.init()`"
            f" reads `{key}`, or runs without {history.feature} and with the memory and speed of"
            f" a job without it. Run SMP {since} or later{where}, or"
            " remove the key."
        ),
        evidence=evidence,
    )


def _sdk_dependent(
    key: str,
    located: Located,
    history: V2KeyHistory,
    version: SmpVersion,
    evidence: tuple[str, ...],
) -> ConfigProblem:
    since, sdk = text(history.since), text(history.sdk)
    return ConfigProblem(
        located,
        f"{snippet(key)} needs SMP {since}: this container gets it from SageMaker SDK v{sdk} on",
        Severity.HINT,
        explanation=(
            "The SageMaker Python SDK picks the SMP v2 image for a `framework_version`: the"
            f" newest release it knows, here SMP {text(version.version)} to"
            f" {text(version.latest)} depending on the SDK. SDK v{sdk} and later pick one with"
            f" {history.feature}; an older SDK picks one without, which stops at `tsm.init()`"
            f" or runs without {history.feature}. Require `sagemaker>={sdk}` where the job is"
            " launched."
        ),
        evidence=evidence,
    )


def _container_advice(history: V2KeyHistory, joint: str, close: str = "") -> str:
    """The oldest ``framework_version`` that gets a release with the key, with the SDK that
    picks it, between ``joint`` and ``close``."""
    container = first_smp_v2_container_with(history.since)
    if container is None:
        return ""
    return (
        f"{joint}`framework_version` {text(container)} or later with SageMaker Python SDK"
        f" v{text(history.sdk)} or later{close}"
    )


def _picked_by_sdk(view: ConfigView) -> bool:
    """The configuration's release is the one the SDK picks for a ``framework_version``, not
    the one an image tag names; a ``tsm.init`` configuration takes its job's, which a
    launcher's ``framework_version`` gives far more often than an image."""
    if view.launcher is None:
        return True
    found = pytorch_version(view.launcher)
    return found is not None and found.written != "the image_uri tag"


def versions_table() -> str:
    """SMP010's page: the keys that came after SMP 2.0, with their releases and sources."""
    rows = [
        f"| `{history.key}` | {history.releases} | v{text(history.sdk)} or later |"
        f" {history.source} |"
        for history in sorted(V2_KEY_HISTORY.values(), key=lambda h: (h.since, h.key))
    ]
    return "\n".join(
        [
            "| Key | Releases that know it | SageMaker Python SDK | Source |",
            "| --- | --- | --- | --- |",
            *rows,
        ]
    )
