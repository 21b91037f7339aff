"""EmbeddedHaServices: HA in one process, leadership granted and revoked on demand (Flink's
``EmbeddedHaServicesWithLeadershipControl``), for tests of the logic around leadership (a
Dispatcher recovering jobs, a ResourceManager dropping its TaskExecutors on revocation) without a
ZooKeeper.

It runs the real ``LeaderElectionService`` and state machine; only the driver is in memory. A test
plays ZooKeeper: ``grant_leadership()`` (this process's latch became the lowest),
``revoke_leadership()``, ``suspend_connection()`` / ``reconnect()``, ``lose_session()``. Each returns
once the service has handled it, so contenders have been called. ``lose_latch_unnoticed()`` plays a
process frozen while its session expired, ``publish_other_leader()`` another process that leads. Fenced store writes and
publications are checked against the current latch, as ZooKeeper's transactions would.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections import defaultdict
from collections.abc import Callable

from yarnflink.highavailability.election_service import LeaderElectionService
from yarnflink.highavailability.errors import LeadershipLostError
from yarnflink.highavailability.leaderelection import (
    ConnectionState,
    ConnectionStateChanged,
    Event,
    LatchAcquired,
    LatchReleased,
    LeaderFence,
    LeaderInformation,
    LeaseExpired,
    LeaseRenewed,
)
from yarnflink.highavailability.leaderretrieval import LeaderListener, LeaderRetrievalService
from yarnflink.highavailability.services import HighAvailabilityServices
from yarnflink.highavailability.stores import (
    CheckpointIDCounter,
    CompletedCheckpointPointerStore,
    InMemoryCheckpointIDCounter,
    InMemoryCompletedCheckpointPointerStore,
    InMemoryJobGraphStore,
    InMemoryJobResultStore,
    JobGraphStore,
    JobResultStore,
)

__all__ = ["EmbeddedHaServices", "EmbeddedLeaderElectionDriver"]


class _Registry:
    """Published leader information and its watchers (what ZooKeeper's leader/ nodes are)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._infos: dict[str, LeaderInformation] = {}
        self._listeners: dict[str, list[LeaderListener]] = defaultdict(list)

    def set(self, component_id: str, info: LeaderInformation | None) -> None:
        with self._lock:
            if info is None:
                self._infos.pop(component_id, None)
            else:
                self._infos[component_id] = info
            for listener in list(self._listeners[component_id]):
                listener(info)

    def get(self, component_id: str) -> LeaderInformation | None:
        with self._lock:
            return self._infos.get(component_id)

    def watch(self, component_id: str, listener: LeaderListener) -> None:
        with self._lock:
            self._listeners[component_id].append(listener)
            listener(self._infos.get(component_id))

    def unwatch(self, component_id: str, listener: LeaderListener) -> None:
        with self._lock:
            if listener in self._listeners[component_id]:
                self._listeners[component_id].remove(listener)


class _RetrievalDriver:
    def __init__(self, registry: _Registry, component_id: str) -> None:
        self._registry = registry
        self._component_id = component_id
        self._notify: LeaderListener | None = None

    def start(self, notify: LeaderListener) -> None:
        self._notify = notify
        self._registry.watch(self._component_id, notify)

    def stop(self) -> None:
        if self._notify is not None:
            self._registry.unwatch(self._component_id, self._notify)


class EmbeddedLeaderElectionDriver:
    def __init__(self, registry: _Registry) -> None:
        self._registry = registry
        self._emit: Callable[[Event], None] = lambda e: None
        self._count = 0
        #: The latch that is the lowest now (None: another process leads, or nobody).
        self.latch: str | None = None

    # ------------------------------------------------------------------ the test's controls
    def grant(self) -> str:
        self._count += 1
        self.latch = f"embedded-latch-{self._count:010d}"
        self._emit(LatchAcquired(self.latch))
        return self.latch

    def revoke(self) -> None:
        old, self.latch = self.latch, None
        if old is not None:
            self._emit(LatchReleased(old))

    def connection(self, state: ConnectionState) -> None:
        if state is ConnectionState.LOST:
            self.latch = None
        self._emit(ConnectionStateChanged(state))

    def lease(self, valid: bool) -> None:
        self._emit(LeaseRenewed() if valid else LeaseExpired())

    def check(self, fence: LeaderFence) -> None:
        if fence.latch_path != self.latch:
            raise LeadershipLostError(f"leader session {fence.session_id} is over")

    # ------------------------------------------------------------------ LeaderElectionDriver
    def start(self, emit: Callable[[Event], None]) -> None:
        self._emit = emit
        emit(ConnectionStateChanged(ConnectionState.CONNECTED))

    def publish(self, component_id: str, info: LeaderInformation, fence: LeaderFence) -> None:
        if fence.latch_path == self.latch:
            self._registry.set(component_id, info)

    def delete(self, component_id: str, fence: LeaderFence) -> None:
        if fence.latch_path == self.latch:
            self._registry.set(component_id, None)

    def reset_latch(self, latch_path: str) -> None:
        if self.latch == latch_path:  # a new latch; the test grants it again if it wants
            self.latch = None

    def verify(self, fence: LeaderFence) -> concurrent.futures.Future[bool]:
        f: concurrent.futures.Future[bool] = concurrent.futures.Future()
        f.set_result(fence.latch_path == self.latch)
        return f

    def close(self) -> None:
        self.latch = None


class EmbeddedHaServices(HighAvailabilityServices):
    def __init__(self, *, tolerate_suspended: bool = False, new_session_id: Callable[[], str] | None = None) -> None:
        self._registry = _Registry()
        self.driver = EmbeddedLeaderElectionDriver(self._registry)
        self._tolerate = tolerate_suspended
        self._new_session_id = new_session_id
        self._lock = threading.Lock()
        self._election: LeaderElectionService | None = None
        self._graphs: dict[str, object] = {}
        self._job_results = InMemoryJobResultStore()
        self._counters: dict[str, InMemoryCheckpointIDCounter] = {}
        self._checkpoints: dict[str, InMemoryCompletedCheckpointPointerStore] = {}

    # ------------------------------------------------------------------ leadership control
    def grant_leadership(self) -> LeaderFence:
        service = self.leader_election_service()
        self.driver.grant()
        service.drain()
        fence = service.leader
        assert fence is not None, "leadership was not granted (is the connection suspended?)"
        return fence

    def revoke_leadership(self) -> None:
        service = self.leader_election_service()
        self.driver.revoke()
        service.drain()

    def lose_latch_unnoticed(self) -> None:
        """ZooKeeper dropped this process's latch (its session expired while the process was
        frozen) and has not told it yet: it still believes it leads, but its fenced writes fail."""
        self.driver.latch = None

    def publish_other_leader(self, component_id: str, info: LeaderInformation) -> None:
        """Another process leads ``component_id`` and published where it serves."""
        self._registry.set(component_id, info)

    def suspend_connection(self) -> None:
        self._connection(ConnectionState.SUSPENDED)

    def reconnect(self) -> None:
        self._connection(ConnectionState.CONNECTED)

    def lose_session(self) -> None:
        self._connection(ConnectionState.LOST)

    def expire_lease(self) -> None:
        self.driver.lease(False)
        self.leader_election_service().drain()

    def renew_lease(self) -> None:
        self.driver.lease(True)
        self.leader_election_service().drain()

    def _connection(self, state: ConnectionState) -> None:
        service = self.leader_election_service()
        self.driver.connection(state)
        service.drain()

    def published(self, component_id: str) -> LeaderInformation | None:
        return self._registry.get(component_id)

    # ------------------------------------------------------------------ HighAvailabilityServices
    def leader_election_service(self) -> LeaderElectionService:
        with self._lock:
            if self._election is None:
                self._election = LeaderElectionService(
                    self.driver, tolerate_suspended=self._tolerate, new_session_id=self._new_session_id
                ).start()
            return self._election

    def leader_retriever(self, component_id: str) -> LeaderRetrievalService:
        return LeaderRetrievalService(_RetrievalDriver(self._registry, component_id), component_id)

    def job_graph_store(self, fence: LeaderFence | None = None) -> JobGraphStore:
        return InMemoryJobGraphStore(fence, self.driver.check, data=self._graphs)

    def job_result_store(self) -> JobResultStore:
        return self._job_results

    def checkpoint_id_counter(self, job_id: str, fence: LeaderFence | None = None) -> CheckpointIDCounter:
        with self._lock:
            counter = self._counters.setdefault(job_id, InMemoryCheckpointIDCounter())
        return counter.fenced(fence, self.driver.check)

    def completed_checkpoint_pointer_store(
        self, job_id: str, max_retained: int = 1, fence: LeaderFence | None = None
    ) -> CompletedCheckpointPointerStore:
        with self._lock:
            store = self._checkpoints.setdefault(job_id, InMemoryCompletedCheckpointPointerStore(max_retained))
        return store.fenced(fence, self.driver.check)

    def global_cleanup(self, job_id: str, fence: LeaderFence | None = None) -> None:
        if fence is not None:
            self.driver.check(fence)
        with self._lock:
            self._counters.pop(job_id, None)
            self._checkpoints.pop(job_id, None)

    def close(self) -> None:
        with self._lock:
            election, self._election = self._election, None
        if election is not None:
            election.close()

    def close_and_cleanup_all_data(self) -> None:
        self.close()
        self._graphs.clear()
