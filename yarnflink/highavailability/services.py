"""HighAvailabilityServices: everything HA a process needs, made from its configuration (Flink's
``HighAvailabilityServices`` and ``HighAvailabilityServicesUtils``).

* ``high-availability.type: NONE`` -> ``StandaloneHaServices``: the process always leads, with one
  leader session id for its lifetime; addresses are the configured ones; stores live in memory.
  Nothing about a cluster without HA changes.
* ``high-availability.type: ZOOKEEPER`` -> ``ZooKeeperHaServices`` (kazoo; ``zookeeper/``).
* Tests of pure logic use ``EmbeddedHaServices`` (``embedded.py``): leadership granted and revoked
  on demand, all in memory.

One process makes one services object and one ``leader_election_service()`` (one latch per master
process); its components register on it under the component ids below.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

from yarnflink.common.config import Configuration
from yarnflink.common.process_identity import this_process
from yarnflink.highavailability.election_service import LeaderElectionService
from yarnflink.highavailability.leaderelection import (
    ConnectionState,
    ConnectionStateChanged,
    Event,
    LatchAcquired,
    LeaderFence,
    LeaderInformation,
)
from yarnflink.highavailability.leaderretrieval import LeaderListener, LeaderRetrievalService
from yarnflink.highavailability.options import HighAvailabilityOptions
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

__all__ = [
    "DISPATCHER",
    "RESOURCE_MANAGER",
    "REST_SERVER",
    "HighAvailabilityServices",
    "StandaloneHaServices",
    "create_ha_services",
    "ha_enabled",
    "job_master_component",
]

#: Component ids (the ZooKeeper node names under ``leader/``, as Flink's).
RESOURCE_MANAGER = "resource_manager"
DISPATCHER = "dispatcher"
REST_SERVER = "rest_server"


def job_master_component(job_id: str) -> str:
    """The component id of a job's JobMaster: the job id, as in Flink."""
    if not job_id or "/" in job_id:
        raise ValueError(f"invalid job id {job_id!r}")
    return job_id


def ha_enabled(config: Configuration) -> bool:
    return str(config.get(HighAvailabilityOptions.HA_MODE)) != "NONE"


log = logging.getLogger(__name__)


class HighAvailabilityServices(ABC):
    @abstractmethod
    def leader_election_service(self) -> LeaderElectionService:
        """The process's one election (started on first use)."""

    @abstractmethod
    def leader_retriever(self, component_id: str) -> LeaderRetrievalService:
        """A new (unstarted) retrieval of ``component_id``'s leader; the caller starts and stops it."""

    def resource_manager_leader_retriever(self) -> LeaderRetrievalService:
        return self.leader_retriever(RESOURCE_MANAGER)

    def dispatcher_leader_retriever(self) -> LeaderRetrievalService:
        return self.leader_retriever(DISPATCHER)

    def rest_endpoint_leader_retriever(self) -> LeaderRetrievalService:
        return self.leader_retriever(REST_SERVER)

    def job_master_leader_retriever(self, job_id: str) -> LeaderRetrievalService:
        return self.leader_retriever(job_master_component(job_id))

    @abstractmethod
    def job_graph_store(self, fence: LeaderFence | None = None) -> JobGraphStore: ...

    @abstractmethod
    def job_result_store(self) -> JobResultStore: ...

    @abstractmethod
    def checkpoint_id_counter(self, job_id: str, fence: LeaderFence | None = None) -> CheckpointIDCounter: ...

    @abstractmethod
    def completed_checkpoint_pointer_store(
        self, job_id: str, max_retained: int = 1, fence: LeaderFence | None = None
    ) -> CompletedCheckpointPointerStore: ...

    @abstractmethod
    def global_cleanup(self, job_id: str, fence: LeaderFence | None = None) -> None:
        """Removes the HA data of a job that ended for good, except its JobGraph (the
        JobGraphStore's ``global_cleanup``) and its job result: checkpoint counter and pointers,
        the JobMaster's leader node. Idempotent."""

    def register_process(self, kind: str, info: dict[str, Any]) -> None:
        """Announces this process (``kind``: master or taskexecutor; ``info``: pid, host, start
        time, addresses) for as long as it lives, so clients find and stop every process of the
        cluster, however it was started. Without HA there is nothing to announce."""

    def registered_processes(self) -> list[dict[str, Any]]:
        """The processes announced now (``register_process``)."""
        return []

    @abstractmethod
    def close(self) -> None:
        """Leaves the election and closes connections; HA data stays for the next leader."""

    @abstractmethod
    def close_and_cleanup_all_data(self) -> None:
        """Closes and deletes all HA data of the cluster (when the cluster shuts down for good)."""

    def __enter__(self) -> HighAvailabilityServices:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def announce_process(ha: HighAvailabilityServices, kind: str, info: dict[str, Any]) -> None:
    """This process (pid, host, start time, and ``info``) in the HA store's process registry; a
    failure costs only that (logged)."""
    try:
        ha.register_process(kind, {**this_process(), **info})
    except Exception as e:  # noqa: BLE001 - the process works without it
        log.warning("could not announce this %s in the HA store: %s", kind, e)


# ----------------------------------------------------------------------------- standalone
class _StandaloneElectionDriver:
    """Always leads; what is published is kept for the process's own retrievers."""

    def __init__(self, published: Callable[[str, LeaderInformation], None]) -> None:
        self._published = published

    def start(self, emit: Callable[[Event], None]) -> None:
        emit(ConnectionStateChanged(ConnectionState.CONNECTED))
        emit(LatchAcquired("standalone"))

    def publish(self, component_id: str, info: LeaderInformation, fence: LeaderFence) -> None:
        self._published(component_id, info)

    def delete(self, component_id: str, fence: LeaderFence) -> None:
        pass

    def reset_latch(self, latch_path: str) -> None:
        pass

    def verify(self, fence: LeaderFence) -> concurrent.futures.Future[bool]:
        f: concurrent.futures.Future[bool] = concurrent.futures.Future()
        f.set_result(True)
        return f

    def close(self) -> None:
        pass


class _FixedRetrievalDriver:
    def __init__(self, info: LeaderInformation | None) -> None:
        self._info = info

    def start(self, notify: LeaderListener) -> None:
        notify(self._info)

    def stop(self) -> None:
        pass


class StandaloneHaServices(HighAvailabilityServices):
    """No HA. ``addresses`` (component id -> address) are what retrievers report, with an empty
    session id: without HA a client learns a component's fencing token when it registers, as
    before. The process's components are granted ``leader_session_id`` (one per process)."""

    def __init__(self, addresses: Mapping[str, str] | None = None, leader_session_id: str | None = None) -> None:
        self.addresses = dict(addresses or {})
        self.leader_session_id = leader_session_id or uuid.uuid4().hex
        self._lock = threading.Lock()
        self._election: LeaderElectionService | None = None
        self._job_graphs = InMemoryJobGraphStore()
        self._job_results = InMemoryJobResultStore()
        self._counters: dict[str, InMemoryCheckpointIDCounter] = {}
        self._checkpoints: dict[str, InMemoryCompletedCheckpointPointerStore] = {}

    def _on_published(self, component_id: str, info: LeaderInformation) -> None:
        self.addresses[component_id] = info.address

    def leader_election_service(self) -> LeaderElectionService:
        with self._lock:
            if self._election is None:
                sid = self.leader_session_id
                self._election = LeaderElectionService(
                    _StandaloneElectionDriver(self._on_published), new_session_id=lambda: sid
                ).start()
            return self._election

    def leader_retriever(self, component_id: str) -> LeaderRetrievalService:
        address = self.addresses.get(component_id)
        info = LeaderInformation("", address) if address else None
        return LeaderRetrievalService(_FixedRetrievalDriver(info), component_id)

    def job_graph_store(self, fence: LeaderFence | None = None) -> JobGraphStore:
        return self._job_graphs

    def job_result_store(self) -> JobResultStore:
        return self._job_results

    def checkpoint_id_counter(self, job_id: str, fence: LeaderFence | None = None) -> CheckpointIDCounter:
        with self._lock:
            return self._counters.setdefault(job_id, InMemoryCheckpointIDCounter())

    def completed_checkpoint_pointer_store(
        self, job_id: str, max_retained: int = 1, fence: LeaderFence | None = None
    ) -> CompletedCheckpointPointerStore:
        with self._lock:
            return self._checkpoints.setdefault(job_id, InMemoryCompletedCheckpointPointerStore(max_retained))

    def global_cleanup(self, job_id: str, fence: LeaderFence | None = None) -> None:
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


# ----------------------------------------------------------------------------- factory
def create_ha_services(
    config: Configuration, *, addresses: Mapping[str, str] | None = None
) -> HighAvailabilityServices:
    """The services ``config`` asks for. ``addresses`` are the standalone components' addresses
    (e.g. ``{RESOURCE_MANAGER: "host:port"}`` for a TaskExecutor started with ``--master``);
    with ZooKeeper they are retrieved instead. A ZooKeeper quorum that cannot be reached within
    the connection timeout is a ``HighAvailabilityError``; a missing key a ``ConfigError``."""
    if not ha_enabled(config):
        return StandaloneHaServices(addresses)
    from yarnflink.highavailability.zookeeper.services import (
        ZooKeeperHaServices,  # deferred: kazoo, with ZooKeeper HA only
    )

    return ZooKeeperHaServices.from_config(config)
