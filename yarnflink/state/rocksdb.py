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

Incremental checkpoints (``incremental``, to a factory that takes shared state) use the same
RocksDB checkpoint: its SST files become shared files, uploaded unless the last confirmed
checkpoint uploaded them; its other files, the timers and a manifest are private files
(``_write_incremental``; restored by ``_restore_incremental``).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import io
import itertools
import json
import os
import pickle
import re
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pyarrow as pa

from yarnflink.common.keygroups import key_group_of
from yarnflink.state.descriptors import StateDescriptor
from yarnflink.state.handles import (
    ByteStreamStateHandle,
    IncrementalKeyedStateHandle,
    KeyedStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    SharedFileHandle,
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
    check_redeclaration,
)
from yarnflink.state.keyed_states import STATE_CLASSES
from yarnflink.state.snapshot_serializer import binary_array, dumps, split_entry_key
from yarnflink.state.streams import (
    CheckpointStreamFactory,
    InlineStreamFactory,
    StateReader,
    download,
    read_inline,
    supports_shared_state,
    write_shared_file,
    write_state_file,
)
from yarnflink.state.tables import MISSING, StateTable

_NOT_CACHED: Any = object()
#: the private manifest of an incremental checkpoint (the first private file of its handle)
INCREMENTAL_FORMAT = "yarnflink-rocksdb-incremental-v1"
#: ``SharedFileHandle.kind`` of an SST file
SST = "sst"
#: rows a restore writes to the store in one write batch
RESTORE_BATCH_ROWS = 4096
#: the prefix of a backend's directory in the local directory (its pid decides whether it is stale)
_DIR_PREFIX = "yarnflink-rocksdb-"
_DIR_RE = re.compile(r"^yarnflink-rocksdb-(\d+)-")


class CanonicalPickler:
    """``(key, namespace)`` -> its pickle without memo: equal keys give equal bytes (a memo
    would make them depend on which parts are the same object). One pickler, reused (a new one
    per call cost 3.5 us, reused 0.9 us); one per backend, as a backend is used by one thread."""

    __slots__ = ("_f", "_p")

    def __init__(self) -> None:
        self._f = io.BytesIO()
        self._p = pickle.Pickler(self._f, protocol=pickle.HIGHEST_PROTOCOL)
        self._p.fast = True

    def __call__(self, key: Any, namespace: Any) -> bytes:
        f = self._f
        f.seek(0)
        f.truncate()
        self._p.dump((key, namespace))
        return f.getvalue()


def canonical_entry(key: Any, namespace: Any) -> bytes:
    """``CanonicalPickler`` once."""
    return CanonicalPickler()(key, namespace)


@dataclass(frozen=True)
class RocksDBMemory:
    """What RocksDB may hold in memory. ``managed``: one LRU cache of ``fixed_per_tm`` bytes for
    every rocksdb backend of the TaskExecutor process holds the data blocks, the index and filter
    blocks and (charged to it by a write buffer manager) the memtables, which get
    ``write_buffer_ratio`` of it (Flink's managed memory for RocksDB). Not managed: each backend
    its own ``block_cache_size`` cache and ``write_buffer_count`` memtables of
    ``write_buffer_size``. A memtable is at most ``write_buffer_size`` in both: a snapshot's
    synchronous part flushes the current one (8 MB: ~20 ms of CPU; 64 MB, Flink's default: ~150 ms)."""

    managed: bool = True
    fixed_per_tm: int = 256 << 20
    write_buffer_ratio: float = 0.5
    block_cache_size: int = 8 << 20
    write_buffer_size: int = 8 << 20
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
        # memtables of write_buffer_size (at most half the memtable budget, so two fit: one
        # flushing, one filling); the write buffer manager flushes when they fill the budget
        budget = int(memory.fixed_per_tm * memory.write_buffer_ratio)
        opts.set_write_buffer_size(max(1 << 20, min(memory.write_buffer_size, budget // 2)))
        opts.set_max_write_buffer_number(max(2, memory.write_buffer_count))
    else:
        table.set_block_cache(Cache(memory.block_cache_size))
        opts.set_write_buffer_size(memory.write_buffer_size)
        opts.set_max_write_buffer_number(memory.write_buffer_count)
    opts.set_block_based_table_factory(table)
    return opts


_libc: Any = None


def release_free_memory() -> None:
    """Give the memory the C allocator keeps free back to the system (glibc's ``malloc_trim``),
    after a snapshot or a restore: RocksDB's threads and the snapshot thread each allocate from
    an arena of their own, and without a trim the pages they freed stay in the process's RSS.
    Does nothing where there is no glibc."""
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            _libc = False
    if _libc:
        _libc.malloc_trim(0)


#: seconds between two ``release_free_memory`` calls of the trimming thread while rocksdb backends live
TRIM_INTERVAL_S = 5.0
_trim_lock = threading.Lock()
_trim_stop: threading.Event | None = None  # the running trimming thread's stop signal
_live_backends = 0


def _backend_opened() -> None:
    """A backend opened: the first one starts the thread that trims every ``TRIM_INTERVAL_S``.
    Random reads over a store larger than the cache replace cached blocks all the time, and the
    allocator keeps the freed ones: measured 600 MB of free pages over a 1 GB cache of a 10 GB
    store, 40 MB over 128 MB for 1 GB (docs/PERFORMANCE.md); a trim took 30 ms there (the GIL is
    released, and the task waits only if it allocates while the trim holds the main arena)."""
    global _live_backends, _trim_stop
    with _trim_lock:
        _live_backends += 1
        if _trim_stop is None:
            _trim_stop = threading.Event()
            threading.Thread(target=_trim_loop, args=(_trim_stop,), name="rocksdb-malloc-trim", daemon=True).start()


def _backend_closed() -> None:
    global _live_backends, _trim_stop
    with _trim_lock:
        _live_backends -= 1
        if _live_backends == 0 and _trim_stop is not None:
            _trim_stop.set()
            _trim_stop = None


def _trim_loop(stop: threading.Event) -> None:
    while not stop.wait(TRIM_INTERVAL_S):
        release_free_memory()


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
        incremental: bool = False,
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
        _backend_opened()
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
        self._canonical = CanonicalPickler()
        self._snapshots = itertools.count()
        self._disposed = False
        #: incremental checkpoints (``execution.checkpointing.incremental``): a checkpoint uploads
        #: the SST files of the store's RocksDB checkpoint that the last confirmed one did not
        self.incremental = incremental
        self._chain_lock = threading.Lock()
        self._confirmed: dict[str, SharedFileHandle] = {}  # SST file name -> its upload
        self._confirmed_id = -1
        self._pending: dict[int, dict[str, SharedFileHandle]] = {}

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
            enc = self._encoded[ek] = self._canonical(*split_entry_key(ek))
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
        else:
            check_redeclaration(t.meta, kind, ttl)
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

    def stored_items(self, state_name: str) -> Generator[tuple[int, Any, Any, Any], None, None]:
        """``(key group, key, namespace, stored value)`` of every entry of ``state_name`` (values
        as stored: under a TTL, wrapped in ``TtlValue``), by key group, streamed from the store
        (the heap backend's ``stored_items``; the State Processor API reads through it)."""
        sid = self._ids.get(state_name)
        if sid is None:
            return
        loads = pickle.loads
        for kg, _, e, v in self._scan(sid):
            key, ns = loads(e)
            yield kg, key, ns, loads(v)

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
        memory = self.memory

        if self.incremental and supports_shared_state(factory):

            def write_incremental() -> SnapshotResult:
                try:
                    return self._write_incremental(chk, checkpoint_id, metas, timers, factory, label)
                finally:
                    shutil.rmtree(chk, ignore_errors=True)
                    release_free_memory()

            return self._executor_for_snapshots().submit(write_incremental)

        def write() -> SnapshotResult:
            try:
                files = list(_write_checkpoint_rows(chk, names, ttls, now, compression, factory, label, path, memory))
                for name, entries in timers:
                    files += _write_timer_rows(name, entries, compression, factory, label, path)
            finally:
                shutil.rmtree(chk, ignore_errors=True)
                release_free_memory()
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

    # ------------------------------------------------------------------ incremental checkpoints
    def _write_incremental(
        self,
        chk: str,
        checkpoint_id: int,
        metas: tuple[StateMetaInfo, ...],
        timers: list[tuple[str, list[tuple[int, int, Any, Any]]]],
        factory: Any,
        label: str,
    ) -> SnapshotResult:
        """(Snapshot thread) an incremental checkpoint of the RocksDB checkpoint ``chk``: its SST
        files (immutable) as shared files, uploaded unless the last confirmed checkpoint did;
        its other files (MANIFEST, OPTIONS, ...) and the timers (canonical rows) as private
        files; and first a private manifest naming each file and the states' ids."""
        rng = self.key_group_range
        prefix = getattr(factory, "shared_prefix", None)
        with self._chain_lock:
            reuse = {n: h for n, h in self._confirmed.items() if prefix is None or h.path.startswith(prefix)}
        shared: list[SharedFileHandle] = []
        private: list[Any] = []
        files: dict[str, list[Any]] = {}
        written = 0
        for name in sorted(os.listdir(chk)):
            path = os.path.join(chk, name)
            if name.endswith(".sst"):
                h = reuse.get(name)
                if h is None:
                    h = write_shared_file(factory, path, f"{label}-{name}", rng, SST)
                    written += h.size
                files[name] = ["shared", len(shared)]
                shared.append(h)
            else:
                with open(path, "rb") as f:
                    ph = factory.write_state(f.read(), f"{label}-{name}")
                written += ph.state_size
                files[name] = ["private", len(private) + 1]
                private.append(ph)
        timer_files = []
        for name, entries in timers:
            for _, ph in _write_timer_rows(name, entries, self.compression, factory, label, self.path):
                timer_files.append(len(private) + 1)
                private.append(ph)
                written += ph.state_size
        manifest = json.dumps(
            {"format": INCREMENTAL_FORMAT, "files": files, "timers": timer_files, "states": [m.name for m in metas]}
        ).encode()
        mh = factory.write_state(manifest, f"{label}-manifest")
        written += mh.state_size
        with self._chain_lock:
            self._pending[checkpoint_id] = {n: shared[i] for n, (kind, i) in files.items() if kind == "shared"}
        return SnapshotResult(
            keyed_handles=(
                IncrementalKeyedStateHandle(
                    rng, checkpoint_id, tuple(shared), (mh, *private), metas, self.backend_name, written
                ),
            )
        )

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """(Task thread) checkpoint ``checkpoint_id`` completed: later checkpoints refer to its
        SST files instead of uploading them again."""
        with self._chain_lock:
            uploaded = self._pending.pop(checkpoint_id, None)
            if uploaded is None or checkpoint_id < self._confirmed_id:
                return
            self._confirmed, self._confirmed_id = uploaded, checkpoint_id
            for c in [c for c in self._pending if c < checkpoint_id]:
                del self._pending[c]

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """(Task thread) checkpoint ``checkpoint_id`` was aborted: its uploads are never referred to."""
        with self._chain_lock:
            self._pending.pop(checkpoint_id, None)

    def _restore_incremental(self, h: IncrementalKeyedStateHandle, read: StateReader) -> int:
        """The entries of this backend's key groups in the incremental checkpoint ``h``: its
        files downloaded into a directory, opened read-only, the key-group range scanned into
        this store (the state ids mapped by name), then the timers loaded."""
        from rocksdict import AccessType, Rdict, ReadOptions, WriteBatch

        if not h.private:
            raise StateMigrationError(f"a rocksdb incremental snapshot without its manifest: {h}")
        manifest = json.loads(read(h.private[0]))
        if manifest.get("format") != INCREMENTAL_FORMAT:
            raise StateMigrationError(
                f"not a {INCREMENTAL_FORMAT} manifest (format {manifest.get('format')!r}): {h.private[0]}"
            )
        sids = {i.to_bytes(2, "big"): self._ids[name] for i, name in enumerate(manifest["states"])}
        tmp = os.path.join(self.path, f"restore-{uuid.uuid4().hex[:12]}")
        os.makedirs(tmp)
        count = 0
        try:
            for name, (kind, i) in manifest["files"].items():
                src = h.shared[i] if kind == "shared" else h.private[i]
                download(read, src, os.path.join(tmp, os.path.basename(name)))
            rng = self.key_group_range.intersection(h.key_group_range)
            db = Rdict(tmp, _options(self.memory), access_type=AccessType.read_only())
            try:
                scan = ReadOptions()
                scan.fill_cache(False)  # type: ignore[call-arg]  # (a method; the stub says a property)
                scan.set_iterate_upper_bound((rng.end + 1).to_bytes(2, "big"))
                wb = WriteBatch(raw_mode=True)
                n = 0
                items = db.items(from_key=rng.start.to_bytes(2, "big"), read_opt=scan)
                for k, v in cast(Iterator[tuple[bytes, bytes]], items):
                    wb.put(k[:2] + sids[k[2:4]] + k[4:], v)
                    n += 1
                    if n % RESTORE_BATCH_ROWS == 0:
                        self._db.write(wb, self._wo)
                        wb = WriteBatch(raw_mode=True)
                self._db.write(wb, self._wo)
                count += n
            finally:
                db.close()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        for i in manifest["timers"]:
            count += self._load(pa.BufferReader(read(h.private[i])))
        return count

    # ------------------------------------------------------------------ restore
    def restore(self, handles: Iterable[KeyedStateHandle], read: StateReader = read_inline) -> int:
        """Load the entries of this backend's key groups from ``handles`` (canonical snapshots of
        either backend, of any key-group ranges). Returns the entry count."""
        self._flush()
        count = 0
        for h in handles:
            if len(h.key_group_range.intersection(self.key_group_range)) == 0:
                continue
            if isinstance(h, IncrementalKeyedStateHandle) and h.backend != self.backend_name:
                raise StateMigrationError(
                    f"keyed state is an incremental checkpoint of the {h.backend} backend; the rocksdb backend "
                    "restores its own incremental checkpoints and full snapshots of either backend (take a "
                    "savepoint, which is always full, and restore from it)"
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
            if isinstance(h, IncrementalKeyedStateHandle):
                count += self._restore_incremental(h, read)
            else:
                count += self._load_file(h.delegate, read)
        release_free_memory()
        return count

    def _load_file(self, handle: Any, read: StateReader) -> int:
        """The rows of a canonical snapshot file: downloaded to the local directory in pieces,
        then read one record batch at a time (a restore never holds the whole file)."""
        if isinstance(handle, ByteStreamStateHandle):
            return self._load(pa.BufferReader(handle.data))
        spool = os.path.join(self.path, f"restore-{uuid.uuid4().hex[:12]}.arrow")
        try:
            download(read, handle, spool)
            with pa.OSFile(spool, "rb") as f:
                return self._load(f)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(spool)

    def _load(self, source: Any) -> int:
        from rocksdict import WriteBatch

        with pa.ipc.open_stream(source) as reader:
            md = reader.schema.metadata or {}
            if md.get(b"format") != SNAPSHOT_FORMAT.encode():
                raise StateMigrationError(
                    f"not a {SNAPSHOT_FORMAT} keyed state snapshot (format {md.get(b'format')!r})"
                )
            rng = self.key_group_range
            count = 0
            loads = pickle.loads
            canonical = self._canonical
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
                        wb.put(kg.to_bytes(2, "big") + self._ids[state] + canonical(key, ns), value)
                    count += 1
                self._db.write(wb, self._wo)
        return count

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
            _backend_closed()
            shutil.rmtree(self.path, ignore_errors=True)
        self._tables.clear()
        self._queues.clear()
        self._states.clear()


# ----------------------------------------------------------------------------- snapshot rows
class _RowFiles:
    """Canonical snapshot rows into Arrow IPC files of about ``SNAPSHOT_FILE_BYTES`` (a file
    ends at a key-group boundary), each written to ``factory`` when full. A file is spooled to
    ``spool_dir`` on local disk and handed to the factory as a file (``write_state_file``:
    checkpoint storage copies it to a local file system by the kernel, and uploads it to S3 from
    a memory map), so it never is the process's own memory (built in memory, a 64 MB file cost
    ~200 MB of RSS; memory-mapped, up to 64 MB of file-backed RSS)."""

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
            handle = write_state_file(self._factory, self._spool, self._label)
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
    memory: RocksDBMemory,
) -> Iterator[tuple[KeyGroupRange, Any]]:
    """(Snapshot thread) the rows of the RocksDB checkpoint ``chk`` as snapshot files."""
    from rocksdict import AccessType, Rdict, ReadOptions

    db = Rdict(chk, _options(memory), access_type=AccessType.read_only())  # (the backend's cache)
    scan = ReadOptions()
    # a bulk scan: the blocks it reads would only push the task's out of the cache
    scan.fill_cache(False)  # type: ignore[call-arg]  # (a method; the stub says a property)
    scan.set_readahead_size(2 << 20)
    try:
        files = _RowFiles(compression, factory, label, spool_dir)
        for k, v in cast(Iterator[tuple[bytes, bytes]], db.items(read_opt=scan)):
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


__all__ = ["CanonicalPickler", "RocksDBKeyedStateBackend", "RocksDBMemory", "canonical_entry", "remove_stale_dirs"]
