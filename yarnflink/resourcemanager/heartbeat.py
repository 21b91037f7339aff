"""Heartbeat bookkeeping (Flink's HeartbeatMonitor), shared by the ResourceManager, the JobMaster's
connection to it and the TaskExecutor. Pure: callers pass the time and report what happened.

A target is lost when nothing was heard from it for ``timeout`` seconds, or when
``rpc_failure_threshold`` heartbeat RPCs in a row failed because the target was unreachable
(``heartbeat.rpc-failure-threshold``; -1 turns that off). A deadline that passes without an answer
is not such a failure: a busy peer is not a dead one, the timeout covers it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class _Target:
    last_heard: float
    failures: int = 0


@dataclass
class HeartbeatMonitor:
    timeout: float
    rpc_failure_threshold: int = 2
    targets: dict[str, _Target] = field(default_factory=dict)

    def monitor(self, target: str, now: float) -> None:
        self.targets[target] = _Target(now)

    def unmonitor(self, target: str) -> None:
        self.targets.pop(target, None)

    def __contains__(self, target: str) -> bool:
        return target in self.targets

    def received(self, target: str, now: float) -> None:
        t = self.targets.get(target)
        if t is not None:
            t.last_heard, t.failures = max(t.last_heard, now), 0

    def rpc_failed(self, target: str) -> bool:
        """Counts an unreachable-target failure; True when the target is now considered lost."""
        t = self.targets.get(target)
        if t is None:
            return False
        t.failures += 1
        return 0 < self.rpc_failure_threshold <= t.failures

    def timed_out(self, now: float) -> list[str]:
        return [k for k, t in self.targets.items() if now - t.last_heard > self.timeout]

    def since_last_heard(self, target: str, now: float) -> float:
        t = self.targets.get(target)
        return now - t.last_heard if t is not None else float("inf")


@dataclass
class FailureRater:
    """Flink's ThresholdMeter for worker start failures: more than ``max_per_minute`` failures
    within the last minute pause worker starts for ``retry_interval`` seconds (counted again from
    every further failure while the rate stays above the maximum)."""

    max_per_minute: float
    retry_interval: float
    failures: list[float] = field(default_factory=list)
    paused_until: float = float("-inf")

    def record_failure(self, now: float) -> bool:
        """Returns True when this failure pauses worker starts."""
        self.failures = [t for t in self.failures if now - t < 60.0]
        self.failures.append(now)
        if len(self.failures) > self.max_per_minute:
            self.paused_until = now + self.retry_interval
            return True
        return False

    def may_start(self, now: float) -> bool:
        return now >= self.paused_until
