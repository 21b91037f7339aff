"""Keyed state of both backends (``make_backend``: hashmap and rocksdb): the state kinds, key groups,
TTL, snapshots taken at their synchronous part, restore into other key-group ranges."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest

from yarnflink.common.keygroups import key_group_of, key_group_range
from yarnflink.state import (
    AggregateFunction,
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateMigrationError,
    StateTtlConfig,
    ValueStateDescriptor,
)
from yarnflink.state.heap import KeyGroupRangeError


class ManualExecutor:
    """Runs submitted snapshot writes only when told (to interleave writes with them)."""

    def __init__(self) -> None:
        self.queue: list = []

    def submit(self, fn):  # type: ignore[no-untyped-def]
        f: Future = Future()
        self.queue.append((f, fn))
        return f

    def run_all(self) -> None:
        for f, fn in self.queue:
            f.set_result(fn())
        self.queue = []


class Clock:
    def __init__(self, t: int = 1_000) -> None:
        self.t = t

    def __call__(self) -> int:
        return self.t


class Avg(AggregateFunction):
    def create_accumulator(self):  # type: ignore[no-untyped-def]
        return [0, 0]

    def add(self, value, acc):  # type: ignore[no-untyped-def]
        acc[0] += value  # in place on purpose: the backend must copy a shared accumulator
        acc[1] += 1
        return acc

    def get_result(self, acc):  # type: ignore[no-untyped-def]
        return acc[0] / acc[1]

    def merge(self, a, b):  # type: ignore[no-untyped-def]
        return [a[0] + b[0], a[1] + b[1]]


def test_value_list_map_reducing_aggregating_state_per_key(make_backend: Callable[..., Any]) -> None:
    b = make_backend()
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    lst = b.get_partitioned_state(ListStateDescriptor("l"))
    m = b.get_partitioned_state(MapStateDescriptor("m"))
    r = b.get_partitioned_state(ReducingStateDescriptor("r", lambda x, y: x + y))
    a = b.get_partitioned_state(AggregatingStateDescriptor("a", Avg()))
    for key, n in (("x", 3), ("y", 5)):
        b.set_current_key(key)
        assert v.value() is None and lst.get() == [] and m.is_empty() and r.get() is None and a.get() is None
        for i in range(n):
            v.update(i)
            lst.add(i)
            m.put(i, i * i)
            r.add(i)
            a.add(i)
    b.set_current_key("x")
    assert (v.value(), lst.get(), m.items(), r.get(), a.get()) == (2, [0, 1, 2], [(0, 0), (1, 1), (2, 4)], 3, 1.0)
    b.set_current_key("y")
    assert (v.value(), lst.get(), r.get(), a.get()) == (4, [0, 1, 2, 3, 4], 10, 2.0)
    assert m.get(3) == 9 and 3 in m and m.contains(4) and not m.contains(7) and m[2] == 4
    m.remove(3)
    del m[4]
    assert m.keys() == [0, 1, 2] and m.values() == [0, 1, 4]
    lst.update([7, 8])
    lst.add_all([9])
    assert list(lst) == [7, 8, 9]
    with pytest.raises(ValueError, match="cannot add None"):
        lst.add(None)
    v.update(None)  # Flink: update(null) clears
    assert v.value() is None
    for s in (lst, m, r, a):
        s.clear()
    assert lst.get() == [] and m.is_empty() and r.get() is None and a.get() is None
    b.set_current_key("x")
    assert v.value() == 2  # other keys untouched


def test_keys_outside_the_backends_key_groups_are_refused(make_backend: Callable[..., Any]) -> None:
    rng = key_group_range(128, 2, 0)  # key groups 0..63
    b = make_backend(128, rng)
    inside = next(k for k in range(100) if key_group_of(k, 128) in rng)
    outside = next(k for k in range(100) if key_group_of(k, 128) not in rng)
    b.set_current_key(inside)
    with pytest.raises(KeyGroupRangeError, match=r"key group \d+, which is not in this backend"):
        b.set_current_key(outside)


def test_a_state_name_keeps_its_kind(make_backend: Callable[..., Any]) -> None:
    b = make_backend()
    b.get_partitioned_state(ValueStateDescriptor("s"))
    with pytest.raises(StateMigrationError, match="registered as value state, but is now declared as list state"):
        b.get_partitioned_state(ListStateDescriptor("s"))


def test_namespaces_are_separate_and_merge(make_backend: Callable[..., Any]) -> None:
    b = make_backend()
    lst = b.get_partitioned_state(ListStateDescriptor("l"))
    r = b.get_partitioned_state(ReducingStateDescriptor("r", lambda x, y: x + y))
    b.set_current_key("k")
    for ns, vals in (("w1", [1, 2]), ("w2", [3]), ("w3", [4])):
        lst.set_current_namespace(ns)
        r.set_current_namespace(ns)
        for x in vals:
            lst.add(x)
            r.add(x)
    lst.merge_namespaces("w1", ["w2", "w3"])
    r.merge_namespaces("w1", ["w2", "w3"])
    lst.set_current_namespace("w1")
    r.set_current_namespace("w1")
    assert sorted(lst.get()) == [1, 2, 3, 4] and r.get() == 10
    lst.set_current_namespace("w2")
    r.set_current_namespace("w3")
    assert lst.get() == [] and r.get() is None


# ----------------------------------------------------------------------------- TTL
def ttl(ms: int, **kw) -> StateTtlConfig:  # type: ignore[no-untyped-def]
    builder = StateTtlConfig.new_builder(ms)
    if kw.get("on_read"):
        builder.update_ttl_on_read_and_write()
    if kw.get("return_expired"):
        builder.return_expired_if_not_cleaned_up()
    if kw.get("full_snapshot"):
        builder.cleanup_full_snapshot()
    return builder.build()


def test_ttl_expires_values_list_elements_and_map_entries(make_backend: Callable[..., Any]) -> None:
    clock = Clock()
    b = make_backend(clock=clock)
    d_v, d_l, d_m = ValueStateDescriptor("v"), ListStateDescriptor("l"), MapStateDescriptor("m")
    for d in (d_v, d_l, d_m):
        d.enable_time_to_live(ttl(100))
    v, lst, m = (b.get_partitioned_state(d) for d in (d_v, d_l, d_m))
    b.set_current_key("k")
    v.update("a")
    lst.add(1)
    m.put("x", 1)
    clock.t += 60
    lst.add(2)
    m.put("y", 2)
    assert v.value() == "a"  # reading does not extend the TTL (OnCreateAndWrite)
    clock.t += 40  # first writes are 100 ms old: expired
    assert v.value() is None
    assert lst.get() == [2]
    assert m.items() == [("y", 2)]
    clock.t += 60
    assert lst.get() == [] and m.is_empty()


def test_ttl_update_on_read_and_return_expired(make_backend: Callable[..., Any]) -> None:
    clock = Clock()
    b = make_backend(clock=clock)
    d1, d2 = ValueStateDescriptor("read"), ValueStateDescriptor("expired")
    d1.enable_time_to_live(ttl(100, on_read=True))
    d2.enable_time_to_live(ttl(100, return_expired=True))
    s1, s2 = b.get_partitioned_state(d1), b.get_partitioned_state(d2)
    b.set_current_key("k")
    s1.update(1)
    s2.update(2)
    for _ in range(3):
        clock.t += 90
        assert s1.value() == 1  # each read extends it
    assert s2.value() == 2  # expired but not cleaned up yet: returned once, then removed
    assert s2.value() is None


def test_ttl_state_cannot_become_ttl_less(make_backend: Callable[..., Any]) -> None:
    b = make_backend()
    d = ValueStateDescriptor("v")
    d.enable_time_to_live(ttl(10))
    b.get_partitioned_state(d)
    b2 = make_backend()
    snap = b.snapshot(1)
    b.set_current_key(1)
    b.get_partitioned_state(d).update(5)
    snap = b.snapshot(2).result().keyed
    b2.restore([snap])
    with pytest.raises(StateMigrationError, match="TTL"):
        b2.get_partitioned_state(ValueStateDescriptor("v"))


# ----------------------------------------------------------------------------- snapshots
def test_snapshot_sees_the_state_at_its_synchronous_part(make_backend: Callable[..., Any]) -> None:
    ex = ManualExecutor()
    b = make_backend(executor=ex)
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    lst = b.get_partitioned_state(ListStateDescriptor("l"))
    m = b.get_partitioned_state(MapStateDescriptor("m"))
    a = b.get_partitioned_state(AggregatingStateDescriptor("a", Avg()))
    for k in range(20):
        b.set_current_key(k)
        v.update([k])
        lst.add(k)
        m.put("n", k)
        a.add(k)
    future = b.snapshot(7)
    assert not future.done()  # the write runs in the background
    for k in range(20):  # every kind of change before the background part runs
        b.set_current_key(k)
        v.value().append("mutated in place")
        lst.add(-1)
        m.put("n", -1)
        a.add(1000)
        if k % 2:
            v.clear()
    b.set_current_key(99)
    v.update(["new key"])
    ex.run_all()
    restored = make_backend()
    assert restored.restore([future.result().keyed]) == 80
    v2, l2, m2, a2 = (
        restored.get_partitioned_state(d)
        for d in (
            ValueStateDescriptor("v"),
            ListStateDescriptor("l"),
            MapStateDescriptor("m"),
            AggregatingStateDescriptor("a", Avg()),
        )
    )
    for k in range(20):
        restored.set_current_key(k)
        assert (v2.value(), l2.get(), m2.get("n"), a2.get()) == ([k], [k], k, float(k))
    restored.set_current_key(99)
    assert v2.value() is None
    # and the live state has every change
    b.set_current_key(2)
    assert v.value() == [2, "mutated in place"] and lst.get() == [2, -1] and a.get() == 501.0


def test_restore_splits_key_groups_over_a_new_parallelism(make_backend: Callable[..., Any]) -> None:
    old = [make_backend(128, key_group_range(128, 2, i)) for i in range(2)]
    keys = [f"key-{i}" for i in range(300)]
    for k in keys:
        kg = key_group_of(k, 128)
        b = old[0] if kg in key_group_range(128, 2, 0) else old[1]
        b.set_current_key(k, kg)
        b.get_partitioned_state(ValueStateDescriptor("v")).update(k.upper())
    handles = [b.snapshot(1).result().keyed for b in old]
    new = [make_backend(128, key_group_range(128, 3, i)) for i in range(3)]
    counts = [b.restore(handles) for b in new]
    assert sum(counts) == len(keys) and all(counts)
    for k in keys:
        owner = [b for b in new if key_group_of(k, 128) in range(b.key_group_range.start, b.key_group_range.end + 1)]
        assert len(owner) == 1
        owner[0].set_current_key(k)
        assert owner[0].get_partitioned_state(ValueStateDescriptor("v")).value() == k.upper()


def test_full_snapshot_cleanup_drops_expired_entries(make_backend: Callable[..., Any]) -> None:
    clock = Clock()
    b = make_backend(clock=clock)
    d = ValueStateDescriptor("v")
    d.enable_time_to_live(ttl(100, full_snapshot=True))
    v = b.get_partitioned_state(d)
    b.set_current_key("old")
    v.update(1)
    clock.t += 80
    b.set_current_key("new")
    v.update(2)
    clock.t += 30
    r = make_backend(clock=clock)
    assert r.restore([b.snapshot(1).result().keyed]) == 1


def test_empty_backend_snapshots_nothing(make_backend: Callable[..., Any]) -> None:
    assert make_backend().snapshot(1).result().keyed is None


def test_runtime_context_refuses_keyed_state_outside_keyed_functions() -> None:
    from yarnflink.operators.base import OperatorContext
    from yarnflink.operators.functions import RuntimeContext

    ctx = OperatorContext(task_name="t", operator_name="op", subtask_index=0, parallelism=1, max_parallelism=128)
    with pytest.raises(RuntimeError, match="only available in a function applied after key_by"):
        RuntimeContext(ctx).get_state(ValueStateDescriptor("v"))
