"""State handles: what a snapshot produced and where it lives (Flink's ``StateObject`` tree).

Pure data (no I/O). A checkpoint's metadata is a tree of these::

    CompletedCheckpoint -> OperatorState (per operator id)
        -> OperatorSubtaskState (per subtask index)
            -> KeyGroupsStateHandle (keyed state of a key-group range, one file: a full snapshot)
            -> IncrementalKeyedStateHandle (keyed state of a key-group range as shared files that
               several checkpoints refer to, plus files of its own: an incremental checkpoint)
                -> SharedFileHandle (a file in the job's ``shared/`` directory)
            -> OperatorStateHandle (operator list / union state)
                -> StreamStateHandle: ByteStreamStateHandle (inline bytes) | FileStateHandle (a file)

``to_json`` / ``state_handle_from_json`` give the JSON form stored in ``_metadata``.

Shared state (incremental checkpoints, docs/STATE_AND_EVENT_TIME.md): a ``SharedFileHandle`` names
an immutable file by path, size and content hash. The JobMaster's ``SharedStateRegistry``
(``yarnflink.checkpoint.shared``) counts which retained checkpoints refer to it and deletes it
when none does; a restore checks its size and hash. Backend-neutral: ``hashmap`` writes its
materialized bases and deltas as shared files, ``rocksdb`` its store's immutable files.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Union


# ----------------------------------------------------------------------------- key groups
@dataclass(frozen=True)
class KeyGroupRange:
    """Key groups ``start..end`` (both included; Flink's ``KeyGroupRange``). Empty if end < start."""

    start: int
    end: int

    @staticmethod
    def of(r: range) -> KeyGroupRange:
        return KeyGroupRange(r.start, r.stop - 1)

    @staticmethod
    def empty() -> KeyGroupRange:
        return KeyGroupRange(0, -1)

    def __len__(self) -> int:
        return max(0, self.end - self.start + 1)

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.end + 1))

    def __contains__(self, key_group: object) -> bool:
        return isinstance(key_group, int) and self.start <= key_group <= self.end

    def intersection(self, other: KeyGroupRange) -> KeyGroupRange:
        start, end = max(self.start, other.start), min(self.end, other.end)
        return KeyGroupRange(start, end) if start <= end else KeyGroupRange.empty()

    def __str__(self) -> str:
        return f"KeyGroupRange{{start={self.start}, end={self.end}}}"


# ----------------------------------------------------------------------------- stream handles
@dataclass(frozen=True)
class ByteStreamStateHandle:
    """State small enough to be stored inline in the checkpoint's ``_metadata``
    (``state.storage.fs.memory-threshold``)."""

    name: str
    data: bytes

    @property
    def state_size(self) -> int:
        return len(self.data)

    def to_json(self) -> dict[str, Any]:
        return {"type": "bytes", "name": self.name, "data": base64.b64encode(self.data).decode("ascii")}


@dataclass(frozen=True)
class FileStateHandle:
    """A state file (an fsspec URL: ``file://``, ``s3://``, ``hdfs://``)."""

    path: str
    size: int

    @property
    def state_size(self) -> int:
        return self.size

    def to_json(self) -> dict[str, Any]:
        return {"type": "file", "path": self.path, "size": self.size}


StreamStateHandle = Union[ByteStreamStateHandle, FileStateHandle]


def stream_handle_from_json(d: dict[str, Any]) -> StreamStateHandle:
    t = d.get("type")
    if t == "bytes":
        return ByteStreamStateHandle(str(d["name"]), base64.b64decode(d["data"]))
    if t == "file":
        return FileStateHandle(str(d["path"]), int(d["size"]))
    raise ValueError(f"unknown stream state handle type {t!r}")


# ----------------------------------------------------------------------------- keyed / operator
@dataclass(frozen=True)
class StateMetaInfo:
    """What a snapshot says about one registered state: its kind (``value``, ``list``, ``map``,
    ``reducing``, ``aggregating``, ``timers``) and whether it has a TTL."""

    name: str
    kind: str
    ttl: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "ttl": self.ttl}

    @staticmethod
    def from_json(d: dict[str, Any]) -> StateMetaInfo:
        return StateMetaInfo(str(d["name"]), str(d["kind"]), bool(d.get("ttl", False)))


@dataclass(frozen=True)
class KeyGroupsStateHandle:
    """The keyed state of one backend for ``key_group_range`` (an Arrow IPC file with one row per
    entry, sorted by key group; a restoring backend keeps the rows of its own key groups)."""

    key_group_range: KeyGroupRange
    delegate: StreamStateHandle
    states: tuple[StateMetaInfo, ...] = ()
    backend: str = "hashmap"

    @property
    def state_size(self) -> int:
        return self.delegate.state_size

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "keyed",
            "key_groups": [self.key_group_range.start, self.key_group_range.end],
            "backend": self.backend,
            "states": [s.to_json() for s in self.states],
            "delegate": self.delegate.to_json(),
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> KeyGroupsStateHandle:
        start, end = d["key_groups"]
        return KeyGroupsStateHandle(
            KeyGroupRange(int(start), int(end)),
            stream_handle_from_json(d["delegate"]),
            tuple(StateMetaInfo.from_json(s) for s in d.get("states", ())),
            str(d.get("backend", "hashmap")),
        )


#: the content hash algorithm of shared files (``SharedFileHandle.content_hash`` is ``sha256:<hex>``)
CONTENT_HASH = "sha256"


@dataclass(frozen=True)
class SharedFileHandle:
    """An immutable state file that several checkpoints may refer to (a key of Flink's
    ``SharedStateRegistry``; the registry key is ``path``). ``content_hash``: ``sha256:<hex>`` of
    its bytes (a restore checks it); ``key_group_range``: the key groups whose state it holds;
    ``kind``: what the file is to the backend that wrote it (``hashmap``: ``base`` or ``delta``;
    ``rocksdb``: e.g. ``sst``), opaque to the coordinator."""

    path: str
    size: int
    content_hash: str
    key_group_range: KeyGroupRange
    kind: str = ""

    @property
    def state_size(self) -> int:
        return self.size

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "shared",
            "path": self.path,
            "size": self.size,
            "hash": self.content_hash,
            "key_groups": [self.key_group_range.start, self.key_group_range.end],
            "kind": self.kind,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> SharedFileHandle:
        if d.get("type") != "shared":
            raise ValueError(f"not a shared file handle: type {d.get('type')!r}")
        start, end = d["key_groups"]
        content_hash = str(d["hash"])
        if not content_hash.startswith(CONTENT_HASH + ":"):
            raise ValueError(f"shared file {d.get('path')!r}: unknown content hash {content_hash!r}")
        return SharedFileHandle(
            str(d["path"]), int(d["size"]), content_hash, KeyGroupRange(int(start), int(end)), str(d.get("kind", ""))
        )

    def as_file(self) -> FileStateHandle:
        """The file as a plain ``FileStateHandle`` (to delete or copy it)."""
        return FileStateHandle(self.path, self.size)


@dataclass(frozen=True)
class IncrementalKeyedStateHandle:
    """The keyed state of one backend for ``key_group_range`` at checkpoint ``checkpoint_id``
    (Flink's ``IncrementalRemoteKeyedStateHandle``): ``shared`` files, in the order the backend
    applies them, which other checkpoints may refer to too, and ``private`` files of this
    checkpoint alone (``rocksdb``: its store's mutable metadata files). ``checkpointed_size``:
    the bytes this checkpoint wrote (its new shared files and its private ones); ``state_size``:
    all it refers to. A restoring backend reads what intersects its own key groups."""

    key_group_range: KeyGroupRange
    checkpoint_id: int
    shared: tuple[SharedFileHandle, ...]
    private: tuple[StreamStateHandle, ...] = ()
    states: tuple[StateMetaInfo, ...] = ()
    backend: str = "hashmap"
    checkpointed_size: int = 0

    @property
    def state_size(self) -> int:
        return sum(h.size for h in self.shared) + sum(h.state_size for h in self.private)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "keyed-incremental",
            "key_groups": [self.key_group_range.start, self.key_group_range.end],
            "checkpoint_id": self.checkpoint_id,
            "backend": self.backend,
            "states": [s.to_json() for s in self.states],
            "shared": [h.to_json() for h in self.shared],
            "private": [h.to_json() for h in self.private],
            "checkpointed_size": self.checkpointed_size,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> IncrementalKeyedStateHandle:
        start, end = d["key_groups"]
        return IncrementalKeyedStateHandle(
            KeyGroupRange(int(start), int(end)),
            int(d["checkpoint_id"]),
            tuple(SharedFileHandle.from_json(h) for h in d.get("shared", ())),
            tuple(stream_handle_from_json(h) for h in d.get("private", ())),
            tuple(StateMetaInfo.from_json(s) for s in d.get("states", ())),
            str(d.get("backend", "hashmap")),
            int(d.get("checkpointed_size", 0)),
        )


KeyedStateHandle = Union[KeyGroupsStateHandle, IncrementalKeyedStateHandle]


def keyed_handle_from_json(d: dict[str, Any]) -> KeyedStateHandle:
    if d.get("type") == "keyed-incremental":
        return IncrementalKeyedStateHandle.from_json(d)
    return KeyGroupsStateHandle.from_json(d)


def keyed_stream_handles(h: KeyedStateHandle) -> list[StreamStateHandle]:
    """The files of a keyed handle that belong to its checkpoint alone (not the shared ones)."""
    return [h.delegate] if isinstance(h, KeyGroupsStateHandle) else list(h.private)


SPLIT_DISTRIBUTE = "SPLIT_DISTRIBUTE"  # operator list state: elements split over the new subtasks
UNION = "UNION"  # union list state: every new subtask gets every element


@dataclass(frozen=True)
class OperatorStateHandle:
    """Operator (non-keyed) list states of one subtask. ``states`` maps a state name to its
    distribution mode and the indices of its elements in the file that this handle covers
    (a repartitioned handle covers a subset; Flink's ``OperatorStreamStateHandle`` offsets)."""

    delegate: StreamStateHandle
    states: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)

    @property
    def state_size(self) -> int:
        return self.delegate.state_size

    def with_states(self, states: dict[str, tuple[str, tuple[int, ...]]]) -> OperatorStateHandle:
        return OperatorStateHandle(self.delegate, states)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "operator",
            "states": {n: {"mode": m, "elements": list(idx)} for n, (m, idx) in self.states.items()},
            "delegate": self.delegate.to_json(),
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> OperatorStateHandle:
        states = {str(n): (str(v["mode"]), tuple(int(i) for i in v["elements"])) for n, v in d["states"].items()}
        return OperatorStateHandle(stream_handle_from_json(d["delegate"]), states)

    def __hash__(self) -> int:  # dict field: hash by identity of content that matters
        return hash((self.delegate, tuple(sorted((n, m, i) for n, (m, i) in self.states.items()))))


@dataclass(frozen=True)
class InputChannelStateHandle:
    """Unaligned checkpoints: the in-flight records input channel ``channel`` (of
    ``num_channels``) delivered between the task's snapshot and that channel's barrier (an Arrow
    IPC stream; Flink's ``InputChannelStateHandle``). Replayed through the chain on restore."""

    channel: int
    num_channels: int
    delegate: StreamStateHandle

    @property
    def state_size(self) -> int:
        return self.delegate.state_size

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "input-channel",
            "channel": self.channel,
            "num_channels": self.num_channels,
            "delegate": self.delegate.to_json(),
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> InputChannelStateHandle:
        return InputChannelStateHandle(
            int(d["channel"]), int(d["num_channels"]), stream_handle_from_json(d["delegate"])
        )


@dataclass
class OperatorSubtaskState:
    """The state one subtask's operator snapshotted (Flink's ``OperatorSubtaskState``); the
    input channel state (unaligned checkpoints) is kept with the chain's head operator."""

    managed_keyed_state: list[KeyedStateHandle] = field(default_factory=list)
    managed_operator_state: list[OperatorStateHandle] = field(default_factory=list)
    input_channel_state: list[InputChannelStateHandle] = field(default_factory=list)

    @property
    def state_size(self) -> int:
        return (
            sum(h.state_size for h in self.managed_keyed_state)
            + sum(h.state_size for h in self.managed_operator_state)
            + self.persisted_data
        )

    @property
    def persisted_data(self) -> int:
        """Bytes of in-flight data persisted (unaligned checkpoints)."""
        return sum(h.state_size for h in self.input_channel_state)

    def is_empty(self) -> bool:
        return not self.managed_keyed_state and not self.managed_operator_state and not self.input_channel_state

    def stream_handles(self) -> list[StreamStateHandle]:
        """The files of this state that belong to its checkpoint alone (``shared_handles``: the others)."""
        return (
            [d for h in self.managed_keyed_state for d in keyed_stream_handles(h)]
            + [h.delegate for h in self.managed_operator_state]
            + [h.delegate for h in self.input_channel_state]
        )

    def shared_handles(self) -> list[SharedFileHandle]:
        return [s for h in self.managed_keyed_state if isinstance(h, IncrementalKeyedStateHandle) for s in h.shared]

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "keyed": [h.to_json() for h in self.managed_keyed_state],
            "operator": [h.to_json() for h in self.managed_operator_state],
        }
        if self.input_channel_state:
            d["input_channels"] = [h.to_json() for h in self.input_channel_state]
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> OperatorSubtaskState:
        return OperatorSubtaskState(
            [keyed_handle_from_json(h) for h in d.get("keyed", ())],
            [OperatorStateHandle.from_json(h) for h in d.get("operator", ())],
            [InputChannelStateHandle.from_json(h) for h in d.get("input_channels", ())],
        )


@dataclass
class TaskStateSnapshot:
    """All operator states of one task (a chain) for one checkpoint: operator id -> state.
    What a task acknowledges to the CheckpointCoordinator, and what it gets back to restore."""

    subtask_states: dict[str, OperatorSubtaskState] = field(default_factory=dict)

    def get(self, operator_id: str) -> OperatorSubtaskState | None:
        return self.subtask_states.get(operator_id)

    @property
    def state_size(self) -> int:
        return sum(s.state_size for s in self.subtask_states.values())

    @property
    def persisted_data(self) -> int:
        return sum(s.persisted_data for s in self.subtask_states.values())

    def stream_handles(self) -> list[StreamStateHandle]:
        return [h for s in self.subtask_states.values() for h in s.stream_handles()]

    def shared_handles(self) -> list[SharedFileHandle]:
        return [h for s in self.subtask_states.values() for h in s.shared_handles()]

    def to_json(self) -> dict[str, Any]:
        return {op: st.to_json() for op, st in self.subtask_states.items()}

    @staticmethod
    def from_json(d: dict[str, Any]) -> TaskStateSnapshot:
        return TaskStateSnapshot({op: OperatorSubtaskState.from_json(st) for op, st in d.items()})


@dataclass
class SnapshotResult:
    """What a state backend's ``snapshot`` future yields (None: nothing to store)."""

    #: the keyed state: one handle per file, each for the key groups it holds (or incremental handles)
    keyed_handles: tuple[KeyedStateHandle, ...] = ()
    operator: OperatorStateHandle | None = None

    @property
    def keyed(self) -> KeyedStateHandle | None:
        """The keyed state written as one file (None: none); ``keyed_handles`` for several."""
        if len(self.keyed_handles) > 1:
            raise ValueError(f"the keyed state was written as {len(self.keyed_handles)} files: use keyed_handles")
        return self.keyed_handles[0] if self.keyed_handles else None
