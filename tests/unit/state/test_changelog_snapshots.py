"""``thread``-mode snapshots of the hashmap backend: the task keeps changelogs, the snapshot side
applies them to its shadows (heap.py's module doc). Every snapshot must restore to exactly the
state at its synchronous part, however the snapshot threads lag behind the task, and the task
must never copy a key group."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest

from yarnflink.state import HeapKeyedStateBackend, ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from yarnflink.state.handles import SnapshotResult

KEYS = 60


class LaggingExecutor:
    """Holds submitted snapshot jobs; runs the oldest ones when told, or drops them the way
    ``Future.cancel()`` drops a queued job (an aborted checkpoint whose write never starts)."""

    def __init__(self) -> None:
        self.queue: list[tuple[Future, Callable[[], Any]]] = []

    def submit(self, fn: Callable[[], Any]) -> Future:
        f: Future = Future()
        self.queue.append((f, fn))
        return f

    def run_oldest(self) -> None:
        f, fn = self.queue.pop(0)
        try:
            f.set_result(fn())
        except Exception as e:  # noqa: BLE001 - handed to the future, as an executor does
            f.set_exception(e)

    def drop_oldest(self) -> None:
        f, _ = self.queue.pop(0)
        f.cancel()


def _states(b: HeapKeyedStateBackend) -> tuple[Any, Any, Any]:
    return (
        b.get_partitioned_state(ValueStateDescriptor("v")),
        b.get_partitioned_state(ListStateDescriptor("l")),
        b.get_partitioned_state(MapStateDescriptor("m")),
    )


def _read(b: HeapKeyedStateBackend) -> dict:
    """Everything in the backend, as plain values: {(state, key): value} and the timers."""
    v, lst, m = _states(b)
    out: dict = {}
    for k in range(KEYS):
        b.set_current_key(k)
        for ns in (None, "w1"):
            v.set_current_namespace(ns)
            lst.set_current_namespace(ns)
            if v.value() is not None:
                out[("v", k, ns)] = copy.deepcopy(v.value())
            if lst.get():
                out[("l", k, ns)] = list(lst.get())
        v.set_current_namespace(None)
        lst.set_current_namespace(None)
        if not m.is_empty():
            out[("m", k)] = dict(m.items())
    q = b.create_timer_queue("timers")
    out["timers"] = sorted((ts, key, ns) for _, ts, key, ns in q.snapshot_entries())
    return out


def _restored(result: SnapshotResult) -> dict:
    r = HeapKeyedStateBackend(128, range(0, 128))
    if result.keyed is not None:
        r.restore([result.keyed])
    return _read(r)


def _random_change(b: HeapKeyedStateBackend, rnd: random.Random) -> None:
    v, lst, m = _states(b)
    q = b.create_timer_queue("timers")
    k = rnd.randrange(KEYS)
    b.set_current_key(k)
    ns = rnd.choice((None, None, "w1"))
    v.set_current_namespace(ns)
    lst.set_current_namespace(ns)
    op = rnd.randrange(10)
    if op == 0:
        v.update([rnd.randrange(100)])  # a mutable value...
    elif op == 1:
        cur = v.value()
        if cur is not None:
            cur.append(-1)  # ...changed in place (value() hands out the task's own copy)
            v.update(cur)
    elif op == 2:
        v.clear()
    elif op == 3:
        lst.add(rnd.randrange(100))  # appended in place when the list exists
    elif op == 4:
        lst.clear()
    elif op == 5:
        m.put(rnd.randrange(3), rnd.randrange(100))
    elif op == 6:
        m.remove(rnd.randrange(3))
    elif op == 7:
        q.add(rnd.randrange(20), k, ns, b.current_key_group)
    elif op == 8:
        q.remove(rnd.randrange(20), k, ns, b.current_key_group)
    else:
        q.poll()
    v.set_current_namespace(None)
    lst.set_current_namespace(None)


@pytest.mark.parametrize("seed", range(12))
def test_every_snapshot_restores_the_state_at_its_synchronous_part(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random changes, snapshots at random points, snapshot jobs run late or dropped at random,
    and (odd seeds) changelogs handed over between checkpoints every few writes: each completed
    snapshot restores to the model taken at its synchronous part."""
    from yarnflink.state import heap

    if seed % 2:
        monkeypatch.setattr(heap, "HAND_OFF_WRITES", 7)
    rnd = random.Random(seed)
    ex = LaggingExecutor()
    b = HeapKeyedStateBackend(128, range(0, 128), executor=ex)
    if seed % 3 == 0:  # start from a restored backend, as after a failover
        for _ in range(200):
            _random_change(b, rnd)
        first = b.snapshot(1)
        while ex.queue:
            ex.run_oldest()
        restored_from = first.result(timeout=5)
        b = HeapKeyedStateBackend(128, range(0, 128), executor=ex)
        b.restore([restored_from.keyed])
    expected: list[tuple[Future, dict]] = []
    for step in range(600):
        _random_change(b, rnd)
        if rnd.random() < 0.04:
            expected.append((b.snapshot(step), _read(b)))
        if ex.queue and rnd.random() < 0.05:
            if rnd.random() < 0.2:
                ex.drop_oldest()
            else:
                ex.run_oldest()
    expected.append((b.snapshot(10_000), _read(b)))
    while ex.queue:
        ex.run_oldest()
    checked = 0
    for future, model in expected:
        if future.cancelled():
            continue
        assert _restored(future.result(timeout=5)) == model
        checked += 1
    assert checked >= 3


def test_the_task_never_copies_a_key_group() -> None:
    """After the synchronous part the task writes into the same dicts: no key group is copied
    (the stall of copy-on-write per key group grew with the state: ~150 ms per GB)."""
    ex = LaggingExecutor()
    b = HeapKeyedStateBackend(128, range(0, 128), executor=ex)
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    for k in range(2_000):
        b.set_current_key(k)
        v.update(k)
    table = b._tables["v"]
    before = {kg: id(m.data) for kg, m in table.maps.items()}
    f = b.snapshot(1)
    for k in range(2_000):
        b.set_current_key(k)
        v.update(-k)
    assert {kg: id(m.data) for kg, m in table.maps.items()} == before
    ex.run_oldest()
    r = HeapKeyedStateBackend(128, range(0, 128))
    r.restore([f.result().keyed])
    rv = r.get_partitioned_state(ValueStateDescriptor("v"))
    r.set_current_key(1234)
    assert rv.value() == 1234


def test_a_snapshot_run_after_a_later_one_fails_instead_of_writing_later_state() -> None:
    """An executor that runs snapshot jobs out of order cannot make a checkpoint hold state from
    after its barrier: the overtaken snapshot fails (its checkpoint is declined)."""
    ex = LaggingExecutor()
    b = HeapKeyedStateBackend(128, range(0, 128), executor=ex)
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    b.set_current_key(1)
    v.update(1)
    first = b.snapshot(1)
    v.update(2)
    second = b.snapshot(2)
    ex.queue.reverse()
    ex.run_oldest()
    ex.run_oldest()
    assert second.result().keyed is not None
    with pytest.raises(RuntimeError, match="checkpoint 1 ran after a later one"):
        first.result()


def test_changelogs_applied_in_chunks_restore_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """A large changelog is applied a chunk at a time (the GIL released in between)."""
    from yarnflink.state import heap

    monkeypatch.setattr(heap, "APPLY_CHUNK_ENTRIES", 3)
    b = HeapKeyedStateBackend(1, range(0, 1))  # one key group: every change in one changelog
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    for k in range(100):
        b.set_current_key(k)
        v.update(k)
    b.snapshot(1).result()
    for k in range(0, 100, 2):
        b.set_current_key(k)
        v.update(-k)
    for k in range(1, 30, 3):
        b.set_current_key(k)
        v.clear()
    cleared = set(range(1, 30, 3))
    expected = {k: None if k in cleared else -k if k % 2 == 0 else k for k in range(100)}
    r = HeapKeyedStateBackend(1, range(0, 1))
    r.restore([b.snapshot(2).result().keyed])
    rv = r.get_partitioned_state(ValueStateDescriptor("v"))
    got = {}
    for k in range(100):
        r.set_current_key(k)
        got[k] = rv.value()
    assert got == expected


def test_changelogs_are_handed_over_between_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every HAND_OFF_WRITES writes the task hands its changelogs to the snapshot side, which
    applies them, so the shadows stop holding the values replaced since (memory), and the next
    checkpoint has less to apply; none while changelogs still wait for the snapshot side."""
    import weakref

    from yarnflink.state import heap

    class Value:  # (weakly referenceable, unlike plain values)
        def __init__(self, n: int) -> None:
            self.n = n

    monkeypatch.setattr(heap, "HAND_OFF_WRITES", 10)
    ex = LaggingExecutor()
    b = HeapKeyedStateBackend(128, range(0, 128), executor=ex)
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    b.set_current_key(1)
    first = Value(1)
    v.update(first)
    b.snapshot(1)
    ex.run_oldest()  # the shadow holds ``first``
    gone = weakref.ref(first)
    del first
    for n in range(9):  # 9 writes: no hand-off yet
        v.update(Value(n))
    assert not ex.queue and gone() is not None
    v.update(Value(99))  # the 10th: handed over; applied by the snapshot side
    assert len(ex.queue) == 1
    for n in range(10):  # changelogs wait for the snapshot side: no second job
        v.update(Value(n))
    assert len(ex.queue) == 1
    ex.run_oldest()
    assert gone() is None  # the shadow let go of the replaced value
    f = b.snapshot(2)
    ex.run_oldest()
    r = HeapKeyedStateBackend(128, range(0, 128))
    r.restore([f.result().keyed])
    r.set_current_key(1)
    assert r.get_partitioned_state(ValueStateDescriptor("v")).value().n == 9
