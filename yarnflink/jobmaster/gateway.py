"""JobMasterGateway: what TaskExecutors and the ResourceManager call on a JobMaster, and
JobMasterControlGateway: what the Dispatcher calls on the JobMasters it runs (Flink's
JobMasterGateway, split by caller: the first goes over gRPC, the second stays in the process).

Every call carries the JobMaster's fencing token (``jobmaster_id``); a stale one fails with
``FencingTokenMismatch``. Calls fail with the exceptions of ``yarnflink.common.rpc_errors``.
Messages are frozen dataclasses; the gRPC adapter (``yarnflink.rpc``) converts them.
"""

from __future__ import annotations

import traceback as _traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from yarnflink.common.rpc_errors import RPC_TIMEOUT_S
from yarnflink.executiongraph.executiongraph import ExecutionState
from yarnflink.jobmaster.collect import CollectedSince
from yarnflink.resourcemanager.resources import UNKNOWN, ResourceProfile
from yarnflink.state.handles import TaskStateSnapshot

__all__ = [
    "AcknowledgeCheckpoint",
    "CheckpointMetrics",
    "CoordinationData",
    "DeclineCheckpoint",
    "DisconnectTaskManager",
    "JobMasterControlGateway",
    "JobMasterGateway",
    "OfferSlots",
    "ReconnectTaskManager",
    "RegisterTaskManager",
    "ReportedTask",
    "SerializedThrowable",
    "SlotOffer",
    "TaskExecutionState",
    "TaskManagerHeartbeat",
]


@dataclass(frozen=True, slots=True)
class SerializedThrowable:
    """A failure carried as text: the class name, the message and the Python traceback."""

    exception_class: str
    message: str
    traceback: str = ""

    @staticmethod
    def of(e: BaseException) -> SerializedThrowable:
        return SerializedThrowable(type(e).__name__, str(e), "".join(_traceback.format_exception(e)))


@dataclass(frozen=True, slots=True)
class RegisterTaskManager:
    jobmaster_id: str
    job_id: str
    resource_id: str
    rpc_address: str  # host:port of its TaskExecutorGateway
    data_address: str  # host:port of its shuffle data server


@dataclass(frozen=True, slots=True)
class SlotOffer:
    allocation_id: str
    slot_index: int
    profile: ResourceProfile = UNKNOWN  # what the TaskExecutor says the slot has


@dataclass(frozen=True, slots=True)
class OfferSlots:
    jobmaster_id: str
    resource_id: str
    offers: tuple[SlotOffer, ...]


@dataclass(frozen=True, slots=True)
class TaskExecutionState:
    jobmaster_id: str
    execution_id: str
    state: ExecutionState
    error: SerializedThrowable | None = None  # set when state is FAILED
    #: with a terminal state: the task's final metrics (Flink's IOMetrics)
    io_metrics: Mapping[str, float] = field(default_factory=dict)
    #: FAILED reading this upstream partition (a consumer-side PartitionException)
    failed_partition_id: str = ""


@dataclass(frozen=True, slots=True)
class CheckpointMetrics:
    """A subtask's statistics of one checkpoint (``yarnflink.metrics.checkpoint_stats``).
    Durations milliseconds, sizes bytes."""

    sync_ms: float = 0.0
    async_ms: float = 0.0
    alignment_ms: float = 0.0
    start_delay_ms: float = 0.0
    state_size: int = 0
    checkpointed_size: int = 0
    #: unaligned checkpoints only: bytes of in-flight input data written with the state
    persisted_data: int = 0
    unaligned: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "sync_ms": self.sync_ms,
            "async_ms": self.async_ms,
            "alignment_ms": self.alignment_ms,
            "start_delay_ms": self.start_delay_ms,
            "state_size": self.state_size,
            "checkpointed_size": self.checkpointed_size,
        }
        if self.unaligned:
            out["persisted_data"] = self.persisted_data
            out["unaligned"] = 1
        return out


@dataclass(frozen=True, slots=True)
class AcknowledgeCheckpoint:
    """A task has written its state for ``checkpoint_id`` (Flink's acknowledgeCheckpoint)."""

    jobmaster_id: str
    execution_id: str
    checkpoint_id: int
    attempt_number: int
    subtask_state: TaskStateSnapshot
    metrics: CheckpointMetrics = CheckpointMetrics()


@dataclass(frozen=True, slots=True)
class DeclineCheckpoint:
    """A task could not take part in ``checkpoint_id`` (Flink's declineCheckpoint)."""

    jobmaster_id: str
    execution_id: str
    checkpoint_id: int
    attempt_number: int
    reason: str


@dataclass(frozen=True, slots=True)
class CoordinationData:
    """Data a task sends its JobMaster: ``kind`` "collect" is a batch of ``execute_and_collect()``
    results (Arrow IPC bytes)."""

    jobmaster_id: str
    execution_id: str
    kind: str
    payload: bytes


@dataclass(frozen=True, slots=True)
class TaskManagerHeartbeat:
    jobmaster_id: str
    resource_id: str
    running_execution_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DisconnectTaskManager:
    jobmaster_id: str
    resource_id: str
    cause: str


@dataclass(frozen=True, slots=True)
class ReportedTask:
    """A task a TaskExecutor runs (or ran) for the job, as it tells a new JobMaster leader: the
    attempt keeps its id; ``state`` is its latest, including one reached while no leader was
    there (``error``/``failed_partition_id`` with FAILED, as in ``TaskExecutionState``)."""

    execution_id: str
    vertex_id: str
    subtask_index: int
    attempt_number: int
    state: ExecutionState
    allocation_id: str
    error: SerializedThrowable | None = None
    failed_partition_id: str = ""


@dataclass(frozen=True, slots=True)
class ReconnectTaskManager:
    """A TaskExecutor that kept the job's slots and tasks while the job had no leader reports
    them to the job's new JobMaster (``jobmaster_id``: the new leader's session id, as published
    with its address). The JobMaster adopts what it can (yarnflink.jobmaster.reconciliation)."""

    jobmaster_id: str
    job_id: str
    resource_id: str
    rpc_address: str
    data_address: str
    slots: tuple[SlotOffer, ...]
    tasks: tuple[ReportedTask, ...]


class JobMasterGateway(Protocol):
    """Called by TaskExecutors (slots, task states, checkpoints) and the ResourceManager (a lost
    TaskExecutor). ``timeout``: the caller's deadline (RpcTimeout after it)."""

    async def register_task_manager(self, request: RegisterTaskManager, *, timeout: float = RPC_TIMEOUT_S) -> None: ...

    async def offer_slots(self, request: OfferSlots, *, timeout: float = RPC_TIMEOUT_S) -> tuple[str, ...]:
        """The allocation ids of the offers accepted."""
        ...

    async def update_task_execution_state(
        self, request: TaskExecutionState, *, timeout: float = RPC_TIMEOUT_S
    ) -> None: ...

    async def acknowledge_checkpoint(
        self, request: AcknowledgeCheckpoint, *, timeout: float = RPC_TIMEOUT_S
    ) -> None: ...

    async def decline_checkpoint(self, request: DeclineCheckpoint, *, timeout: float = RPC_TIMEOUT_S) -> None: ...

    async def send_coordination_data(self, request: CoordinationData, *, timeout: float = RPC_TIMEOUT_S) -> None: ...

    async def heartbeat_from_task_manager(
        self, request: TaskManagerHeartbeat, *, timeout: float = RPC_TIMEOUT_S
    ) -> None: ...

    async def disconnect_task_manager(
        self, request: DisconnectTaskManager, *, timeout: float = RPC_TIMEOUT_S
    ) -> None: ...

    async def reconnect_task_manager(self, request: ReconnectTaskManager, *, timeout: float = RPC_TIMEOUT_S) -> None:
        """A TaskExecutor's slots and tasks of the job, for a JobMaster that took over (HA)."""
        ...


class JobMasterControlGateway(Protocol):
    """Called by the Dispatcher on a JobMaster it runs in its own process: job control and the
    views of the REST API (JSON-shaped dicts, as the REST API serves them)."""

    async def request_job_details(self) -> dict[str, Any]: ...

    async def request_job_exceptions(self) -> dict[str, Any]: ...

    async def request_monitoring_snapshot(self) -> dict[str, Any]:
        """``details``, final task metrics (``finals``), checkpoint statistics, restarts."""
        ...

    async def trigger_savepoint(
        self, target_directory: str | None, *, stop: bool = False, drain: bool = False, cancel_job: bool = False
    ) -> str | None:
        """The savepoint's trigger id; None if the job has no checkpointing."""
        ...

    async def request_savepoint_status(self, trigger_id: str) -> dict[str, Any] | None: ...

    async def request_collected(self, offset: int) -> CollectedSince:
        """``execute_and_collect()`` results after ``offset`` (``yarnflink.jobmaster.collect``)."""
        ...

    async def cancel(self) -> bool: ...

    async def suspend(self, cause: str, timeout: float = 2.0) -> None:
        """Leadership lost (HA): stop acting and free every slot; not a terminal state."""
        ...
