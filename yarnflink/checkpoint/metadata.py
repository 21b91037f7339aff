"""CompletedCheckpoint and the ``_metadata`` file format (pure: no I/O).

``_metadata`` = 4-byte magic ``YFCK``, 2-byte format version, 4-byte CRC32 of the payload, 8-byte
payload length (all big-endian), then the payload: UTF-8 JSON of the checkpoint (state handles,
small state inline as base64). A truncated or altered file fails the length or CRC check and is
reported as corrupted; a file from another format version is refused.
"""

from __future__ import annotations

import json
import posixpath
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from yarnflink.state.handles import (
    FileStateHandle,
    IncrementalKeyedStateHandle,
    InputChannelStateHandle,
    KeyedStateHandle,
    KeyGroupsStateHandle,
    OperatorStateHandle,
    OperatorSubtaskState,
    SharedFileHandle,
    StreamStateHandle,
)

MAGIC = b"YFCK"
VERSION = 1
_HEADER = struct.Struct(">4sHIQ")
METADATA_FILE_NAME = "_metadata"


class CheckpointMetadataError(Exception):
    """A ``_metadata`` file is missing, corrupted or does not fit the job; the message names the
    path and the problem."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"checkpoint metadata {path}: {problem}")
        self.path = path
        self.problem = problem


@dataclass
class OperatorState:
    """The state of one operator (all subtasks) in a checkpoint (Flink's ``OperatorState``)."""

    operator_id: str
    parallelism: int
    max_parallelism: int
    subtask_states: dict[int, OperatorSubtaskState] = field(default_factory=dict)

    @property
    def state_size(self) -> int:
        return sum(s.state_size for s in self.subtask_states.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "operator_id": self.operator_id,
            "parallelism": self.parallelism,
            "max_parallelism": self.max_parallelism,
            "subtasks": {str(i): s.to_json() for i, s in sorted(self.subtask_states.items())},
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> OperatorState:
        return OperatorState(
            str(d["operator_id"]),
            int(d["parallelism"]),
            int(d["max_parallelism"]),
            {int(i): OperatorSubtaskState.from_json(s) for i, s in d.get("subtasks", {}).items()},
        )


@dataclass
class CompletedCheckpoint:
    job_id: str
    checkpoint_id: int
    timestamp: int
    operator_states: dict[str, OperatorState] = field(default_factory=dict)
    is_savepoint: bool = False
    completion_timestamp: int = 0
    #: where it is stored (the ``chk-<n>`` directory or the savepoint directory); set on write
    external_pointer: str | None = None

    @property
    def state_size(self) -> int:
        return sum(o.state_size for o in self.operator_states.values())

    def stream_handles(self) -> list[StreamStateHandle]:
        """The files that belong to this checkpoint alone (deleted with it)."""
        return [h for o in self.operator_states.values() for s in o.subtask_states.values() for h in s.stream_handles()]

    def shared_handles(self) -> list[SharedFileHandle]:
        """The shared files it refers to (incremental checkpoints; the ``SharedStateRegistry``
        deletes them once no retained checkpoint does), each once."""
        seen: dict[str, SharedFileHandle] = {}
        for o in self.operator_states.values():
            for s in o.subtask_states.values():
                for h in s.shared_handles():
                    seen.setdefault(h.path, h)
        return list(seen.values())

    @property
    def is_incremental(self) -> bool:
        return any(
            isinstance(h, IncrementalKeyedStateHandle)
            for o in self.operator_states.values()
            for s in o.subtask_states.values()
            for h in s.managed_keyed_state
        )

    def map_stream_handles(self, fn: Callable[[StreamStateHandle], StreamStateHandle]) -> CompletedCheckpoint:
        """A copy whose every state handle's file/bytes handle is ``fn(handle)`` (relocation;
        shared files are not relocated)."""

        def keyed(h: KeyedStateHandle) -> KeyedStateHandle:
            if isinstance(h, KeyGroupsStateHandle):
                return KeyGroupsStateHandle(h.key_group_range, fn(h.delegate), h.states, h.backend)
            return IncrementalKeyedStateHandle(
                h.key_group_range,
                h.checkpoint_id,
                h.shared,
                tuple(fn(p) for p in h.private),
                h.states,
                h.backend,
                h.checkpointed_size,
            )

        ops = {}
        for op_id, o in self.operator_states.items():
            subs = {
                i: OperatorSubtaskState(
                    [keyed(h) for h in s.managed_keyed_state],
                    [OperatorStateHandle(fn(h.delegate), dict(h.states)) for h in s.managed_operator_state],
                    [InputChannelStateHandle(h.channel, h.num_channels, fn(h.delegate)) for h in s.input_channel_state],
                )
                for i, s in o.subtask_states.items()
            }
            ops[op_id] = OperatorState(o.operator_id, o.parallelism, o.max_parallelism, subs)
        return CompletedCheckpoint(
            self.job_id,
            self.checkpoint_id,
            self.timestamp,
            ops,
            self.is_savepoint,
            self.completion_timestamp,
            self.external_pointer,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "checkpoint_id": self.checkpoint_id,
            "timestamp": self.timestamp,
            "completion_timestamp": self.completion_timestamp,
            "is_savepoint": self.is_savepoint,
            "operators": [o.to_json() for _, o in sorted(self.operator_states.items())],
        }

    @staticmethod
    def from_json(d: dict[str, Any], external_pointer: str | None = None) -> CompletedCheckpoint:
        ops = [OperatorState.from_json(o) for o in d.get("operators", [])]
        return CompletedCheckpoint(
            job_id=str(d["job_id"]),
            checkpoint_id=int(d["checkpoint_id"]),
            timestamp=int(d["timestamp"]),
            operator_states={o.operator_id: o for o in ops},
            is_savepoint=bool(d.get("is_savepoint", False)),
            completion_timestamp=int(d.get("completion_timestamp", 0)),
            external_pointer=external_pointer,
        )


def _is_relative(path: str) -> bool:
    return "://" not in path and not path.startswith("/")


def make_relative(checkpoint: CompletedCheckpoint, directory: str) -> CompletedCheckpoint:
    """The checkpoint with the state files under ``directory`` referred to by paths relative to
    it: a savepoint directory copied elsewhere then restores (self-contained, relocatable)."""
    prefix = directory.rstrip("/") + "/"

    def rel(h: StreamStateHandle) -> StreamStateHandle:
        if isinstance(h, FileStateHandle) and h.path.startswith(prefix):
            return FileStateHandle(h.path[len(prefix) :], h.size)
        return h

    return checkpoint.map_stream_handles(rel)


def resolve_relative(checkpoint: CompletedCheckpoint, directory: str, path: str = "<bytes>") -> CompletedCheckpoint:
    """The checkpoint with relative state file paths resolved against ``directory`` (where its
    ``_metadata`` is now); a relative path that leaves the directory is refused."""

    def resolve(h: StreamStateHandle) -> StreamStateHandle:
        if isinstance(h, FileStateHandle) and _is_relative(h.path):
            parts = h.path.split("/")
            if not h.path or any(p in ("", ".", "..") for p in parts):
                raise CheckpointMetadataError(
                    path, f"state file path {h.path!r} is not a plain path inside the checkpoint directory"
                )
            return FileStateHandle(directory.rstrip("/") + "/" + h.path, h.size) if directory else h
        return h

    return checkpoint.map_stream_handles(resolve)


def check_structure(checkpoint: CompletedCheckpoint, path: str = "<bytes>") -> None:
    """CheckpointMetadataError naming ``path`` if the checkpoint's content is inconsistent
    (parallelism, key groups, subtask indices, sizes)."""
    if checkpoint.checkpoint_id < 0:
        raise CheckpointMetadataError(path, f"invalid checkpoint id {checkpoint.checkpoint_id}")
    for op_id, o in checkpoint.operator_states.items():
        where = f"operator {op_id}"
        if not op_id:
            raise CheckpointMetadataError(path, "an operator has an empty id")
        if o.parallelism < 1 or o.max_parallelism < 1 or o.parallelism > o.max_parallelism:
            raise CheckpointMetadataError(
                path, f"{where}: invalid parallelism {o.parallelism} / max parallelism {o.max_parallelism}"
            )
        for i, s in o.subtask_states.items():
            if not 0 <= i < o.parallelism:
                raise CheckpointMetadataError(path, f"{where}: subtask index {i} outside parallelism {o.parallelism}")
            for h in s.managed_keyed_state:
                r = h.key_group_range
                if len(r) and (r.start < 0 or r.end >= o.max_parallelism):
                    raise CheckpointMetadataError(
                        path, f"{where}: key groups {r.start}..{r.end} outside 0..{o.max_parallelism - 1}"
                    )
            for sh in s.stream_handles():
                if isinstance(sh, FileStateHandle) and (sh.size < 0 or not sh.path):
                    raise CheckpointMetadataError(
                        path, f"{where}: invalid state file handle {sh.path!r} ({sh.size} bytes)"
                    )
            for shared in s.shared_handles():
                if shared.size < 0 or not shared.path or _is_relative(shared.path):
                    raise CheckpointMetadataError(
                        path, f"{where}: invalid shared state file handle {shared.path!r} ({shared.size} bytes)"
                    )


def serialize_metadata(checkpoint: CompletedCheckpoint, relative_to: str | None = None) -> bytes:
    """The ``_metadata`` bytes; state files under ``relative_to`` are stored with relative paths."""
    if relative_to is not None:
        checkpoint = make_relative(checkpoint, relative_to)
    payload = json.dumps(checkpoint.to_json(), separators=(",", ":"), sort_keys=True).encode("utf-8")
    return _HEADER.pack(MAGIC, VERSION, zlib.crc32(payload), len(payload)) + payload


def deserialize_metadata(data: bytes, path: str = "<bytes>", directory: str | None = None) -> CompletedCheckpoint:
    """Parse a ``_metadata`` file; ``CheckpointMetadataError`` naming ``path`` if it is not a
    complete, intact, consistent metadata file of this format. Relative state file paths are
    resolved against ``directory`` (default: the directory of ``path``)."""
    if len(data) == 0:
        raise CheckpointMetadataError(path, "the file is empty (the checkpoint was not completed)")
    if len(data) < _HEADER.size:
        raise CheckpointMetadataError(path, f"the file is truncated ({len(data)} bytes, shorter than the header)")
    magic, version, crc, length = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CheckpointMetadataError(path, f"not a yarnflink checkpoint metadata file (magic {magic!r})")
    if version != VERSION:
        raise CheckpointMetadataError(
            path, f"unsupported metadata format version {version} (this yarnflink reads {VERSION})"
        )
    payload = data[_HEADER.size :]
    if len(payload) != length:
        raise CheckpointMetadataError(
            path, f"the file is truncated or padded: {len(payload)} payload bytes, header says {length}"
        )
    if zlib.crc32(payload) != crc:
        raise CheckpointMetadataError(path, "checksum mismatch: the file is corrupted")
    try:
        d = json.loads(payload.decode("utf-8"))
        if not isinstance(d, dict) or not isinstance(d.get("operators", []), list):
            raise TypeError("the payload is not a checkpoint object")
        checkpoint = CompletedCheckpoint.from_json(d)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CheckpointMetadataError(path, f"unreadable content: {type(e).__name__}: {e}") from None
    check_structure(checkpoint, path)
    return resolve_relative(checkpoint, directory if directory is not None else posixpath.dirname(path), path)
