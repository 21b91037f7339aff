"""TaskSlotTable: the slots of one TaskExecutor, who holds them, and which tasks run in them. Pure.

Static slots 0..n-1 each hold the default slot profile (the total resources split n ways); with
fine-grained resource management the ResourceManager asks for dynamic slots instead (index -1),
carved out of whatever the allocated slots leave of the total. ``version`` counts allocations and
frees; it travels with slot reports so the ResourceManager can tell old reports from new ones.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from yarnflink.resourcemanager.resources import UNKNOWN, ResourceProfile


class SlotState(str, enum.Enum):
    FREE = "FREE"
    ALLOCATED = "ALLOCATED"  # given to a job by the ResourceManager, not yet accepted by its JobMaster
    ACTIVE = "ACTIVE"  # accepted by the JobMaster; tasks may be deployed into it


@dataclass
class TaskSlot:
    index: int
    state: SlotState = SlotState.FREE
    allocation_id: str = ""
    job_id: str = ""
    tasks: set[str] = field(default_factory=set)  # execution attempt ids
    profile: ResourceProfile = UNKNOWN


class SlotAllocationError(Exception):
    pass


class TaskSlotTable:
    def __init__(
        self, num_slots: int, total: ResourceProfile = UNKNOWN, default_slot: ResourceProfile | None = None
    ) -> None:
        self.num_slots = num_slots
        self.total = total
        self.default_slot = default_slot if default_slot is not None else total.divide(max(1, num_slots))
        self._static = [TaskSlot(i, profile=self.default_slot) for i in range(num_slots)]
        self._dynamic: dict[int, TaskSlot] = {}
        self.version = 0

    @property
    def slots(self) -> list[TaskSlot]:
        """Static slots (at their index) followed by dynamic ones."""
        return self._static + [self._dynamic[i] for i in sorted(self._dynamic)]

    def used(self) -> ResourceProfile:
        used = UNKNOWN
        for s in self.slots:
            if s.state != SlotState.FREE:
                used = used + s.profile
        return used

    def allocate(self, index: int, job_id: str, allocation_id: str, profile: ResourceProfile = UNKNOWN) -> TaskSlot:
        """Index -1: a dynamic slot of ``profile``. Asking again for the same allocation is a no-op."""
        existing = self.by_allocation(allocation_id)
        if existing is not None:
            if existing.job_id == job_id and index in (-1, existing.index):
                return existing
            raise SlotAllocationError(f"allocation {allocation_id} already holds slot {existing.index}")
        if index == -1:
            return self._allocate_dynamic(job_id, allocation_id, profile)
        if not 0 <= index < self.num_slots:
            raise SlotAllocationError(f"slot index {index} out of range (this TaskExecutor has {self.num_slots} slots)")
        slot = self._static[index]
        if slot.state != SlotState.FREE:
            raise SlotAllocationError(f"slot {index} is already allocated to {slot.allocation_id} (job {slot.job_id})")
        self._check_budget(slot.profile)
        slot.state, slot.job_id, slot.allocation_id = SlotState.ALLOCATED, job_id, allocation_id
        self.version += 1
        return slot

    def _allocate_dynamic(self, job_id: str, allocation_id: str, profile: ResourceProfile) -> TaskSlot:
        if self.total.is_unknown:
            raise SlotAllocationError("this TaskExecutor declares no resources: it has static slots only")
        profile = self.default_slot if profile.is_unknown else profile
        self._check_budget(profile)
        index = next(
            i for i in range(self.num_slots, self.num_slots + len(self._dynamic) + 1) if i not in self._dynamic
        )
        slot = self._dynamic[index] = TaskSlot(index, SlotState.ALLOCATED, allocation_id, job_id, profile=profile)
        self.version += 1
        return slot

    def _check_budget(self, profile: ResourceProfile) -> None:
        if self.total.is_unknown:
            return
        free = self.total - self.used()
        if not profile.fits_into(free):
            raise SlotAllocationError(f"a slot of {profile} does not fit into the free resources {free}")

    def by_allocation(self, allocation_id: str) -> TaskSlot | None:
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

    def free(self, allocation_id: str) -> TaskSlot | None:
        slot = self.by_allocation(allocation_id)
        if slot is None:
            return None
        freed = TaskSlot(slot.index, slot.state, slot.allocation_id, slot.job_id, set(slot.tasks), slot.profile)
        if slot.index in self._dynamic:
            del self._dynamic[slot.index]
        else:
            slot.state, slot.allocation_id, slot.job_id = SlotState.FREE, "", ""
            slot.tasks.clear()
        self.version += 1
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
