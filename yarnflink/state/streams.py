"""Where snapshots write their bytes: the ``CheckpointStreamFactory`` seam.

State backends never open files themselves. A snapshot's background part hands its serialized
bytes to a stream factory, which returns a handle: ``yarnflink.checkpoint.storage`` provides the
file system one (fsspec/pyarrow: ``file://``, ``s3://``, ``hdfs://``, with small state inline);
``InlineStreamFactory`` keeps everything inline (tests, and jobs without checkpoint storage).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from yarnflink.state.handles import ByteStreamStateHandle, StreamStateHandle

#: Scopes of Flink's checkpoint directory layout: ``chk-<n>/`` (exclusive to one checkpoint),
#: ``shared/`` (may be referenced by several checkpoints), ``taskowned/`` (owned by the task).
EXCLUSIVE, SHARED, TASKOWNED = "exclusive", "shared", "taskowned"


class CheckpointStreamFactory(Protocol):
    def write_state(self, data: bytes, name: str, scope: str = EXCLUSIVE) -> StreamStateHandle: ...


class InlineStreamFactory:
    """Every state inline (a ByteStreamStateHandle)."""

    def write_state(self, data: bytes, name: str, scope: str = EXCLUSIVE) -> StreamStateHandle:
        return ByteStreamStateHandle(name, bytes(data))


StateReader = Callable[[StreamStateHandle], bytes]


def read_inline(handle: StreamStateHandle) -> bytes:
    """The default reader: inline handles only (file handles need checkpoint storage)."""
    if isinstance(handle, ByteStreamStateHandle):
        return handle.data
    raise ValueError(
        f"state handle {handle!r} refers to a file; restoring it needs a reader from checkpoint "
        f"storage (yarnflink.checkpoint.storage.read_stream_handle)"
    )
