"""The client polls a job often at first, then no more often than its interval."""

from __future__ import annotations

import itertools

import pytest

from yarnflink.client.polling import poll_intervals


def test_polls_start_short_and_double_up_to_the_interval() -> None:
    assert list(itertools.islice(poll_intervals(0.2), 7)) == [0.01, 0.02, 0.04, 0.08, 0.16, 0.2, 0.2]


def test_an_interval_below_the_first_poll_is_kept() -> None:
    assert list(itertools.islice(poll_intervals(0.005), 3)) == [0.005, 0.005, 0.005]


def test_a_negative_interval_is_refused_and_zero_means_no_wait() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        next(poll_intervals(-0.1))
    assert list(itertools.islice(poll_intervals(0), 2)) == [0, 0]
