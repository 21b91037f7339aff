"""Restart strategies (Flink's RestartBackoffTimeStrategy): whether a failed job may restart, and
after how long. Pure: the caller passes the time (monotonic seconds); jitter takes an injected
``random.Random``.

Each failure is reported with ``notify_failure(now)``; then ``can_restart()`` says whether the job
may go on and ``backoff_time(now)`` how long to wait before redeploying. ``notify_failure`` returns
whether the failure counts as a new restart attempt (exponential-delay merges failures that arrive
while a restart is still pending, as Flink 1.19 does).
"""

from __future__ import annotations

import random
from collections import deque
from typing import Protocol

from yarnflink.checkpoint.options import CheckpointingOptions
from yarnflink.common.config import ConfigError, Configuration
from yarnflink.scheduler.options import RestartStrategyOptions

#: Accepted spellings of ``restart-strategy.type`` (Flink's), by canonical name.
STRATEGY_NAMES = {
    "none": "none",
    "off": "none",
    "disable": "none",
    "fixed-delay": "fixed-delay",
    "fixeddelay": "fixed-delay",
    "failure-rate": "failure-rate",
    "failurerate": "failure-rate",
    "exponential-delay": "exponential-delay",
    "exponentialdelay": "exponential-delay",
}


class RestartBackoffTimeStrategy(Protocol):
    def notify_failure(self, now: float) -> bool: ...

    def can_restart(self) -> bool: ...

    def backoff_time(self, now: float) -> float: ...


class NoRestartBackoffTimeStrategy:
    def notify_failure(self, now: float) -> bool:
        return True

    def can_restart(self) -> bool:
        return False

    def backoff_time(self, now: float) -> float:
        return 0.0

    def __str__(self) -> str:
        return "NoRestartBackoffTimeStrategy"


class FixedDelayRestartBackoffTimeStrategy:
    """At most ``attempts`` restarts, each ``delay`` seconds after its failure."""

    def __init__(self, attempts: int, delay_s: float) -> None:
        if attempts < 0 or delay_s < 0:
            raise ValueError("fixed-delay needs attempts >= 0 and a delay >= 0")
        self.attempts = attempts
        self.delay_s = delay_s
        self.failures = 0

    def notify_failure(self, now: float) -> bool:
        self.failures += 1
        return True

    def can_restart(self) -> bool:
        return self.failures <= self.attempts

    def backoff_time(self, now: float) -> float:
        return self.delay_s

    def __str__(self) -> str:
        return (
            f"FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts={self.attempts}, "
            f"backoffTimeMS={self.delay_s * 1000:.0f})"
        )


class FailureRateRestartBackoffTimeStrategy:
    """Restarts while at most ``max_failures`` failures fall within any ``interval``."""

    def __init__(self, max_failures: int, interval_s: float, delay_s: float) -> None:
        if max_failures < 1 or interval_s <= 0 or delay_s < 0:
            raise ValueError("failure-rate needs max-failures-per-interval >= 1, an interval > 0 and a delay >= 0")
        self.max_failures = max_failures
        self.interval_s = interval_s
        self.delay_s = delay_s
        self._times: deque[float] = deque()

    def notify_failure(self, now: float) -> bool:
        self._times.append(now)
        while self._times and now - self._times[0] > self.interval_s:
            self._times.popleft()
        return True

    def can_restart(self) -> bool:
        return len(self._times) <= self.max_failures

    def backoff_time(self, now: float) -> float:
        return self.delay_s

    def __str__(self) -> str:
        return (
            f"FailureRateRestartBackoffTimeStrategy(failuresIntervalMS={self.interval_s * 1000:.0f}, "
            f"backoffTimeMS={self.delay_s * 1000:.0f}, maxFailuresPerInterval={self.max_failures})"
        )


class ExponentialDelayRestartBackoffTimeStrategy:
    """Backoff ``initial * multiplier**n`` (plus or minus ``jitter`` of it, within [initial, max]);
    n starts again at 0 once the job ran ``reset_threshold`` without failure. Gives up after
    ``attempts_before_reset`` restarts without a reset."""

    def __init__(
        self,
        initial_s: float,
        max_s: float,
        multiplier: float,
        reset_threshold_s: float,
        jitter: float,
        attempts_before_reset: int,
        rng: random.Random | None = None,
    ) -> None:
        if not 0 < initial_s <= max_s:
            raise ValueError("exponential-delay needs 0 < initial-backoff <= max-backoff")
        if multiplier <= 1:
            raise ValueError("exponential-delay needs a backoff-multiplier > 1")
        if reset_threshold_s <= 0 or not 0 <= jitter <= 1 or attempts_before_reset < 1:
            raise ValueError(
                "exponential-delay needs reset-backoff-threshold > 0, 0 <= jitter-factor <= 1 "
                "and attempts-before-reset-backoff >= 1"
            )
        self.initial_s = initial_s
        self.max_s = max_s
        self.multiplier = multiplier
        self.reset_threshold_s = reset_threshold_s
        self.jitter = jitter
        self.attempts_before_reset = attempts_before_reset
        self._rng = rng or random.Random()
        self.attempt = 0
        self.next_restart: float | None = None

    def notify_failure(self, now: float) -> bool:
        if self.next_restart is not None and now <= self.next_restart:
            return False  # a restart is pending: this failure joins it
        if self.next_restart is not None and now - self.next_restart >= self.reset_threshold_s:
            self.attempt = 0
        self.next_restart = now + self._backoff(self.attempt)
        self.attempt += 1
        return True

    def _backoff(self, attempt: int) -> float:
        base = self.initial_s * self.multiplier**attempt
        if self.jitter:
            base += self._rng.uniform(-1, 1) * base * self.jitter
        return max(self.initial_s, min(base, self.max_s))

    def can_restart(self) -> bool:
        return self.attempt <= self.attempts_before_reset

    def backoff_time(self, now: float) -> float:
        return 0.0 if self.next_restart is None else max(0.0, self.next_restart - now)

    def __str__(self) -> str:
        return (
            f"ExponentialDelayRestartBackoffTimeStrategy(initialBackoffMS={self.initial_s * 1000:.0f}, "
            f"maxBackoffMS={self.max_s * 1000:.0f}, backoffMultiplier={self.multiplier}, "
            f"resetBackoffThresholdMS={self.reset_threshold_s * 1000:.0f}, jitterFactor={self.jitter}, "
            f"attemptsBeforeResetBackoff={self.attempts_before_reset}, currentRestartAttempt={self.attempt})"
        )


def strategy_name(config: Configuration) -> str:
    """The canonical restart strategy of a job. Unset: none, or exponential-delay when
    checkpointing is enabled (Flink's defaults)."""
    raw = config.get_string(RestartStrategyOptions.RESTART_STRATEGY)
    if raw is None:
        return "exponential-delay" if config.get_string(CheckpointingOptions.INTERVAL) else "none"
    name = STRATEGY_NAMES.get(raw.strip().lower())
    if name is None:
        raise ConfigError(
            f"invalid value {raw!r} for 'restart-strategy.type': expected one of {', '.join(STRATEGY_NAMES)}"
        )
    return name


def from_configuration(config: Configuration, rng: random.Random | None = None) -> RestartBackoffTimeStrategy:
    """The strategy ``restart-strategy.*`` configures (ConfigError for an invalid combination)."""
    name = strategy_name(config)
    try:
        if name == "fixed-delay":
            return FixedDelayRestartBackoffTimeStrategy(
                int(config.get(RestartStrategyOptions.FIXED_DELAY_ATTEMPTS)),
                config.get_seconds(RestartStrategyOptions.FIXED_DELAY_DELAY) or 0.0,
            )
        if name == "failure-rate":
            return FailureRateRestartBackoffTimeStrategy(
                int(config.get(RestartStrategyOptions.FAILURE_RATE_MAX_FAILURES_PER_INTERVAL)),
                config.get_seconds(RestartStrategyOptions.FAILURE_RATE_INTERVAL) or 0.0,
                config.get_seconds(RestartStrategyOptions.FAILURE_RATE_DELAY) or 0.0,
            )
        if name == "exponential-delay":
            return ExponentialDelayRestartBackoffTimeStrategy(
                config.get_seconds(RestartStrategyOptions.EXPONENTIAL_DELAY_INITIAL_BACKOFF) or 0.0,
                config.get_seconds(RestartStrategyOptions.EXPONENTIAL_DELAY_MAX_BACKOFF) or 0.0,
                float(config.get(RestartStrategyOptions.EXPONENTIAL_DELAY_BACKOFF_MULTIPLIER)),
                config.get_seconds(RestartStrategyOptions.EXPONENTIAL_DELAY_RESET_BACKOFF_THRESHOLD) or 0.0,
                float(config.get(RestartStrategyOptions.EXPONENTIAL_DELAY_JITTER_FACTOR)),
                int(config.get(RestartStrategyOptions.EXPONENTIAL_DELAY_ATTEMPTS)),
                rng,
            )
    except ValueError as e:
        raise ConfigError(f"restart-strategy.type {name}: {e}") from None
    return NoRestartBackoffTimeStrategy()
