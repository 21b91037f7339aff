"""ResourceManagerGateway: what TaskExecutors and JobMasters call on the ResourceManager (Flink's
ResourceManagerGateway).

Every call carries the ResourceManager's fencing token (its leader session id) except the two
registrations, which return it; a stale token, or a ResourceManager that does not lead, fails the
call with ``FencingTokenMismatch``. The ResourceManager heartbeats TaskExecutors
(``TaskExecutorGateway.heartbeat_from_resource_manager``, answered with the slot report); JobMasters
heartbeat the ResourceManager (``heartbeat_from_job_master``).

``ResourceManagerControlGateway``: what the Dispatcher in the master's process reads for the REST
API, the dashboard and the metrics (Flink's ``requestTaskManagerInfo`` and
``requestResourceOverview``); ``LocalResourceManagerGateway`` implements it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from yarnflink.common.rpc_errors import RPC_TIMEOUT_S
from yarnflink.resourcemanager.resources import UNKNOWN, ResourceProfile
from yarnflink.resourcemanager.slotmanager import ReportedSlot, SlotReport

__all__ = [
    "DeclareRequiredResources",
    "DisconnectJobMaster",
    "DisconnectTaskExecutor",
    "JobMasterHeartbeat",
    "JobMasterRegistrationSuccess",
    "NotifySlotAvailable",
    "RegisterJobMaster",
    "RegisterTaskExecutor",
    "ReportedSlot",
    "ResourceManagerControlGateway",
    "ResourceManagerGateway",
    "ResourceOverview",
    "ResourceRequirement",
    "SlotInfo",
    "SlotReport",
    "TaskExecutorRegistrationSuccess",
    "TaskManagerInfo",
    "TaskManagerSlot",
]


@dataclass(frozen=True, slots=True)
class RegisterTaskExecutor:
    resource_id: str  # the TaskExecutor's ResourceID
    rpc_address: str  # host:port of its TaskExecutorGateway
    data_address: str  # host:port of its shuffle data server
    num_slots: int
    default_slot_profile: ResourceProfile = UNKNOWN
    total_profile: ResourceProfile = UNKNOWN
    slot_report: SlotReport = SlotReport()
    pid: int = 0
    hostname: str = ""


@dataclass(frozen=True, slots=True)
class TaskExecutorRegistrationSuccess:
    registration_id: str
    fencing_token: str  # the ResourceManager's leader session id
    resource_manager_resource_id: str
    heartbeat_interval_ms: int
    heartbeat_timeout_ms: int


@dataclass(frozen=True, slots=True)
class NotifySlotAvailable:
    fencing_token: str
    resource_id: str
    slot_index: int
    allocation_id: str  # the allocation that was freed
    slot_report_version: int  # the TaskExecutor's slot table version after the free


@dataclass(frozen=True, slots=True)
class DisconnectTaskExecutor:
    fencing_token: str
    resource_id: str
    cause: str


@dataclass(frozen=True, slots=True)
class RegisterJobMaster:
    job_id: str
    jobmaster_address: str  # host:port of its JobMasterGateway
    jobmaster_id: str  # the JobMaster's fencing token


@dataclass(frozen=True, slots=True)
class JobMasterRegistrationSuccess:
    fencing_token: str  # the ResourceManager's leader session id
    heartbeat_interval_ms: int
    heartbeat_timeout_ms: int
    heartbeat_rpc_failure_threshold: int  # -1: only the timeout counts


@dataclass(frozen=True, slots=True)
class ResourceRequirement:
    """The slots one slot sharing group needs: ``profile`` UNKNOWN takes any default slot."""

    profile: ResourceProfile
    number_of_slots: int
    slot_sharing_group: str = ""


@dataclass(frozen=True, slots=True)
class DeclareRequiredResources:
    fencing_token: str
    job_id: str
    jobmaster_address: str
    requirements: tuple[ResourceRequirement, ...]
    jobmaster_id: str  # the JobMaster's fencing token, given to TaskExecutors with slots


@dataclass(frozen=True, slots=True)
class DisconnectJobMaster:
    fencing_token: str
    job_id: str
    cause: str


@dataclass(frozen=True, slots=True)
class JobMasterHeartbeat:
    fencing_token: str
    job_id: str
    jobmaster_id: str


class ResourceManagerGateway(Protocol):
    """``timeout``: the caller's deadline (RpcTimeout after it)."""

    async def register_task_executor(
        self, request: RegisterTaskExecutor, *, timeout: float = RPC_TIMEOUT_S
    ) -> TaskExecutorRegistrationSuccess: ...

    async def notify_slot_available(self, request: NotifySlotAvailable, *, timeout: float = RPC_TIMEOUT_S) -> None: ...

    async def disconnect_task_executor(
        self, request: DisconnectTaskExecutor, *, timeout: float = RPC_TIMEOUT_S
    ) -> None: ...

    async def register_job_master(
        self, request: RegisterJobMaster, *, timeout: float = RPC_TIMEOUT_S
    ) -> JobMasterRegistrationSuccess: ...

    async def declare_required_resources(
        self, request: DeclareRequiredResources, *, timeout: float = RPC_TIMEOUT_S
    ) -> None: ...

    async def disconnect_job_master(self, request: DisconnectJobMaster, *, timeout: float = RPC_TIMEOUT_S) -> None: ...

    async def heartbeat_from_job_master(self, request: JobMasterHeartbeat, *, timeout: float = RPC_TIMEOUT_S) -> bool:
        """False: the ResourceManager lost this job's registration (register again)."""
        ...


@dataclass(frozen=True, slots=True)
class ResourceOverview:
    """The registered TaskExecutors and their slots (Flink's ResourceOverview)."""

    number_task_managers: int
    number_registered_slots: int
    number_free_slots: int


@dataclass(frozen=True, slots=True)
class SlotInfo:
    """A slot allocated to a job (Flink's SlotInfo in TaskManagerInfoWithSlots)."""

    job_id: str
    resource: ResourceProfile


@dataclass(frozen=True, slots=True)
class TaskManagerSlot:
    """One slot of a TaskExecutor: an allocation, or a free default slot (``allocation_id`` None)."""

    index: int  # -1: a dynamic (fine-grained) slot
    allocation_id: str | None
    job_id: str | None
    status: str  # the allocation's state; FREE for a free slot
    resource: ResourceProfile


@dataclass(frozen=True, slots=True)
class TaskManagerInfo:
    """A registered TaskExecutor as the ResourceManager knows it (Flink's TaskManagerInfo)."""

    resource_id: str
    rpc_address: str  # host:port of its TaskExecutorGateway
    data_port: int
    time_since_last_heartbeat_ms: int
    number_slots: int
    number_available_slots: int
    total_resource: ResourceProfile
    free_resource: ResourceProfile
    pid: int
    hostname: str
    allocated_slots: tuple[SlotInfo, ...]  # in allocation order
    slots: tuple[TaskManagerSlot, ...]  # allocations by index, then the free default slots


class ResourceManagerControlGateway(Protocol):
    """Called by the Dispatcher on the ResourceManager in its own process: the views of the REST
    API, the dashboard and the master's metrics. Not fenced: they read, and answer as a standby does."""

    @property
    def address(self) -> str:
        """host:port of its ResourceManagerGateway (Flink's ``RpcGateway.getAddress``)."""
        ...

    async def request_task_manager_info(self) -> tuple[TaskManagerInfo, ...]: ...

    async def request_resource_overview(self) -> ResourceOverview: ...
