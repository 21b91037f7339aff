from yarnflink.resourcemanager.slotmanager import AllocateSlot, SlotManager


def register(sm: SlotManager, rid: str, slots: int, now: float = 0.0) -> list[AllocateSlot]:
    return sm.register_task_executor(rid, f"{rid}:1", f"{rid}:2", slots, {}, now)


def test_requirements_wait_for_slots_then_allocate_each_free_slot_once() -> None:
    sm = SlotManager()
    assert sm.declare_requirements("job", "jm:1", "jm-id", 3) == []
    actions = register(sm, "te1", 2)
    assert [(a.resource_id, a.slot_index) for a in actions] == [("te1", 0), ("te1", 1)]
    assert all(a.job_id == "job" and a.jobmaster_id == "jm-id" for a in actions)
    actions = register(sm, "te2", 2, now=1.0)
    assert [(a.resource_id, a.slot_index) for a in actions] == [("te2", 0)]
    assert sm.missing_slots("job") == 0
    assert sm.totals() == (4, 1)


def test_pending_allocation_survives_a_heartbeat_that_does_not_report_it_yet() -> None:
    sm = SlotManager()
    register(sm, "te1", 1)
    (a,) = sm.declare_requirements("job", "jm:1", "jm-id", 1)
    assert sm.heartbeat("te1", {}, 1.0)
    assert sm.check_requirements() == []  # still pending, not offered twice
    sm.heartbeat("te1", {0: (a.allocation_id, "job")}, 2.0)
    sm.heartbeat("te1", {}, 3.0)  # confirmed allocation later freed by the TaskExecutor
    assert sm.totals() == (1, 1)


def test_failed_allocation_is_retried_and_freed_slots_serve_other_jobs() -> None:
    sm = SlotManager()
    register(sm, "te1", 1)
    (a,) = sm.declare_requirements("j1", "jm:1", "id1", 1)
    (retry,) = sm.allocation_failed("te1", a.allocation_id)
    assert retry.job_id == "j1" and retry.allocation_id != a.allocation_id
    assert sm.declare_requirements("j2", "jm:2", "id2", 1) == []
    sm.unregister_job("j1")
    (b,) = sm.slot_freed("te1", 0, retry.allocation_id)
    assert b.job_id == "j2"


def test_lost_task_executor_takes_its_slots_and_unknown_heartbeat_is_reported() -> None:
    sm = SlotManager()
    register(sm, "te1", 2)
    assert sm.timed_out(now=100.0, timeout=50.0) == ["te1"]
    sm.unregister_task_executor("te1")
    assert sm.totals() == (0, 0)
    assert not sm.heartbeat("te1", {}, 101.0)


def test_evenly_spread_out_slots_alternates_task_executors() -> None:
    sm = SlotManager(evenly_spread_out_slots=True)
    register(sm, "te1", 2, 0.0)
    register(sm, "te2", 2, 1.0)
    actions = sm.declare_requirements("job", "jm", "id", 2)
    assert sorted(a.resource_id for a in actions) == ["te1", "te2"]
    packed = SlotManager()
    register(packed, "te1", 2, 0.0)
    register(packed, "te2", 2, 1.0)
    assert [a.resource_id for a in packed.declare_requirements("job", "jm", "id", 2)] == ["te1", "te1"]
