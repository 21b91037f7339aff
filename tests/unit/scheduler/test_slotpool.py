"""SlotPool: pending requests, accepted and rejected offers, idle slots, sticky reuse."""

from __future__ import annotations

from yarnflink.jobmaster.slotpool import SlotPool


def pool_with(*allocs: str) -> SlotPool:
    pool = SlotPool(idle_timeout_s=50.0)
    pool.register_task_manager("te", "te:rpc", "te:data", 0.0)
    for i, a in enumerate(allocs):
        pool.request(f"k{i}", None, 0.0)
        pool.offer_slots("te", [(a, i)], 0.0)
    return pool


def test_a_released_slot_is_kept_idle_and_given_back_to_the_key_that_had_it() -> None:
    pool = pool_with("a0", "a1")
    assert pool.slot_for("k0").allocation_id == "a0"  # type: ignore[union-attr]
    pool.release("k0", 1.0)
    pool.release("k1", 2.0)
    assert pool.required == 0 and len(pool.idle_slots()) == 2
    # a restarted group asks for the slot its tasks had: sticky, even if it was not the first idle
    assert pool.request("k1", "a1", 3.0).allocation_id == "a1"  # type: ignore[union-attr]
    assert pool.request("k9", "gone", 3.0).allocation_id == "a0"  # type: ignore[union-attr]
    assert pool.request("k8", None, 3.0) is None and pool.required == 3


def test_an_offer_goes_to_the_request_that_prefers_it() -> None:
    pool = pool_with("a0")
    pool.release_task_manager("te")
    pool.register_task_manager("te2", "te2:rpc", "te2:data", 0.0)
    pool.request("x", None, 0.0)
    pool.request("y", "b1", 0.0)
    accepted, fulfilled = pool.offer_slots("te2", [("b1", 1)], 0.0)
    assert accepted == ["b1"] and [k for k, _ in fulfilled] == ["y"]
    assert pool.rejected_offers == 0


def test_a_released_slot_goes_straight_to_a_waiting_request() -> None:
    pool = pool_with("a0")
    assert pool.request("next", None, 0.0) is None
    assert pool.release("k0", 5.0) == ("next", pool.slots["a0"])
    assert not pool.idle_slots() and not pool.pending


def test_idle_slots_expire_after_the_idle_timeout() -> None:
    pool = pool_with("a0", "a1")
    pool.release("k0", 10.0)
    assert pool.next_idle_expiry() == 60.0
    assert pool.expire_idle(59.9) == []
    assert [s.allocation_id for s in pool.expire_idle(60.0)] == ["a0"]
    assert list(pool.slots) == ["a1"] and pool.next_idle_expiry() is None
