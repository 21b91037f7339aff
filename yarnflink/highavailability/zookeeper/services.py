"""ZooKeeperHaServices: HA through one kazoo client per process and the storageDir (fsspec)."""

from __future__ import annotations

import logging
import posixpath
import threading
from typing import Any

from kazoo.client import KazooClient

from yarnflink.common.config import ConfigError, Configuration
from yarnflink.highavailability.election_service import LeaderElectionService
from yarnflink.highavailability.filesystem import FileSystemJobResultStore, FileSystemStateStorage
from yarnflink.highavailability.leaderelection import LeaderFence
from yarnflink.highavailability.leaderretrieval import LeaderRetrievalService
from yarnflink.highavailability.options import HighAvailabilityOptions, JobResultStoreOptions
from yarnflink.highavailability.services import HighAvailabilityServices, job_master_component
from yarnflink.highavailability.stores import (
    CheckpointIDCounter,
    CompletedCheckpointPointerStore,
    JobGraphStore,
    JobResultStore,
)
from yarnflink.highavailability.zookeeper.client import (
    ZooKeeperClientSettings,
    ZooKeeperPaths,
    start_client,
)
from yarnflink.highavailability.zookeeper.leaderelection import ZooKeeperLeaderElectionDriver
from yarnflink.highavailability.zookeeper.leaderretrieval import ZooKeeperLeaderRetrievalDriver
from yarnflink.highavailability.zookeeper.processes import ZooKeeperProcessRegistry
from yarnflink.highavailability.zookeeper.stores import (
    ZooKeeperCheckpointIDCounter,
    ZooKeeperCompletedCheckpointPointerStore,
    ZooKeeperJobGraphStore,
    delete_tree,
)

log = logging.getLogger(__name__)

__all__ = ["ZooKeeperHaServices"]


class ZooKeeperHaServices(HighAvailabilityServices):
    def __init__(
        self,
        client: KazooClient,
        paths: ZooKeeperPaths,
        storage_dir: str,
        *,
        tolerate_suspended: bool = False,
        job_result_store_path: str | None = None,
        delete_job_results_on_commit: bool = True,
        cluster_id: str = "default",
        owns_client: bool = True,
    ) -> None:
        self.client = client
        self.paths = paths
        self.tolerate_suspended = tolerate_suspended
        self.owns_client = owns_client
        base = storage_dir.rstrip("/")
        cluster = cluster_id.strip("/") or "default"
        self.storage = FileSystemStateStorage(posixpath.join(base, cluster))
        self._job_results = FileSystemJobResultStore(
            job_result_store_path or posixpath.join(base, "job-result-store", cluster),
            delete_on_commit=delete_job_results_on_commit,
        )
        self._lock = threading.Lock()
        self._election: LeaderElectionService | None = None
        self._closed = False
        self.processes = ZooKeeperProcessRegistry(client, f"{paths.root}/processes")

    @staticmethod
    def from_config(config: Configuration) -> ZooKeeperHaServices:
        settings = ZooKeeperClientSettings.from_config(config)
        storage_dir = config.get(HighAvailabilityOptions.HA_STORAGE_PATH)
        if not storage_dir:
            raise ConfigError(
                "high-availability.type is ZOOKEEPER but high-availability.storageDir is not set "
                "(a file system URL for JobGraphs and job results, e.g. hdfs:///flink/ha or "
                "s3://bucket/ha)"
            )
        paths = ZooKeeperPaths.from_config(config)
        client = start_client(settings.make_client(), settings.connection_timeout_s)
        return ZooKeeperHaServices(
            client,
            paths,
            str(storage_dir),
            tolerate_suspended=settings.tolerate_suspended,
            job_result_store_path=config.get(JobResultStoreOptions.STORAGE_PATH),
            delete_job_results_on_commit=bool(config.get(JobResultStoreOptions.DELETE_ON_COMMIT)),
            cluster_id=str(config.get(HighAvailabilityOptions.HA_CLUSTER_ID)),
        )

    # ------------------------------------------------------------------ leadership
    def leader_election_service(self) -> LeaderElectionService:
        with self._lock:
            if self._closed:
                raise RuntimeError("the HA services are closed")
            if self._election is None:
                driver = ZooKeeperLeaderElectionDriver(self.client, self.paths)
                self._election = LeaderElectionService(driver, tolerate_suspended=self.tolerate_suspended).start()
            return self._election

    def leader_retriever(self, component_id: str) -> LeaderRetrievalService:
        driver = ZooKeeperLeaderRetrievalDriver(
            self.client, self.paths.connection_info(component_id), tolerate_suspended=self.tolerate_suspended
        )
        return LeaderRetrievalService(driver, component_id)

    # ------------------------------------------------------------------ stores
    def job_graph_store(self, fence: LeaderFence | None = None) -> JobGraphStore:
        return ZooKeeperJobGraphStore(self.client, self.paths, self.storage, fence)

    def job_result_store(self) -> JobResultStore:
        return self._job_results

    def checkpoint_id_counter(self, job_id: str, fence: LeaderFence | None = None) -> CheckpointIDCounter:
        return ZooKeeperCheckpointIDCounter(self.client, self.paths, job_id, fence)

    def completed_checkpoint_pointer_store(
        self, job_id: str, max_retained: int = 1, fence: LeaderFence | None = None
    ) -> CompletedCheckpointPointerStore:
        return ZooKeeperCompletedCheckpointPointerStore(self.client, self.paths, job_id, max_retained, fence)

    def global_cleanup(self, job_id: str, fence: LeaderFence | None = None) -> None:
        delete_tree(self.client, self.paths.job(job_id), fence)
        delete_tree(self.client, self.paths.leader(job_master_component(job_id)), fence)

    # ------------------------------------------------------------------ processes
    def register_process(self, kind: str, info: dict[str, Any]) -> None:
        self.processes.register(kind, info)

    def registered_processes(self) -> list[dict[str, Any]]:
        return self.processes.processes()

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            election, self._election = self._election, None
        try:
            if election is not None:
                election.close()
        finally:
            if self.owns_client:
                self.client.stop()
                self.client.close()

    def close_and_cleanup_all_data(self) -> None:
        with self._lock:
            election, self._election = self._election, None
        if election is not None:
            election.close()
        try:
            delete_tree(self.client, self.paths.root, None)
            for fs, base in ((self.storage.fs, self.storage.base), (self._job_results.fs, self._job_results.base)):
                if fs.exists(base):
                    fs.rm(base, recursive=True)
        finally:
            self.close()
