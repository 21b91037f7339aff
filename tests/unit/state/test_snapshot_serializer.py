"""Bulk pickling of snapshot columns (``yarnflink.state.snapshot_serializer``): every element is a
pickle that ``pickle.loads`` turns back into an equal object of the same type; plain scalars are
written in bulk (their own opcodes, no protocol header), everything else one ``pickle.dumps`` at
a time; and a ``hashmap`` snapshot of every state kind, written that way, restores exactly, at
another parallelism too."""

from __future__ import annotations

import math
import os
import pickle
from typing import Any

import pyarrow as pa
import pytest

from yarnflink.common.keygroups import key_group_of, key_group_range
from yarnflink.state import (
    AggregateFunction,
    AggregatingStateDescriptor,
    HeapKeyedStateBackend,
    KeyGroupRange,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from yarnflink.state.snapshot_serializer import BufferPieces, binary_array, pickled_column, pickled_entry_column
from yarnflink.state.streams import read_inline

BULK_OPCODES = {bytes: b"B", str: b"X", int: b"\x8a", float: b"G"}
PICKLE_HEADER = b"\x80"


def loaded(column: pa.Array) -> list[Any]:
    assert column.type == pa.large_binary()
    return [pickle.loads(b) for b in column.to_pylist()]


def same(a: list[Any], b: list[Any]) -> bool:
    """Equal element by element, of the same types (NaN equal to NaN)."""

    def one(x: Any, y: Any) -> bool:
        if isinstance(x, float) and math.isnan(x):
            return isinstance(y, float) and math.isnan(y)
        return type(x) is type(y) and x == y

    return len(a) == len(b) and all(map(one, a, b))


@pytest.mark.parametrize(
    "values",
    [
        [b"", b"a", bytes(range(256)) * 5, os.urandom(70_000)],
        ["", "a", "grüße ✓ 𝄞", "x" * 100_000],
        [0, 1, -1, 2**63 - 1, -(2**63), 255, 256, -129],
        [0.0, -0.0, 1.5, -2.25e300, math.inf, -math.inf, math.nan, 5e-324],
    ],
)
def test_plain_scalars_of_one_type_are_pickled_in_bulk(values: list[Any]) -> None:
    column = pickled_column(values)
    assert same(loaded(column), values)
    opcode = BULK_OPCODES[type(values[0])]
    assert all(b[:1] == opcode for b in column.to_pylist())


@pytest.mark.parametrize(
    "values",
    [
        [2**63, 1],  # beyond 64 bits
        [True, False],  # bool is not int here
        [1, "a", b"b", 2.0, None],  # mixed types
        ["ok", "lone \ud800 surrogate"],  # not UTF-8
        [[1, 2], {"a": (1, 2)}, frozenset({3})],
        [(1, 2), (3,)],
    ],
)
def test_anything_else_is_pickled_one_object_at_a_time(values: list[Any]) -> None:
    column = pickled_column(values)
    assert same(loaded(column), values)
    assert all(b[:1] == PICKLE_HEADER for b in column.to_pylist())


def test_objects_pickled_one_at_a_time_pause_between_slices() -> None:
    """``map(pickle.dumps, ...)`` never lets the GIL go: ``pause`` is called every
    ``PICKLE_SLICE`` objects (the snapshot thread then lets the task thread run)."""
    from yarnflink.state.snapshot_serializer import PICKLE_SLICE

    pauses: list[int] = []
    values = [[i, i] for i in range(2 * PICKLE_SLICE + 10)]
    column = pickled_column(values, pause=lambda: pauses.append(1))
    assert loaded(column) == values and len(pauses) == 2
    entries = [(i, ("window", i)) for i in range(PICKLE_SLICE + 1)]
    assert loaded(pickled_entry_column(entries, pause=lambda: pauses.append(1))) == entries
    assert len(pauses) == 3
    assert loaded(pickled_column([b"x"] * 1000, pause=lambda: pauses.append(1))) == [b"x"] * 1000
    assert len(pauses) == 3  # the bulk path has nothing to pause for


def test_what_pickle_cannot_handle_goes_through_cloudpickle() -> None:
    fn = loaded(pickled_column([lambda x: x + 1, 3]))[0]
    assert fn(1) == 2


def test_entries_without_a_namespace_are_pickled_in_bulk() -> None:
    for keys in ([1, -5, 2**40], ["u1", "ü2"], [b"k1", b""]):
        entries = [(k, None) for k in keys]
        column = pickled_entry_column(entries)
        assert loaded(column) == entries
        assert all(b[:1] == BULK_OPCODES[type(keys[0])] for b in column.to_pylist())
    windowed = [(1, None), (2, ("window", 0, 10))]
    assert loaded(pickled_entry_column(windowed)) == windowed
    mixed = [(1, None), ("a", None), ((1, 2), None)]
    assert loaded(pickled_entry_column(mixed)) == mixed
    assert loaded(pickled_entry_column([])) == []


def test_binary_arrays_are_built_from_one_buffer() -> None:
    values = [b"", b"a", bytes(range(256)) * 3, b"xyz"]
    assert binary_array(values).equals(pa.array(values, pa.large_binary()))
    assert binary_array([]).equals(pa.array([], pa.large_binary()))


def test_buffer_pieces_keep_arrow_buffers_as_they_are() -> None:
    out = BufferPieces()
    big = pa.py_buffer(os.urandom(100_000))
    for piece in (b"head", big, b"", memoryview(b"tail")):
        out.write(piece)
    whole = b"head" + big.to_pybytes() + b"tail"
    assert len(out) == len(whole) and bytes(out) == whole and bytes(out.contiguous()) == whole
    views = out.buffers()
    assert [len(v) for v in views] == [4, 100_000, 4]
    assert views[1].obj is big  # the Arrow buffer itself, not a copy
    pauses: list[int] = []
    out.release(lambda: pauses.append(1), every=2)
    assert pauses == [1, 1] and len(out) == 0 and out.buffers() == []


class Mean(AggregateFunction):
    def create_accumulator(self) -> tuple[int, int]:
        return (0, 0)

    def add(self, value: int, acc: tuple[int, int]) -> tuple[int, int]:
        return (acc[0] + value, acc[1] + 1)

    def get_result(self, acc: tuple[int, int]) -> float:
        return acc[0] / acc[1]


def _states(b: HeapKeyedStateBackend) -> dict[str, Any]:
    ttl = StateTtlConfig.new_builder(60_000).cleanup_full_snapshot().build()
    with_ttl = ValueStateDescriptor("ttl", "str")
    with_ttl.enable_time_to_live(ttl)
    return {
        "bytes": b.get_partitioned_state(ValueStateDescriptor("bytes", "bytes")),
        "float": b.get_partitioned_state(ValueStateDescriptor("float", "float")),
        "list": b.get_partitioned_state(ListStateDescriptor("list", "int")),
        "map": b.get_partitioned_state(MapStateDescriptor("map", "str", "int")),
        "reducing": b.get_partitioned_state(ReducingStateDescriptor("reducing", lambda x, y: x + y)),
        "aggregating": b.get_partitioned_state(AggregatingStateDescriptor("aggregating", Mean())),
        "ttl": b.get_partitioned_state(with_ttl),
    }


KEYS: list[Any] = [*range(300), *(f"user-{i}" for i in range(200)), *(b"k%d" % i for i in range(100))]


def _filled() -> HeapKeyedStateBackend:
    b = HeapKeyedStateBackend(128, range(0, 128), name="t", clock=lambda: 1_000)
    st = _states(b)
    timers = b.create_timer_queue("timers")
    for i, k in enumerate(KEYS):
        b.set_current_key(k)
        st["bytes"].update(b"%d" % i * 40)
        st["float"].update(i / 7)
        st["list"].add_all([i, i + 1])
        st["map"].put("a", i)
        st["reducing"].add(i)
        st["reducing"].add(1)
        st["aggregating"].add(i)
        st["ttl"].update(f"t{i}")
        timers.add(10_000 + i, k, None, b.current_key_group)
        st["list"].set_current_namespace(("window", i))
        st["list"].add(-i)  # namespaced entries take the per-object path
        st["list"].set_current_namespace(None)
    return b


def _check(b: HeapKeyedStateBackend, keys: list[Any]) -> None:
    st = _states(b)
    for k in keys:
        i = KEYS.index(k)
        b.set_current_key(k)
        assert st["bytes"].value() == b"%d" % i * 40
        assert st["float"].value() == i / 7
        assert list(st["list"].get()) == [i, i + 1]
        assert dict(st["map"].items()) == {"a": i}
        assert st["reducing"].get() == i + 1
        assert st["aggregating"].get() == i
        assert st["ttl"].value() == f"t{i}"
        st["list"].set_current_namespace(("window", i))
        assert list(st["list"].get()) == [-i]
        st["list"].set_current_namespace(None)


def test_every_state_kind_round_trips_and_rescales() -> None:
    snapshot = _filled().snapshot(1).result().keyed
    assert snapshot is not None
    payload = read_inline(snapshot.delegate)
    with pa.ipc.open_stream(pa.BufferReader(payload)) as reader:
        table = reader.read_all()
    rows = dict(zip(table.column("state").to_pylist(), table.column("value").to_pylist()))
    assert rows["bytes"][:1] == b"B" and rows["float"][:1] == b"G"  # the bulk path was taken

    whole = HeapKeyedStateBackend(128, range(0, 128), name="t", clock=lambda: 1_000)
    assert whole.restore([snapshot]) == 9 * len(KEYS)
    _check(whole, KEYS)
    assert len(whole.create_timer_queue("timers")) == len(KEYS)

    for index in range(3):  # rescaled to parallelism 3: every key lands in exactly one subtask
        groups = KeyGroupRange.of(key_group_range(128, 3, index))
        part = HeapKeyedStateBackend(128, groups, name="t", clock=lambda: 1_000)
        part.restore([snapshot])
        mine = [k for k in KEYS if key_group_of(k, 128) in groups]
        _check(part, mine)
        assert len(part.create_timer_queue("timers")) == len(mine)


def test_expired_ttl_values_are_left_out_of_a_full_snapshot() -> None:
    now = [1_000]
    b = HeapKeyedStateBackend(128, range(0, 128), name="t", clock=lambda: now[0])
    st = _states(b)["ttl"]
    for k in range(10):
        b.set_current_key(k)
        st.update(f"v{k}")
    now[0] += 60_000
    snapshot = b.snapshot(1).result().keyed
    assert snapshot is None or HeapKeyedStateBackend(128, range(0, 128)).restore([snapshot]) == 0


def test_tables_of_plain_keys_and_values_stay_untracked_by_the_garbage_collector() -> None:
    """A write must not make a key group's dict GC-tracked: a full collection (which a snapshot's
    allocations set off) would walk every entry of every such dict, a long stall at 1 GB."""
    import gc

    b = HeapKeyedStateBackend(128, range(0, 128), name="t")
    values = b.get_partitioned_state(ValueStateDescriptor("v", "bytes"))
    counts = b.get_partitioned_state(ValueStateDescriptor("c", "int"))
    for k in [*range(2_000), *(f"user-{i}" for i in range(500))]:
        b.set_current_key(k)
        values.update(os.urandom(16))
        counts.update(len(str(k)))
    for name in ("v", "c"):
        tracked = [kg for kg, m in b._tables[name].maps.items() if gc.is_tracked(m.data)]
        assert tracked == [], f"{len(tracked)} key groups of {name!r} are GC-tracked"


def test_keys_of_every_form_round_trip_and_are_listed() -> None:
    """Bare plain keys, tuple keys, bools and namespaced entries side by side in one table."""
    b = HeapKeyedStateBackend(128, range(0, 128), name="t")
    desc = ValueStateDescriptor("v", "str")
    st = b.get_partitioned_state(desc)
    keys: list[Any] = [7, "7", b"7", 7.5, True, (7, None), ("a", 1), ((1, 2), None)]
    for k in keys:
        b.set_current_key(k)
        st.update(f"plain {k!r}")
        st.set_current_namespace(("window", 3))
        st.update(f"windowed {k!r}")
        st.set_current_namespace(None)
    assert {repr(k) for k in b.get_keys("v")} == {repr(k) for k in keys}
    assert {repr(k) for k in b.get_keys("v", ("window", 3))} == {repr(k) for k in keys}
    seen: dict[str, str] = {}
    b.apply_to_all_keys(desc, lambda k, s: seen.__setitem__(repr(k), s.value()))
    assert seen == {repr(k): f"plain {k!r}" for k in keys}

    restored = HeapKeyedStateBackend(128, range(0, 128), name="t")
    snapshot = b.snapshot(1).result().keyed
    assert snapshot is not None and restored.restore([snapshot]) == 2 * len(keys)
    again = restored.get_partitioned_state(desc)
    for k in keys:
        restored.set_current_key(k)
        assert again.value() == f"plain {k!r}"
        again.set_current_namespace(("window", 3))
        assert again.value() == f"windowed {k!r}"
        again.set_current_namespace(None)
    assert {repr(k) for k in restored.get_keys("v")} == {repr(k) for k in keys}
