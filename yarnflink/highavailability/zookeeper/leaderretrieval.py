"""ZooKeeperLeaderRetrievalDriver: watches one component's ``connection_info`` node.

Reports the node's leader information on every change, and ``None`` while the connection is
SUSPENDED (unless suspended connections are tolerated) or the session LOST: what it knew may be
stale then, and a component must not keep talking to a leader it cannot vouch for.

kazoo calls back on its own threads (watches, connection listener); they only queue a read on the
driver's single worker thread, so reads happen one at a time and the last read is the freshest.
Every (re)connection reads again, which covers changes made while the watch was not set.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NoNodeError

from yarnflink.highavailability.leaderelection import LeaderInformation
from yarnflink.highavailability.leaderretrieval import LeaderListener
from yarnflink.highavailability.zookeeper.worker import SerialWorker

log = logging.getLogger(__name__)

__all__ = ["ZooKeeperLeaderRetrievalDriver"]


class ZooKeeperLeaderRetrievalDriver:
    def __init__(self, client: KazooClient, path: str, *, tolerate_suspended: bool = False) -> None:
        self.client = client
        self.path = path
        self.tolerate_suspended = tolerate_suspended
        self._lock = threading.Lock()
        self._notify: LeaderListener | None = None
        self._state = client.state
        self._node: LeaderInformation | None = None
        self._stopped = False
        self._io = SerialWorker("ZooKeeperLeaderRetrieval")

    def start(self, notify: LeaderListener) -> None:
        self._notify = notify
        self.client.add_listener(self._on_state)
        self._on_state(self.client.state)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
        self.client.remove_listener(self._on_state)
        self._io.shutdown()

    # ------------------------------------------------------------------ kazoo threads
    def _on_state(self, state: str) -> None:
        with self._lock:
            if self._stopped:
                return
            self._state = state
            if state == KazooState.LOST:
                self._node = None  # may be stale: read again once connected
            self._report()
        if state == KazooState.CONNECTED:
            self._submit()

    def _on_watch(self, event: Any) -> None:
        self._submit()

    def _submit(self) -> None:
        try:
            self._io.submit(self._read)
        except RuntimeError:  # stopped
            pass

    # ------------------------------------------------------------------ worker thread
    def _read(self) -> None:
        if self._stopped or self.client.state != KazooState.CONNECTED:
            return
        try:
            try:
                data: bytes | None = self.client.get(self.path, watch=self._on_watch)[0]
            except NoNodeError:
                data = None
                if self.client.exists(self.path, watch=self._on_watch) is not None:
                    self._submit()  # created meanwhile
                    return
        except KazooException as e:
            log.info("could not read %s: %r (read again on reconnection)", self.path, e)
            return
        info = None
        if data is not None:
            try:
                info = LeaderInformation.from_bytes(data)
            except ValueError as e:
                log.warning("ignoring leader information at %s: %s", self.path, e)
        with self._lock:
            if self._stopped:
                return
            self._node = info
            self._report()

    def _report(self) -> None:
        usable = self._state == KazooState.CONNECTED or (
            self._state == KazooState.SUSPENDED and self.tolerate_suspended
        )
        if self._notify is not None:
            self._notify(self._node if usable else None)
