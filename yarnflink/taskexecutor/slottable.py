"""TaskSlotTable: the slots of one TaskExecutor, who holds them, and which tasks run in them. Pure."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Optional


class SlotState(str, enum.Enum):
    FREE = "FREE"
    ALLOCATED = "ALLOCATED"  # given to a job by the ResourceManager, not yet accepted by its JobMaster
    ACTIVE = "ACTIVE"        # accepted by the JobMaster; tasks may be deployed into it


@dataclass
class TaskSlot:
    index: int
    state: SlotState = SlotState.FREE
    allocation_id: str = ""
    job_id: str = ""
    tasks: set[str] = field(default_factory=set)  # execution attempt ids


class SlotAllocationError(Exception):
    pass


class TaskSlotTable:
    def __init__(self, num_slots: int) -> None:
        self.slots = [TaskSlot(i) for i in range(num_slots)]

    def allocate(self, index: int, job_id: str, allocation_id: str) -> None:
        if not 0 <= index < len(self.slots):
            raise SlotAllocationError(f"slot index {index} out of range (this TaskExecutor has {len(self.slots)} slots)")
        slot = self.slots[index]
        if slot.state != SlotState.FREE and slot.allocation_id != allocation_id:
            raise SlotAllocationError(
                f"slot {index} is already allocated to {slot.allocation_id} (job {slot.job_id})")
        slot.state, slot.job_id, slot.allocation_id = (
            SlotState.ALLOCATED if slot.state == SlotState.FREE else slot.state, job_id, allocation_id)

    def by_allocation(self, allocation_id: str) -> Optional[TaskSlot]:
        for s in self.slots:
            if s.allocation_id == allocation_id and s.state != SlotState.FREE:
                return s
        return None

    def activate(self, allocation_id: str) -> bool:
        slot = self.by_allocation(allocation_id)
        if slot is None:
            return False
        slot.state = SlotState.ACTIVE
        return True

    def free(self, allocation_id: str) -> Optional[TaskSlot]:
        slot = self.by_allocation(allocation_id)
        if slot is None:
            return None
        freed = TaskSlot(slot.index, slot.state, slot.allocation_id, slot.job_id, set(slot.tasks))
        slot.state, slot.allocation_id, slot.job_id = SlotState.FREE, "", ""
        slot.tasks.clear()
        return freed

    def add_task(self, allocation_id: str, job_id: str, execution_id: str) -> TaskSlot:
        slot = self.by_allocation(allocation_id)
        if slot is None or slot.state != SlotState.ACTIVE:
            raise SlotAllocationError(f"no active slot for allocation {allocation_id}")
        if slot.job_id != job_id:
            raise SlotAllocationError(f"slot of allocation {allocation_id} belongs to job {slot.job_id}, not {job_id}")
        slot.tasks.add(execution_id)
        return slot

    def remove_task(self, execution_id: str) -> None:
        for s in self.slots:
            s.tasks.discard(execution_id)

    def jobs(self) -> set[str]:
        return {s.job_id for s in self.slots if s.job_id}

    def slots_of_job(self, job_id: str) -> list[TaskSlot]:
        return [s for s in self.slots if s.job_id == job_id]
