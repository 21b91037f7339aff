"""State handles: what a snapshot produced and where it lives (Flink's ``StateObject`` tree).

Pure data (no I/O). A checkpoint's metadata is a tree of these::

    CompletedCheckpoint -> OperatorState (per operator id)
        -> OperatorSubtaskState (per subtask index)
            -> KeyGroupsStateHandle (keyed state of a key-group range)
            -> OperatorStateHandle (operator list / union state)
                -> StreamStateHandle: ByteStreamStateHandle (inline bytes) | FileStateHandle (a file)

``to_json`` / ``state_handle_from_json`` give the JSON form stored in ``_metadata``.
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

    managed_keyed_state: list[KeyGroupsStateHandle] = field(default_factory=list)
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
        return (
            [h.delegate for h in self.managed_keyed_state]
            + [h.delegate for h in self.managed_operator_state]
            + [h.delegate for h in self.input_channel_state]
        )

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
            [KeyGroupsStateHandle.from_json(h) for h in d.get("keyed", ())],
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

    def to_json(self) -> dict[str, Any]:
        return {op: st.to_json() for op, st in self.subtask_states.items()}

    @staticmethod
    def from_json(d: dict[str, Any]) -> TaskStateSnapshot:
        return TaskStateSnapshot({op: OperatorSubtaskState.from_json(st) for op, st in d.items()})


@dataclass
class SnapshotResult:
    """What a state backend's ``snapshot`` future yields (None: nothing to store)."""

    #: the keyed state: one handle per file, each for the key groups it holds
    keyed_handles: tuple[KeyGroupsStateHandle, ...] = ()
    operator: OperatorStateHandle | None = None

    @property
    def keyed(self) -> KeyGroupsStateHandle | None:
        """The keyed state written as one file (None: none); ``keyed_handles`` for several."""
        if len(self.keyed_handles) > 1:
            raise ValueError(f"the keyed state was written as {len(self.keyed_handles)} files: use keyed_handles")
        return self.keyed_handles[0] if self.keyed_handles else None
