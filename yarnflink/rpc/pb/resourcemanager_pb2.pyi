from yarnflink.rpc.pb import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RegisterTaskExecutorRequest(_message.Message):
    __slots__ = ("resource_id", "rpc_address", "data_address", "num_slots", "default_slot_profile", "total_profile", "slot_report", "pid", "hostname")
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    RPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    DATA_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    NUM_SLOTS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_SLOT_PROFILE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_PROFILE_FIELD_NUMBER: _ClassVar[int]
    SLOT_REPORT_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    resource_id: str
    rpc_address: str
    data_address: str
    num_slots: int
    default_slot_profile: _common_pb2.ResourceProfile
    total_profile: _common_pb2.ResourceProfile
    slot_report: _common_pb2.SlotReport
    pid: int
    hostname: str
    def __init__(self, resource_id: _Optional[str] = ..., rpc_address: _Optional[str] = ..., data_address: _Optional[str] = ..., num_slots: _Optional[int] = ..., default_slot_profile: _Optional[_Union[_common_pb2.ResourceProfile, _Mapping]] = ..., total_profile: _Optional[_Union[_common_pb2.ResourceProfile, _Mapping]] = ..., slot_report: _Optional[_Union[_common_pb2.SlotReport, _Mapping]] = ..., pid: _Optional[int] = ..., hostname: _Optional[str] = ...) -> None: ...

class RegisterTaskExecutorResponse(_message.Message):
    __slots__ = ("registration_id", "fencing_token", "resource_manager_resource_id", "heartbeat_interval_ms", "heartbeat_timeout_ms")
    REGISTRATION_ID_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_MANAGER_RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    registration_id: str
    fencing_token: str
    resource_manager_resource_id: str
    heartbeat_interval_ms: int
    heartbeat_timeout_ms: int
    def __init__(self, registration_id: _Optional[str] = ..., fencing_token: _Optional[str] = ..., resource_manager_resource_id: _Optional[str] = ..., heartbeat_interval_ms: _Optional[int] = ..., heartbeat_timeout_ms: _Optional[int] = ...) -> None: ...

class NotifySlotAvailableRequest(_message.Message):
    __slots__ = ("fencing_token", "resource_id", "slot_index", "allocation_id", "slot_report_version")
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    SLOT_INDEX_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_ID_FIELD_NUMBER: _ClassVar[int]
    SLOT_REPORT_VERSION_FIELD_NUMBER: _ClassVar[int]
    fencing_token: str
    resource_id: str
    slot_index: int
    allocation_id: str
    slot_report_version: int
    def __init__(self, fencing_token: _Optional[str] = ..., resource_id: _Optional[str] = ..., slot_index: _Optional[int] = ..., allocation_id: _Optional[str] = ..., slot_report_version: _Optional[int] = ...) -> None: ...

class DisconnectTaskExecutorRequest(_message.Message):
    __slots__ = ("fencing_token", "resource_id", "cause")
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    fencing_token: str
    resource_id: str
    cause: str
    def __init__(self, fencing_token: _Optional[str] = ..., resource_id: _Optional[str] = ..., cause: _Optional[str] = ...) -> None: ...

class RegisterJobMasterRequest(_message.Message):
    __slots__ = ("job_id", "jobmaster_address", "jobmaster_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOBMASTER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    JOBMASTER_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    jobmaster_address: str
    jobmaster_id: str
    def __init__(self, job_id: _Optional[str] = ..., jobmaster_address: _Optional[str] = ..., jobmaster_id: _Optional[str] = ...) -> None: ...

class RegisterJobMasterResponse(_message.Message):
    __slots__ = ("fencing_token", "heartbeat_interval_ms", "heartbeat_timeout_ms", "heartbeat_rpc_failure_threshold")
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_RPC_FAILURE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    fencing_token: str
    heartbeat_interval_ms: int
    heartbeat_timeout_ms: int
    heartbeat_rpc_failure_threshold: int
    def __init__(self, fencing_token: _Optional[str] = ..., heartbeat_interval_ms: _Optional[int] = ..., heartbeat_timeout_ms: _Optional[int] = ..., heartbeat_rpc_failure_threshold: _Optional[int] = ...) -> None: ...

class ResourceRequirement(_message.Message):
    __slots__ = ("profile", "number_of_slots", "slot_sharing_group")
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    NUMBER_OF_SLOTS_FIELD_NUMBER: _ClassVar[int]
    SLOT_SHARING_GROUP_FIELD_NUMBER: _ClassVar[int]
    profile: _common_pb2.ResourceProfile
    number_of_slots: int
    slot_sharing_group: str
    def __init__(self, profile: _Optional[_Union[_common_pb2.ResourceProfile, _Mapping]] = ..., number_of_slots: _Optional[int] = ..., slot_sharing_group: _Optional[str] = ...) -> None: ...

class DeclareRequiredResourcesRequest(_message.Message):
    __slots__ = ("fencing_token", "job_id", "jobmaster_address", "requirements", "jobmaster_id")
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOBMASTER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    REQUIREMENTS_FIELD_NUMBER: _ClassVar[int]
    JOBMASTER_ID_FIELD_NUMBER: _ClassVar[int]
    fencing_token: str
    job_id: str
    jobmaster_address: str
    requirements: _containers.RepeatedCompositeFieldContainer[ResourceRequirement]
    jobmaster_id: str
    def __init__(self, fencing_token: _Optional[str] = ..., job_id: _Optional[str] = ..., jobmaster_address: _Optional[str] = ..., requirements: _Optional[_Iterable[_Union[ResourceRequirement, _Mapping]]] = ..., jobmaster_id: _Optional[str] = ...) -> None: ...

class DisconnectJobMasterRequest(_message.Message):
    __slots__ = ("fencing_token", "job_id", "cause")
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    fencing_token: str
    job_id: str
    cause: str
    def __init__(self, fencing_token: _Optional[str] = ..., job_id: _Optional[str] = ..., cause: _Optional[str] = ...) -> None: ...

class JobMasterHeartbeat(_message.Message):
    __slots__ = ("fencing_token", "job_id", "jobmaster_id")
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOBMASTER_ID_FIELD_NUMBER: _ClassVar[int]
    fencing_token: str
    job_id: str
    jobmaster_id: str
    def __init__(self, fencing_token: _Optional[str] = ..., job_id: _Optional[str] = ..., jobmaster_id: _Optional[str] = ...) -> None: ...

class JobMasterHeartbeatResponse(_message.Message):
    __slots__ = ("known",)
    KNOWN_FIELD_NUMBER: _ClassVar[int]
    known: bool
    def __init__(self, known: _Optional[bool] = ...) -> None: ...
