"""LeaderRetrievalService: who leads a component now (Flink's ``LeaderRetrievalService``).

A TaskExecutor retrieves the ResourceManager's leader, the CLI the REST endpoint's, a JobMaster's
peers the JobMaster's. The listener is told every change, ``None`` when no leader is known (none
published, or the ZooKeeper connection is suspended or lost, so what was known may be stale). It is
called on the driver's threads and must not block: a component hands the news to its own loop
and reconnects from there; it takes the new leader's session id as the fencing token of its calls.

Blocking callers (the CLI) use ``wait_for_leader``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from yarnflink.highavailability.leaderelection import LeaderInformation

log = logging.getLogger(__name__)

__all__ = ["LeaderListener", "LeaderRetrievalDriver", "LeaderRetrievalService"]

LeaderListener = Callable[[LeaderInformation | None], None]


class LeaderRetrievalDriver(Protocol):
    """Reports what it sees (possibly repeating itself) through the ``notify`` it is started with."""

    def start(self, notify: LeaderListener) -> None: ...

    def stop(self) -> None: ...


class LeaderRetrievalService:
    def __init__(self, driver: LeaderRetrievalDriver, component_id: str = "") -> None:
        self.driver = driver
        self.component_id = component_id
        self._cond = threading.Condition()
        self._current: LeaderInformation | None = None
        self._changes = 0
        self._listener: LeaderListener | None = None
        self._started = False
        self._stopped = False

    def start(self, listener: LeaderListener | None = None) -> LeaderRetrievalService:
        if self._started:
            raise RuntimeError("leader retrieval already started")
        self._started = True
        self._listener = listener
        self.driver.start(self._notify)
        return self

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        with self._cond:
            self._listener = None
            self._cond.notify_all()
        if self._started:
            self.driver.stop()

    def __enter__(self) -> LeaderRetrievalService:
        if not self._started:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def current(self) -> LeaderInformation | None:
        return self._current

    def wait_for_leader(self, timeout: float, *, other_than: LeaderInformation | None = None) -> LeaderInformation:
        """The leader, once one is known (and differs from ``other_than``); TimeoutError after
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                info = self._current
                if info is not None and info != other_than:
                    return info
                left = deadline - time.monotonic()
                if left <= 0 or self._stopped:
                    what = self.component_id or "the component"
                    raise TimeoutError(f"no leader of {what} known after {timeout:.0f}s")
                self._cond.wait(left)

    def _notify(self, info: LeaderInformation | None) -> None:
        with self._cond:
            if self._stopped or info == self._current and self._changes:
                return
            self._current = info
            self._changes += 1
            self._cond.notify_all()
            listener = self._listener
            # under the lock: listeners see changes in the order they happened
            if listener is not None:
                try:
                    listener(info)
                except Exception:
                    log.exception("leader retrieval listener failed")
