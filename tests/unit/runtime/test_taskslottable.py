import pytest

from yarnflink.taskexecutor.slottable import SlotAllocationError, SlotState, TaskSlotTable


def test_slot_lifecycle() -> None:
    t = TaskSlotTable(2)
    t.allocate(1, "job", "a1")
    assert t.slots[1].state == SlotState.ALLOCATED
    with pytest.raises(SlotAllocationError, match="no active slot"):
        t.add_task("a1", "job", "e1")
    assert t.activate("a1")
    t.add_task("a1", "job", "e1")
    with pytest.raises(SlotAllocationError, match="belongs to job"):
        t.add_task("a1", "other", "e2")
    freed = t.free("a1")
    assert freed is not None and freed.tasks == {"e1"} and freed.index == 1
    assert t.slots[1].state == SlotState.FREE and t.jobs() == set()


def test_double_allocation_and_bad_index_are_refused() -> None:
    t = TaskSlotTable(1)
    t.allocate(0, "job", "a1")
    t.allocate(0, "job", "a1")  # the same allocation again is idempotent
    with pytest.raises(SlotAllocationError, match="already allocated"):
        t.allocate(0, "job2", "a2")
    with pytest.raises(SlotAllocationError, match="out of range"):
        t.allocate(5, "job", "a3")
