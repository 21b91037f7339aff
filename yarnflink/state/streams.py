"""Where snapshots write their bytes: the ``CheckpointStreamFactory`` seam.

State backends never open files themselves. A snapshot's background part hands its serialized
bytes to a stream factory, which returns a handle: ``yarnflink.checkpoint.storage`` provides the
file system one (fsspec/pyarrow: ``file://``, ``s3://``, ``hdfs://``, with small state inline);
``InlineStreamFactory`` keeps everything inline (tests, and jobs without checkpoint storage).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any, Protocol, Union, cast

from yarnflink.state.handles import (
    CONTENT_HASH,
    ByteStreamStateHandle,
    KeyGroupRange,
    SharedFileHandle,
    StreamStateHandle,
)

#: Scopes of Flink's checkpoint directory layout: ``chk-<n>/`` (exclusive to one checkpoint),
#: ``shared/`` (may be referenced by several checkpoints), ``taskowned/`` (owned by the task).
EXCLUSIVE, SHARED, TASKOWNED = "exclusive", "shared", "taskowned"


class CheckpointStreamFactory(Protocol):
    def write_state(self, data: bytes, name: str, scope: str = EXCLUSIVE) -> StreamStateHandle: ...


class SharedStateStreamFactory(Protocol):
    """A stream factory that can also write shared state files (incremental checkpoints to
    checkpoint storage; ``supports_shared_state`` tells whether a factory is one)."""

    shared_state: bool

    def write_state(self, data: bytes, name: str, scope: str = EXCLUSIVE) -> StreamStateHandle: ...

    def write_shared(self, data: Any, name: str, key_group_range: KeyGroupRange, kind: str) -> SharedFileHandle: ...


def supports_shared_state(factory: object) -> bool:
    """Whether a snapshot written to ``factory`` may write shared files and refer to earlier ones:
    a checkpoint (not a savepoint: those are self-contained) to file system storage."""
    return bool(getattr(factory, "shared_state", False)) and callable(getattr(factory, "write_shared", None))


def content_hash(pieces: Iterable[Any]) -> str:
    """``sha256:<hex>`` of the bytes of ``pieces`` (buffers, one after the other; hashlib lets go
    of the GIL while it hashes a large one)."""
    h = hashlib.new(CONTENT_HASH)
    for p in pieces:
        h.update(p)
    return f"{CONTENT_HASH}:{h.hexdigest()}"


class InlineStreamFactory:
    """Every state inline (a ByteStreamStateHandle)."""

    def write_state(self, data: bytes, name: str, scope: str = EXCLUSIVE) -> StreamStateHandle:
        return ByteStreamStateHandle(name, bytes(data))


StateReader = Callable[[Union[StreamStateHandle, SharedFileHandle]], bytes]


def file_content_hash(path: str, chunk_bytes: int = 4 << 20) -> str:
    """``content_hash`` of a local file, read in pieces."""
    h = hashlib.new(CONTENT_HASH)
    with open(path, "rb") as f:
        while chunk := f.read(chunk_bytes):
            h.update(chunk)
    return f"{CONTENT_HASH}:{h.hexdigest()}"


def write_state_file(factory: Any, local_path: str, name: str, scope: str = EXCLUSIVE) -> StreamStateHandle:
    """The local file ``local_path`` as a state file of ``factory``: its ``write_state_file`` if
    it has one (checkpoint storage copies the file without reading it into the process), else
    the file memory-mapped to ``write_state``."""
    fn = getattr(factory, "write_state_file", None)
    if fn is not None:
        return cast(StreamStateHandle, fn(local_path, name, scope))
    import pyarrow as pa  # deferred: only a factory without write_state_file needs it

    with pa.memory_map(local_path) as mapped:
        return cast(StreamStateHandle, factory.write_state(mapped.read_buffer(), name, scope))


def write_shared_file(
    factory: Any, local_path: str, name: str, key_group_range: KeyGroupRange, kind: str
) -> SharedFileHandle:
    """``write_state_file`` for a shared file (``write_shared_file``, else ``write_shared``)."""
    fn = getattr(factory, "write_shared_file", None)
    if fn is not None:
        return cast(SharedFileHandle, fn(local_path, name, key_group_range, kind))
    import pyarrow as pa

    with pa.memory_map(local_path) as mapped:
        return cast(SharedFileHandle, factory.write_shared(mapped.read_buffer(), name, key_group_range, kind))


def download(read: StateReader, handle: StreamStateHandle | SharedFileHandle, dest: str) -> None:
    """``handle``'s bytes into the local file ``dest``: through the reader's ``copy_to`` (piece
    by piece; checkpoint storage's reader has it), else read whole and written."""
    copy_to = getattr(read, "copy_to", None)
    if copy_to is not None:
        copy_to(handle, dest)
        return
    with open(dest, "wb") as f:
        f.write(read(handle))


def read_inline(handle: StreamStateHandle | SharedFileHandle) -> bytes:
    """The default reader: inline handles only (file handles need checkpoint storage)."""
    if isinstance(handle, ByteStreamStateHandle):
        return handle.data
    raise ValueError(
        f"state handle {handle!r} refers to a file; restoring it needs a reader from checkpoint "
        f"storage (yarnflink.checkpoint.storage.read_stream_handle)"
    )
