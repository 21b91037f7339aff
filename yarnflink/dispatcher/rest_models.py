"""Response models of the REST API, for its OpenAPI description (``/openapi.json``).

They document Flink's JSON shapes; handlers return plain dicts (the models are not used to
re-validate responses at run time, so a new field never turns into a 500). Every model admits
extra fields; ``tests/e2e/test_openapi_fuzz.py`` checks real responses against these schemas.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class ErrorResponse(_Model):
    errors: list[str] = Field(description="what went wrong")


class Empty(_Model):
    pass


# ---------------------------------------------------------------------------- cluster
class DashboardFeatures(_Model):
    web_submit: bool = Field(alias="web-submit")
    web_cancel: bool = Field(alias="web-cancel")
    web_history: bool = Field(alias="web-history")


class DashboardConfiguration(_Model):
    refresh_interval: int = Field(alias="refresh-interval", description="dashboard refresh interval, ms")
    timezone_name: str = Field(alias="timezone-name")
    timezone_offset: int = Field(alias="timezone-offset")
    flink_version: str = Field(alias="flink-version")
    flink_revision: str = Field(alias="flink-revision")
    features: DashboardFeatures
    metric_reporters: dict[str, str] = Field(
        default_factory=dict,
        alias="metric-reporters",
        description="yarnflink: address (host:port) of each metric reporter of the master, e.g. prom",
    )


class ConfigEntry(_Model):
    key: str
    value: str


class ClusterOverview(_Model):
    taskmanagers: int
    slots_total: int = Field(alias="slots-total")
    slots_available: int = Field(alias="slots-available")
    jobs_running: int = Field(alias="jobs-running")
    jobs_finished: int = Field(alias="jobs-finished")
    jobs_cancelled: int = Field(alias="jobs-cancelled")
    jobs_failed: int = Field(alias="jobs-failed")
    flink_version: str = Field(alias="flink-version")


class TaskManagerInfo(_Model):
    id: str
    path: str | None = None
    dataPort: int | None = None
    timeSinceLastHeartbeat: int | None = None
    slotsNumber: int | None = None
    freeSlots: int | None = None
    hardware: dict[str, Any] | None = None


class TaskManagersList(_Model):
    taskmanagers: list[TaskManagerInfo]


class TaskInSlot(_Model):
    execution_id: str = Field(alias="execution-id")
    job_id: str = Field(alias="job-id")
    vertex_id: str = Field(alias="vertex-id")
    task_name: str = Field(alias="task-name")
    subtask: int
    attempt: int
    status: str
    metrics: dict[str, float] = Field(description="the task's metrics by Flink's names")


class SlotDetails(_Model):
    index: int
    allocationId: str | None = None
    jobId: str | None = None
    tasks: list[TaskInSlot]


class GarbageCollector(_Model):
    name: str
    count: int
    time: int = Field(description="-1: not measured")


class TaskManagerMemory(_Model):
    rss: int = Field(description="resident set size of the process, bytes")
    vms: int
    arrowAllocated: int = Field(description="bytes held by Arrow's memory pool")
    shuffleMemoryUsed: int = Field(description="bytes buffered in result partitions and input channels")
    cpuLoad: float = Field(description="share of the machine's CPUs the process uses, 0..1")
    cpuCores: int
    threads: int
    garbageCollectors: list[GarbageCollector]


class LogInfo(_Model):
    name: str
    size: int
    mtime: int


class LogList(_Model):
    logs: list[LogInfo]


class TaskManagerDetails(TaskManagerInfo):
    metrics: TaskManagerMemory
    slots: list[SlotDetails]
    logs: list[LogInfo]
    metricReporters: dict[str, str] = Field(
        default_factory=dict, description="yarnflink: address of each metric reporter"
    )


# ---------------------------------------------------------------------------- metrics
class MetricValue(_Model):
    id: str = Field(description="metric name; per subtask '<subtask>.<name>'")
    value: str | None = Field(default=None, description="the value as a string (present with ?get=)")


class AggregatedMetric(_Model):
    id: str
    min: float | None = None
    max: float | None = None
    sum: float | None = None
    avg: float | None = None
    skew: float | None = None


class SubtaskBackPressure(_Model):
    subtask: int
    attempt_number: int = Field(alias="attempt-number")
    backpressure_level: str = Field(alias="backpressure-level")
    ratio: float
    idleRatio: float
    busyRatio: float


class JobVertexBackPressure(_Model):
    status: str
    backpressure_level: str = Field(alias="backpressure-level", description="ok, low or high")
    end_timestamp: int = Field(alias="end-timestamp")
    subtasks: list[SubtaskBackPressure]


# ---------------------------------------------------------------------------- jobs
class SubmitResponse(_Model):
    jobUrl: str


class JobIdWithStatus(_Model):
    id: str
    status: str


class JobIdsWithStatus(_Model):
    jobs: list[JobIdWithStatus]


class JobOverview(_Model):
    jid: str
    name: str
    state: str
    start_time: int = Field(alias="start-time")
    end_time: int = Field(alias="end-time")
    duration: int
    tasks: dict[str, int]


class JobsOverview(_Model):
    jobs: list[JobOverview]


class IOMetrics(_Model):
    read_bytes: int = Field(alias="read-bytes")
    read_bytes_complete: bool = Field(alias="read-bytes-complete")
    write_bytes: int = Field(alias="write-bytes")
    write_bytes_complete: bool = Field(alias="write-bytes-complete")
    read_records: int = Field(alias="read-records")
    read_records_complete: bool = Field(alias="read-records-complete")
    write_records: int = Field(alias="write-records")
    write_records_complete: bool = Field(alias="write-records-complete")
    accumulated_backpressured_time: int = Field(alias="accumulated-backpressured-time")
    read_records_per_second: float = Field(alias="read-records-per-second", description="yarnflink")
    write_records_per_second: float = Field(alias="write-records-per-second", description="yarnflink")
    backpressured_time_ms_per_second: float = Field(
        alias="backpressured-time-ms-per-second", description="yarnflink: max over the subtasks"
    )
    backpressure_level: str = Field(alias="backpressure-level", description="yarnflink: ok, low or high")
    current_input_watermark: int = Field(alias="current-input-watermark", description="yarnflink")


class SubtaskDetails(_Model):
    subtask: int
    status: str
    attempt: int
    metrics: IOMetrics | None = None


class JobVertexDetails(_Model):
    id: str
    name: str
    parallelism: int
    status: str
    tasks: dict[str, int]
    operators: list[str] | None = None
    metrics: IOMetrics | None = None
    subtasks: list[SubtaskDetails] | None = None


class PlanInput(_Model):
    num: int
    id: str
    ship_strategy: str
    exchange: str


class PlanNode(_Model):
    id: str
    parallelism: int
    operator: str
    description: str
    inputs: list[PlanInput] | None = None


class Plan(_Model):
    jid: str
    name: str
    type: str
    nodes: list[PlanNode]


class JobPlan(_Model):
    plan: Plan


class JobDetails(_Model):
    jid: str
    name: str
    state: str
    start_time: int = Field(alias="start-time")
    end_time: int = Field(alias="end-time")
    duration: int
    now: int
    timestamps: dict[str, int]
    vertices: list[JobVertexDetails]
    status_counts: dict[str, int] = Field(alias="status-counts")
    plan: Plan | None = None


class VertexDetails(_Model):
    id: str
    name: str
    parallelism: int
    maxParallelism: int
    now: int
    subtasks: list[SubtaskDetails]


class ExceptionEntry(_Model):
    exceptionName: str
    stacktrace: str
    timestamp: int


class ExceptionHistory(_Model):
    entries: list[ExceptionEntry]
    truncated: bool


class JobExceptions(_Model):
    root_exception: str | None = Field(alias="root-exception")
    timestamp: int | None = None
    exceptionHistory: ExceptionHistory


class QueueStatus(_Model):
    id: str = Field(description="IN_PROGRESS or COMPLETED")


class JobExecutionResultBody(_Model):
    id: str
    application_status: str = Field(alias="application-status")
    net_runtime: int = Field(alias="net-runtime")
    accumulator_results: dict[str, Any] = Field(alias="accumulator-results")
    failure_cause: dict[str, Any] | None = Field(default=None, alias="failure-cause")


class JobExecutionResult(_Model):
    status: QueueStatus
    job_execution_result: JobExecutionResultBody | None = Field(default=None, alias="job-execution-result")


class CollectedResults(_Model):
    payloads: list[str]  # base64 Arrow IPC streams, in arrival order
    offset: int
    stale: bool
    done: bool


class CheckpointCounts(_Model):
    restored: int
    total: int
    in_progress: int
    completed: int
    failed: int


class LatestCheckpoints(_Model):
    completed: dict[str, Any] | None = None
    savepoint: dict[str, Any] | None = None
    failed: dict[str, Any] | None = None
    restored: dict[str, Any] | None = None


class CheckpointHistoryEntry(_Model):
    id: int
    status: str
    trigger_timestamp: int | None = None
    end_to_end_duration: int | None = None
    checkpointed_size: int | None = None
    state_size: int | None = None


class CheckpointingStatistics(_Model):
    counts: CheckpointCounts
    summary: dict[str, Any]
    latest: LatestCheckpoints
    history: list[CheckpointHistoryEntry]


class CheckpointDetails(_Model):
    """Flink's CheckpointStatistics of one checkpoint, with ``tasks`` (per vertex)."""

    id: int
    status: str
    trigger_timestamp: int | None = None
    latest_ack_timestamp: int | None = None
    end_to_end_duration: int | None = None
    checkpointed_size: int | None = None
    state_size: int | None = None
    num_subtasks: int | None = None
    num_acknowledged_subtasks: int | None = None
    tasks: dict[str, dict[str, Any]]


class TaskCheckpointDetails(_Model):
    """Flink's TaskCheckpointStatisticsWithSubtaskDetails: ``summary`` and ``subtasks``."""

    id: int
    status: str
    state_size: int
    checkpointed_size: int
    end_to_end_duration: int
    num_subtasks: int
    num_acknowledged_subtasks: int
    summary: dict[str, Any]
    subtasks: list[dict[str, Any]]


class ExecutionConfig(_Model):
    execution_mode: str = Field(alias="execution-mode")
    restart_strategy: str = Field(alias="restart-strategy")
    job_parallelism: int = Field(alias="job-parallelism")
    object_reuse_mode: bool = Field(alias="object-reuse-mode")
    user_config: dict[str, str] = Field(alias="user-config")


class JobConfig(_Model):
    jid: str
    name: str
    execution_config: ExecutionConfig = Field(alias="execution-config")


# ---------------------------------------------------------------------------- request bodies
JOB_GRAPH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A JobGraph as JSON (what yarnflink's client builds; see yarnflink.jobgraph). "
    'Also accepted wrapped as {"jobGraph": {...}}.',
    "required": ["jobId", "jobName", "vertices"],
    "properties": {
        "jobId": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
        "jobName": {"type": "string"},
        "runtimeMode": {"type": "string", "enum": ["STREAMING", "BATCH"]},
        "config": {"type": "object", "additionalProperties": {"type": "string"}},
        "vertices": {"type": "array", "minItems": 1, "items": {"type": "object"}},
        "datasets": {"type": "array", "items": {"type": "object"}},
        "edges": {"type": "array", "items": {"type": "object"}},
    },
}
