"""A ``hashmap`` snapshot larger than ``SNAPSHOT_FILE_BYTES`` is written as several files, each of
whole key groups and handed to the stream factory (and let go) before the next is serialized;
the files restore exactly, and a rescaled backend reads only the files of its key groups."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from yarnflink.common.keygroups import key_group_of
from yarnflink.state import heap
from yarnflink.state.descriptors import ListStateDescriptor, ValueStateDescriptor
from yarnflink.state.handles import ByteStreamStateHandle, KeyGroupsStateHandle
from yarnflink.state.heap import HeapKeyedStateBackend
from yarnflink.state.snapshot_serializer import BufferPieces
from yarnflink.state.streams import read_inline

KEYS = 3000


def _filled() -> HeapKeyedStateBackend:
    b = HeapKeyedStateBackend(128, range(0, 128), name="t")
    v = b.get_partitioned_state(ValueStateDescriptor("v", "bytes"))
    lst = b.get_partitioned_state(ListStateDescriptor("l", "str"))
    timers = b.create_timer_queue("timers-q")
    for k in range(KEYS):
        b.set_current_key(k)
        v.update(bytes([k % 251]) * 100)
        lst.add(f"x{k}")
        timers.add(k, k, None, b.current_key_group)
    return b


class RecordingFactory:
    """Keeps each file in memory; checks that the previous file's pieces were let go before the
    next file is handed over, and records how many values had been serialized by then."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.serialized_at_write: list[int] = []
        self.serialized = 0
        self._previous: BufferPieces | None = None

    def write_state(self, data: BufferPieces, name: str, scope: str = "exclusive") -> ByteStreamStateHandle:
        if self._previous is not None:
            assert len(self._previous) == 0, "the previous file's pieces are still held"
        self._previous = data
        self.sizes.append(len(data))
        self.serialized_at_write.append(self.serialized)
        return ByteStreamStateHandle(name, bytes(data))


def _snapshot(monkeypatch: pytest.MonkeyPatch, file_bytes: int) -> tuple[list[KeyGroupsStateHandle], RecordingFactory]:
    """(Small batches here, so that a file's size is known a few rows after they are added.)"""
    monkeypatch.setattr(heap, "SNAPSHOT_FILE_BYTES", file_bytes)
    if heap.ENCODE_CHUNK_ROWS > 500:
        monkeypatch.setattr(heap, "ENCODE_CHUNK_ROWS", 50)
    factory = RecordingFactory()
    real = heap.pickled_column

    def counted(objs: Any, pause: Any = None) -> Any:
        factory.serialized += len(objs)
        return real(objs, pause)

    monkeypatch.setattr(heap, "pickled_column", counted)
    result = _filled().snapshot(1, 0, factory).result()  # type: ignore[arg-type]
    return list(result.keyed_handles), factory


def _key_groups_in(handle: KeyGroupsStateHandle) -> set[int]:
    with pa.ipc.open_stream(pa.BufferReader(read_inline(handle.delegate))) as reader:
        return set(reader.read_all().column("key_group").to_pylist())


def test_a_snapshot_over_the_file_size_is_several_files_of_whole_key_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    handles, factory = _snapshot(monkeypatch, 32 << 10)
    assert len(handles) >= 5
    ranges = [(h.key_group_range.start, h.key_group_range.end) for h in handles]
    assert ranges == sorted(ranges) and all(a[1] < b[0] for a, b in zip(ranges, ranges[1:]))  # ascending, disjoint
    seen: set[int] = set()
    for h in handles:
        kgs = _key_groups_in(h)
        assert kgs and min(kgs) == h.key_group_range.start and max(kgs) == h.key_group_range.end
        seen |= kgs
    assert seen == set(range(128))
    # a file ends at the first key-group boundary past the size, give or take the rows not yet
    # written as a batch (3 states x 50 rows here, ~18 KB) and one key group (~5 KB)
    assert min(factory.sizes[:-1]) >= 32 << 10 and max(factory.sizes) < (32 << 10) + (24 << 10)
    # each file is written before the next is serialized (memory for one file, not all of them)
    at = factory.serialized_at_write
    assert at == sorted(set(at)) and at[0] < factory.serialized // 4

    r = HeapKeyedStateBackend(128, range(0, 128), name="t")
    assert r.restore(handles) == 3 * KEYS
    v = r.get_partitioned_state(ValueStateDescriptor("v", "bytes"))
    lst = r.get_partitioned_state(ListStateDescriptor("l", "str"))
    for k in range(0, KEYS, 7):
        r.set_current_key(k)
        assert v.value() == bytes([k % 251]) * 100 and list(lst.get()) == [f"x{k}"]
    assert len(r.create_timer_queue("timers-q")) == KEYS


def test_below_the_file_size_a_snapshot_is_one_file(monkeypatch: pytest.MonkeyPatch) -> None:
    handles, factory = _snapshot(monkeypatch, 64 << 20)
    assert len(handles) == 1 and len(factory.sizes) == 1
    assert (handles[0].key_group_range.start, handles[0].key_group_range.end) == (0, 127)


def test_a_rescaled_backend_reads_only_the_files_of_its_key_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    handles, _ = _snapshot(monkeypatch, 32 << 10)
    read: list[Any] = []

    def reader(h: Any) -> bytes:
        read.append(h)
        return read_inline(h)

    total = 0
    for rng in (range(0, 64), range(64, 128)):
        read.clear()
        b = HeapKeyedStateBackend(128, rng, name="t")
        total += b.restore(handles, reader)
        wanted = [h.delegate for h in handles if h.key_group_range.start <= rng[-1] and h.key_group_range.end >= rng[0]]
        assert read == wanted and len(read) < len(handles)
        v = b.get_partitioned_state(ValueStateDescriptor("v", "bytes"))
        for k in range(KEYS):
            if key_group_of(k, 128) in rng:
                b.set_current_key(k)
                assert v.value() == bytes([k % 251]) * 100
    assert total == 3 * KEYS


def test_batches_stay_of_one_state_and_full_although_rows_come_in_key_group_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(heap, "ENCODE_CHUNK_ROWS", 500)
    handles, _ = _snapshot(monkeypatch, 64 << 20)
    with pa.ipc.open_stream(pa.BufferReader(read_inline(handles[0].delegate))) as reader:
        batches = list(reader)
    per_state: dict[str, list[int]] = {}
    for rb in batches:
        states = set(rb.column("state").to_pylist())
        assert len(states) == 1
        per_state.setdefault(states.pop(), []).append(rb.num_rows)
        kgs = rb.column("key_group").to_pylist()
        assert kgs == sorted(kgs)  # each batch in key-group order
    assert set(per_state) == {"v", "l", "timers-q"}
    for sizes in per_state.values():  # full batches, not one per key group (~23 rows)
        assert sum(sizes) == KEYS and all(n == 500 for n in sizes[:-1])


def test_no_parts_encode_to_a_valid_stream_of_no_rows() -> None:
    """(What the State Processor API's bootstrap writes for an empty key-group range.)"""
    payload = heap._encode_pieces([], 0)
    with pa.ipc.open_stream(pa.BufferReader(bytes(payload))) as reader:
        assert reader.read_all().num_rows == 0
