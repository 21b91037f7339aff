"""The SlotManager as pure logic: events in, actions out, no servers."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator

import pytest

from yarnflink.resourcemanager.resources import UNKNOWN, ResourceProfile, WorkerSpec
from yarnflink.resourcemanager.slotmanager import (
    AllocateSlot,
    AllocationState,
    NotifyTaskManagerLost,
    ReportedSlot,
    SlotManager,
    SlotReport,
    StartWorker,
    StopWorker,
)

CPU1 = ResourceProfile(1.0, 100, 0, 100)
TE_TOTAL = ResourceProfile(4.0, 400, 0, 400)
SPEC = WorkerSpec(TE_TOTAL, 4)


def make(**kw) -> SlotManager:  # type: ignore[no-untyped-def]
    ids = itertools.count()
    return SlotManager(new_id=lambda: f"id{next(ids)}", **kw)


@pytest.fixture
def sms() -> Iterator[list[SlotManager]]:
    """Every SlotManager a test puts here has its invariants checked at the end (as dask's
    worker-state-machine tests do)."""
    made: list[SlotManager] = []
    yield made
    for sm in made:
        check_invariants(sm)


def check_invariants(sm: SlotManager) -> None:
    counts: Counter[tuple[str, ResourceProfile]] = Counter()
    for te in sm.task_executors.values():
        used = UNKNOWN
        for a in te.allocations.values():
            used = used + a.profile
            counts[(a.job_id, a.requirement)] += 1
        assert used == te.used, te.resource_id
        static = [a.slot_index for a in te.allocations.values() if 0 <= a.slot_index < te.num_slots]
        assert len(static) == len(set(static)), f"two allocations in one slot of {te.resource_id}"
        assert (te.idle_since is None) == bool(te.allocations)
    assert counts == Counter({(j, p): n for j, c in sm._job_allocations.items() for p, n in c.items()})


def register(
    sm: SlotManager,
    rid: str,
    slots: int = 2,
    now: float = 0.0,
    report: SlotReport = SlotReport(),
    total: ResourceProfile = UNKNOWN,
) -> list:
    return sm.register_task_executor(rid, f"{rid}:1", f"{rid}:2", slots, report, now, total=total)


def allocs(actions: list) -> list[tuple[str, int, str]]:
    return [(a.resource_id, a.slot_index, a.job_id) for a in actions if isinstance(a, AllocateSlot)]


def report(*slots: tuple[int, str, str], version: int) -> SlotReport:
    return SlotReport(tuple(ReportedSlot(i, a, j) for i, a, j in slots), version)


# ---------------------------------------------------------------------- matching
def test_requirements_wait_for_slots_then_allocate_each_free_slot_once(sms: list) -> None:
    sm = make()
    sms.append(sm)
    assert sm.declare_requirements("job", "jm:1", "jm-id", 3, 0.0) == []
    assert allocs(register(sm, "te1", 2)) == [("te1", 0, "job"), ("te1", 1, "job")]
    assert allocs(register(sm, "te2", 2, 1.0)) == [("te2", 0, "job")]
    assert sm.missing_slots("job") == 0 and sm.totals() == (4, 1)
    assert sm.check_requirements(2.0) == []  # nothing asked twice


def test_slot_sharing_groups_are_declared_apart_and_each_gets_its_slots(sms: list) -> None:
    sm = make(fine_grained=True)
    sms.append(sm)
    register(sm, "te1", 4, total=TE_TOTAL)
    heavy = ResourceProfile(2.0, 200, 0, 200)
    actions = sm.declare_requirements("job", "jm", "id", {UNKNOWN: 1, heavy: 1}, 0.0)
    assert sorted((a.slot_index, a.profile) for a in actions) == sorted([(-1, TE_TOTAL.divide(4)), (-1, heavy)])
    te = sm.task_executors["te1"]
    assert te.used == TE_TOTAL.divide(4) + heavy
    # one default slot still fits (1 cpu left), a second heavy one does not
    assert te.free_slots(True) == 1
    assert allocs(sm.declare_requirements("job", "jm", "id", {UNKNOWN: 1, heavy: 2}, 1.0)) == []
    assert sm.missing_slots("job") == 1


def test_fine_grained_carves_slots_to_fit_and_spills_to_the_next_task_executor(sms: list) -> None:
    sm = make(fine_grained=True)
    sms.append(sm)
    register(sm, "te1", 4, total=TE_TOTAL)
    register(sm, "te2", 4, total=TE_TOTAL, now=1.0)
    big = ResourceProfile(3.0, 100, 0, 0)
    actions = sm.declare_requirements("job", "jm", "id", {big: 2, CPU1: 2}, 0.0)
    placed = Counter((a.resource_id, a.profile) for a in actions)
    # packing: te1 takes a 3-cpu slot and a 1-cpu slot, te2 the rest
    assert placed == Counter({("te1", big): 1, ("te1", CPU1): 1, ("te2", big): 1, ("te2", CPU1): 1})


def test_without_fine_grained_profiles_are_ignored_and_all_slots_are_equal(sms: list) -> None:
    sm = make()
    sms.append(sm)
    register(sm, "te1", 2, total=TE_TOTAL)
    actions = sm.declare_requirements("job", "jm", "id", {ResourceProfile(8.0, 10_000, 0, 0): 1, CPU1: 1}, 0.0)
    assert sorted(a.slot_index for a in actions) == [0, 1]
    assert {a.profile for a in actions} == {TE_TOTAL.divide(2)}


def test_evenly_spread_out_slots_alternates_task_executors(sms: list) -> None:
    sm = make(evenly_spread_out_slots=True)
    packed = make()
    sms += [sm, packed]
    for m in (sm, packed):
        register(m, "te1", 2, 0.0)
        register(m, "te2", 2, 1.0)
    assert sorted(a.resource_id for a in sm.declare_requirements("job", "jm", "id", 2, 0.0)) == ["te1", "te2"]
    assert [a.resource_id for a in packed.declare_requirements("job", "jm", "id", 2, 0.0)] == ["te1", "te1"]
    fine = make(fine_grained=True, evenly_spread_out_slots=True)
    sms.append(fine)
    register(fine, "te1", 4, total=TE_TOTAL)
    register(fine, "te2", 4, total=TE_TOTAL, now=1.0)
    assert sorted(a.resource_id for a in fine.declare_requirements("job", "jm", "id", {CPU1: 4}, 0.0)) == [
        "te1",
        "te1",
        "te2",
        "te2",
    ]


# ---------------------------------------------------------------------- reconciliation
def test_pending_allocation_survives_a_report_that_does_not_show_it_yet(sms: list) -> None:
    sm = make()
    sms.append(sm)
    register(sm, "te1", 1)
    (a,) = sm.declare_requirements("job", "jm", "id", 1, 0.0)
    assert sm.slot_report("te1", report(version=0), 1.0) == []  # request still in flight
    assert sm.check_requirements(1.5) == []  # still pending, not asked twice
    sm.allocation_acked("te1", a.allocation_id, 0, version=1, now=2.0)
    assert sm.task_executors["te1"].allocations[a.allocation_id].state == AllocationState.ALLOCATED


def test_a_late_report_from_before_the_ack_does_not_free_the_slot(sms: list) -> None:
    sm = make()
    sms.append(sm)
    register(sm, "te1", 1)
    (a,) = sm.declare_requirements("job", "jm", "id", 1, 0.0)
    sm.allocation_acked("te1", a.allocation_id, 0, version=1, now=1.0)
    # a heartbeat answered before the TaskExecutor took the slot arrives after the ack
    assert sm.slot_report("te1", report(version=0), 2.0) == []
    assert sm.allocated_to("job") == 1 and sm.totals() == (1, 0)


def test_a_late_report_from_before_a_free_does_not_bring_the_slot_back(sms: list) -> None:
    sm = make()
    sms.append(sm)
    register(sm, "te1", 1)
    (a,) = sm.declare_requirements("job", "jm", "id", 1, 0.0)
    sm.allocation_acked("te1", a.allocation_id, 0, version=1, now=1.0)
    sm.unregister_job("job", 1.5)
    sm.slot_freed("te1", a.allocation_id, version=2, now=2.0)
    sm.declare_requirements("other", "jm2", "id2", 1, 2.5)  # takes the freed slot
    stale = report((0, a.allocation_id, "job"), version=1)
    assert sm.slot_report("te1", stale, 3.0) == []
    (slot,) = sm.task_executors["te1"].allocations.values()
    assert slot.job_id == "other"


def test_a_lost_free_notice_is_repaired_by_the_next_report(sms: list) -> None:
    sm = make()
    sms.append(sm)
    register(sm, "te1", 1)
    (a,) = sm.declare_requirements("j1", "jm", "id", 1, 0.0)
    sm.allocation_acked("te1", a.allocation_id, 0, version=1, now=0.5)
    assert sm.declare_requirements("j2", "jm2", "id2", 1, 1.0) == []  # no slot free
    sm.unregister_job("j1", 1.5)
    # the TaskExecutor freed the slot (version 2); its notice never arrived; the heartbeat says so
    (b,) = sm.slot_report("te1", report(version=2), 2.0)
    assert b.job_id == "j2"


def test_a_slot_taken_there_but_unknown_here_is_learned_from_the_report(sms: list) -> None:
    sm = make()
    sms.append(sm)
    register(sm, "te1", 2)
    sm.slot_report("te1", report((1, "foreign", "jx"), version=3), 1.0)
    (a,) = sm.declare_requirements("job", "jm", "id", 1, 2.0)
    assert a.slot_index == 0  # slot 1 is known to be taken
    assert sm.task_executors["te1"].allocations["foreign"].state == AllocationState.ALLOCATED


def test_registration_with_a_report_keeps_the_slots_it_shows(sms: list) -> None:
    sm = make()
    sms.append(sm)
    sm.declare_requirements("job", "jm", "id", 2, 0.0)
    actions = register(sm, "te1", 2, report=report((0, "a-old", "job"), version=7))
    assert allocs(actions) == [("te1", 1, "job")]
    assert sm.allocated_to("job") == 2


def test_failed_request_goes_elsewhere_and_the_task_executor_waits_for_its_report(sms: list) -> None:
    sm = make()
    sms.append(sm)
    register(sm, "te1", 1)
    register(sm, "te2", 1, 1.0)
    (a,) = sm.declare_requirements("j1", "jm", "id1", 1, 0.0)
    assert a.resource_id == "te1"
    (retry,) = sm.allocation_failed("te1", a.allocation_id, 1.0)
    assert retry.resource_id == "te2" and retry.allocation_id != a.allocation_id
    assert sm.declare_requirements("j2", "jm2", "id2", 1, 2.0) == []  # te1 skipped until it reports
    (b,) = sm.slot_report("te1", report(version=0), 3.0)
    assert (b.resource_id, b.job_id) == ("te1", "j2")


def test_freed_slots_serve_other_jobs(sms: list) -> None:
    sm = make()
    sms.append(sm)
    register(sm, "te1", 1)
    (a,) = sm.declare_requirements("j1", "jm", "id1", 1, 0.0)
    assert sm.declare_requirements("j2", "jm2", "id2", 1, 0.0) == []
    sm.unregister_job("j1", 1.0)
    (b,) = sm.slot_freed("te1", a.allocation_id, 1, 1.0)
    assert b.job_id == "j2"


def test_lost_task_executor_takes_its_slots_and_its_jobmasters_are_told(sms: list) -> None:
    sm = make()
    sms.append(sm)
    register(sm, "te1", 2)
    register(sm, "te2", 2, 1.0)
    sm.declare_requirements("job", "jm:9", "jm-id", 3, 0.0)
    actions = sm.task_executor_lost("te1", "heartbeat timed out", 5.0)
    assert actions[0] == NotifyTaskManagerLost("job", "jm:9", "jm-id", "te1", "heartbeat timed out")
    assert allocs(actions[1:]) == [("te2", 1, "job")]  # the requirement stands: what is left is used
    assert sm.totals() == (2, 0)
    assert sm.slot_report("te1", report(version=9), 6.0) == []  # unknown sender


# ---------------------------------------------------------------------- workers (active mode)
def test_standalone_never_starts_or_stops_workers(sms: list) -> None:
    sm = make(min_slots=4)
    sms.append(sm)
    assert sm.declare_requirements("job", "jm", "id", 3, 0.0) == []
    register(sm, "te1", 1)
    assert sm.tick(1000.0) == []


def test_demand_beyond_registered_slots_starts_workers_up_to_the_maximum(sms: list) -> None:
    sm = make(worker_spec=WorkerSpec(UNKNOWN, 2), max_slots=6)
    sms.append(sm)
    register(sm, "te1", 2)
    actions = sm.declare_requirements("job", "jm", "id", 7, 0.0)
    assert len(allocs(actions)) == 2
    starts = [a for a in actions if isinstance(a, StartWorker)]
    assert len(starts) == 2  # 2 + 2*2 = 6 slots: the 7th can never be had
    assert ("job", UNKNOWN) in sm.unfulfillable
    assert sm.check_requirements(1.0) == []  # workers being started count: none started twice
    sm.worker_requested(starts[0].request_id, "w-a")
    acts = sm.register_task_executor("w-a", "w-a:1", "w-a:2", 2, SlotReport(), 2.0)
    assert allocs(acts) == [("w-a", 0, "job"), ("w-a", 1, "job")]
    assert list(sm.pending_workers) == [starts[1].request_id]


def test_fine_grained_demand_is_packed_into_new_workers(sms: list) -> None:
    sm = make(fine_grained=True, worker_spec=SPEC)
    sms.append(sm)
    actions = sm.declare_requirements(
        "job", "jm", "id", {ResourceProfile(2.0, 100, 0, 0): 3, ResourceProfile(9.0, 1, 0, 0): 1}, 0.0
    )
    assert len([a for a in actions if isinstance(a, StartWorker)]) == 2  # 3 x 2 cpu in 4-cpu workers
    assert ("job", ResourceProfile(9.0, 1, 0, 0)) in sm.unfulfillable  # larger than any worker


def test_minimum_is_started_at_once_kept_when_idle_and_replaced_when_lost(sms: list) -> None:
    sm = make(worker_spec=WorkerSpec(UNKNOWN, 2), min_slots=4, task_manager_timeout=30.0)
    sms.append(sm)
    starts = sm.check_requirements(0.0)
    assert [type(a) for a in starts] == [StartWorker, StartWorker]
    for i, s in enumerate(starts):
        sm.worker_requested(s.request_id, f"w{i}")
        sm.register_task_executor(f"w{i}", "x", "y", 2, SlotReport(), 1.0)
    assert sm.tick(100.0) == []  # idle, but the minimum
    lost = sm.worker_terminated("w0", "exit 137", 101.0)
    assert [type(a) for a in lost] == [StartWorker]


def test_idle_task_executors_beyond_the_minimum_are_stopped_after_the_timeout(sms: list) -> None:
    sm = make(worker_spec=WorkerSpec(UNKNOWN, 1), min_slots=1, task_manager_timeout=30.0)
    sms.append(sm)
    register(sm, "te0", 1, now=0.0)
    sm.pending_workers.clear()  # te0 stands for the minimum
    actions = sm.declare_requirements("job", "jm", "id", 2, 0.0)
    (start,) = [a for a in actions if isinstance(a, StartWorker)]
    sm.worker_requested(start.request_id, "te1")
    (a1,) = register(sm, "te1", 1, now=1.0)
    a0 = next(iter(sm.task_executors["te0"].allocations.values()))
    sm.unregister_job("job", 10.0)
    sm.slot_freed("te0", a0.allocation_id, 1, 10.0)
    sm.slot_freed("te1", a1.allocation_id, 1, 12.0)
    assert sm.tick(39.0) == []  # idle 29 s and 27 s
    # te0 idle 31 s goes: te1 keeps the minimum, whichever TaskExecutor that is
    assert sm.tick(41.0) == [StopWorker("te0", "idle for more than 30 s", "te0:1")]
    assert sm.tick(1000.0) == []
    assert list(sm.task_executors) == ["te1"]


def test_busy_task_executors_are_never_released(sms: list) -> None:
    sm = make(worker_spec=WorkerSpec(UNKNOWN, 1), task_manager_timeout=1.0)
    sms.append(sm)
    register(sm, "te0", 1)
    sm.declare_requirements("job", "jm", "id", 1, 0.0)
    assert [a for a in sm.tick(100.0) if isinstance(a, StopWorker)] == []


def test_worker_start_failures_beyond_the_rate_pause_starts_for_the_retry_interval(sms: list) -> None:
    sm = make(worker_spec=WorkerSpec(UNKNOWN, 1), max_start_failure_rate=2, start_retry_interval=10.0)
    sms.append(sm)
    (s,) = sm.declare_requirements("job", "jm", "id", 1, 0.0)
    now = 0.0
    for _ in range(2):  # two failures in a minute are within the rate: restarted at once
        now += 1.0
        (s,) = sm.worker_terminated(s.request_id, "exit 1", now)
        assert isinstance(s, StartWorker)
    now += 1.0
    assert sm.worker_terminated(s.request_id, "exit 1", now) == []  # the third pauses starts
    assert sm.tick(now + 9.9) == []
    (s,) = sm.tick(now + 10.0)
    assert isinstance(s, StartWorker)
    # still above the rate: the next failure pauses again
    assert sm.worker_terminated(s.request_id, "exit 1", now + 11.0) == []
    assert isinstance(sm.tick(now + 21.0)[0], StartWorker)


def test_a_worker_that_never_registers_is_stopped_and_counts_as_a_failure(sms: list) -> None:
    sm = make(worker_spec=WorkerSpec(UNKNOWN, 1), registration_timeout=60.0, max_start_failure_rate=0)
    sms.append(sm)
    (s,) = sm.declare_requirements("job", "jm", "id", 1, 0.0)
    sm.worker_requested(s.request_id, "w1")
    assert sm.tick(59.0) == []
    assert sm.tick(61.0) == [StopWorker("w1", "did not register within 60 s")]  # and paused
    assert isinstance(sm.tick(64.0)[0], StartWorker)  # the default retry interval is 3 s


def test_a_registered_worker_that_dies_is_not_a_start_failure(sms: list) -> None:
    sm = make(worker_spec=WorkerSpec(UNKNOWN, 1), max_start_failure_rate=0)
    sms.append(sm)
    register(sm, "w1", 1)
    sm.declare_requirements("job", "jm", "id", 1, 0.0)
    actions = sm.worker_terminated("w1", "killed", 1.0)
    assert isinstance(actions[0], NotifyTaskManagerLost)
    assert isinstance(actions[1], StartWorker)  # not paused
