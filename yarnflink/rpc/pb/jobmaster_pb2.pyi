from yarnflink.rpc.pb import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RegisterTaskManagerRequest(_message.Message):
    __slots__ = ("jobmaster_id", "job_id", "resource_id", "rpc_address", "data_address")
    JOBMASTER_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    RPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    DATA_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    jobmaster_id: str
    job_id: str
    resource_id: str
    rpc_address: str
    data_address: str
    def __init__(self, jobmaster_id: _Optional[str] = ..., job_id: _Optional[str] = ..., resource_id: _Optional[str] = ..., rpc_address: _Optional[str] = ..., data_address: _Optional[str] = ...) -> None: ...

class SlotOffer(_message.Message):
    __slots__ = ("allocation_id", "slot_index", "profile")
    ALLOCATION_ID_FIELD_NUMBER: _ClassVar[int]
    SLOT_INDEX_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    allocation_id: str
    slot_index: int
    profile: _common_pb2.ResourceProfile
    def __init__(self, allocation_id: _Optional[str] = ..., slot_index: _Optional[int] = ..., profile: _Optional[_Union[_common_pb2.ResourceProfile, _Mapping]] = ...) -> None: ...

class OfferSlotsRequest(_message.Message):
    __slots__ = ("jobmaster_id", "resource_id", "offers")
    JOBMASTER_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFERS_FIELD_NUMBER: _ClassVar[int]
    jobmaster_id: str
    resource_id: str
    offers: _containers.RepeatedCompositeFieldContainer[SlotOffer]
    def __init__(self, jobmaster_id: _Optional[str] = ..., resource_id: _Optional[str] = ..., offers: _Optional[_Iterable[_Union[SlotOffer, _Mapping]]] = ...) -> None: ...

class OfferSlotsResponse(_message.Message):
    __slots__ = ("accepted_allocation_ids",)
    ACCEPTED_ALLOCATION_IDS_FIELD_NUMBER: _ClassVar[int]
    accepted_allocation_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, accepted_allocation_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class TaskExecutionState(_message.Message):
    __slots__ = ("jobmaster_id", "execution_id", "state", "error", "io_metrics", "failed_partition_id")
    class IoMetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    JOBMASTER_ID_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    IO_METRICS_FIELD_NUMBER: _ClassVar[int]
    FAILED_PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    jobmaster_id: str
    execution_id: str
    state: str
    error: _common_pb2.SerializedThrowable
    io_metrics: _containers.ScalarMap[str, float]
    failed_partition_id: str
    def __init__(self, jobmaster_id: _Optional[str] = ..., execution_id: _Optional[str] = ..., state: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.SerializedThrowable, _Mapping]] = ..., io_metrics: _Optional[_Mapping[str, float]] = ..., failed_partition_id: _Optional[str] = ...) -> None: ...

class CheckpointMetrics(_message.Message):
    __slots__ = ("sync_ms", "async_ms", "alignment_ms", "start_delay_ms", "state_size", "checkpointed_size", "persisted_data", "unaligned")
    SYNC_MS_FIELD_NUMBER: _ClassVar[int]
    ASYNC_MS_FIELD_NUMBER: _ClassVar[int]
    ALIGNMENT_MS_FIELD_NUMBER: _ClassVar[int]
    START_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    STATE_SIZE_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINTED_SIZE_FIELD_NUMBER: _ClassVar[int]
    PERSISTED_DATA_FIELD_NUMBER: _ClassVar[int]
    UNALIGNED_FIELD_NUMBER: _ClassVar[int]
    sync_ms: float
    async_ms: float
    alignment_ms: float
    start_delay_ms: float
    state_size: int
    checkpointed_size: int
    persisted_data: int
    unaligned: bool
    def __init__(self, sync_ms: _Optional[float] = ..., async_ms: _Optional[float] = ..., alignment_ms: _Optional[float] = ..., start_delay_ms: _Optional[float] = ..., state_size: _Optional[int] = ..., checkpointed_size: _Optional[int] = ..., persisted_data: _Optional[int] = ..., unaligned: _Optional[bool] = ...) -> None: ...

class AcknowledgeCheckpointRequest(_message.Message):
    __slots__ = ("jobmaster_id", "execution_id", "checkpoint_id", "attempt_number", "subtask_state", "metrics")
    JOBMASTER_ID_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_NUMBER_FIELD_NUMBER: _ClassVar[int]
    SUBTASK_STATE_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    jobmaster_id: str
    execution_id: str
    checkpoint_id: int
    attempt_number: int
    subtask_state: bytes
    metrics: CheckpointMetrics
    def __init__(self, jobmaster_id: _Optional[str] = ..., execution_id: _Optional[str] = ..., checkpoint_id: _Optional[int] = ..., attempt_number: _Optional[int] = ..., subtask_state: _Optional[bytes] = ..., metrics: _Optional[_Union[CheckpointMetrics, _Mapping]] = ...) -> None: ...

class DeclineCheckpointRequest(_message.Message):
    __slots__ = ("jobmaster_id", "execution_id", "checkpoint_id", "attempt_number", "reason")
    JOBMASTER_ID_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_NUMBER_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    jobmaster_id: str
    execution_id: str
    checkpoint_id: int
    attempt_number: int
    reason: str
    def __init__(self, jobmaster_id: _Optional[str] = ..., execution_id: _Optional[str] = ..., checkpoint_id: _Optional[int] = ..., attempt_number: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class CoordinationData(_message.Message):
    __slots__ = ("jobmaster_id", "execution_id", "kind", "payload")
    JOBMASTER_ID_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    jobmaster_id: str
    execution_id: str
    kind: str
    payload: bytes
    def __init__(self, jobmaster_id: _Optional[str] = ..., execution_id: _Optional[str] = ..., kind: _Optional[str] = ..., payload: _Optional[bytes] = ...) -> None: ...

class TaskManagerHeartbeat(_message.Message):
    __slots__ = ("jobmaster_id", "resource_id", "running_execution_ids")
    JOBMASTER_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    RUNNING_EXECUTION_IDS_FIELD_NUMBER: _ClassVar[int]
    jobmaster_id: str
    resource_id: str
    running_execution_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, jobmaster_id: _Optional[str] = ..., resource_id: _Optional[str] = ..., running_execution_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class DisconnectTaskManagerRequest(_message.Message):
    __slots__ = ("jobmaster_id", "resource_id", "cause")
    JOBMASTER_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    jobmaster_id: str
    resource_id: str
    cause: str
    def __init__(self, jobmaster_id: _Optional[str] = ..., resource_id: _Optional[str] = ..., cause: _Optional[str] = ...) -> None: ...

class ReportedTask(_message.Message):
    __slots__ = ("execution_id", "vertex_id", "subtask_index", "attempt_number", "state", "allocation_id", "error", "failed_partition_id")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    VERTEX_ID_FIELD_NUMBER: _ClassVar[int]
    SUBTASK_INDEX_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_NUMBER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FAILED_PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    vertex_id: str
    subtask_index: int
    attempt_number: int
    state: str
    allocation_id: str
    error: _common_pb2.SerializedThrowable
    failed_partition_id: str
    def __init__(self, execution_id: _Optional[str] = ..., vertex_id: _Optional[str] = ..., subtask_index: _Optional[int] = ..., attempt_number: _Optional[int] = ..., state: _Optional[str] = ..., allocation_id: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.SerializedThrowable, _Mapping]] = ..., failed_partition_id: _Optional[str] = ...) -> None: ...

class ReconnectTaskManagerRequest(_message.Message):
    __slots__ = ("jobmaster_id", "job_id", "resource_id", "rpc_address", "data_address", "slots", "tasks")
    JOBMASTER_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    RPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    DATA_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    jobmaster_id: str
    job_id: str
    resource_id: str
    rpc_address: str
    data_address: str
    slots: _containers.RepeatedCompositeFieldContainer[SlotOffer]
    tasks: _containers.RepeatedCompositeFieldContainer[ReportedTask]
    def __init__(self, jobmaster_id: _Optional[str] = ..., job_id: _Optional[str] = ..., resource_id: _Optional[str] = ..., rpc_address: _Optional[str] = ..., data_address: _Optional[str] = ..., slots: _Optional[_Iterable[_Union[SlotOffer, _Mapping]]] = ..., tasks: _Optional[_Iterable[_Union[ReportedTask, _Mapping]]] = ...) -> None: ...
