"""High availability: leader election, leader retrieval and durable HA metadata (Flink's
``flink-runtime/highavailability`` and ``leaderelection`` / ``leaderretrieval``).

::

    HighAvailabilityServices (services.py) ....... made by create_ha_services(config)
     +-- StandaloneHaServices ........... high-availability.type: NONE (always leader, fixed addresses)
     +-- ZooKeeperHaServices ............ ZOOKEEPER (zookeeper/services.py; kazoo + fsspec)
     +-- EmbeddedHaServices ............. tests: leadership on demand (embedded.py)

    LeaderElection (leaderelection.py) ........... pure state machine: events in, actions out
    LeaderElectionService (election_service.py) .. runs it on its own loop; contenders register here
     +-- driver: ZooKeeperLeaderElectionDriver (zookeeper/leaderelection.py) | standalone | embedded
    LeaderRetrievalService (leaderretrieval.py) .. who leads a component, every change
     +-- driver: ZooKeeperLeaderRetrievalDriver (zookeeper/leaderretrieval.py) | fixed | embedded
    JobGraphStore, JobResultStore, CheckpointIDCounter, CompletedCheckpointPointerStore (stores.py)
     +-- ZooKeeper pointers (zookeeper/stores.py), files in the storageDir (filesystem.py), in memory
    JobCheckpointRecovery (checkpoints.py) ....... a JobMaster's checkpoint ids and pointers
    register_process / registered_processes ...... the cluster's live processes (zookeeper/processes.py)

The master process's use of them: ``yarnflink.dispatcher.recovery`` (pure decisions) and
``yarnflink.dispatcher.leadership`` (their driver); docs/HA.md.

This package's top level imports neither kazoo nor fsspec; the ZooKeeper forms load on demand.
"""

from typing import TYPE_CHECKING

from yarnflink.common.lazy import lazy_exports

if TYPE_CHECKING:  # the static view (mypy, import-linter); at run time they load on first use
    from yarnflink.highavailability.checkpoints import JobCheckpointRecovery
    from yarnflink.highavailability.election_service import (
        LeaderContender,
        LeaderElectionHandle,
        LeaderElectionService,
    )
    from yarnflink.highavailability.embedded import EmbeddedHaServices
    from yarnflink.highavailability.errors import HaStoreError, HighAvailabilityError, LeadershipLostError
    from yarnflink.highavailability.leaderelection import LeaderElection, LeaderFence, LeaderInformation
    from yarnflink.highavailability.leaderretrieval import LeaderRetrievalService
    from yarnflink.highavailability.services import (
        DISPATCHER,
        RESOURCE_MANAGER,
        REST_SERVER,
        HighAvailabilityServices,
        StandaloneHaServices,
        create_ha_services,
        ha_enabled,
        job_master_component,
    )
    from yarnflink.highavailability.stores import (
        CheckpointIDCounter,
        CompletedCheckpointPointerStore,
        JobGraphStore,
        JobResult,
        JobResultStore,
        RecoveryPlan,
        plan_recovery,
        recover_jobs,
    )

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "yarnflink.highavailability.checkpoints": ("JobCheckpointRecovery",),
        "yarnflink.highavailability.election_service": (
            "LeaderContender",
            "LeaderElectionHandle",
            "LeaderElectionService",
        ),
        "yarnflink.highavailability.embedded": ("EmbeddedHaServices",),
        "yarnflink.highavailability.errors": ("HaStoreError", "HighAvailabilityError", "LeadershipLostError"),
        "yarnflink.highavailability.leaderelection": ("LeaderElection", "LeaderFence", "LeaderInformation"),
        "yarnflink.highavailability.leaderretrieval": ("LeaderRetrievalService",),
        "yarnflink.highavailability.services": (
            "DISPATCHER",
            "RESOURCE_MANAGER",
            "REST_SERVER",
            "HighAvailabilityServices",
            "StandaloneHaServices",
            "create_ha_services",
            "ha_enabled",
            "job_master_component",
        ),
        "yarnflink.highavailability.stores": (
            "CheckpointIDCounter",
            "CompletedCheckpointPointerStore",
            "JobGraphStore",
            "JobResult",
            "JobResultStore",
            "RecoveryPlan",
            "plan_recovery",
            "recover_jobs",
        ),
    },
)

__all__ = [
    "DISPATCHER",
    "RESOURCE_MANAGER",
    "REST_SERVER",
    "CheckpointIDCounter",
    "CompletedCheckpointPointerStore",
    "EmbeddedHaServices",
    "HaStoreError",
    "HighAvailabilityError",
    "HighAvailabilityServices",
    "JobCheckpointRecovery",
    "JobGraphStore",
    "JobResult",
    "JobResultStore",
    "LeaderContender",
    "LeaderElection",
    "LeaderElectionHandle",
    "LeaderElectionService",
    "LeaderFence",
    "LeaderInformation",
    "LeaderRetrievalService",
    "LeadershipLostError",
    "RecoveryPlan",
    "StandaloneHaServices",
    "create_ha_services",
    "ha_enabled",
    "job_master_component",
    "plan_recovery",
    "recover_jobs",
]
