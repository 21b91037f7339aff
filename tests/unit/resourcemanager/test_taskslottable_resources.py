"""TaskSlotTable with resources: dynamic slots carved from the total, versions of changes."""

import pytest

from yarnflink.resourcemanager.resources import ResourceProfile
from yarnflink.taskexecutor.slottable import SlotAllocationError, SlotState, TaskSlotTable

TOTAL = ResourceProfile(4.0, 400, 0, 400)


def test_dynamic_slots_are_carved_out_of_the_free_resources_and_given_back() -> None:
    t = TaskSlotTable(2, TOTAL)
    assert t.default_slot == ResourceProfile(2.0, 200, 0, 200)
    big = t.allocate(-1, "job", "a1", ResourceProfile(3.0, 100, 0, 0))
    assert big.index == 2 and big.profile.cpu_cores == 3.0
    with pytest.raises(SlotAllocationError, match="does not fit"):
        t.allocate(-1, "job", "a2", ResourceProfile(2.0, 100, 0, 0))
    with pytest.raises(SlotAllocationError, match="does not fit"):
        t.allocate(0, "job", "a3")  # a static slot needs its default profile too
    small = t.allocate(-1, "job", "a4", ResourceProfile(1.0, 100, 0, 0))
    assert small.index == 3
    assert t.used() == ResourceProfile(4.0, 200, 0, 0)
    assert t.free("a1") is not None
    assert [s.index for s in t.slots] == [0, 1, 3]
    assert t.allocate(-1, "job", "a5", ResourceProfile(2.0, 100, 0, 0)).index == 2


def test_every_allocation_and_free_counts_as_a_new_version() -> None:
    t = TaskSlotTable(2, TOTAL)
    t.allocate(0, "job", "a1")
    assert t.version == 1
    t.allocate(0, "job", "a1")  # the same request again changes nothing
    assert t.version == 1
    t.activate("a1")
    assert t.version == 1 and t.slots[0].state == SlotState.ACTIVE
    t.free("a1")
    assert t.version == 2
    with pytest.raises(SlotAllocationError, match="already holds slot 1"):
        t.allocate(1, "job", "a6") and t.allocate(0, "job", "a6")


def test_without_declared_resources_only_static_slots_exist() -> None:
    t = TaskSlotTable(1)
    with pytest.raises(SlotAllocationError, match="static slots only"):
        t.allocate(-1, "job", "a1", ResourceProfile(1.0, 1, 0, 0))
    t.allocate(0, "job", "a1")
