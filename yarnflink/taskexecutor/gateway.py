"""TaskExecutorGateway: what the ResourceManager (slot requests, heartbeats) and JobMasters (tasks,
slots, partitions, checkpoints) call on a TaskExecutor (Flink's TaskExecutorGateway), with the
TaskDeploymentDescriptor a task is deployed with.

Calls from a leader carry its fencing token (``resource_manager_token``, ``jobmaster_id``); the
TaskExecutor refuses a stale one with ``FencingTokenMismatch``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from yarnflink.common.rpc_errors import RPC_TIMEOUT_S
from yarnflink.resourcemanager.resources import ResourceProfile
from yarnflink.resourcemanager.slotmanager import SlotReport

__all__ = [
    "CancelTask",
    "ChainedOperator",
    "DisconnectJobManager",
    "FreeSlot",
    "InputChannelDescriptor",
    "InputGateDescriptor",
    "LogFileInfo",
    "NotifyCheckpoint",
    "ReleasePartitions",
    "RequestSlot",
    "RequestTaskExecutorInfo",
    "ResultPartitionDescriptor",
    "SlotRequestAck",
    "SubmitTask",
    "TaskDeploymentDescriptor",
    "TaskExecutorGateway",
    "TaskExecutorInfo",
    "TaskInfo",
    "TaskMetrics",
    "TriggerCheckpoint",
]


# ---------------------------------------------------------------------------- deployment
@dataclass(frozen=True, slots=True)
class InputChannelDescriptor:
    """Flink's InputChannelDeploymentDescriptor: where one input channel reads from."""

    partition_id: str
    subpartition: int
    producer_data_address: str


@dataclass(frozen=True, slots=True)
class InputGateDescriptor:
    dataset_id: str
    partitioning: str
    channels: tuple[InputChannelDescriptor, ...] = ()


@dataclass(frozen=True, slots=True)
class ResultPartitionDescriptor:
    """Flink's ResultPartitionDeploymentDescriptor."""

    dataset_id: str
    partition_id: str
    num_subpartitions: int
    partitioning: str
    key_selector: bytes = b""  # cloudpickled KeySelectorSpec, for hash partitioning
    consumer_vertex_id: str = ""
    result_type: str = ""  # PIPELINED_BOUNDED (when empty) or BLOCKING


@dataclass(frozen=True, slots=True)
class ChainedOperator:
    node_id: int
    name: str
    kind: str
    spec: bytes
    uid: str = ""
    chained_outputs: tuple[int, ...] = ()
    output_datasets: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TaskDeploymentDescriptor:
    """Flink's TaskDeploymentDescriptor: everything a TaskExecutor needs to run one attempt."""

    job_id: str
    task_name: str
    execution_id: str  # ExecutionAttemptID
    subtask_index: int
    parallelism: int
    max_parallelism: int
    job_name: str = ""
    vertex_id: str = ""
    attempt_number: int = 0
    allocation_id: str = ""
    operators: tuple[ChainedOperator, ...] = ()
    produced_partitions: tuple[ResultPartitionDescriptor, ...] = ()
    input_gates: tuple[InputGateDescriptor, ...] = ()
    runtime_mode: str = "STREAMING"
    job_config: Mapping[str, str] = field(default_factory=dict)
    task_state: bytes = b""  # JSON TaskStateSnapshot to restore (empty: none)
    restored_checkpoint_id: int = 0  # the checkpoint it comes from (0: none)


# ---------------------------------------------------------------------------- requests
@dataclass(frozen=True, slots=True)
class RequestSlot:
    """The ResourceManager assigns a slot to a job: the TaskExecutor offers it to that JobMaster.
    ``slot_index`` -1 asks for a dynamic slot carved out of the free resources (fine-grained)."""

    resource_manager_token: str  # fencing token of the calling ResourceManager
    slot_index: int
    job_id: str
    allocation_id: str
    profile: ResourceProfile
    jobmaster_address: str
    jobmaster_id: str  # the JobMaster's fencing token


@dataclass(frozen=True, slots=True)
class SlotRequestAck:
    slot_index: int  # the slot taken (a dynamic slot's index is chosen by the TaskExecutor)
    slot_report_version: int  # the slot table version after the allocation


@dataclass(frozen=True, slots=True)
class SubmitTask:
    jobmaster_id: str
    tdd: TaskDeploymentDescriptor


@dataclass(frozen=True, slots=True)
class CancelTask:
    jobmaster_id: str
    execution_id: str


@dataclass(frozen=True, slots=True)
class FreeSlot:
    allocation_id: str
    cause: str
    #: the calling JobMaster's fencing token: a TaskExecutor that follows a newer leader of the
    #: slot's job refuses it ("": not fenced, e.g. the TaskExecutor's own decisions in tests)
    jobmaster_id: str = ""


@dataclass(frozen=True, slots=True)
class ReleasePartitions:
    job_id: str
    partition_ids: tuple[str, ...] = ()  # empty: every partition of the job
    jobmaster_id: str = ""  # as FreeSlot's


@dataclass(frozen=True, slots=True)
class DisconnectJobManager:
    job_id: str
    cause: str
    jobmaster_id: str = ""  # as FreeSlot's


@dataclass(frozen=True, slots=True)
class TriggerCheckpoint:
    """The JobMaster triggers a checkpoint at a source task. ``synchronous``: stop-with-savepoint
    (Flink's SavepointType SUSPEND / TERMINATE: the sources emit no record after the barrier and the
    tasks finish once the savepoint completed); ``drain``: MAX_WATERMARK before the barrier."""

    jobmaster_id: str
    execution_id: str
    checkpoint_id: int
    timestamp: int
    is_savepoint: bool = False
    synchronous: bool = False
    drain: bool = False


@dataclass(frozen=True, slots=True)
class NotifyCheckpoint:
    """A checkpoint completed or was aborted (to every task of the job)."""

    jobmaster_id: str
    execution_id: str
    checkpoint_id: int


@dataclass(frozen=True, slots=True)
class RequestTaskExecutorInfo:
    include_metrics: bool = False  # fill task_metrics and process_metrics
    log_name: str = ""  # if set: return this log file's content (one of log_files)
    log_max_bytes: int = 0  # at most this many bytes from the end of that file (0: default)


# ---------------------------------------------------------------------------- TaskExecutorInfo
@dataclass(frozen=True, slots=True)
class TaskInfo:
    execution_id: str
    job_id: str
    task_name: str
    subtask_index: int
    state: str
    slot_index: int
    allocation_id: str
    vertex_id: str
    attempt_number: int


@dataclass(frozen=True, slots=True)
class TaskMetrics:
    """Metrics of one running task, with Flink's metric names (``yarnflink.metrics.names``)."""

    execution_id: str
    job_id: str
    vertex_id: str
    subtask_index: int
    attempt_number: int
    task_name: str
    metrics: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LogFileInfo:
    """A log file of a process (Flink's LogInfo)."""

    name: str
    size: int
    mtime_ms: int


@dataclass(frozen=True, slots=True)
class TaskExecutorInfo:
    resource_id: str
    slot_report: SlotReport = SlotReport()
    tasks: tuple[TaskInfo, ...] = ()
    rss_bytes: int = 0
    network_memory_in_use: int = 0
    task_metrics: tuple[TaskMetrics, ...] = ()  # with include_metrics
    process_metrics: Mapping[str, float] = field(default_factory=dict)  # with include_metrics
    log_files: tuple[LogFileInfo, ...] = ()  # this TaskExecutor's log and stdout files
    log_content: bytes = b""  # the requested log_name (its end), if any
    log_truncated: bool = False  # log_content is only the end of the file
    metric_reporter_address: str = ""  # host:port of the Prometheus endpoint, if started


class TaskExecutorGateway(Protocol):
    """``timeout``: the caller's deadline (RpcTimeout after it)."""

    async def request_slot(self, request: RequestSlot, *, timeout: float = RPC_TIMEOUT_S) -> SlotRequestAck: ...

    async def submit_task(self, request: SubmitTask, *, timeout: float = RPC_TIMEOUT_S) -> None: ...

    async def cancel_task(self, request: CancelTask, *, timeout: float = RPC_TIMEOUT_S) -> None:
        """UnknownTarget if the task is not (any longer) here."""
        ...

    async def free_slot(self, request: FreeSlot, *, timeout: float = RPC_TIMEOUT_S) -> None: ...

    async def release_partitions(self, request: ReleasePartitions, *, timeout: float = RPC_TIMEOUT_S) -> None: ...

    async def disconnect_job_manager(
        self, request: DisconnectJobManager, *, timeout: float = RPC_TIMEOUT_S
    ) -> None: ...

    async def request_task_executor_info(
        self, request: RequestTaskExecutorInfo, *, timeout: float = RPC_TIMEOUT_S
    ) -> TaskExecutorInfo: ...

    async def heartbeat_from_resource_manager(
        self, resource_manager_token: str, *, timeout: float = RPC_TIMEOUT_S
    ) -> SlotReport:
        """The ResourceManager's heartbeat; the answer is the slot report."""
        ...

    async def trigger_checkpoint(self, request: TriggerCheckpoint, *, timeout: float = RPC_TIMEOUT_S) -> None: ...

    async def notify_checkpoint_complete(
        self, request: NotifyCheckpoint, *, timeout: float = RPC_TIMEOUT_S
    ) -> None: ...

    async def notify_checkpoint_aborted(self, request: NotifyCheckpoint, *, timeout: float = RPC_TIMEOUT_S) -> None: ...
