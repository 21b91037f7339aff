"""Incremental checkpoints of the ``hashmap`` backend: chains of a materialized base and deltas.

With ``execution.checkpointing.incremental: true`` a checkpoint of a ``HeapKeyedStateBackend``
refers to a *chain* of shared files (``IncrementalKeyedStateHandle.shared``, in the job's
``shared/`` directory, reference-counted by the JobMaster's ``SharedStateRegistry``):

* a **base**: the whole state of the backend's key groups as of some checkpoint, in the format of
  a full snapshot (``heap.SNAPSHOT_FORMAT``; several files of whole key groups if large), and
* **deltas**, oldest first: the entries (and timers) changed since, each as its value at the
  checkpoint or as removed (``DELTA_FORMAT``, one file per checkpoint).

A checkpoint builds on the chain of the newest checkpoint *confirmed* complete to the task
(``notify_checkpoint_complete``), never on one that may still fail, so that an aborted
checkpoint's files are referred to by no other and can be deleted at once. Its delta therefore
holds what changed since that confirmed checkpoint (usually the previous one). The idea is
FLIP-158's (the changelog state backend), with the changelog kept per key group in memory
(``heap``'s changelog and shadow) and written at the checkpoint.

``MaterializationRule`` decides when a checkpoint writes a new base instead of a delta: when
nothing is confirmed yet (the first checkpoint, after an abort, after a restore of a rescaled
or foreign checkpoint), when the chain has ``max_deltas`` deltas, or when its deltas would exceed
``max_delta_ratio`` of the base (at least ``MIN_DELTA_BUDGET``). A restore then reads at most
about ``(1 + max_delta_ratio)`` times the base.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from yarnflink.state.handles import KeyGroupRange, SharedFileHandle
from yarnflink.state.snapshot_serializer import BufferPieces, pickled_column, pickled_entry_column
from yarnflink.state.tables import MISSING

BASE, DELTA = "base", "delta"
DELTA_FORMAT = "yarnflink-keyed-delta-v1"
#: deltas may always reach this many bytes, however small the base (a small state's checkpoints
#: would otherwise all be bases)
MIN_DELTA_BUDGET = 1 << 20
#: rows per record batch of a delta file
DELTA_CHUNK_ROWS = 2048

_DELTA_SCHEMA = pa.schema(
    [
        ("key_group", pa.int32()),
        ("state", pa.string()),
        ("entry", pa.large_binary()),
        ("value", pa.large_binary()),
        ("removed", pa.bool_()),
    ],
    metadata={b"format": DELTA_FORMAT.encode()},
)


class DeltaFormatError(ValueError):
    """A file that should be a delta is not one."""


# ----------------------------------------------------------------------------- chains
@dataclass(frozen=True)
class Chain:
    """The shared files of a backend's incremental checkpoint ``checkpoint_id``: bases, then deltas."""

    checkpoint_id: int
    files: tuple[SharedFileHandle, ...]

    @staticmethod
    def materialized(checkpoint_id: int, bases: tuple[SharedFileHandle, ...]) -> Chain:
        return Chain(checkpoint_id, bases)

    @staticmethod
    def of(checkpoint_id: int, files: Iterable[SharedFileHandle]) -> Chain:
        return Chain(checkpoint_id, tuple(files))

    def extended(self, checkpoint_id: int, delta: SharedFileHandle | None) -> Chain:
        return Chain(checkpoint_id, self.files + ((delta,) if delta is not None else ()))

    @property
    def base_size(self) -> int:
        return sum(f.size for f in self.files if f.kind == BASE)

    @property
    def delta_size(self) -> int:
        return sum(f.size for f in self.files if f.kind == DELTA)

    @property
    def num_deltas(self) -> int:
        return sum(1 for f in self.files if f.kind == DELTA)


@dataclass(frozen=True)
class MaterializationRule:
    """When an incremental checkpoint writes a new base (the two
    ``execution.checkpointing.incremental.materialization.*`` options)."""

    max_deltas: int = 50
    max_delta_ratio: float = 0.5

    def must_materialize(self, confirmed: Chain | None, force: bool, shared_prefix: str | None = None) -> str | None:
        """Why the next checkpoint must be a base before any delta is written (None: a delta may do)."""
        if confirmed is None:
            return "no checkpoint is confirmed to build on"
        if force:
            return "a checkpoint was aborted"
        if shared_prefix and any(not f.path.startswith(shared_prefix) for f in confirmed.files):
            return "the chain restored is not in this job's shared directory"
        if confirmed.num_deltas >= self.max_deltas:
            return f"the chain has {confirmed.num_deltas} deltas"
        return None

    def delta_fits(self, confirmed: Chain, delta_size: int) -> bool:
        """Whether a delta of ``delta_size`` bytes may extend ``confirmed`` (else: a base)."""
        budget = max(self.max_delta_ratio * confirmed.base_size, MIN_DELTA_BUDGET)
        return confirmed.num_deltas < self.max_deltas and confirmed.delta_size + delta_size <= budget


# ----------------------------------------------------------------------------- delta files
class DeltaWriter:
    """A delta file: rows ``(key group, state, (key, namespace), value, removed)``; a timer's
    row is ``(key group, timer queue, (key, namespace), timestamp, removed)``."""

    def __init__(self, compression: str | None = None, pause: Callable[[], None] | None = None) -> None:
        self._out = BufferPieces()
        self._compression = compression
        self._pause = pause
        self._writer: Any = None
        self._rows = 0
        self._kgs: list[int] = []
        self._states: list[str] = []
        self._entries: list[Any] = []
        self._values: list[Any] = []
        self._removed: list[bool] = []

    def entries(self, key_group: int, state: str, items: Iterable[tuple[Any, Any]]) -> None:
        """``(entry key, value)`` pairs; ``MISSING``: the entry was removed."""
        for ek, v in items:
            removed = v is MISSING
            self._add(key_group, state, ek, None if removed else v, removed)

    def timers(self, key_group: int, state: str, changed: Iterable[tuple[int, Any, Any]], live: set) -> None:
        """The timers ``(timestamp, key, namespace)`` changed: registered if in ``live``, else removed."""
        for t in changed:
            self._add(key_group, state, (t[1], t[2]), t[0], t not in live)

    def _add(self, kg: int, state: str, entry: Any, value: Any, removed: bool) -> None:
        self._kgs.append(kg)
        self._states.append(state)
        self._entries.append(entry)
        self._values.append(value)
        self._removed.append(removed)
        if len(self._entries) >= DELTA_CHUNK_ROWS:
            self._flush()

    def _flush(self) -> None:
        if not self._entries:
            return
        if self._writer is None:
            self._writer = pa.ipc.new_stream(
                pa.PythonFile(self._out, mode="w"),
                _DELTA_SCHEMA,
                options=pa.ipc.IpcWriteOptions(compression=self._compression),
            )
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(np.array(self._kgs, dtype=np.int32)),
                pa.array(self._states, pa.string()),
                pickled_entry_column(self._entries, self._pause),
                pickled_column(self._values, self._pause),
                pa.array(self._removed, pa.bool_()),
            ],
            schema=_DELTA_SCHEMA,
        )
        self._writer.write_batch(batch)
        self._rows += len(self._entries)
        self._kgs, self._states, self._entries, self._values, self._removed = [], [], [], [], []
        if self._pause is not None:
            self._pause()

    def finish(self) -> BufferPieces | None:
        """The file's bytes (None: nothing changed)."""
        self._flush()
        if self._writer is None:
            return None
        self._writer.close()
        return self._out


def apply_delta(
    payload: bytes,
    key_groups: KeyGroupRange,
    timer_states: set[str],
    put: Callable[[int, str, Any, Any, Any], None],
    remove: Callable[[int, str, Any, Any], None],
    timer: Callable[[int, str, int, Any, Any, bool], None],
) -> int:
    """Apply the rows of a delta file in ``key_groups``: ``put(kg, state, key, ns, value)``,
    ``remove(kg, state, key, ns)``, ``timer(kg, queue, ts, key, ns, added)``. Returns the rows applied."""
    try:
        reader = pa.ipc.open_stream(pa.BufferReader(payload))
    except pa.ArrowInvalid as e:
        raise DeltaFormatError(f"not a {DELTA_FORMAT} file: {e}") from None
    with reader:
        md = reader.schema.metadata or {}
        if md.get(b"format") != DELTA_FORMAT.encode():
            raise DeltaFormatError(f"not a {DELTA_FORMAT} file (format {md.get(b'format')!r})")
        table = reader.read_all()
    if table.num_rows == 0:
        return 0
    kgs = table.column("key_group").to_numpy()
    keep = np.flatnonzero((kgs >= key_groups.start) & (kgs <= key_groups.end))
    if len(keep) == 0:
        return 0
    table = table.take(pa.array(keep))
    loads = pickle.loads
    count = 0
    for kg, state, entry, value, removed in zip(
        table.column("key_group").to_pylist(),
        table.column("state").to_pylist(),
        table.column("entry").to_pylist(),
        table.column("value").to_pylist(),
        table.column("removed").to_pylist(),
    ):
        key, ns = loads(entry)
        if state in timer_states:
            timer(kg, state, loads(value), key, ns, not removed)
        elif removed:
            remove(kg, state, key, ns)
        else:
            put(kg, state, key, ns, loads(value))
        count += 1
    return count
