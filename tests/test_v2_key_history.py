"""When SMP v2's later keys arrived, and what follows from it for a job's release."""

from __future__ import annotations

from smpfix.job.jobfacts import V2_FEATURE_SINCE
from smpfix.job.v2_key_history import V2_KEY_HISTORY, v2_key_history
from smpfix.job.versions import first_smp_v2_container_with, smp_v2_container


def test_expert_and_context_parallelism_date_their_keys() -> None:
    assert V2_KEY_HISTORY["expert_parallel_degree"].since == (2, 3, 0)
    assert V2_KEY_HISTORY["context_parallel_degree"].since == (2, 5, 0)
    # Keys of the first release (or undated ones) have no history: every v2 release knows them.
    assert v2_key_history("hybrid_shard_degree") is None
    assert v2_key_history("random_seed") is None


def test_a_job_with_the_feature_on_runs_at_least_its_release() -> None:
    assert V2_FEATURE_SINCE == {"EP": (2, 3, 0), "CP": (2, 5, 0)}


def test_the_oldest_container_with_a_release_of_the_key() -> None:
    # PyTorch 2.2.0 shipped SMP 2.2.0 and later 2.3.x; 2.3.1 shipped 2.4.0 and later 2.5.0.
    assert first_smp_v2_container_with((2, 3, 0)) == (2, 2, 0)
    assert first_smp_v2_container_with((2, 5, 0)) == (2, 3, 1)
    assert first_smp_v2_container_with((9, 0)) is None


def test_the_sdk_that_picks_a_release_with_the_key_is_no_older_than_the_release() -> None:
    """Each key's SDK is the first that resolves some container to a release with it: the
    container that straddles the arrival does so in the releases table too."""
    for history in V2_KEY_HISTORY.values():
        container = first_smp_v2_container_with(history.since)
        assert container is not None
        releases = smp_v2_container(container)
        assert releases is not None and releases[0] < history.since <= releases[1]
