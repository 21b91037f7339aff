"""Restart strategies give up at Flink's count and wait Flink's backoff."""

from __future__ import annotations

import random

import pytest

from yarnflink.common.config import ConfigError, Configuration
from yarnflink.scheduler import restart
from yarnflink.scheduler.restart import (
    ExponentialDelayRestartBackoffTimeStrategy,
    FailureRateRestartBackoffTimeStrategy,
    FixedDelayRestartBackoffTimeStrategy,
    NoRestartBackoffTimeStrategy,
)


def test_none_is_the_default_without_checkpointing() -> None:
    s = restart.from_configuration(Configuration())
    assert isinstance(s, NoRestartBackoffTimeStrategy)
    s.notify_failure(0.0)
    assert not s.can_restart()
    for alias in ("off", "disable", "NONE"):
        assert isinstance(
            restart.from_configuration(Configuration({"restart-strategy.type": alias})), NoRestartBackoffTimeStrategy
        )


def test_fixed_delay_gives_up_after_its_attempts() -> None:
    s = restart.from_configuration(
        Configuration(
            {
                "restart-strategy.type": "fixeddelay",
                "restart-strategy.fixed-delay.attempts": "2",
                "restart-strategy.fixed-delay.delay": "250 ms",
            }
        )
    )
    assert isinstance(s, FixedDelayRestartBackoffTimeStrategy)
    for t in (0.0, 1.0):
        assert s.notify_failure(t) and s.can_restart() and s.backoff_time(t) == 0.25
    s.notify_failure(2.0)
    assert not s.can_restart()
    defaults = restart.from_configuration(Configuration({"restart-strategy.type": "fixed-delay"}))
    assert (defaults.attempts, defaults.delay_s) == (1, 1.0)  # type: ignore[attr-defined]


def test_failure_rate_counts_failures_within_the_interval() -> None:
    s = FailureRateRestartBackoffTimeStrategy(max_failures=2, interval_s=10.0, delay_s=0.5)
    for t in (0.0, 4.0):
        s.notify_failure(t)
        assert s.can_restart()
    s.notify_failure(9.0)  # three within 10 s
    assert not s.can_restart()
    spread = FailureRateRestartBackoffTimeStrategy(max_failures=1, interval_s=1.0, delay_s=0.0)
    for t in (0.0, 1.5, 3.0, 4.5):  # one per interval, forever
        spread.notify_failure(t)
        assert spread.can_restart()
    defaults = restart.from_configuration(Configuration({"restart-strategy.type": "failure-rate"}))
    assert (defaults.max_failures, defaults.interval_s, defaults.delay_s) == (1, 60.0, 1.0)  # type: ignore[attr-defined]


def test_exponential_delay_grows_caps_merges_resets_and_gives_up() -> None:
    s = ExponentialDelayRestartBackoffTimeStrategy(
        initial_s=1.0, max_s=5.0, multiplier=2.0, reset_threshold_s=60.0, jitter=0.0, attempts_before_reset=4
    )
    now, backoffs = 0.0, []
    for _ in range(4):
        assert s.notify_failure(now) and s.can_restart()
        backoffs.append(s.backoff_time(now))
        now += backoffs[-1] + 0.1  # fails again shortly after each restart
    assert backoffs == pytest.approx([1.0, 2.0, 4.0, 5.0])
    assert s.notify_failure(now) and not s.can_restart()  # the fifth attempt is one too many
    merging = ExponentialDelayRestartBackoffTimeStrategy(1.0, 5.0, 2.0, 60.0, 0.0, 1)
    assert merging.notify_failure(0.0)
    assert not merging.notify_failure(0.5)  # a restart is pending: merged, not a new attempt
    assert merging.can_restart() and merging.backoff_time(0.5) == pytest.approx(0.5)
    s2 = ExponentialDelayRestartBackoffTimeStrategy(1.0, 5.0, 2.0, 60.0, 0.0, 100)
    s2.notify_failure(0.0)
    s2.notify_failure(10.0)
    assert s2.backoff_time(10.0) == pytest.approx(2.0)
    s2.notify_failure(100.0)  # ran 60 s+ without failure: back to the initial backoff
    assert s2.backoff_time(100.0) == pytest.approx(1.0)


def test_exponential_delay_jitter_stays_within_its_factor_and_the_bounds() -> None:
    s = ExponentialDelayRestartBackoffTimeStrategy(1.0, 100.0, 2.0, 3600.0, 0.1, 1000, rng=random.Random(7))
    now = 0.0
    for n in range(6):
        s.notify_failure(now)
        b = s.backoff_time(now)
        assert 0.9 * 2**n <= b <= 1.1 * 2**n
        now += b + 1
    defaults = restart.from_configuration(Configuration({"restart-strategy.type": "exponential-delay"}))
    assert (
        defaults.initial_s,
        defaults.max_s,
        defaults.multiplier,
        defaults.jitter,  # type: ignore[attr-defined]
        defaults.reset_threshold_s,
    ) == (1.0, 60.0, 1.5, 0.1, 3600.0)  # type: ignore[attr-defined]


def test_invalid_settings_are_configuration_errors() -> None:
    with pytest.raises(ConfigError, match="backoff-multiplier > 1"):
        restart.from_configuration(
            Configuration(
                {
                    "restart-strategy.type": "exponential-delay",
                    "restart-strategy.exponential-delay.backoff-multiplier": "1",
                }
            )
        )
    with pytest.raises(ConfigError, match="restart-strategy.type"):
        Configuration({"restart-strategy.type": "sometimes"})
