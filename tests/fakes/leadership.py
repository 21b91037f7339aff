"""TestingLeaderRetrievalDriver: the driver of a real ``LeaderRetrievalService`` that the test
publishes leaders to (Flink's SettableLeaderRetrievalService idea), for endpoints that follow a
leader (a TaskExecutor and its ResourceManager) without ZooKeeper."""

from __future__ import annotations

from collections.abc import Callable

from yarnflink.highavailability.leaderelection import LeaderInformation

__all__ = ["TestingLeaderRetrievalDriver"]


class TestingLeaderRetrievalDriver:
    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        self._notify: Callable[[LeaderInformation | None], None] | None = None
        self.stopped = False

    def start(self, notify: Callable[[LeaderInformation | None], None]) -> None:
        self._notify = notify

    def stop(self) -> None:
        self.stopped = True

    @property
    def started(self) -> bool:
        return self._notify is not None

    def publish(self, session_id: str, address: str) -> None:
        """A leader is known (from the test's thread, as ZooKeeper's callbacks come from theirs)."""
        assert self._notify is not None, "not started"
        self._notify(LeaderInformation(session_id, address))

    def lose(self) -> None:
        """No leader is known (none published, or the connection to ZooKeeper is suspended)."""
        assert self._notify is not None, "not started"
        self._notify(None)
