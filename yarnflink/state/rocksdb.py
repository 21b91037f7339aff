"""The ``rocksdb`` keyed state backend (Flink's ``EmbeddedRocksDBStateBackend``): keyed state in an
embedded RocksDB (through ``rocksdict``) in a TaskExecutor-local directory, so state can outgrow
the TaskExecutor's memory; what it holds in memory is bounded by configuration (``RocksDBMemory``).

Layout: one key space, every key prefixed by its key group (2 bytes, big-endian), then the state
(2 bytes: an id given when the state is registered), then a canonical pickle of ``(key, namespace)``
(no memo, so equal keys have equal bytes); the value is a pickle of the stored value (a
``TtlValue`` under a TTL, as on the heap). A key-group range is therefore one contiguous range of
the store: a snapshot scans it in key-group order, a restore deletes what is outside its range.

The state objects (``keyed_states``) are the heap backend's: they read and change the values of
the current key, which this backend keeps decoded in a small cache (``_cache``) and writes back,
changed ones only, when the current key changes (and before a snapshot or a scan). Changing a
list, map or accumulator in place thus costs one decode and one encode per record, not per call.

Timers stay on the heap (Flink's ``state.backend.rocksdb.timer-service.factory: HEAP``), in the
heap backend's ``KeyGroupedTimerQueue``, and are snapshotted with the state.

Snapshots are full and canonical: the rows of the ``hashmap`` backend's snapshot format (an Arrow
IPC stream of ``key_group, state, entry, value``), so that a savepoint or checkpoint of either
backend restores on the other, and the State Processor API reads both. The synchronous part takes a
RocksDB checkpoint (the memtable flushed, the immutable SST files hard-linked into a directory of
their own); the asynchronous part opens that checkpoint read-only, scans it and writes the rows
(the entries are copied as they are stored, nothing is decoded unless a TTL asks to drop expired
entries), then deletes it. (A RocksDB snapshot would cost less in the synchronous part, but
rocksdict 0.3.29's iterators ignore it: tests/unit/state/test_rocksdb_backend.py.)
"""

from __future__ import annotations

import io
import itertools
import os
import pickle
import re
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pyarrow as pa

from yarnflink.common.keygroups import key_group_of
from yarnflink.state.descriptors import StateDescriptor
from yarnflink.state.handles import (
    KeyedStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    SnapshotResult,
    StateMetaInfo,
)
from yarnflink.state.heap import (
    _SNAPSHOT_SCHEMA,
    CANONICAL_BACKENDS,
    ENCODE_CHUNK_ROWS,
    SNAPSHOT_FILE_BYTES,
    SNAPSHOT_FORMAT,
    TIMERS,
    KeyGroupedTimerQueue,
    KeyGroupRangeError,
    StateMigrationError,
    _drop_expired,
    _let_others_run,
    _now_ms,
)
from yarnflink.state.keyed_states import STATE_CLASSES
from yarnflink.state.snapshot_serializer import binary_array, dumps, split_entry_key
from yarnflink.state.streams import CheckpointStreamFactory, InlineStreamFactory, StateReader, read_inline
from yarnflink.state.tables import MISSING, StateTable

_NOT_CACHED: Any = object()
#: rows a restore writes to the store in one write batch
RESTORE_BATCH_ROWS = 4096
#: the prefix of a backend's directory in the local directory (its pid decides whether it is stale)
_DIR_PREFIX = "yarnflink-rocksdb-"
_DIR_RE = re.compile(r"^yarnflink-rocksdb-(\d+)-")


def canonical_entry(key: Any, namespace: Any) -> bytes:
    """The pickle of ``(key, namespace)`` without memo: equal keys give equal bytes (a memo
    would make them depend on which parts are the same object)."""
    f = io.BytesIO()
    p = pickle.Pickler(f, protocol=pickle.HIGHEST_PROTOCOL)
    p.fast = True
    p.dump((key, namespace))
    return f.getvalue()


@dataclass(frozen=True)
class RocksDBMemory:
    """What RocksDB may hold in memory. ``managed``: one LRU cache of ``fixed_per_tm`` bytes for
    every rocksdb backend of the TaskExecutor process holds the data blocks, the index and filter
    blocks and (charged to it by a write buffer manager) the memtables, which get
    ``write_buffer_ratio`` of it (Flink's managed memory for RocksDB). Not managed: each backend
    its own ``block_cache_size`` cache and ``write_buffer_count`` memtables of
    ``write_buffer_size``."""

    managed: bool = True
    fixed_per_tm: int = 256 << 20
    write_buffer_ratio: float = 0.5
    block_cache_size: int = 8 << 20
    write_buffer_size: int = 64 << 20
    write_buffer_count: int = 2


_shared_lock = threading.Lock()
_shared: dict[tuple[int, float], tuple[Any, Any]] = {}


def _shared_cache(memory: RocksDBMemory) -> tuple[Any, Any]:
    """The TaskExecutor's cache and write buffer manager for ``memory`` (made once per process)."""
    from rocksdict import Cache, WriteBufferManager

    key = (memory.fixed_per_tm, memory.write_buffer_ratio)
    with _shared_lock:
        got = _shared.get(key)
        if got is None:
            cache = Cache(memory.fixed_per_tm)
            wbm = WriteBufferManager.new_write_buffer_manager_with_cache(
                max(1 << 20, int(memory.fixed_per_tm * memory.write_buffer_ratio)), False, cache
            )
            got = _shared[key] = (cache, wbm)
        return got


def _options(memory: RocksDBMemory) -> Any:
    from rocksdict import BlockBasedOptions, Cache, Options

    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.set_max_background_jobs(2)
    opts.set_keep_log_file_num(2)
    table = BlockBasedOptions()
    table.set_cache_index_and_filter_blocks(True)
    table.set_pin_l0_filter_and_index_blocks_in_cache(True)
    table.set_bloom_filter(10, False)
    if memory.managed:
        cache, wbm = _shared_cache(memory)
        table.set_block_cache(cache)
        opts.set_write_buffer_manager(wbm)
        # a memtable of at most half the memtable budget, so two fit (one flushing, one filling)
        opts.set_write_buffer_size(max(1 << 20, int(memory.fixed_per_tm * memory.write_buffer_ratio) // 2))
        opts.set_max_write_buffer_number(2)
    else:
        table.set_block_cache(Cache(memory.block_cache_size))
        opts.set_write_buffer_size(memory.write_buffer_size)
        opts.set_max_write_buffer_number(memory.write_buffer_count)
    opts.set_block_based_table_factory(table)
    return opts


def remove_stale_dirs(local_dir: str) -> list[str]:
    """Delete the backend directories in ``local_dir`` of processes that are gone (a
    TaskExecutor killed before it could dispose of its backends). Returns what it deleted."""
    gone: list[str] = []
    try:
        names = os.listdir(local_dir)
    except FileNotFoundError:
        return gone
    for name in names:
        m = _DIR_RE.match(name)
        if m is None or int(m.group(1)) == os.getpid() or _alive(int(m.group(1))):
            continue
        shutil.rmtree(os.path.join(local_dir, name), ignore_errors=True)
        gone.append(name)
    return gone


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def default_local_dir() -> str:
    return os.path.join(tempfile.gettempdir(), "yarnflink-rocksdb")


class RocksDBKeyedStateBackend:
    """Keyed state for the key groups ``key_group_range`` of ``max_parallelism`` in a RocksDB
    under ``local_dir`` (deleted by ``dispose``). The same interface as ``HeapKeyedStateBackend``."""

    backend_name = "rocksdb"

    def __init__(
        self,
        max_parallelism: int,
        key_group_range: KeyGroupRange | range,
        *,
        clock: Callable[[], int] = _now_ms,
        executor: Executor | None = None,
        name: str = "",
        local_dir: str | None = None,
        memory: RocksDBMemory | None = None,
        compression: str | None = None,
    ):
        from rocksdict import Rdict, WriteOptions

        if isinstance(key_group_range, range):
            key_group_range = KeyGroupRange.of(key_group_range)
        if not 0 < max_parallelism <= 32768:
            raise ValueError(f"max parallelism must be in 1..32768, got {max_parallelism}")
        self.max_parallelism = max_parallelism
        self.key_group_range = key_group_range
        self.clock = clock
        self.name = name
        self.compression = compression
        self.memory = memory or RocksDBMemory()
        self._executor = executor
        self._own_executor: ThreadPoolExecutor | None = None
        self.local_dir = local_dir or default_local_dir()
        os.makedirs(self.local_dir, exist_ok=True)
        remove_stale_dirs(self.local_dir)
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name or "keyed")[:60]
        #: this backend's directory: the store in ``db``, snapshots' checkpoints beside it
        self.path = os.path.join(self.local_dir, f"{_DIR_PREFIX}{os.getpid()}-{safe}-{uuid.uuid4().hex[:12]}")
        os.makedirs(self.path)
        self._db = Rdict(os.path.join(self.path, "db"), _options(self.memory))
        wo = WriteOptions()
        wo.disable_wal = True  # type: ignore[method-assign,assignment]  # (a property; the stub says a method)  # as Flink: the store is rebuilt from a checkpoint after a failure
        self._db.set_write_options(wo)
        self._wo = wo
        self._tables: dict[str, StateTable] = {}
        self._ids: dict[str, bytes] = {}  # state name -> its 2-byte id in keys
        self._names: dict[bytes, str] = {}
        self._queues: dict[str, KeyGroupedTimerQueue] = {}
        self._states: dict[str, Any] = {}
        self._key: Any = None
        self._kg = -1
        self._kg_prefix = b""
        #: the current key's entries read or written: (state id, entry key) -> value or MISSING
        self._cache: dict[tuple[bytes, Any], Any] = {}
        self._dirty: set[tuple[bytes, Any]] = set()
        self._encoded: dict[Any, bytes] = {}  # entry key -> its canonical bytes (current key)
        self._snapshots = itertools.count()
        self._disposed = False

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
        if key_group != self._kg or key is not self._key and key != self._key:
            if self._cache:
                self._flush()
            self._kg = key_group
            self._kg_prefix = key_group.to_bytes(2, "big")
        self._key = key

    def get_current_key(self) -> Any:
        return self._key

    @property
    def current_key_group(self) -> int:
        return self._kg

    # ------------------------------------------------------------------ entries (state objects)
    def _db_key(self, sid: bytes, ek: Any) -> bytes:
        enc = self._encoded.get(ek)
        if enc is None:
            enc = self._encoded[ek] = canonical_entry(*split_entry_key(ek))
        return self._kg_prefix + sid + enc

    def _get_entry(self, table: StateTable, ek: Any) -> Any:
        if self._kg < 0:
            raise RuntimeError("no current key: keyed state is accessed outside of a keyed context")
        sid = self._ids[table.meta.name]
        ck = (sid, ek)
        v = self._cache.get(ck, _NOT_CACHED)
        if v is _NOT_CACHED:
            raw = self._db.get(self._db_key(sid, ek))
            v = self._cache[ck] = MISSING if raw is None else pickle.loads(raw)
        return v

    def _put_entry(self, table: StateTable, ek: Any, value: Any) -> None:
        if self._kg < 0:
            raise RuntimeError("no current key: keyed state is accessed outside of a keyed context")
        ck = (self._ids[table.meta.name], ek)
        self._cache[ck] = value
        self._dirty.add(ck)

    def _remove_entry(self, table: StateTable, ek: Any) -> None:
        self._put_entry(table, ek, MISSING)

    def _owned_entry(self, table: StateTable, ek: Any, copier: Callable[[Any], Any]) -> Any:
        """The cached entry ``ek`` (it exists), to change in place: written back with the rest."""
        v = self._get_entry(table, ek)
        self._dirty.add((self._ids[table.meta.name], ek))
        return v

    def _flush(self) -> None:
        """Write the current key's changed entries to the store; forget its cached ones."""
        if self._dirty:
            db = self._db
            cache = self._cache
            for sid, ek in self._dirty:
                k = self._db_key(sid, ek)
                v = cache[(sid, ek)]
                if v is MISSING:
                    db.delete(k)
                else:
                    db.put(k, dumps(v))
            self._dirty.clear()
        self._cache.clear()
        self._encoded.clear()

    # ------------------------------------------------------------------ registration
    def _table(self, name: str, kind: str, ttl: bool) -> StateTable:
        t = self._tables.get(name)
        if t is None:
            if len(self._ids) >= 0xFFFF:
                raise StateMigrationError("a rocksdb backend holds at most 65535 states")
            t = self._tables[name] = StateTable(StateMetaInfo(name, kind, ttl))
            sid = len(self._ids).to_bytes(2, "big")
            self._ids[name] = sid
            self._names[sid] = name
        elif t.meta.kind != kind:
            raise StateMigrationError(
                f"state {name!r} is registered as {t.meta.kind} state, but is now declared as {kind} state"
            )
        elif t.meta.ttl != ttl:
            raise StateMigrationError(
                f"state {name!r} was registered {'with' if t.meta.ttl else 'without'} a TTL and is now "
                f"declared {'with' if ttl else 'without'} one; the TTL setting of a state cannot change"
            )
        return t

    def get_partitioned_state(self, descriptor: StateDescriptor) -> Any:
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
        q = self._queues.get(name)
        if q is None:
            self._table(name, TIMERS, False)
            q = self._queues[name] = KeyGroupedTimerQueue(name)
        return q

    def state_names(self) -> list[str]:
        return [n for n, t in self._tables.items() if t.meta.kind != TIMERS]

    # ------------------------------------------------------------------ scans
    def _scan(self, sid: bytes | None = None) -> Iterator[tuple[int, bytes, bytes, bytes]]:
        """``(key group, state id, canonical entry, value)`` of the stored entries (of state
        ``sid``, or of all), in key-group order (pending writes flushed first)."""
        self._flush()
        for k, v in cast(Iterator[tuple[bytes, bytes]], self._db.items()):
            if sid is None or k[2:4] == sid:
                yield int.from_bytes(k[:2], "big"), k[2:4], k[4:], v

    def get_keys(self, state_name: str, namespace: Any = None) -> Iterator[Any]:
        sid = self._ids.get(state_name)
        if sid is None:
            return iter(())
        keys = []
        for _, _, e, _ in self._scan(sid):
            k, ns = pickle.loads(e)
            if ns == namespace:
                keys.append(k)
        return iter(keys)

    def entries(self, state_name: str) -> list[tuple[int, Any, Any]]:
        sid = self._ids.get(state_name)
        if sid is None:
            return []
        return [(kg, *pickle.loads(e)) for kg, _, e, _ in self._scan(sid)]

    def apply_to_all_keys(
        self, descriptor: StateDescriptor, fn: Callable[[Any, Any], None], namespace: Any = None
    ) -> None:
        st = self.get_partitioned_state(descriptor)
        saved = (self._key, self._kg)
        try:
            for kg, k, ns in self.entries(descriptor.name):
                if ns == namespace:
                    self.set_current_key(k, kg)
                    st.set_current_namespace(namespace)
                    fn(k, st)
        finally:
            self._flush()
            self._key, self._kg = saved
            self._kg_prefix = saved[1].to_bytes(2, "big") if saved[1] >= 0 else b""

    def num_entries(self) -> int:
        return sum(1 for _ in self._scan()) + sum(len(q) for q in self._queues.values())

    # ------------------------------------------------------------------ snapshot
    def snapshot(
        self,
        checkpoint_id: int,
        timestamp: int = 0,
        stream_factory: CheckpointStreamFactory | None = None,
    ) -> Future[SnapshotResult]:
        """Synchronous part: the current key's changes written, a RocksDB checkpoint of the store
        taken and the timers copied; the future's background part writes the canonical rows."""
        from rocksdict import Checkpoint

        factory = stream_factory or InlineStreamFactory()
        now = self.clock()
        rng = self.key_group_range
        label = f"{self.name or 'keyed'}-{rng.start}-{rng.end}-chk{checkpoint_id}"
        self._flush()
        chk = os.path.join(self.path, f"snapshot-{checkpoint_id}-{next(self._snapshots)}")
        Checkpoint(self._db).create_checkpoint(chk)
        names = dict(self._names)
        ttls = {
            self._ids[n]: t.descriptor.ttl_config.ttl_ms
            for n, t in self._tables.items()
            if t.descriptor is not None
            and t.descriptor.ttl_config is not None
            and t.descriptor.ttl_config.cleanup_full_snapshot
        }
        timers = [(name, q.snapshot_entries()) for name, q in self._queues.items() if len(q)]
        metas = tuple(self._tables[n].meta for n in self._tables)
        compression = self.compression
        path = self.path

        def write() -> SnapshotResult:
            try:
                files = list(_write_checkpoint_rows(chk, names, ttls, now, compression, factory, label, path))
                for name, entries in timers:
                    files += _write_timer_rows(name, entries, compression, factory, label, path)
            finally:
                shutil.rmtree(chk, ignore_errors=True)
            return SnapshotResult(
                keyed_handles=tuple(KeyGroupsStateHandle(kgs, h, metas, self.backend_name) for kgs, h in files)
            )

        return self._executor_for_snapshots().submit(write)

    def _executor_for_snapshots(self) -> Executor:
        if self._executor is not None:
            return self._executor
        if self._own_executor is None:
            self._own_executor = ThreadPoolExecutor(1, thread_name_prefix=f"async-snapshot-{self.name or 'keyed'}")
        return self._own_executor

    # ------------------------------------------------------------------ restore
    def restore(self, handles: Iterable[KeyedStateHandle], read: StateReader = read_inline) -> int:
        """Load the entries of this backend's key groups from ``handles`` (canonical snapshots of
        either backend, of any key-group ranges). Returns the entry count."""
        self._flush()
        count = 0
        for h in handles:
            if len(h.key_group_range.intersection(self.key_group_range)) == 0:
                continue
            if not isinstance(h, KeyGroupsStateHandle):
                raise StateMigrationError(
                    "keyed state is an incremental checkpoint of the hashmap backend; the rocksdb backend "
                    "restores full snapshots (take a savepoint, which is always full, and restore from it)"
                )
            if h.backend not in CANONICAL_BACKENDS:
                raise StateMigrationError(
                    f"keyed state was written by the {h.backend!r} backend; the rocksdb backend restores "
                    f"snapshots of {', '.join(CANONICAL_BACKENDS)}"
                )
            for meta in h.states:
                self._table(meta.name, meta.kind, meta.ttl)
                if meta.kind == TIMERS and meta.name not in self._queues:
                    self._queues[meta.name] = KeyGroupedTimerQueue(meta.name)
            count += self._load(read(h.delegate))
        return count

    def _load(self, payload: bytes) -> int:
        from rocksdict import WriteBatch

        with pa.ipc.open_stream(pa.BufferReader(payload)) as reader:
            md = reader.schema.metadata or {}
            if md.get(b"format") != SNAPSHOT_FORMAT.encode():
                raise StateMigrationError(
                    f"not a {SNAPSHOT_FORMAT} keyed state snapshot (format {md.get(b'format')!r})"
                )
            rng = self.key_group_range
            count = 0
            loads = pickle.loads
            for batch in reader:
                kgs = batch.column(0).to_numpy()
                keep = np.flatnonzero((kgs >= rng.start) & (kgs <= rng.end))
                if len(keep) == 0:
                    continue
                if len(keep) < len(kgs):
                    batch = batch.take(pa.array(keep))
                wb = WriteBatch(raw_mode=True)
                for kg, state, entry, value in zip(
                    batch.column(0).to_pylist(),
                    batch.column(1).to_pylist(),
                    batch.column(2).to_pylist(),
                    batch.column(3).to_pylist(),
                ):
                    key, ns = loads(entry)
                    if self._tables[state].meta.kind == TIMERS:
                        self._queues[state].add(loads(value), key, ns, kg)
                    else:
                        wb.put(kg.to_bytes(2, "big") + self._ids[state] + canonical_entry(key, ns), value)
                    count += 1
                self._db.write(wb, self._wo)
        return count

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """(Task thread) Nothing to confirm: this backend's snapshots are full."""

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """(Task thread) Nothing to let go: this backend's snapshots are full."""

    def dispose(self) -> None:
        """Close the store and delete its directory (the task ended)."""
        if self._own_executor is not None:
            self._own_executor.shutdown(wait=True)
            self._own_executor = None
        if not self._disposed:
            self._disposed = True
            self._cache.clear()
            self._dirty.clear()
            self._db.close()
            shutil.rmtree(self.path, ignore_errors=True)
        self._tables.clear()
        self._queues.clear()
        self._states.clear()


# ----------------------------------------------------------------------------- snapshot rows
class _RowFiles:
    """Canonical snapshot rows into Arrow IPC files of about ``SNAPSHOT_FILE_BYTES`` (a file
    ends at a key-group boundary), each written to ``factory`` when full. A file is spooled to
    ``spool_dir`` on local disk and handed to the factory memory-mapped: its pages are the page
    cache's, not the process's own memory (built in memory, a 64 MB file cost ~200 MB of RSS)."""

    def __init__(self, compression: str | None, factory: CheckpointStreamFactory, label: str, spool_dir: str) -> None:
        self._opts = pa.ipc.IpcWriteOptions(compression=compression)
        self._factory = factory
        self._label = label
        self._spool = os.path.join(spool_dir, f"spool-{uuid.uuid4().hex}.arrow")
        self._sink: Any = None
        self._writer: Any = None
        self._first = self._last = -1
        self._rows: tuple[list[int], list[str], list[bytes], list[bytes]] = ([], [], [], [])
        self.done: list[tuple[KeyGroupRange, Any]] = []

    def add(self, kg: int, state: str, entry: bytes, value: bytes) -> None:
        if kg != self._last and self._sink is not None and self._sink.tell() >= SNAPSHOT_FILE_BYTES:
            self._close_file()
        if self._sink is None:
            self._sink = pa.OSFile(self._spool, "wb")
            self._writer = pa.ipc.new_stream(self._sink, _SNAPSHOT_SCHEMA, options=self._opts)
            self._first = kg
        self._last = kg
        kgs, states, entries, values = self._rows
        kgs.append(kg)
        states.append(state)
        entries.append(entry)
        values.append(value)
        if len(kgs) >= ENCODE_CHUNK_ROWS:
            self._write_batch()

    def _write_batch(self) -> None:
        kgs, states, entries, values = self._rows
        if not kgs:
            return
        self._writer.write_batch(
            pa.RecordBatch.from_arrays(
                [
                    pa.array(np.array(kgs, dtype=np.int32)),
                    pa.array(states, pa.string()),
                    binary_array(entries),
                    binary_array(values),
                ],
                schema=_SNAPSHOT_SCHEMA,
            )
        )
        self._rows = ([], [], [], [])
        _let_others_run()

    def _close_file(self) -> None:
        self._write_batch()
        self._writer.close()
        self._sink.close()
        self._sink = self._writer = None
        try:
            with pa.memory_map(self._spool) as mapped:
                handle = self._factory.write_state(mapped.read_buffer(), self._label)  # type: ignore[arg-type]
        finally:
            os.unlink(self._spool)
        self.done.append((KeyGroupRange(self._first, self._last), handle))

    def close(self) -> list[tuple[KeyGroupRange, Any]]:
        if self._sink is not None:
            self._close_file()
        return self.done


def _write_checkpoint_rows(
    chk: str,
    names: dict[bytes, str],
    ttls: dict[bytes, int],
    now: int,
    compression: str | None,
    factory: CheckpointStreamFactory,
    label: str,
    spool_dir: str,
) -> Iterator[tuple[KeyGroupRange, Any]]:
    """(Snapshot thread) the rows of the RocksDB checkpoint ``chk`` as snapshot files."""
    from rocksdict import AccessType, Options, Rdict

    db = Rdict(chk, Options(raw_mode=True), access_type=AccessType.read_only())
    try:
        files = _RowFiles(compression, factory, label, spool_dir)
        for k, v in cast(Iterator[tuple[bytes, bytes]], db.items()):
            sid = k[2:4]
            ttl_ms = ttls.get(sid)
            if ttl_ms is not None:
                kept = _drop_expired(pickle.loads(v), now, ttl_ms)
                if kept is MISSING:
                    continue
                v = dumps(kept)
            files.add(int.from_bytes(k[:2], "big"), names[sid], k[4:], v)
        yield from files.close()
    finally:
        db.close()


def _write_timer_rows(
    name: str,
    entries: list[tuple[int, int, Any, Any]],
    compression: str | None,
    factory: CheckpointStreamFactory,
    label: str,
    spool_dir: str,
) -> list[tuple[KeyGroupRange, Any]]:
    """(Snapshot thread) the timers ``(key group, timestamp, key, namespace)`` as snapshot files."""
    files = _RowFiles(compression, factory, label, spool_dir)
    for kg, ts, key, ns in sorted(entries, key=lambda e: e[0]):
        files.add(kg, name, dumps((key, ns)), dumps(ts))
    return files.close()


__all__ = ["RocksDBKeyedStateBackend", "RocksDBMemory", "canonical_entry", "remove_stale_dirs"]
