"""The ``hashmap`` keyed state backend (Flink's ``HashMapStateBackend``): state on the heap,
organised by key group so that a snapshot can be split and redistributed when the parallelism
changes.

Layout: one ``StateTable`` per registered state; a table holds one ``KeyGroupMap`` per key group whose
``data`` dict maps the entry key (``entry_key(key, namespace)``: the plain key alone for the void
namespace, ``(key, namespace)`` otherwise) to the stored value. Timers live in key-grouped priority
queues of the same backend.

Snapshots are asynchronous (``snapshot() -> Future[SnapshotResult]``). In ``thread`` mode (the
default) the snapshot side keeps its own copy of every key group, the *shadow*, and the task keeps
a changelog: every write also records the entry in its key group's ``changes`` (a removal in
``removed``). The synchronous part of a snapshot only hands the changelogs over and starts new
ones (O(number of key groups), no entry is touched); the snapshot thread applies them to the
shadows and serializes the shadows, which are then exactly the state at the synchronous point.
The task never copies a key group: the only per-entry copy is of a mutable value (list, map,
accumulator) changed in place whose entry is not in the current changelog, since the shadow may
share that object (the first in-place change after a synchronous point copies it). This is the
idea of Flink's changelog state backend (FLIP-158) with the materialization done on every
checkpoint, and it keeps a checkpoint's stall on the task independent of the state's size
(docs/PERFORMANCE.md). ``fork`` mode instead serializes in a forked child, whose copy-on-write
image of the heap is the snapshot; it keeps no changelog.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import os
import pickle
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa

from yarnflink.common.keygroups import key_group_of
from yarnflink.state.descriptors import StateDescriptor, StateTtlConfig
from yarnflink.state.handles import (
    IncrementalKeyedStateHandle,
    KeyedStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    SharedFileHandle,
    SnapshotResult,
    StateMetaInfo,
)
from yarnflink.state.incremental import (
    BASE,
    DELTA,
    Chain,
    DeltaWriter,
    MaterializationRule,
    apply_delta,
)
from yarnflink.state.keyed_states import STATE_CLASSES
from yarnflink.state.snapshot_serializer import (
    BufferPieces,
    entry_key,
    pickled_column,
    pickled_entry_column,
    split_entry_key,
)
from yarnflink.state.snapshot_serializer import dumps as _dumps  # noqa: F401 - operator_state.py imports it
from yarnflink.state.streams import (
    CheckpointStreamFactory,
    InlineStreamFactory,
    StateReader,
    read_inline,
    supports_shared_state,
)
from yarnflink.state.tables import MISSING, KeyGroupMap, StateTable, TtlValue

TIMERS = "timers"
SNAPSHOT_FORMAT = "yarnflink-keyed-v1"
SNAPSHOT_MODES = ("thread", "fork")
#: backends whose snapshots are rows of ``SNAPSHOT_FORMAT`` (full, canonical): each restores the other's
CANONICAL_BACKENDS = ("hashmap", "rocksdb")


class StateMigrationError(RuntimeError):
    """A state is declared differently from how it was registered or restored."""


def check_redeclaration(meta: StateMetaInfo, kind: str, ttl: bool) -> None:
    """A registered state declared again must keep its kind and whether it has a TTL (both backends)."""
    if meta.kind != kind:
        raise StateMigrationError(
            f"state {meta.name!r} is registered as {meta.kind} state, but is now declared as {kind} state"
        )
    if meta.ttl != ttl:
        raise StateMigrationError(
            f"state {meta.name!r} was registered {'with' if meta.ttl else 'without'} a TTL and is now "
            f"declared {'with' if ttl else 'without'} one; the TTL setting of a state cannot change"
        )


class KeyGroupRangeError(RuntimeError):
    """A key does not belong to the key groups of this backend."""


def _now_ms() -> int:
    return int(time.time() * 1000)


# ----------------------------------------------------------------------------- timer queues
class KeyGroupedTimerQueue:
    """Timers ``(timestamp, key, namespace)`` kept per key group (for snapshots and rescaling)
    with one heap over all of them (lazy deletion) for polling the earliest.

    With ``track``, it keeps a changelog for ``thread``-mode snapshots like the keyed tables
    (``hand_off`` at the synchronous point; the snapshot thread applies it to its shadow)."""

    def __init__(self, name: str, track: bool = False):
        self.name = name
        self._by_kg: dict[int, dict[tuple, int]] = {}  # kg -> {(ts, key, ns): seq}
        self._heap: list[tuple[int, int, Any, Any, int]] = []  # (ts, seq, key, ns, kg)
        self._seq = itertools.count()
        self._size = 0
        #: kg -> {(ts, key, ns): added (True) or removed (False)} since the last hand-off
        self._changes: dict[int, dict[tuple, bool]] | None = {} if track else None
        self._shadow: dict[int, set] = {}  # the snapshot thread's copy

    def __len__(self) -> int:
        return self._size

    def _changed(self, key_group: int, t: tuple, added: bool) -> None:
        ch = self._changes.get(key_group)  # type: ignore[union-attr]
        if ch is None:
            ch = self._changes[key_group] = {}  # type: ignore[index]
        ch[t] = added

    def add(self, timestamp: int, key: Any, namespace: Any, key_group: int) -> bool:
        entries = self._by_kg.setdefault(key_group, {})
        t = (timestamp, key, namespace)
        if t in entries:
            return False
        seq = next(self._seq)
        entries[t] = seq
        heapq.heappush(self._heap, (timestamp, seq, key, namespace, key_group))
        self._size += 1
        if self._changes is not None:
            self._changed(key_group, t, True)
        return True

    def seq_of(self, timestamp: int, key: Any, namespace: Any, key_group: int) -> int | None:
        """The registration order of a timer (equal timestamps fire in it), or None."""
        return self._by_kg.get(key_group, {}).get((timestamp, key, namespace))

    def remove(self, timestamp: int, key: Any, namespace: Any, key_group: int) -> bool:
        entries = self._by_kg.get(key_group)
        t = (timestamp, key, namespace)
        if entries is None or entries.pop(t, None) is None:
            return False
        self._size -= 1
        if self._changes is not None:
            self._changed(key_group, t, False)
        return True

    def _clean_head(self) -> None:
        heap = self._heap
        while heap:
            ts, seq, key, ns, kg = heap[0]
            if self._by_kg.get(kg, {}).get((ts, key, ns)) == seq:
                return
            heapq.heappop(heap)

    def peek(self) -> tuple[int, Any, Any, int] | None:
        """Earliest timer ``(timestamp, key, namespace, key_group)`` or None."""
        self._clean_head()
        if not self._heap:
            return None
        ts, _, key, ns, kg = self._heap[0]
        return ts, key, ns, kg

    def poll(self) -> tuple[int, Any, Any, int] | None:
        head = self.peek()
        if head is not None:
            heapq.heappop(self._heap)
            ts, key, ns, kg = head
            t = (ts, key, ns)
            del self._by_kg[kg][t]
            self._size -= 1
            if self._changes is not None:
                self._changed(kg, t, False)
        return head

    def snapshot_entries(self) -> list[tuple[int, int, Any, Any]]:
        """``(key_group, timestamp, key, namespace)`` of every timer (a copy)."""
        return [(kg, t[0], t[1], t[2]) for kg in sorted(self._by_kg) for t in self._by_kg[kg]]

    def hand_off(self) -> dict[int, dict[tuple, bool]]:
        """The changelog since the last hand-off (the synchronous point of a snapshot: O(1))."""
        if self._changes is None:
            return {}
        ch, self._changes = self._changes, {}
        return ch

    def apply(self, changes: dict[int, dict[tuple, bool]]) -> None:
        """(Snapshot thread) a handed-off changelog into the shadow."""
        for kg, ch in changes.items():
            s = self._shadow.get(kg)
            if s is None:
                s = self._shadow[kg] = set()
            for t, added in ch.items():
                if added:
                    s.add(t)
                else:
                    s.discard(t)
            if not s:
                del self._shadow[kg]

    def parts(self, shadow: bool = False) -> list[tuple[int, list[tuple[int, Any, Any]]]]:
        """``(key_group, [(timestamp, key, namespace)])`` of the live timers, or of the shadow
        (snapshot thread)."""
        return [(kg, list(s)) for kg, s in (self._shadow if shadow else self._by_kg).items() if s]

    def shadow_of(self, key_group: int) -> set:
        """(Snapshot thread) the shadow's timers of ``key_group``."""
        return self._shadow.get(key_group, set())

    def timers_of(self, key: Any, key_group: int) -> list[tuple[int, Any]]:
        return [(t[0], t[2]) for t in self._by_kg.get(key_group, {}) if t[1] == key]


# ----------------------------------------------------------------------------- backend
class HeapKeyedStateBackend:
    """Keyed state for the key groups ``key_group_range`` of ``max_parallelism``.

    ``set_current_key(key)`` selects the key the state objects read and write (the operator
    calls it per record; passing the key group saves hashing it again).
    """

    backend_name = "hashmap"

    def __init__(
        self,
        max_parallelism: int,
        key_group_range: KeyGroupRange | range,
        *,
        clock: Callable[[], int] = _now_ms,
        executor: Executor | None = None,
        name: str = "",
        snapshot_mode: str = "thread",
        compression: str | None = None,
        incremental: bool = False,
        materialization: MaterializationRule | None = None,
    ):
        if isinstance(key_group_range, range):
            key_group_range = KeyGroupRange.of(key_group_range)
        self.max_parallelism = max_parallelism
        self.key_group_range = key_group_range
        self.clock = clock
        self.name = name
        self._executor = executor
        if snapshot_mode not in SNAPSHOT_MODES:
            raise ValueError(f"unknown snapshot mode {snapshot_mode!r}; expected one of {SNAPSHOT_MODES}")
        #: where the asynchronous part serializes: a thread of this process, or a forked child
        self.snapshot_mode = snapshot_mode
        #: Arrow IPC buffer compression of snapshots (None, "lz4" or "zstd"; Flink: off by default)
        self.compression = compression
        self._own_executor: ThreadPoolExecutor | None = None
        self._tables: dict[str, StateTable] = {}
        self._queues: dict[str, KeyGroupedTimerQueue] = {}
        self._states: dict[str, Any] = {}
        self._key: Any = None
        self._kg = -1
        #: thread mode keeps changelogs (see the module doc); fork mode needs none where it can
        #: fork (elsewhere its snapshots run as thread mode's)
        self._track = snapshot_mode == "thread" or not hasattr(os, "fork")
        self._gen = 0
        #: changelogs handed over by synchronous parts, oldest first, not yet in the shadows:
        #: ``(gen, [(map, changes, removed)], [(queue, timer changes)])``
        self._handoffs: collections.deque = collections.deque()
        #: held by the snapshot side while it applies changelogs and reads the shadows
        self._shadow_lock = threading.Lock()
        self._shadow_gen = 0  # the last changelog applied
        self._writes = 0  # writes since the last hand-off
        #: incremental checkpoints (``execution.checkpointing.incremental``; thread mode: a
        #: checkpoint writes the entries changed since the last checkpoint confirmed to it, and a
        #: new base by ``materialization``). See ``yarnflink.state.incremental``.
        self.incremental = incremental
        if incremental:
            self.snapshot_mode = "thread"
            self._track = True
        self.materialization = materialization or MaterializationRule()
        #: (snapshot thread, ``_shadow_lock``) entry keys / timers changed since the last snapshot
        self._dirty: dict[tuple[str, int], set] = {}
        self._dirty_timers: dict[tuple[str, int], set] = {}
        #: a hand-off that is not a change (what a restore loaded, already in the adopted chain)
        self._clean_gen = 0
        #: guards what follows (the task thread's notifications, the snapshot thread's writes)
        self._chain_lock = threading.Lock()
        #: what changed by snapshot: checkpoint id -> (entries, timers), until a later one is confirmed
        self._dirty_by_checkpoint: dict[int, tuple[dict, dict]] = {}
        #: the chains written and not yet confirmed, by checkpoint id
        self._chains: dict[int, Chain] = {}
        #: the chain of the newest checkpoint confirmed complete (None: the next one materializes)
        self._confirmed: Chain | None = None
        self._materialize_next = False

    # ------------------------------------------------------------------ current key
    def set_current_key(self, key: Any, key_group: int | None = None) -> None:
        if key_group is None:
            key_group = key_group_of(key, self.max_parallelism)
        if not self.key_group_range.start <= key_group <= self.key_group_range.end:
            raise KeyGroupRangeError(
                f"key {key!r} is in key group {key_group}, which is not in this backend's "
                f"{self.key_group_range} (max parallelism {self.max_parallelism}): the key "
                "was not partitioned by key_by with the same key selector"
            )
        self._key = key
        self._kg = key_group

    def get_current_key(self) -> Any:
        return self._key

    @property
    def current_key_group(self) -> int:
        return self._kg

    # ------------------------------------------------------------------ writes (changelog)
    def _new_map(self, table: StateTable) -> KeyGroupMap:
        if self._kg < 0:
            raise RuntimeError("no current key: keyed state is accessed outside of a keyed context")
        m = table.maps[self._kg] = KeyGroupMap(self._track)
        return m

    def _get_entry(self, table: StateTable, ek: Any) -> Any:
        """The stored value of the entry ``ek`` of the current key group, or ``MISSING``."""
        m = table.maps.get(self._kg)
        if m is None:
            return MISSING
        return m.data.get(ek, MISSING)

    def _put_entry(self, table: StateTable, ek: Any, value: Any) -> None:
        """``value`` for the entry ``ek`` of the current key group (and in its changelog)."""
        m = table.maps.get(self._kg)
        if m is None:
            m = self._new_map(table)
        m.data[ek] = value
        changes = m.changes
        if changes is not None:
            changes[ek] = value
            if m.removed:
                m.removed.discard(ek)
            self._writes += 1
            if self._writes >= HAND_OFF_WRITES:
                self._maybe_hand_off()

    def _remove_entry(self, table: StateTable, ek: Any) -> None:
        m = table.maps.get(self._kg)
        if m is None or m.data.pop(ek, MISSING) is MISSING:
            return
        changes = m.changes
        if changes is not None:
            changes.pop(ek, None)
            if m.removed is None:
                m.removed = set()
            m.removed.add(ek)
            self._writes += 1
            if self._writes >= HAND_OFF_WRITES:
                self._maybe_hand_off()

    def _owned_entry(self, table: StateTable, ek: Any, copier: Callable[[Any], Any]) -> Any:
        """The entry ``ek`` (must exist), to change in place: copied first if the snapshot side
        may share it (it is not in the current changelog, so a shadow holds the same object)."""
        m = table.maps[self._kg]
        v = m.data[ek]
        changes = m.changes
        if changes is not None and ek not in changes:
            v = copier(v)
            m.data[ek] = v
            changes[ek] = v
        return v

    # ------------------------------------------------------------------ registration
    def _table(self, name: str, kind: str, ttl: bool) -> StateTable:
        t = self._tables.get(name)
        if t is None:
            t = self._tables[name] = StateTable(StateMetaInfo(name, kind, ttl))
        else:
            check_redeclaration(t.meta, kind, ttl)
        return t

    def get_partitioned_state(self, descriptor: StateDescriptor) -> Any:
        """The state object for ``descriptor`` (one per name; it follows the current key)."""
        name = descriptor.name
        st = self._states.get(name)
        if st is not None:
            if st.descriptor.kind != descriptor.kind:
                raise StateMigrationError(
                    f"state {name!r} is registered as {st.descriptor.kind} state, but is now declared "
                    f"as {descriptor.kind} state"
                )
            return st
        if descriptor.kind not in STATE_CLASSES:
            raise TypeError(f"unknown state descriptor {descriptor!r}")
        table = self._table(name, descriptor.kind, descriptor.ttl_config is not None)
        table.descriptor = descriptor
        st = STATE_CLASSES[descriptor.kind](self, table, descriptor)
        self._states[name] = st
        return st

    def create_timer_queue(self, name: str) -> KeyGroupedTimerQueue:
        """A key-grouped priority queue that is snapshotted with this backend (restored timers
        are already in it)."""
        q = self._queues.get(name)
        if q is None:
            self._table(name, TIMERS, False)
            q = self._queues[name] = KeyGroupedTimerQueue(name, self._track)
        return q

    def state_names(self) -> list[str]:
        return [n for n, t in self._tables.items() if t.meta.kind != TIMERS]

    def get_keys(self, state_name: str, namespace: Any = None) -> Iterator[Any]:
        """Keys that have an entry in ``state_name`` under ``namespace`` (a copy is iterated)."""
        table = self._tables.get(state_name)
        if table is None:
            return iter(())
        keys = [k for m in table.maps.values() for (k, ns) in map(split_entry_key, list(m.data)) if ns == namespace]
        return iter(keys)

    def entries(self, state_name: str) -> list[tuple[int, Any, Any]]:
        """``(key group, key, namespace)`` of every entry of ``state_name`` (a copy), by key group."""
        table = self._tables.get(state_name)
        if table is None:
            return []
        return [(kg, *split_entry_key(ek)) for kg, m in sorted(table.maps.items()) for ek in list(m.data)]

    def stored_items(self, state_name: str) -> Generator[tuple[int, Any, Any, Any], None, None]:
        """``(key group, key, namespace, stored value)`` of every entry of ``state_name`` (values
        as stored: under a TTL, wrapped in ``TtlValue``), by key group (a copy is iterated)."""
        table = self._tables.get(state_name)
        if table is None:
            return
        for kg, m in sorted(table.maps.items()):
            for ek, v in list(m.data.items()):
                key, ns = split_entry_key(ek)
                yield kg, key, ns, v

    def apply_to_all_keys(
        self, descriptor: StateDescriptor, fn: Callable[[Any, Any], None], namespace: Any = None
    ) -> None:
        """``fn(key, state)`` for every key with an entry (Flink's ``applyToAllKeys``)."""
        st = self.get_partitioned_state(descriptor)
        saved = (self._key, self._kg)
        try:
            table = self._tables[descriptor.name]
            for kg, m in sorted(table.maps.items()):
                for k, ns in map(split_entry_key, list(m.data)):
                    if ns == namespace:
                        self._key, self._kg = k, kg
                        st.set_current_namespace(namespace)
                        fn(k, st)
        finally:
            self._key, self._kg = saved

    def num_entries(self) -> int:
        return sum(len(m.data) for t in self._tables.values() for m in t.maps.values()) + sum(
            len(q) for q in self._queues.values()
        )

    # ------------------------------------------------------------------ snapshot
    def snapshot(
        self,
        checkpoint_id: int,
        timestamp: int = 0,
        stream_factory: CheckpointStreamFactory | None = None,
    ) -> Future[SnapshotResult]:
        """Synchronous part now (cheap), serialization and writing in the background; the
        future yields a ``SnapshotResult`` with a ``KeyGroupsStateHandle`` (None if empty)."""
        factory = stream_factory or InlineStreamFactory()
        now = self.clock()
        rng = self.key_group_range
        label = f"{self.name or 'keyed'}-{rng.start}-{rng.end}-chk{checkpoint_id}"
        if self.snapshot_mode == "fork" and hasattr(os, "fork"):
            return self._snapshot_forked(factory, now, label)

        # the synchronous part: hand the changelogs over, start new ones
        gen = self._hand_off()
        views = self._views()
        if self.incremental and supports_shared_state(factory):
            return self._executor_for_snapshots().submit(
                lambda: self._write_incremental(gen, views, checkpoint_id, now, label, factory)
            )

        def write() -> SnapshotResult:
            handles = []
            with self._shadow_lock:  # (the next apply waits: it runs on this executor after it anyway)
                self._apply_handoffs(gen, checkpoint_id)
                self._take_dirty(checkpoint_id)  # (a savepoint: the next delta still has these changes)
                parts, metas = self._parts(views, shadow=True)
                # one file per key-group range of about SNAPSHOT_FILE_BYTES, each written and let
                # go before the next is serialized: memory for one file, not for the whole state
                for kgs, payload in _encode_files(
                    parts, now, self.compression, yield_gil=True, file_bytes=SNAPSHOT_FILE_BYTES
                ):
                    # (not bytes: ``bytes(payload)`` makes them, a file system factory writes its pieces)
                    handle = factory.write_state(payload, label)  # type: ignore[arg-type]
                    payload.release(_let_others_run)
                    handles.append(KeyGroupsStateHandle(kgs, handle, tuple(metas), self.backend_name))
            return SnapshotResult(keyed_handles=tuple(handles))

        return self._executor_for_snapshots().submit(write)

    def _views(
        self,
    ) -> tuple[
        list[tuple[str, StateTable, int | None, list[tuple[int, KeyGroupMap]]]], list[tuple[str, KeyGroupedTimerQueue]]
    ]:
        """(Task thread) the states, their key-group maps and the timer queues as of now."""
        return (
            [
                (name, table, self._full_snapshot_ttl(table), list(table.maps.items()))
                for name, table in self._tables.items()
                if table.meta.kind != TIMERS
            ],
            list(self._queues.items()),
        )

    def _parts(self, views: tuple[list, list], shadow: bool) -> tuple[list[tuple[int, str, Any, Any]], list]:
        """The ``_encode_pieces`` parts ``(key group, state, ttl, entries dict | timer list)`` and
        the metas of the states that have any, from the shadows or from the live state."""
        tables, queues = views
        parts: list[tuple[int, str, Any, Any]] = []
        metas = []
        for name, table, ttl_ms, maps in tables:
            n = len(parts)
            parts += [(kg, name, ttl_ms, d) for kg, m in maps if (d := m.shadow if shadow else m.data)]
            if len(parts) > n:
                metas.append(table.meta)
        for name, q in queues:
            timer_parts = q.parts(shadow)
            if timer_parts:
                metas.append(self._tables[name].meta)
                parts += [(kg, name, TIMERS, items) for kg, items in timer_parts]
        return parts, metas

    def _hand_off(self) -> int:
        """(Task thread) every changelog to the snapshot side, new ones started: O(key groups)."""
        self._writes = 0
        self._gen += 1
        handed: list[tuple[KeyGroupMap, dict, set | None, str, int]] = []
        for name, table in self._tables.items():
            for kg, m in table.maps.items():
                if m.changes or m.removed:
                    handed.append((m, m.changes, m.removed, name, kg))  # type: ignore[arg-type]
                    m.changes, m.removed = {}, None
        self._handoffs.append((self._gen, handed, [(q, q.hand_off()) for q in self._queues.values()]))
        return self._gen

    def _maybe_hand_off(self) -> None:
        """(Task thread, every ``HAND_OFF_WRITES`` writes) hand the changelogs over between
        checkpoints too, so that the shadows let go of replaced values soon (they hold each one
        until a changelog replacing it is applied) -- unless changelogs are still waiting for the
        snapshot side, whose next apply then takes these as well."""
        self._writes = 0
        if self._handoffs:
            return
        gen = self._hand_off()

        def apply() -> None:
            with self._shadow_lock:
                if self._shadow_gen < gen:
                    self._apply_handoffs(gen, 0)

        self._executor_for_snapshots().submit(apply)

    @staticmethod
    def _full_snapshot_ttl(table: StateTable) -> int | None:
        """The TTL whose expired entries a full snapshot leaves out (``cleanupFullSnapshot``)."""
        d = table.descriptor
        if d is not None and d.ttl_config is not None and d.ttl_config.cleanup_full_snapshot:
            return d.ttl_config.ttl_ms
        return None

    def _apply_handoffs(self, gen: int, checkpoint_id: int) -> None:
        """(Snapshot thread, ``_shadow_lock`` held) every changelog handed over up to the
        synchronous part ``gen``, oldest first, into the shadows. A changelog is applied even if
        its own snapshot never runs (an aborted checkpoint): the next one applies it first."""
        if self._shadow_gen >= gen:  # only if an executor ran a later snapshot first
            raise RuntimeError(
                f"the snapshot of checkpoint {checkpoint_id} ran after a later one; the state it was taken of is gone"
            )
        while self._handoffs and self._handoffs[0][0] <= gen:
            g, handed, timer_changes = self._handoffs.popleft()
            since_pause = 0
            dirty = self._dirty if self.incremental and g != self._clean_gen else None
            for i, (m, changes, removed, name, kg) in enumerate(handed):
                if dirty is not None:
                    d = dirty.get((name, kg))
                    if d is None:
                        d = dirty[(name, kg)] = set()
                    d.update(changes)
                    if removed:
                        d.update(removed)
                shadow = m.shadow
                if not shadow:
                    m.shadow = changes  # the first changelog of a key group is its whole state
                else:
                    # replacing an entry frees the old value here: a few hundred ns a cold entry,
                    # so the GIL is let go every APPLY_CHUNK_ENTRIES
                    if len(changes) <= APPLY_CHUNK_ENTRIES:
                        shadow.update(changes)
                    else:
                        items = iter(changes.items())
                        for _ in range(0, len(changes), APPLY_CHUNK_ENTRIES):
                            shadow.update(itertools.islice(items, APPLY_CHUNK_ENTRIES))
                            _let_others_run()
                    if removed:
                        for ek in removed:
                            shadow.pop(ek, None)
                    since_pause += len(changes) + len(removed or ())
                handed[i] = None  # type: ignore[call-overload]  # freed a key group at a time
                del changes, removed, shadow
                if since_pause >= APPLY_CHUNK_ENTRIES:
                    _let_others_run()
                    since_pause = 0
            for q, ch in timer_changes:
                q.apply(ch)
                if dirty is not None:
                    for kg, c in ch.items():
                        td = self._dirty_timers.get((q.name, kg))
                        if td is None:
                            td = self._dirty_timers[(q.name, kg)] = set()
                        td.update(c)
            self._shadow_gen = g

    # ------------------------------------------------------------------ incremental checkpoints
    def _take_dirty(self, checkpoint_id: int) -> None:
        """(Snapshot thread, ``_shadow_lock`` held) what changed since the last snapshot, filed
        under ``checkpoint_id``: the deltas after it include it until a later one is confirmed."""
        if not self.incremental:
            return
        dirty, timers = self._dirty, self._dirty_timers
        self._dirty, self._dirty_timers = {}, {}
        with self._chain_lock:
            self._dirty_by_checkpoint[checkpoint_id] = (dirty, timers)

    def _write_incremental(
        self,
        gen: int,
        views: tuple[list, list],
        checkpoint_id: int,
        now: int,
        label: str,
        factory: Any,
    ) -> SnapshotResult:
        """(Snapshot thread) an incremental checkpoint: the chain of the newest checkpoint
        confirmed to this backend plus a delta of what changed since, or a new base."""
        rng = self.key_group_range
        with self._shadow_lock:
            self._apply_handoffs(gen, checkpoint_id)
            self._take_dirty(checkpoint_id)
            with self._chain_lock:
                confirmed = self._confirmed
                force = self._materialize_next
                self._materialize_next = False
                since = [
                    d
                    for c, d in sorted(self._dirty_by_checkpoint.items())
                    if confirmed is None or c > confirmed.checkpoint_id
                ]
            prefix = getattr(factory, "shared_prefix", None)
            reason = self.materialization.must_materialize(confirmed, force, prefix)
            chain: Chain | None = None
            written = 0
            if reason is None:
                assert confirmed is not None
                delta = DeltaWriter(self.compression, _let_others_run)
                for (name, kg), eks in _merged([d[0] for d in since]).items():
                    table = self._tables.get(name)
                    m = table.maps.get(kg) if table is not None else None
                    shadow = m.shadow if m is not None else {}
                    ttl_ms = self._full_snapshot_ttl(table) if table is not None else None
                    if ttl_ms is None:
                        delta.entries(kg, name, ((ek, shadow.get(ek, MISSING)) for ek in eks))
                    else:  # (expired: left out as a full snapshot would, i.e. removed)
                        delta.entries(
                            kg, name, ((ek, _drop_expired(shadow.get(ek, MISSING), now, ttl_ms)) for ek in eks)
                        )
                for (name, kg), timers in _merged([d[1] for d in since]).items():
                    q = self._queues.get(name)
                    delta.timers(kg, name, timers, q.shadow_of(kg) if q is not None else set())
                payload = delta.finish()
                if payload is None:
                    chain = confirmed.extended(checkpoint_id, None)
                elif self.materialization.delta_fits(confirmed, len(payload)):
                    handle = factory.write_shared(payload, label + "-delta", rng, DELTA)
                    payload.release(_let_others_run)
                    written = handle.size
                    chain = confirmed.extended(checkpoint_id, handle)
            if chain is None:  # a new base: every key group's shadow
                parts, _ = self._parts(views, shadow=True)
                bases: list[SharedFileHandle] = []
                for kgs, payload in _encode_files(
                    parts, now, self.compression, yield_gil=True, file_bytes=SNAPSHOT_FILE_BYTES
                ):
                    bases.append(factory.write_shared(payload, label + "-base", kgs, BASE))
                    payload.release(_let_others_run)
                written = sum(b.size for b in bases)
                chain = Chain.materialized(checkpoint_id, tuple(bases))
            # (from the views taken at the synchronous part: the task may register states meanwhile)
            metas = tuple(table.meta for _, table, _, _ in views[0]) + tuple(
                self._tables[name].meta for name, _ in views[1]
            )
        with self._chain_lock:
            self._chains[checkpoint_id] = chain
        if not chain.files:
            return SnapshotResult()
        return SnapshotResult(
            keyed_handles=(
                IncrementalKeyedStateHandle(
                    rng, checkpoint_id, chain.files, (), metas, self.backend_name, checkpointed_size=written
                ),
            )
        )

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """(Task thread) checkpoint ``checkpoint_id`` completed: its chain is confirmed (later
        checkpoints may refer to its files), what changed up to it is in it."""
        if not self.incremental:
            return
        with self._chain_lock:
            chain = self._chains.pop(checkpoint_id, None)
            if chain is None:
                return  # not one of this backend's incremental snapshots (a savepoint, an old one)
            if self._confirmed is not None and self._confirmed.checkpoint_id > checkpoint_id:
                return
            self._confirmed = chain
            for c in [c for c in self._chains if c < checkpoint_id]:
                del self._chains[c]
            for c in [c for c in self._dirty_by_checkpoint if c <= checkpoint_id]:
                del self._dirty_by_checkpoint[c]

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """(Task thread) checkpoint ``checkpoint_id`` was aborted: its files are never referred
        to again, and the next checkpoint writes a new base (the confirmed chain it would build
        on may have been let go meanwhile; see ``checkpoint/shared.py``)."""
        if not self.incremental:
            return
        with self._chain_lock:
            if self._chains.pop(checkpoint_id, None) is not None:
                self._materialize_next = True

    def _snapshot_forked(self, factory: CheckpointStreamFactory, now: int, label: str) -> Future[SnapshotResult]:
        """Fork mode: the child serializes its copy-on-write image of the live state."""
        parts, metas = self._parts(self._views(), shadow=False)
        rng = self.key_group_range
        if not parts:
            done: Future[SnapshotResult] = Future()
            done.set_result(SnapshotResult())
            return done
        wait_for_child = _encode_in_child(parts, now, self.compression)

        def write_forked() -> SnapshotResult:
            handle = factory.write_state(wait_for_child(), label)
            return SnapshotResult(keyed_handles=(KeyGroupsStateHandle(rng, handle, tuple(metas), self.backend_name),))

        return self._executor_for_snapshots().submit(write_forked)

    def _executor_for_snapshots(self) -> Executor:
        if self._executor is not None:
            return self._executor
        if self._own_executor is None:
            self._own_executor = ThreadPoolExecutor(1, thread_name_prefix=f"async-snapshot-{self.name or 'keyed'}")
        return self._own_executor

    # ------------------------------------------------------------------ restore
    def restore(self, handles: Iterable[KeyedStateHandle], read: StateReader = read_inline) -> int:
        """Load the entries of this backend's key groups from ``handles`` (of any key-group
        ranges: a rescaled job passes every handle that intersects). Returns the entry count.

        An incremental handle's bases are loaded, then its deltas applied in order (files of
        other key groups are not read). When it is this backend's own (same key groups: no
        rescale), an incremental backend builds its next checkpoints on its chain."""
        count = 0
        adopt: list[IncrementalKeyedStateHandle] = []
        for h in handles:
            if len(h.key_group_range.intersection(self.key_group_range)) == 0:
                continue
            if h.backend not in CANONICAL_BACKENDS:
                raise StateMigrationError(
                    f"keyed state was written by the {h.backend!r} backend; the hashmap backend restores "
                    f"snapshots of {', '.join(CANONICAL_BACKENDS)}"
                )
            for meta in h.states:
                self._table(meta.name, meta.kind, meta.ttl)
                if meta.kind == TIMERS and meta.name not in self._queues:
                    self._queues[meta.name] = KeyGroupedTimerQueue(meta.name, self._track)
            if isinstance(h, KeyGroupsStateHandle):
                count += self._load(read(h.delegate))
                continue
            if h.backend != self.backend_name:
                raise StateMigrationError(
                    f"keyed state is an incremental checkpoint of the {h.backend} backend; the hashmap backend "
                    "restores its own incremental checkpoints and full snapshots of either backend (take a "
                    "savepoint, which is always full, and restore from it)"
                )
            if h.private:
                raise StateMigrationError(f"a {self.backend_name} incremental snapshot has no private files: {h}")
            for f in h.shared:
                if len(f.key_group_range.intersection(self.key_group_range)) == 0:
                    continue
                if f.kind == BASE:
                    count += self._load(read(f))
                elif f.kind == DELTA:
                    count += self._apply_delta(read(f))
                else:
                    raise StateMigrationError(f"shared state file {f.path} is of an unknown kind {f.kind!r}")
            if h.key_group_range == self.key_group_range:
                adopt.append(h)
        if self.incremental and len(adopt) == 1:
            h = adopt[0]
            with self._chain_lock:
                self._confirmed = Chain.of(h.checkpoint_id, h.shared)
            self._clean_gen = self._hand_off()  # what was loaded is in that chain: not a change
        return count

    def _apply_delta(self, payload: bytes) -> int:
        """A delta file's changes to the key groups of this backend (restore)."""

        def put(kg: int, state: str, key: Any, ns: Any, value: Any) -> None:
            t = self._tables.get(state)
            if t is None:
                raise StateMigrationError(f"a delta changes state {state!r}, which its snapshot does not declare")
            m = t.maps.get(kg)
            if m is None:
                m = t.maps[kg] = KeyGroupMap(self._track)
            ek = entry_key(key, ns)
            m.data[ek] = value
            if m.changes is not None:
                m.changes[ek] = value

        def remove(kg: int, state: str, key: Any, ns: Any) -> None:
            t = self._tables.get(state)
            m = t.maps.get(kg) if t is not None else None
            if m is None:
                return
            ek = entry_key(key, ns)
            m.data.pop(ek, None)
            if m.changes is not None:
                m.changes.pop(ek, None)

        def timer(kg: int, state: str, ts: int, key: Any, ns: Any, added: bool) -> None:
            q = self._queues.get(state)
            if q is None:
                raise StateMigrationError(f"a delta changes timers {state!r}, which its snapshot does not declare")
            if added:
                q.add(ts, key, ns, kg)
            else:
                q.remove(ts, key, ns, kg)

        rng = self.key_group_range
        return apply_delta(
            payload, rng, {n for n, t in self._tables.items() if t.meta.kind == TIMERS}, put, remove, timer
        )

    def _load(self, payload: bytes) -> int:
        with pa.ipc.open_stream(pa.BufferReader(payload)) as reader:
            md = reader.schema.metadata or {}
            if md.get(b"format") != SNAPSHOT_FORMAT.encode():
                raise StateMigrationError(
                    f"not a {SNAPSHOT_FORMAT} keyed state snapshot (format {md.get(b'format')!r})"
                )
            table = reader.read_all()
        if table.num_rows == 0:
            return 0
        kgs = table.column("key_group").to_numpy()
        rng = self.key_group_range
        keep = np.flatnonzero((kgs >= rng.start) & (kgs <= rng.end))
        if len(keep) == 0:
            return 0
        table = table.take(pa.array(keep))
        loads = pickle.loads
        count = 0
        for kg, state, entry, value in zip(
            table.column("key_group").to_pylist(),
            table.column("state").to_pylist(),
            table.column("entry").to_pylist(),
            table.column("value").to_pylist(),
        ):
            t = self._tables[state]
            if t.meta.kind == TIMERS:
                key, ns = loads(entry)
                self._queues[state].add(loads(value), key, ns, kg)
            else:
                m = t.maps.get(kg)
                if m is None:
                    m = t.maps[kg] = KeyGroupMap(self._track)
                key, ns = loads(entry)
                ek = entry_key(key, ns)
                m.data[ek] = v = loads(value)
                if m.changes is not None:  # the first snapshot's changelog brings it to the shadow
                    m.changes[ek] = v
            count += 1
        return count

    def dispose(self) -> None:
        if self._own_executor is not None:
            self._own_executor.shutdown(wait=True)
            self._own_executor = None
        self._tables.clear()
        self._queues.clear()
        self._states.clear()
        self._handoffs.clear()


#: rows per Arrow record batch of a snapshot: each batch's columns are built in a few bulk calls
#: (``snapshot_serializer``) that hold the GIL for well under a millisecond, after which a snapshot
#: thread lets the task thread run (see docs/PERFORMANCE.md)
ENCODE_CHUNK_ROWS = 2048
#: a thread-mode snapshot of more keyed state than this is written as several files, each of
#: whole key groups (memory for one file at a time while writing; on S3 one PUT per file)
SNAPSHOT_FILE_BYTES = 64 << 20
_SNAPSHOT_SCHEMA = pa.schema(
    [("key_group", pa.int32()), ("state", pa.string()), ("entry", pa.large_binary()), ("value", pa.large_binary())],
    metadata={b"format": SNAPSHOT_FORMAT.encode()},
)


#: writes after which the task hands its changelogs over even without a checkpoint (bounds the
#: replaced values the shadows hold to about this many; docs/PERFORMANCE.md)
HAND_OFF_WRITES = 65536

#: changelog entries the snapshot thread applies to a shadow between two GIL releases
APPLY_CHUNK_ENTRIES = 4096

#: a forked snapshot process still running after this long is killed (the checkpoint fails)
FORK_TIMEOUT_S = 600.0


def _encode_in_child(
    parts: list[tuple[int, str, Any, Any]], now: int, compression: str | None = None
) -> Callable[[], bytes]:
    """Fork; the child encodes ``parts`` (its copy-on-write image of them) into a temporary file
    and exits. Returns the function that waits for the child and returns the file's bytes
    (read in one call, so no copy of the payload is made while holding the GIL)."""
    fd, path = tempfile.mkstemp(prefix="yarnflink-snapshot-", suffix=".arrow")
    pid = os.fork()
    if pid == 0:  # the child: encode, write, exit -- never return into the task's code
        code = 1
        try:
            for view in _encode_pieces(parts, now, compression).buffers():
                while view:
                    view = view[os.write(fd, view) :]
            code = 0
        finally:
            os._exit(code)
    os.close(fd)

    def wait() -> bytes:
        try:
            deadline = time.monotonic() + FORK_TIMEOUT_S
            pause = 0.001
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                if time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    raise TimeoutError(f"the snapshot process did not finish within {FORK_TIMEOUT_S:g}s")
                time.sleep(pause)
                pause = min(pause * 2, 0.02)
            code = os.waitstatus_to_exitcode(status)
            if code != 0:
                raise RuntimeError(f"the snapshot process failed (exit status {code})")
            with open(path, "rb") as f:
                return f.read()
        finally:
            try:
                os.unlink(path)
            except OSError:
                pass

    return wait


class _BatchBuilder:
    """Rows gathered per state up to ``ENCODE_CHUNK_ROWS``, then written as one record batch
    whose ``entry`` and ``value`` columns are pickled in bulk (one state per batch: its values
    are more likely all of one type, which is what the bulk path needs). Rows come in key-group
    order, several states interleaved; each state's batch keeps its rows in that order."""

    def __init__(self, writer: pa.ipc.RecordBatchStreamWriter, yield_gil: bool) -> None:
        self._writer = writer
        self._yield_gil = yield_gil
        #: state -> ((key group, rows) in row order, entries, values) not written yet
        self._pending: dict[str, tuple[list[tuple[int, int]], list[Any], list[Any]]] = {}

    def add(self, key_group: int, state: str, entries: list[Any], values: list[Any]) -> None:
        """Rows ``(key_group, state, entries[i], values[i])``, written in batches as they fill."""
        start = 0
        while start < len(entries):
            groups, es, vs = self._pending.setdefault(state, ([], [], []))
            take = min(len(entries) - start, ENCODE_CHUNK_ROWS - len(es))
            groups.append((key_group, take))
            es += entries[start : start + take]
            vs += values[start : start + take]
            start += take
            if len(es) >= ENCODE_CHUNK_ROWS:
                self._write(state)

    def flush(self) -> None:
        for state in list(self._pending):
            self._write(state)

    def _write(self, state: str) -> None:
        key_groups, entries, values = self._pending.pop(state)
        if not entries:
            return
        groups, counts = zip(*key_groups)
        pause = _let_others_run if self._yield_gil else None
        self._writer.write_batch(
            pa.RecordBatch.from_arrays(
                [
                    pa.array(np.repeat(np.array(groups, dtype=np.int32), counts)),
                    pa.repeat(pa.scalar(state, pa.string()), len(entries)),
                    pickled_entry_column(entries, pause),
                    pickled_column(values, pause),
                ],
                schema=_SNAPSHOT_SCHEMA,
            )
        )
        if pause is not None:
            pause()


def _let_others_run() -> None:
    """Release the GIL: a waiting task thread runs now, not after the 5 ms switch interval."""
    time.sleep(0)


def _encode(parts: list[tuple[int, str, Any, Any]], now: int, compression: str | None = None) -> memoryview:
    """The Arrow IPC stream of a snapshot in one buffer (the State Processor API writes it)."""
    return _encode_pieces(parts, now, compression).contiguous()


def _encode_pieces(
    parts: list[tuple[int, str, Any, Any]], now: int, compression: str | None = None, yield_gil: bool = False
) -> BufferPieces:
    """The Arrow IPC stream of a snapshot, in one file (see ``_encode_files``); a stream of no
    rows if ``parts`` is empty."""
    if not parts:
        out = BufferPieces()
        with pa.ipc.new_stream(pa.PythonFile(out, mode="w"), _SNAPSHOT_SCHEMA):
            pass
        return out
    return next(_encode_files(parts, now, compression, yield_gil, file_bytes=None))[1]


def _encode_files(
    parts: list[tuple[int, str, Any, Any]],
    now: int,
    compression: str | None = None,
    yield_gil: bool = False,
    file_bytes: int | None = None,
) -> Iterator[tuple[KeyGroupRange, BufferPieces]]:
    """The snapshot's files: Arrow IPC streams of record batches of up to ``ENCODE_CHUNK_ROWS``
    rows of one state (compressed, if asked, outside the GIL), kept as the pieces Arrow wrote,
    without copies (a stream factory writes them one after the other). Rows are in key-group
    order; a file ends at the first key-group boundary after ``file_bytes`` (None: one file), and
    comes with the key groups it holds. Nothing if ``parts`` is empty.

    The next file is serialized only when the caller asks for it, so a caller that writes each
    file and lets it go holds one file's pieces at a time, not the whole snapshot's.

    ``parts`` is consumed (emptied): a key group's dict is let go as soon as it is written, so
    that one copied-on-write by the task meanwhile is freed then, a key group at a time. Freed
    all at once at the end, a 1 GB snapshot's replaced entries held the GIL for ~0.5 s."""
    parts.sort(key=lambda p: (p[0], p[1]), reverse=True)  # popped from the end: key group, then state
    while parts:
        out = BufferPieces()
        first = last = parts[-1][0]
        with pa.ipc.new_stream(
            pa.PythonFile(out, mode="w"), _SNAPSHOT_SCHEMA, options=pa.ipc.IpcWriteOptions(compression=compression)
        ) as w:
            batches = _BatchBuilder(w, yield_gil)
            while parts:
                if parts[-1][0] != last and file_bytes is not None and len(out) >= file_bytes:
                    break  # at a key-group boundary, with the file full
                kg, name, ttl_ms, data = parts.pop()
                last = kg
                if ttl_ms == TIMERS:
                    batches.add(kg, name, [(key, ns) for _, key, ns in data], [ts for ts, _, _ in data])
                elif ttl_ms is not None:
                    kept = [
                        (ek, v)
                        for ek, v in ((ek, _drop_expired(v, now, ttl_ms)) for ek, v in data.items())
                        if v is not MISSING
                    ]
                    batches.add(kg, name, [ek for ek, _ in kept], [v for _, v in kept])
                else:  # the dict is not mutated meanwhile (a shadow, or a fork's image): two lists of references
                    batches.add(kg, name, list(data), list(data.values()))
                del data  # (see above)
            batches.flush()
        yield KeyGroupRange(first, last), out


def _merged(dicts: list[dict[tuple[str, int], set]]) -> dict[tuple[str, int], set]:
    """The union of several ``(state, key group) -> keys`` dicts (one of them as it is)."""
    if len(dicts) == 1:
        return dicts[0]
    out: dict[tuple[str, int], set] = {}
    for d in dicts:
        for k, v in d.items():
            s = out.get(k)
            if s is None:
                out[k] = set(v)
            else:
                s |= v
    return out


def _expired(tv: TtlValue, now: int, ttl_ms: int) -> bool:
    return tv.ts + ttl_ms <= now


def _drop_expired(v: Any, now: int, ttl_ms: int) -> Any:
    """A stored value without its expired parts (``MISSING`` if nothing is left)."""
    if isinstance(v, TtlValue):
        return MISSING if _expired(v, now, ttl_ms) else v
    if isinstance(v, list):
        kept = [e for e in v if not (isinstance(e, TtlValue) and _expired(e, now, ttl_ms))]
        return kept if kept else MISSING
    if isinstance(v, dict):
        kept_d = {k: e for k, e in v.items() if not (isinstance(e, TtlValue) and _expired(e, now, ttl_ms))}
        return kept_d if kept_d else MISSING
    return v


TtlUpdate = StateTtlConfig.UpdateType
