from yarnflink.jobmaster.slotpool import SlotPool


def test_offers_are_accepted_up_to_the_requirement_and_lost_with_their_task_manager() -> None:
    pool = SlotPool(required=2)
    assert pool.offer_slots("unknown", [("a0", 0)]) == []  # not registered: rejected
    pool.register_task_manager("te1", "te1:1", "te1:2", 0.0)
    pool.register_task_manager("te2", "te2:1", "te2:2", 0.0)
    assert pool.offer_slots("te1", [("a1", 0)]) == ["a1"]
    assert pool.offer_slots("te1", [("a1", 0)]) == ["a1"]  # repeated offer is idempotent
    assert not pool.has_all_slots()
    assert pool.offer_slots("te2", [("a2", 0), ("a3", 1)]) == ["a2"]
    assert pool.has_all_slots()
    assert [s.allocation_id for s in pool.release_task_manager("te1")] == ["a1"]
    assert not pool.has_all_slots()
