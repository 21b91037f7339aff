"""The asynchronous part of a ``hashmap`` snapshot is written in small Arrow record batches (so it
never holds the GIL for long against the task thread) and restores exactly."""

from __future__ import annotations

import pyarrow as pa

from yarnflink.state import heap
from yarnflink.state.descriptors import ListStateDescriptor, ValueStateDescriptor
from yarnflink.state.heap import HeapKeyedStateBackend
from yarnflink.state.streams import read_inline


def _filled(n: int, snapshot_mode: str = "thread") -> HeapKeyedStateBackend:
    b = HeapKeyedStateBackend(128, range(0, 128), name="t", snapshot_mode=snapshot_mode)
    v = b.get_partitioned_state(ValueStateDescriptor("v", "int"))
    lst = b.get_partitioned_state(ListStateDescriptor("l", "str"))
    timers = b.create_timer_queue("timers-q")
    for k in range(n):
        b.set_current_key(k)
        v.update(k * 10)
        lst.add(f"x{k}")
        timers.add(k, k, None, b.current_key_group)
    return b


def test_a_large_snapshot_is_written_in_chunks_and_restores_exactly(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(heap, "ENCODE_CHUNK_ROWS", 100)
    b = _filled(1000)
    result = b.snapshot(1).result()
    payload = read_inline(result.keyed.delegate)
    with pa.ipc.open_stream(pa.BufferReader(payload)) as reader:
        sizes = [rb.num_rows for rb in reader]
    assert sum(sizes) == 3000 and max(sizes) <= 100 and len(sizes) >= 30

    r = HeapKeyedStateBackend(128, range(0, 128), name="t")
    assert r.restore([result.keyed]) == 3000
    v = r.get_partitioned_state(ValueStateDescriptor("v", "int"))
    lst = r.get_partitioned_state(ListStateDescriptor("l", "str"))
    for k in (0, 499, 999):
        r.set_current_key(k)
        assert v.value() == k * 10 and list(lst.get()) == [f"x{k}"]
    q = r.create_timer_queue("timers-q")
    assert len(q) == 1000 and q.peek()[0] == 0


def test_the_synchronous_part_does_not_serialize(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The task thread's part of a snapshot only marks the key-group maps (copy-on-write); the
    serialization runs on the snapshot thread."""
    import threading

    b = _filled(200)
    threads: list[str] = []
    real = heap.pickled_column

    def spy(objs, pause=None):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread().name)
        return real(objs, pause)

    monkeypatch.setattr(heap, "pickled_column", spy)
    f = b.snapshot(1)
    v = b.get_partitioned_state(ValueStateDescriptor("v", "int"))
    b.set_current_key(7)
    v.update(-1)  # after the synchronous point: not in the snapshot
    res = f.result()
    assert threads and threading.main_thread().name not in threads
    r = HeapKeyedStateBackend(128, range(0, 128), name="t")
    r.restore([res.keyed])
    r.set_current_key(7)
    assert r.get_partitioned_state(ValueStateDescriptor("v", "int")).value() == 70


def test_the_checkpoint_directory_is_made_by_the_first_write_on_the_writing_thread() -> None:
    import threading

    from yarnflink.state.streams import InlineStreamFactory
    from yarnflink.state.task_state import LazyStreamFactory

    made: list[str] = []

    def make() -> InlineStreamFactory:
        made.append(threading.current_thread().name)
        return InlineStreamFactory()

    f = LazyStreamFactory(make)
    assert made == []
    b = _filled(10)
    b.snapshot(1, 0, f).result()
    b.snapshot(2, 0, f).result()
    assert len(made) == 1 and made[0] != threading.main_thread().name


def test_a_forked_snapshot_sees_the_state_at_the_synchronous_point() -> None:
    b = _filled(500, "fork")
    v = b.get_partitioned_state(ValueStateDescriptor("v", "int"))
    f = b.snapshot(1)
    for k in range(500):  # after the fork: in this process only, no changelog kept
        b.set_current_key(k)
        v.update(-k)
    assert all(m.changes is None for t in b._tables.values() for m in t.maps.values())
    res = f.result()
    r = HeapKeyedStateBackend(128, range(0, 128), name="t")
    assert r.restore([res.keyed]) == 1500
    rv = r.get_partitioned_state(ValueStateDescriptor("v", "int"))
    for k in (0, 1, 499):
        r.set_current_key(k)
        assert rv.value() == k * 10


def test_a_failing_snapshot_child_fails_the_snapshot(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import pytest

    b = _filled(10, "fork")

    def broken(parts, now, compression=None):  # type: ignore[no-untyped-def]
        raise RuntimeError("cannot encode")

    monkeypatch.setattr(heap, "_encode_pieces", broken)
    with pytest.raises(RuntimeError, match="snapshot process failed"):
        b.snapshot(1).result()


def test_the_snapshot_mode_is_validated() -> None:
    import pytest

    from yarnflink.state.handles import KeyGroupRange
    from yarnflink.state.task_state import create_keyed_state_backend

    kgs = KeyGroupRange.of(range(0, 128))
    assert create_keyed_state_backend({"state.backend.hashmap.snapshot-mode": "fork"}, 128, kgs).snapshot_mode == "fork"
    assert create_keyed_state_backend({}, 128, kgs).snapshot_mode == "thread"
    with pytest.raises(ValueError, match="snapshot-mode: unknown snapshot mode 'process'"):
        create_keyed_state_backend({"state.backend.hashmap.snapshot-mode": "process"}, 128, kgs)


def test_snapshot_compression_follows_flinks_key() -> None:
    from yarnflink.state.handles import KeyGroupRange
    from yarnflink.state.task_state import create_keyed_state_backend

    kgs = KeyGroupRange.of(range(0, 128))
    assert create_keyed_state_backend({}, 128, kgs).compression is None  # Flink: off by default
    on = create_keyed_state_backend({"execution.checkpointing.snapshot-compression": "true"}, 128, kgs)
    assert on.compression == "lz4"
    plain = _filled(300).snapshot(1).result()
    b = _filled(300)
    b.compression = "lz4"
    packed = b.snapshot(1).result()
    assert packed.keyed.state_size < plain.keyed.state_size
    r = HeapKeyedStateBackend(128, range(0, 128), name="t")
    assert r.restore([packed.keyed]) == 900


def test_encoding_lets_go_of_each_key_group_once_written() -> None:
    """The snapshot thread consumes its list of key-group dicts (so that a dict the task copied
    on write meanwhile is freed right after it is written, not all of them at the end)."""
    from yarnflink.state.handles import ByteStreamStateHandle, KeyGroupsStateHandle

    b = _filled(300)
    tables = {n: t for n, t in b._tables.items() if n != "timers-q"}
    parts = [(kg, name, None, m.data) for name, t in tables.items() for kg, m in t.maps.items()]
    payload = heap._encode_pieces(parts, 0)
    assert parts == []
    r = HeapKeyedStateBackend(128, range(0, 128), name="t")
    handle = KeyGroupsStateHandle(
        r.key_group_range, ByteStreamStateHandle("x", bytes(payload)), tuple(t.meta for t in tables.values())
    )
    assert r.restore([handle]) == 600


def test_fork_mode_without_fork_snapshots_as_thread_mode(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Where the platform cannot fork, fork mode falls back to the snapshot thread, with the
    changelog it needs (an empty snapshot otherwise)."""
    import os

    monkeypatch.delattr(os, "fork")
    b = _filled(50, "fork")
    r = HeapKeyedStateBackend(128, range(0, 128), name="t")
    assert r.restore([b.snapshot(1).result().keyed]) == 150
