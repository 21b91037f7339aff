"""The chaos schedule (integration/chaos/schedule.py): deterministic per seed, every kind asked for
scheduled, and never more faults at once than the HA setup survives."""

from __future__ import annotations

import pytest

from integration.chaos.schedule import FaultKind, Topology, check, make_schedule


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    a = make_schedule(42, 300)
    assert make_schedule(42, 300) == a
    assert make_schedule(43, 300).faults != a.faults
    assert a.describe() == make_schedule(42, 300).describe()


def test_every_kind_is_scheduled_at_least_once_in_a_short_run() -> None:
    for seed in range(50):
        assert make_schedule(seed, 75).kinds() == set(FaultKind)


@pytest.mark.parametrize("topology", [Topology(), Topology(masters=2, max_concurrent=3), Topology(max_concurrent=1)])
def test_the_constraints_hold_on_many_seeds(topology: Topology) -> None:
    for seed in range(60):
        s = make_schedule(seed, 240, topology=topology)
        check(s, list(FaultKind))  # raises on a broken constraint
        moments = sorted({f.begin_s for f in s.faults})
        for t in moments:
            active = [f for f in s.faults if f.begin_s <= t < f.end_s]
            assert len(active) <= topology.max_concurrent
            assert sum(f.kind.group == "zookeeper" for f in active) <= 1  # a majority of 3 serves
            assert sum(f.kind.group == "master" for f in active) <= topology.masters - 1  # one leads
            assert sum(f.kind.group == "taskexecutor" for f in active) <= 1
            assert sum(f.kind.group == "disk" for f in active) <= 1


def test_every_fault_ends_within_the_duration_so_nothing_stays_stopped() -> None:
    for seed in range(100):
        s = make_schedule(seed, 120)
        assert all(0 < f.begin_s < f.end_s <= 120 for f in s.faults)
        ends = [e.fault.id for e in s.events if e.phase == "end"]
        begins = [e.fault.id for e in s.events if e.phase == "begin"]
        assert sorted(ends) == sorted(begins) == list(range(len(s.faults)))
        for e in s.events:  # each end comes after its begin
            if e.phase == "end":
                assert s.events.index(e) > next(i for i, b in enumerate(s.events) if b.fault is e.fault)


def test_only_the_kinds_asked_for_and_a_long_run_has_many() -> None:
    kinds = [FaultKind.MASTER_KILL, FaultKind.SLOW_IO]
    s = make_schedule(1, 600, kinds)
    assert s.kinds() == set(kinds)
    assert len(s.faults) > 60


def test_bad_arguments_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="cannot hold every fault kind"):
        make_schedule(1, 10)
    with pytest.raises(ValueError, match="duration must be positive"):
        make_schedule(1, 0)
    with pytest.raises(ValueError, match="unknown fault kind 'nope'"):
        FaultKind.parse(["master-kill", "nope"])
    assert FaultKind.parse(["all"]) == list(FaultKind)
    with pytest.raises(ValueError, match="at least 2 masters"):
        Topology(masters=1)
