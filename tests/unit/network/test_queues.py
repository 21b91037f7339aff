"""BoundedQueue: bounds in items and bytes, oversized items, abort semantics, accounting."""

from __future__ import annotations

import pytest

from yarnflink.network.errors import CancelledTransfer
from yarnflink.network.queues import BoundedQueue, MemoryAccount

from .netutil import Runner, wait_until

pytestmark = pytest.mark.timeout(60)


def test_fifo_and_accounting() -> None:
    account = MemoryAccount()
    q = BoundedQueue(4, 100, account)
    for i in range(3):
        assert q.put(i, 10) == 0
    assert (len(q), q.nbytes, account.bytes) == (3, 30, 30)
    assert [q.poll(), q.get(), q.poll(), q.poll()] == [0, 1, 2, None]
    assert account.bytes == 0


def test_count_bound_blocks_until_poll() -> None:
    q = BoundedQueue(2, 1000)
    q.put("a", 1)
    q.put("b", 1)
    r = Runner(q.put, "c", 1)
    r.thread.join(0.2)
    assert r.thread.is_alive(), "put into a full queue must block"
    assert q.poll() == "a"
    r.join()
    assert r.result > 0  # reported blocked time
    assert [q.poll(), q.poll()] == ["b", "c"]


def test_byte_bound_and_oversized_item() -> None:
    q = BoundedQueue(100, 50)
    q.put("small", 30)
    r = Runner(q.put, "big", 500)  # larger than the bound: waits until the queue is empty
    r.thread.join(0.2)
    assert r.thread.is_alive()
    assert q.poll() == "small"
    r.join()
    assert q.nbytes == 500 and q.poll() == "big"


def test_abort_drops_items_and_unblocks_both_sides() -> None:
    account = MemoryAccount()
    q = BoundedQueue(1, 100, account)
    q.put("a", 40)
    blocked_put = Runner(q.put, "b", 40)
    wait_until(lambda: blocked_put.started.is_set())
    assert q.abort(RuntimeError("gone")) is True
    blocked_put.join()
    assert isinstance(blocked_put.error, CancelledTransfer)
    assert account.bytes == 0 and len(q) == 0
    with pytest.raises(RuntimeError, match="gone"):
        q.poll()
    with pytest.raises(CancelledTransfer):
        q.put("c", 1)
    assert q.abort(ValueError("second")) is False  # first cause wins


def test_blocked_get_wakes_on_abort_and_times_out() -> None:
    q = BoundedQueue(1, 100)
    with pytest.raises(TimeoutError):
        q.get(timeout=0.05)
    r = Runner(q.get)
    r.thread.join(0.1)
    assert r.thread.is_alive()
    q.abort(CancelledTransfer("closed"))
    r.join()
    assert isinstance(r.error, CancelledTransfer)


def test_force_bypasses_bounds_and_listener_is_called() -> None:
    calls = []
    q = BoundedQueue(1, 10)
    q.set_listener(lambda: calls.append(len(q)))
    q.put("a", 10)
    q.put("end", 0, force=True)
    assert len(q) == 2 and calls == [1, 2]
    q.abort(RuntimeError("x"))
    assert calls == [1, 2, 0]
