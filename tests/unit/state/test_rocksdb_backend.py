"""What the rocksdb backend adds to the shared keyed state tests (test_keyed_state runs those on both
backends): snapshots portable between the backends (all state kinds, TTL, timers), rescaling
2 -> 3 -> 1 with the backends alternating, keys laid out by key group, the local directory
(deleted on dispose; a killed process's directories removed), the memory keys, and the rocksdict
behaviour the snapshot design works around."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from yarnflink.common.config import ConfigError
from yarnflink.common.keygroups import key_group_of, key_group_range
from yarnflink.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from yarnflink.state import heap as heap_module
from yarnflink.state import rocksdb as rocksdb_module
from yarnflink.state.handles import KeyGroupRange
from yarnflink.state.heap import HeapKeyedStateBackend
from yarnflink.state.rocksdb import RocksDBKeyedStateBackend, RocksDBMemory, canonical_entry, remove_stale_dirs
from yarnflink.state.task_state import create_keyed_state_backend

from .conftest import backend_maker
from .test_keyed_state import Avg, Clock

Maker = Callable[..., Any]


@pytest.fixture
def makers(tmp_path: Path) -> Any:
    made: list = []
    yield {kind: backend_maker(kind, tmp_path, made) for kind in ("hashmap", "rocksdb")}
    for b in made:
        b.dispose()


def _descriptors() -> list[Any]:
    ttl = StateTtlConfig.new_builder(10_000).build()
    d_ttl = ValueStateDescriptor("ttl")
    d_ttl.enable_time_to_live(ttl)
    return [
        ValueStateDescriptor("v"),
        ListStateDescriptor("l"),
        MapStateDescriptor("m"),
        ReducingStateDescriptor("r", lambda a, b: a + b),
        AggregatingStateDescriptor("a", Avg()),
        d_ttl,
    ]


def _fill(b: Any, keys: list[Any]) -> None:
    states = [b.get_partitioned_state(d) for d in _descriptors()]
    v, lst, m, r, a, t = states
    timers = b.create_timer_queue("timers")
    for i, k in enumerate(keys):
        kg = key_group_of(k, b.max_parallelism)
        b.set_current_key(k, kg)
        v.update({"k": k})
        lst.add_all([i, i + 1])
        m.put("x", i)
        m.put(("tuple", i), [i])
        r.add(i)
        a.add(i)
        t.update(i)
        lst.set_current_namespace(("window", i % 3))
        lst.add(-i)
        lst.set_current_namespace(None)
        timers.add(1000 + i, k, None, kg)


def _read(b: Any, keys: list[Any]) -> dict[Any, Any]:
    states = [b.get_partitioned_state(d) for d in _descriptors()]
    v, lst, m, r, a, t = states
    timers = b.create_timer_queue("timers")
    out = {}
    for k in keys:
        kg = key_group_of(k, b.max_parallelism)
        if kg not in b.key_group_range:
            continue
        b.set_current_key(k, kg)
        row = [v.value(), lst.get(), sorted(m.items(), key=repr), r.get(), a.get(), t.value()]
        lst.set_current_namespace(("window", k % 3) if isinstance(k, int) else None)
        row.append(lst.get())
        lst.set_current_namespace(None)
        row.append(sorted(timers.timers_of(k, kg)))
        out[k] = row
    return out


KEYS: list[Any] = list(range(200))


def test_a_snapshot_restores_on_the_other_backend_and_back(makers: dict[str, Maker]) -> None:
    """Savepoints are canonical: hashmap -> rocksdb -> hashmap -> rocksdb keeps every state kind,
    namespaces, TTL values and timers, and each backend's snapshot is read by the other."""
    clock = Clock()
    first = makers["hashmap"](clock=clock)
    _fill(first, KEYS)
    want = _read(first, KEYS)
    assert len(want) == len(KEYS) and want[5][7] == [(1005, None)]
    handles = first.snapshot(1).result().keyed_handles
    for kind in ("rocksdb", "hashmap", "rocksdb"):
        b = makers[kind](clock=clock)
        assert b.restore(handles) == first.num_entries()
        assert _read(b, KEYS) == want, kind
        result = b.snapshot(2).result()
        assert {h.backend for h in result.keyed_handles} == {kind}
        handles = result.keyed_handles


@pytest.mark.parametrize("kinds", [("rocksdb", "hashmap", "rocksdb"), ("hashmap", "rocksdb", "hashmap")])
def test_rescale_2_3_1_redistributes_by_key_group_across_backends(
    makers: dict[str, Maker], kinds: tuple[str, str, str]
) -> None:
    keys = [f"key-{i}" for i in range(300)]
    clock = Clock()  # (the TTL state's values must not expire while a slow machine runs the test)
    old = [makers[kinds[0]](128, key_group_range(128, 2, i), clock=clock) for i in range(2)]
    for b in old:
        _fill(b, [k for k in keys if key_group_of(k, 128) in b.key_group_range])
    want = {k: v for b in old for k, v in _read(b, keys).items()}
    assert len(want) == len(keys)
    handles = [h for b in old for h in b.snapshot(1).result().keyed_handles]
    for kind, parallelism in ((kinds[1], 3), (kinds[2], 1)):
        new = [makers[kind](128, key_group_range(128, parallelism, i), clock=clock) for i in range(parallelism)]
        counts = [b.restore(handles) for b in new]
        assert all(counts) and sum(counts) == sum(b.num_entries() for b in old)
        got = {k: v for b in new for k, v in _read(b, keys).items()}
        assert got == want
        handles = [h for b in new for h in b.snapshot(2).result().keyed_handles]


def test_keys_are_laid_out_by_key_group_and_snapshots_split_at_key_group_boundaries(
    makers: dict[str, Maker], monkeypatch: pytest.MonkeyPatch
) -> None:
    b = makers["rocksdb"]()
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    lst = b.get_partitioned_state(ListStateDescriptor("l"))
    for i in range(2000):
        b.set_current_key(i)
        v.update("x" * 100)
        lst.add(i)
    groups = [kg for kg, _, _, _ in b._scan()]
    assert groups == sorted(groups) and len(set(groups)) == 128  # both states, key group first
    monkeypatch.setattr(rocksdb_module, "SNAPSHOT_FILE_BYTES", 20_000)
    monkeypatch.setattr(rocksdb_module, "ENCODE_CHUNK_ROWS", 50)
    handles = b.snapshot(1).result().keyed_handles
    assert len(handles) > 5
    ranges = [h.key_group_range for h in handles]
    assert all(a.end < c.start for a, c in zip(ranges, ranges[1:]))  # disjoint, in order
    half = makers["rocksdb"](128, KeyGroupRange(0, 63))
    assert half.restore(handles) == sum(1 for kg, _, _, _ in b._scan() if kg < 64)


def test_equal_keys_have_equal_bytes_whatever_objects_they_share() -> None:
    s = "".join(["sha", "red"])  # not interned: equal to, but not the same object as, "shared"
    assert canonical_entry(("shared", "shared"), None) == canonical_entry((s, "shared"), None)
    assert canonical_entry(("shared", "shared"), ("w", 1)) != canonical_entry(("shared", "shared"), None)


def test_the_store_lives_in_the_local_dir_and_dispose_deletes_it(tmp_path: Path) -> None:
    local = tmp_path / "local"
    b = create_keyed_state_backend(
        {"state.backend.type": "rocksdb", "state.backend.rocksdb.localdir": str(local)}, 128, KeyGroupRange(0, 127)
    )
    assert isinstance(b, RocksDBKeyedStateBackend)
    b.set_current_key("k")
    b.get_partitioned_state(ValueStateDescriptor("v")).update(1)
    b.snapshot(1).result()
    assert [p.name for p in local.iterdir()] == [os.path.basename(b.path)]
    assert sorted(p.name for p in Path(b.path).iterdir()) == ["db"]  # the snapshot's checkpoint is gone
    b.dispose()
    assert list(local.iterdir()) == []


def test_directories_of_a_killed_process_are_removed_by_the_next_backend(tmp_path: Path) -> None:
    local = tmp_path / "local"
    code = (
        "import os, sys; from yarnflink.state.rocksdb import RocksDBKeyedStateBackend as B; "
        f"b = B(128, range(128), local_dir={str(local)!r}); print(b.path, flush=True); os._exit(0)"
    )
    path = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert os.path.isdir(path)  # the process ended without dispose: its directory stays
    b = RocksDBKeyedStateBackend(128, range(128), local_dir=str(local))
    assert not os.path.exists(path) and os.path.isdir(b.path)
    assert remove_stale_dirs(str(local)) == []  # its own directory is kept
    b.dispose()


def test_memory_keys_are_read_and_bad_values_name_the_key() -> None:
    from yarnflink.state.task_state import rocksdb_settings

    assert rocksdb_settings({}) == (None, RocksDBMemory())
    local, memory = rocksdb_settings(
        {
            "state.backend.rocksdb.localdir": "/data/rocks",
            "state.backend.rocksdb.memory.managed": "false",
            "state.backend.rocksdb.block.cache-size": "32 mb",
            "state.backend.rocksdb.writebuffer.size": "8 mb",
            "state.backend.rocksdb.writebuffer.count": "3",
            "state.backend.rocksdb.memory.fixed-per-tm": "1 gb",
            "state.backend.rocksdb.memory.write-buffer-ratio": "0.25",
        }
    )
    assert local == "/data/rocks"
    assert memory == RocksDBMemory(False, 1 << 30, 0.25, 32 << 20, 8 << 20, 3)
    with pytest.raises(ConfigError, match="state.backend.rocksdb.memory.fixed-per-tm"):
        rocksdb_settings({"state.backend.rocksdb.memory.fixed-per-tm": "lots"})
    with pytest.raises(ValueError, match="unsupported state backend 'leveldb'"):
        create_keyed_state_backend({"state.backend.type": "leveldb"}, 128, KeyGroupRange(0, 127))


def test_unmanaged_memory_gives_the_backend_its_own_cache(tmp_path: Path) -> None:
    mem = RocksDBMemory(managed=False, block_cache_size=1 << 20, write_buffer_size=1 << 20, write_buffer_count=2)
    b = RocksDBKeyedStateBackend(128, range(128), local_dir=str(tmp_path), memory=mem)
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    for i in range(20_000):
        b.set_current_key(i)
        v.update(i)
    b.set_current_key(7)
    assert v.value() == 7 and b.num_entries() == 20_000
    b.dispose()


def _options_file(b: RocksDBKeyedStateBackend) -> dict[str, str]:
    """The options RocksDB says its store runs with (the newest ``OPTIONS-*`` file it wrote)."""
    db = os.path.join(b.path, "db")
    latest = max((n for n in os.listdir(db) if n.startswith("OPTIONS-")), key=lambda n: int(n.split("-")[1]))
    with open(os.path.join(db, latest)) as f:
        return dict(line.strip().split("=", 1) for line in f if "=" in line and not line.lstrip().startswith("#"))


def test_the_memory_configuration_reaches_the_store(tmp_path: Path) -> None:
    """The ``state.backend.rocksdb.*`` memory keys, read from a configuration, are what RocksDB
    runs with: managed, the memtables' size capped at half their share of the cache and their
    count, index and filter blocks in the cache (L0's pinned) and a block cache in use (the
    store's OPTIONS file); the write buffer manager has the memtables' share and charges their
    memory to the shared cache; two backends share one cache. Unmanaged: the backend's own sizes."""
    from yarnflink.state.rocksdb import _shared_cache
    from yarnflink.state.task_state import rocksdb_settings

    _, memory = rocksdb_settings(
        {
            "state.backend.rocksdb.memory.fixed-per-tm": "40 mb",
            "state.backend.rocksdb.memory.write-buffer-ratio": "0.3",
            "state.backend.rocksdb.writebuffer.size": "16 mb",
            "state.backend.rocksdb.writebuffer.count": "3",
        }
    )
    a = RocksDBKeyedStateBackend(128, range(64), local_dir=str(tmp_path), memory=memory)
    b = RocksDBKeyedStateBackend(128, range(64, 128), local_dir=str(tmp_path), memory=memory)
    for backend in (a, b):
        opts = _options_file(backend)
        assert opts["write_buffer_size"] == str(6 << 20)  # min(16 mb, 40 mb * 0.3 / 2)
        assert opts["max_write_buffer_number"] == "3"
        assert opts["cache_index_and_filter_blocks"] == "true"
        assert opts["pin_l0_filter_and_index_blocks_in_cache"] == "true"
        assert opts["no_block_cache"] == "false"
    cache, wbm = _shared_cache(memory)
    assert wbm.enabled() and wbm.get_buffer_size() == int(40 * 0.3 * (1 << 20))
    assert wbm.get_usage() < 1 << 20
    v = a.get_partitioned_state(ValueStateDescriptor("v"))
    for i in range(6000):  # ~3 MB into a's memtable
        if key_group_of(i, 128) < 64:
            a.set_current_key(i)
            v.update(os.urandom(1000))
    a.set_current_key(0)
    assert wbm.get_usage() > 1 << 20
    assert cache.get_usage() >= wbm.get_usage()  # the memtables are charged to the cache
    a.dispose()
    b.dispose()

    _, own = rocksdb_settings(
        {
            "state.backend.rocksdb.memory.managed": "false",
            "state.backend.rocksdb.writebuffer.size": "3 mb",
            "state.backend.rocksdb.writebuffer.count": "4",
        }
    )
    c = RocksDBKeyedStateBackend(128, range(128), local_dir=str(tmp_path), memory=own)
    opts = _options_file(c)
    assert (opts["write_buffer_size"], opts["max_write_buffer_number"]) == (str(3 << 20), "4")
    assert opts["cache_index_and_filter_blocks"] == "true" and opts["no_block_cache"] == "false"
    c.dispose()


def test_rocksdict_iterators_ignore_a_snapshot(tmp_path: Path) -> None:
    """Why a snapshot's synchronous part takes a RocksDB checkpoint, not a RocksDB snapshot: in
    rocksdict 0.3.29 a snapshot's ``get`` sees the state at the snapshot, its iterators the live
    state. (If this fails, rocksdict fixed it: the synchronous part could then take a snapshot.)"""
    from rocksdict import Options, Rdict

    db = Rdict(str(tmp_path / "db"), Options(raw_mode=True))
    db.put(b"a", b"1")
    snap = db.snapshot()
    db.put(b"a", b"2")
    db.put(b"b", b"3")
    assert snap[b"a"] == b"1"
    assert list(snap.items()) == [(b"a", b"2"), (b"b", b"3")]
    del snap
    db.close()


def test_heap_refuses_state_of_an_unknown_backend(makers: dict[str, Maker]) -> None:
    import dataclasses

    b = makers["rocksdb"]()
    b.set_current_key(1)
    b.get_partitioned_state(ValueStateDescriptor("v")).update(1)
    h = dataclasses.replace(b.snapshot(1).result().keyed, backend="forst")
    for kind in ("hashmap", "rocksdb"):
        with pytest.raises(heap_module.StateMigrationError, match="written by the 'forst' backend"):
            makers[kind]().restore([h])
    assert isinstance(makers["hashmap"](), HeapKeyedStateBackend)


def test_incremental_checkpoints_upload_only_new_sst_files_and_restore_rescaled(tmp_path: Path) -> None:
    """``execution.checkpointing.incremental``: a checkpoint refers to the SST files the last
    confirmed one uploaded and uploads only the new ones (checkpointed size proportional to the
    changes); it restores exactly, on all key groups or on a part (rescaling), timers included;
    a savepoint stays full and canonical."""
    from yarnflink.checkpoint.storage import FsCheckpointStorage, make_reader
    from yarnflink.state.handles import IncrementalKeyedStateHandle, KeyGroupsStateHandle

    storage = FsCheckpointStorage(f"file://{tmp_path}/chk", "job", inline_threshold=16)
    storage.initialize()
    mem = RocksDBMemory(write_buffer_size=1 << 20)
    local = str(tmp_path / "local")
    b = RocksDBKeyedStateBackend(128, range(128), local_dir=local, memory=mem, incremental=True)
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    timers = b.create_timer_queue("timers")
    want = {}
    for i in range(20_000):
        kg = key_group_of(i, 128)
        b.set_current_key(i, kg)
        v.update(f"{i:08d}" * 25)
        want[i] = f"{i:08d}" * 25
        if i % 100 == 0:
            timers.add(5_000 + i, i, None, kg)
    h1 = b.snapshot(1, 0, storage.stream_factory(1)).result().keyed
    assert isinstance(h1, IncrementalKeyedStateHandle) and h1.backend == "rocksdb" and h1.shared
    assert h1.checkpointed_size >= sum(f.size for f in h1.shared)
    b.notify_checkpoint_complete(1)
    for i in range(0, 20_000, 100):  # 1% of the keys change
        b.set_current_key(i)
        v.update("changed")
        want[i] = "changed"
    h2 = b.snapshot(2, 0, storage.stream_factory(2)).result().keyed
    assert isinstance(h2, IncrementalKeyedStateHandle)
    assert {f.path for f in h1.shared} & {f.path for f in h2.shared}  # reused, not uploaded again
    assert h2.checkpointed_size * 5 < h1.checkpointed_size
    for ranges in ([KeyGroupRange(0, 127)], [KeyGroupRange(0, 40), KeyGroupRange(41, 127)]):
        got: dict[int, Any] = {}
        fired = 0
        for rng in ranges:
            r = RocksDBKeyedStateBackend(128, rng, local_dir=local, memory=mem, incremental=True)
            r.restore([h2], make_reader())
            rv = r.get_partitioned_state(ValueStateDescriptor("v"))
            for i in want:
                kg = key_group_of(i, 128)
                if kg in rng:
                    r.set_current_key(i, kg)
                    got[i] = rv.value()
            fired += len(r.create_timer_queue("timers"))
            r.dispose()
        assert got == want and fired == 200
    savepoint = b.snapshot(3).result().keyed_handles  # an inline factory: no shared state
    assert all(isinstance(h, KeyGroupsStateHandle) for h in savepoint)
    heap = HeapKeyedStateBackend(128, range(128))
    with pytest.raises(heap_module.StateMigrationError, match="an incremental checkpoint of the rocksdb backend"):
        heap.restore([h2], make_reader())
    b.dispose()


def test_one_thread_returns_free_memory_while_backends_live(tmp_path: Path) -> None:
    """The first backend starts one thread that trims the allocator's free pages every
    ``TRIM_INTERVAL_S``; more backends share it; it ends when the last one is disposed."""
    import threading

    def trimmers() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "rocksdb-malloc-trim"]

    before = rocksdb_module._live_backends
    a = RocksDBKeyedStateBackend(128, range(64), local_dir=str(tmp_path))
    b = RocksDBKeyedStateBackend(128, range(64, 128), local_dir=str(tmp_path))
    assert rocksdb_module._live_backends == before + 2
    deadline = time.monotonic() + 10  # (a thread an earlier test's last dispose stopped may still be ending)
    while len(trimmers()) != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(trimmers()) == 1
    thread = trimmers()[0]
    a.dispose()
    a.dispose()  # (twice: counted once)
    assert thread.is_alive() and rocksdb_module._live_backends == before + 1
    b.dispose()
    if before == 0:
        thread.join(timeout=10)
        assert not thread.is_alive() and trimmers() == []
