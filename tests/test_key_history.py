"""Each SMP v1 release refuses the configuration keys of later ones.

The dates come from the SageMaker SDK's parameter page and the library's release notes
(``smpfix.job.key_history``); a job whose release is known is judged by them (SMP812), and the
rule's page shows them.
"""

from __future__ import annotations

import pytest

from smpfix.job.jobfacts import KNOWN_KEYS
from smpfix.job.key_history import PYTORCH_KEY_HISTORY, absent_from
from smpfix.job.versions import FEATURE_SINCE, SmpVersion, first_pytorch_container_with
from smpfix.rules.pages import read_page


def _job(oldest: tuple[int, ...], newest: tuple[int, ...] | None = None) -> SmpVersion:
    return SmpVersion(oldest, "a test", newest)


def test_a_key_newer_than_every_release_of_the_job_is_absent() -> None:
    assert absent_from("fp16", _job((1, 7), (1, 8))) is not None
    assert absent_from("shard_optimizer_state", _job((1, 4))) is not None


def test_a_key_the_jobs_releases_all_know_is_not_absent() -> None:
    assert absent_from("fp16", _job((1, 10), (1, 11))) is None
    assert absent_from("tensor_parallel_degree", _job((1, 6))) is None


def test_a_container_that_shipped_releases_on_both_sides_is_undecided() -> None:
    history = absent_from("fp16", _job((1, 9), (1, 10)))
    assert history is not None and history.known_by(_job((1, 9), (1, 10))) is None


def test_a_key_the_1_12_schema_dropped_is_known_to_the_releases_documenting_it() -> None:
    assert absent_from("deterministic_server", _job((1, 7))) is None
    assert absent_from("deterministic_server", _job((1, 2))) is not None
    assert absent_from("deterministic_server", _job((1, 13))) is not None


def test_undated_keys_and_unknown_releases_are_never_absent() -> None:
    assert absent_from("microbatches", _job((1, 1))) is None
    assert absent_from("ddp_port", _job((1, 1))) is None
    assert absent_from("fp16", None) is None


@pytest.mark.parametrize("key", sorted(PYTORCH_KEY_HISTORY))
def test_every_dated_key_is_a_key_of_some_release(key: str) -> None:
    history = PYTORCH_KEY_HISTORY[key]
    assert (key in KNOWN_KEYS) == (history.until is None)


@pytest.mark.parametrize(
    ("feature", "key"),
    [
        ("TP", "tensor_parallel_degree"),
        ("OSS", "shard_optimizer_state"),
        ("PRESCALED", "prescaled_batch"),
        ("FP16", "fp16"),
        ("SDP", "sharded_data_parallel_degree"),
        ("BF16", "bf16"),
    ],
)
def test_a_features_first_release_is_its_keys_arrival(feature: str, key: str) -> None:
    assert FEATURE_SINCE[feature] == PYTORCH_KEY_HISTORY[key].since


def test_the_advice_names_containers_that_all_ship_the_release() -> None:
    assert first_pytorch_container_with((1, 10)) == (1, 12, 0)
    assert first_pytorch_container_with((1, 6)) == (1, 10, 2)
    assert first_pytorch_container_with((9, 0)) is None


def test_the_rule_page_lists_every_dated_key_with_its_releases() -> None:
    page = read_page("SMP812")
    assert page is not None
    for history in PYTORCH_KEY_HISTORY.values():
        assert f"| `{history.key}` | {history.releases} |" in page
