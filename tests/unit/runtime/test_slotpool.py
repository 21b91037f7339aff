from yarnflink.jobmaster.slotpool import SlotPool


def test_offers_fulfil_pending_requests_only_and_are_lost_with_their_task_manager() -> None:
    pool = SlotPool()
    assert pool.request("g0", None, 0.0) is None and pool.request("g1", None, 0.0) is None
    assert pool.required == 2
    assert pool.offer_slots("unknown", [("a0", 0)]) == ([], [])  # not registered: rejected
    pool.register_task_manager("te1", "te1:1", "te1:2", 0.0)
    pool.register_task_manager("te2", "te2:1", "te2:2", 0.0)
    accepted, fulfilled = pool.offer_slots("te1", [("a1", 0)])
    assert accepted == ["a1"] and [k for k, _ in fulfilled] == ["g0"]
    assert pool.offer_slots("te1", [("a1", 0)])[0] == ["a1"]  # a repeated offer is idempotent
    accepted, fulfilled = pool.offer_slots("te2", [("a2", 0), ("a3", 1)])
    assert accepted == ["a2"] and [k for k, _ in fulfilled] == ["g1"]  # a3: nobody waits for it
    assert pool.required == 2 and not pool.pending
    assert [(s.allocation_id, k) for s, k in pool.release_task_manager("te1")] == [("a1", "g0")]
    assert pool.required == 1 and pool.slot_for("g0") is None
