from yarnflink.rpc.pb import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CheckpointRequest(_message.Message):
    __slots__ = ("jobmaster_id", "execution_id", "checkpoint_id", "timestamp", "is_savepoint", "synchronous", "drain")
    JOBMASTER_ID_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    IS_SAVEPOINT_FIELD_NUMBER: _ClassVar[int]
    SYNCHRONOUS_FIELD_NUMBER: _ClassVar[int]
    DRAIN_FIELD_NUMBER: _ClassVar[int]
    jobmaster_id: str
    execution_id: str
    checkpoint_id: int
    timestamp: int
    is_savepoint: bool
    synchronous: bool
    drain: bool
    def __init__(self, jobmaster_id: _Optional[str] = ..., execution_id: _Optional[str] = ..., checkpoint_id: _Optional[int] = ..., timestamp: _Optional[int] = ..., is_savepoint: _Optional[bool] = ..., synchronous: _Optional[bool] = ..., drain: _Optional[bool] = ...) -> None: ...

class CheckpointNotification(_message.Message):
    __slots__ = ("jobmaster_id", "execution_id", "checkpoint_id", "completed")
    JOBMASTER_ID_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    jobmaster_id: str
    execution_id: str
    checkpoint_id: int
    completed: bool
    def __init__(self, jobmaster_id: _Optional[str] = ..., execution_id: _Optional[str] = ..., checkpoint_id: _Optional[int] = ..., completed: _Optional[bool] = ...) -> None: ...

class RequestSlotRequest(_message.Message):
    __slots__ = ("resource_manager_token", "slot_index", "job_id", "allocation_id", "profile", "jobmaster_address", "jobmaster_id")
    RESOURCE_MANAGER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SLOT_INDEX_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_ID_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    JOBMASTER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    JOBMASTER_ID_FIELD_NUMBER: _ClassVar[int]
    resource_manager_token: str
    slot_index: int
    job_id: str
    allocation_id: str
    profile: _common_pb2.ResourceProfile
    jobmaster_address: str
    jobmaster_id: str
    def __init__(self, resource_manager_token: _Optional[str] = ..., slot_index: _Optional[int] = ..., job_id: _Optional[str] = ..., allocation_id: _Optional[str] = ..., profile: _Optional[_Union[_common_pb2.ResourceProfile, _Mapping]] = ..., jobmaster_address: _Optional[str] = ..., jobmaster_id: _Optional[str] = ...) -> None: ...

class RequestSlotResponse(_message.Message):
    __slots__ = ("slot_index", "slot_report_version")
    SLOT_INDEX_FIELD_NUMBER: _ClassVar[int]
    SLOT_REPORT_VERSION_FIELD_NUMBER: _ClassVar[int]
    slot_index: int
    slot_report_version: int
    def __init__(self, slot_index: _Optional[int] = ..., slot_report_version: _Optional[int] = ...) -> None: ...

class ResourceManagerHeartbeat(_message.Message):
    __slots__ = ("resource_manager_token",)
    RESOURCE_MANAGER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    resource_manager_token: str
    def __init__(self, resource_manager_token: _Optional[str] = ...) -> None: ...

class ResourceManagerHeartbeatResponse(_message.Message):
    __slots__ = ("slot_report",)
    SLOT_REPORT_FIELD_NUMBER: _ClassVar[int]
    slot_report: _common_pb2.SlotReport
    def __init__(self, slot_report: _Optional[_Union[_common_pb2.SlotReport, _Mapping]] = ...) -> None: ...

class InputChannelDescriptor(_message.Message):
    __slots__ = ("partition_id", "subpartition", "producer_data_address")
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    SUBPARTITION_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_DATA_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    partition_id: str
    subpartition: int
    producer_data_address: str
    def __init__(self, partition_id: _Optional[str] = ..., subpartition: _Optional[int] = ..., producer_data_address: _Optional[str] = ...) -> None: ...

class InputGateDescriptor(_message.Message):
    __slots__ = ("dataset_id", "partitioning", "channels")
    DATASET_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONING_FIELD_NUMBER: _ClassVar[int]
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    dataset_id: str
    partitioning: str
    channels: _containers.RepeatedCompositeFieldContainer[InputChannelDescriptor]
    def __init__(self, dataset_id: _Optional[str] = ..., partitioning: _Optional[str] = ..., channels: _Optional[_Iterable[_Union[InputChannelDescriptor, _Mapping]]] = ...) -> None: ...

class ResultPartitionDescriptor(_message.Message):
    __slots__ = ("dataset_id", "partition_id", "num_subpartitions", "partitioning", "key_selector", "consumer_vertex_id", "result_type")
    DATASET_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    NUM_SUBPARTITIONS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONING_FIELD_NUMBER: _ClassVar[int]
    KEY_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_VERTEX_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_TYPE_FIELD_NUMBER: _ClassVar[int]
    dataset_id: str
    partition_id: str
    num_subpartitions: int
    partitioning: str
    key_selector: bytes
    consumer_vertex_id: str
    result_type: str
    def __init__(self, dataset_id: _Optional[str] = ..., partition_id: _Optional[str] = ..., num_subpartitions: _Optional[int] = ..., partitioning: _Optional[str] = ..., key_selector: _Optional[bytes] = ..., consumer_vertex_id: _Optional[str] = ..., result_type: _Optional[str] = ...) -> None: ...

class ChainedOperator(_message.Message):
    __slots__ = ("node_id", "name", "kind", "uid", "spec", "chained_outputs", "output_datasets")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    CHAINED_OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_DATASETS_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    name: str
    kind: str
    uid: str
    spec: bytes
    chained_outputs: _containers.RepeatedScalarFieldContainer[int]
    output_datasets: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, node_id: _Optional[int] = ..., name: _Optional[str] = ..., kind: _Optional[str] = ..., uid: _Optional[str] = ..., spec: _Optional[bytes] = ..., chained_outputs: _Optional[_Iterable[int]] = ..., output_datasets: _Optional[_Iterable[str]] = ...) -> None: ...

class TaskDeploymentDescriptor(_message.Message):
    __slots__ = ("job_id", "job_name", "vertex_id", "task_name", "execution_id", "subtask_index", "parallelism", "max_parallelism", "attempt_number", "allocation_id", "operators", "produced_partitions", "input_gates", "runtime_mode", "job_config", "task_state", "restored_checkpoint_id")
    class JobConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    VERTEX_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_NAME_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    SUBTASK_INDEX_FIELD_NUMBER: _ClassVar[int]
    PARALLELISM_FIELD_NUMBER: _ClassVar[int]
    MAX_PARALLELISM_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_NUMBER_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_ID_FIELD_NUMBER: _ClassVar[int]
    OPERATORS_FIELD_NUMBER: _ClassVar[int]
    PRODUCED_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    INPUT_GATES_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_MODE_FIELD_NUMBER: _ClassVar[int]
    JOB_CONFIG_FIELD_NUMBER: _ClassVar[int]
    TASK_STATE_FIELD_NUMBER: _ClassVar[int]
    RESTORED_CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_name: str
    vertex_id: str
    task_name: str
    execution_id: str
    subtask_index: int
    parallelism: int
    max_parallelism: int
    attempt_number: int
    allocation_id: str
    operators: _containers.RepeatedCompositeFieldContainer[ChainedOperator]
    produced_partitions: _containers.RepeatedCompositeFieldContainer[ResultPartitionDescriptor]
    input_gates: _containers.RepeatedCompositeFieldContainer[InputGateDescriptor]
    runtime_mode: str
    job_config: _containers.ScalarMap[str, str]
    task_state: bytes
    restored_checkpoint_id: int
    def __init__(self, job_id: _Optional[str] = ..., job_name: _Optional[str] = ..., vertex_id: _Optional[str] = ..., task_name: _Optional[str] = ..., execution_id: _Optional[str] = ..., subtask_index: _Optional[int] = ..., parallelism: _Optional[int] = ..., max_parallelism: _Optional[int] = ..., attempt_number: _Optional[int] = ..., allocation_id: _Optional[str] = ..., operators: _Optional[_Iterable[_Union[ChainedOperator, _Mapping]]] = ..., produced_partitions: _Optional[_Iterable[_Union[ResultPartitionDescriptor, _Mapping]]] = ..., input_gates: _Optional[_Iterable[_Union[InputGateDescriptor, _Mapping]]] = ..., runtime_mode: _Optional[str] = ..., job_config: _Optional[_Mapping[str, str]] = ..., task_state: _Optional[bytes] = ..., restored_checkpoint_id: _Optional[int] = ...) -> None: ...

class SubmitTaskRequest(_message.Message):
    __slots__ = ("jobmaster_id", "tdd")
    JOBMASTER_ID_FIELD_NUMBER: _ClassVar[int]
    TDD_FIELD_NUMBER: _ClassVar[int]
    jobmaster_id: str
    tdd: TaskDeploymentDescriptor
    def __init__(self, jobmaster_id: _Optional[str] = ..., tdd: _Optional[_Union[TaskDeploymentDescriptor, _Mapping]] = ...) -> None: ...

class CancelTaskRequest(_message.Message):
    __slots__ = ("jobmaster_id", "execution_id")
    JOBMASTER_ID_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    jobmaster_id: str
    execution_id: str
    def __init__(self, jobmaster_id: _Optional[str] = ..., execution_id: _Optional[str] = ...) -> None: ...

class FreeSlotRequest(_message.Message):
    __slots__ = ("allocation_id", "cause", "jobmaster_id")
    ALLOCATION_ID_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    JOBMASTER_ID_FIELD_NUMBER: _ClassVar[int]
    allocation_id: str
    cause: str
    jobmaster_id: str
    def __init__(self, allocation_id: _Optional[str] = ..., cause: _Optional[str] = ..., jobmaster_id: _Optional[str] = ...) -> None: ...

class ReleasePartitionsRequest(_message.Message):
    __slots__ = ("job_id", "partition_ids", "jobmaster_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_IDS_FIELD_NUMBER: _ClassVar[int]
    JOBMASTER_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    partition_ids: _containers.RepeatedScalarFieldContainer[str]
    jobmaster_id: str
    def __init__(self, job_id: _Optional[str] = ..., partition_ids: _Optional[_Iterable[str]] = ..., jobmaster_id: _Optional[str] = ...) -> None: ...

class DisconnectJobManagerRequest(_message.Message):
    __slots__ = ("job_id", "cause", "jobmaster_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    JOBMASTER_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    cause: str
    jobmaster_id: str
    def __init__(self, job_id: _Optional[str] = ..., cause: _Optional[str] = ..., jobmaster_id: _Optional[str] = ...) -> None: ...

class TaskExecutorInfoRequest(_message.Message):
    __slots__ = ("include_metrics", "log_name", "log_max_bytes")
    INCLUDE_METRICS_FIELD_NUMBER: _ClassVar[int]
    LOG_NAME_FIELD_NUMBER: _ClassVar[int]
    LOG_MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    include_metrics: bool
    log_name: str
    log_max_bytes: int
    def __init__(self, include_metrics: _Optional[bool] = ..., log_name: _Optional[str] = ..., log_max_bytes: _Optional[int] = ...) -> None: ...

class TaskInfo(_message.Message):
    __slots__ = ("execution_id", "job_id", "task_name", "subtask_index", "state", "slot_index", "allocation_id", "vertex_id", "attempt_number")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_NAME_FIELD_NUMBER: _ClassVar[int]
    SUBTASK_INDEX_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SLOT_INDEX_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_ID_FIELD_NUMBER: _ClassVar[int]
    VERTEX_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_NUMBER_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    job_id: str
    task_name: str
    subtask_index: int
    state: str
    slot_index: int
    allocation_id: str
    vertex_id: str
    attempt_number: int
    def __init__(self, execution_id: _Optional[str] = ..., job_id: _Optional[str] = ..., task_name: _Optional[str] = ..., subtask_index: _Optional[int] = ..., state: _Optional[str] = ..., slot_index: _Optional[int] = ..., allocation_id: _Optional[str] = ..., vertex_id: _Optional[str] = ..., attempt_number: _Optional[int] = ...) -> None: ...

class TaskExecutorInfo(_message.Message):
    __slots__ = ("resource_id", "slot_report", "tasks", "rss_bytes", "network_memory_in_use", "task_metrics", "process_metrics", "log_files", "log_content", "log_truncated", "metric_reporter_address")
    class ProcessMetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    SLOT_REPORT_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    NETWORK_MEMORY_IN_USE_FIELD_NUMBER: _ClassVar[int]
    TASK_METRICS_FIELD_NUMBER: _ClassVar[int]
    PROCESS_METRICS_FIELD_NUMBER: _ClassVar[int]
    LOG_FILES_FIELD_NUMBER: _ClassVar[int]
    LOG_CONTENT_FIELD_NUMBER: _ClassVar[int]
    LOG_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    METRIC_REPORTER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    resource_id: str
    slot_report: _common_pb2.SlotReport
    tasks: _containers.RepeatedCompositeFieldContainer[TaskInfo]
    rss_bytes: int
    network_memory_in_use: int
    task_metrics: _containers.RepeatedCompositeFieldContainer[TaskMetrics]
    process_metrics: _containers.ScalarMap[str, float]
    log_files: _containers.RepeatedCompositeFieldContainer[LogFileInfo]
    log_content: bytes
    log_truncated: bool
    metric_reporter_address: str
    def __init__(self, resource_id: _Optional[str] = ..., slot_report: _Optional[_Union[_common_pb2.SlotReport, _Mapping]] = ..., tasks: _Optional[_Iterable[_Union[TaskInfo, _Mapping]]] = ..., rss_bytes: _Optional[int] = ..., network_memory_in_use: _Optional[int] = ..., task_metrics: _Optional[_Iterable[_Union[TaskMetrics, _Mapping]]] = ..., process_metrics: _Optional[_Mapping[str, float]] = ..., log_files: _Optional[_Iterable[_Union[LogFileInfo, _Mapping]]] = ..., log_content: _Optional[bytes] = ..., log_truncated: _Optional[bool] = ..., metric_reporter_address: _Optional[str] = ...) -> None: ...

class TaskMetrics(_message.Message):
    __slots__ = ("execution_id", "job_id", "vertex_id", "subtask_index", "attempt_number", "task_name", "metrics")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    VERTEX_ID_FIELD_NUMBER: _ClassVar[int]
    SUBTASK_INDEX_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_NUMBER_FIELD_NUMBER: _ClassVar[int]
    TASK_NAME_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    job_id: str
    vertex_id: str
    subtask_index: int
    attempt_number: int
    task_name: str
    metrics: _containers.ScalarMap[str, float]
    def __init__(self, execution_id: _Optional[str] = ..., job_id: _Optional[str] = ..., vertex_id: _Optional[str] = ..., subtask_index: _Optional[int] = ..., attempt_number: _Optional[int] = ..., task_name: _Optional[str] = ..., metrics: _Optional[_Mapping[str, float]] = ...) -> None: ...

class LogFileInfo(_message.Message):
    __slots__ = ("name", "size", "mtime_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    MTIME_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    size: int
    mtime_ms: int
    def __init__(self, name: _Optional[str] = ..., size: _Optional[int] = ..., mtime_ms: _Optional[int] = ...) -> None: ...
