from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Ack(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ResourceProfile(_message.Message):
    __slots__ = ("cpu_cores", "task_heap_mb", "managed_memory_mb", "task_off_heap_mb")
    CPU_CORES_FIELD_NUMBER: _ClassVar[int]
    TASK_HEAP_MB_FIELD_NUMBER: _ClassVar[int]
    MANAGED_MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    TASK_OFF_HEAP_MB_FIELD_NUMBER: _ClassVar[int]
    cpu_cores: float
    task_heap_mb: int
    managed_memory_mb: int
    task_off_heap_mb: int
    def __init__(self, cpu_cores: _Optional[float] = ..., task_heap_mb: _Optional[int] = ..., managed_memory_mb: _Optional[int] = ..., task_off_heap_mb: _Optional[int] = ...) -> None: ...

class SlotStatus(_message.Message):
    __slots__ = ("slot_index", "profile", "allocation_id", "job_id")
    SLOT_INDEX_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    slot_index: int
    profile: ResourceProfile
    allocation_id: str
    job_id: str
    def __init__(self, slot_index: _Optional[int] = ..., profile: _Optional[_Union[ResourceProfile, _Mapping]] = ..., allocation_id: _Optional[str] = ..., job_id: _Optional[str] = ...) -> None: ...

class SlotReport(_message.Message):
    __slots__ = ("slots", "version")
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    slots: _containers.RepeatedCompositeFieldContainer[SlotStatus]
    version: int
    def __init__(self, slots: _Optional[_Iterable[_Union[SlotStatus, _Mapping]]] = ..., version: _Optional[int] = ...) -> None: ...

class SerializedThrowable(_message.Message):
    __slots__ = ("exception_class", "message", "traceback")
    EXCEPTION_CLASS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TRACEBACK_FIELD_NUMBER: _ClassVar[int]
    exception_class: str
    message: str
    traceback: str
    def __init__(self, exception_class: _Optional[str] = ..., message: _Optional[str] = ..., traceback: _Optional[str] = ...) -> None: ...
