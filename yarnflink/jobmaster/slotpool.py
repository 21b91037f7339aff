"""SlotPool: the slots a JobMaster holds. TaskExecutors offer slots the ResourceManager assigned
to this job; the pool accepts offers while requirements are unmet and rejects the rest. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from yarnflink.executiongraph.executiongraph import LogicalSlot


@dataclass
class RegisteredTaskManager:
    resource_id: str
    rpc_address: str
    data_address: str
    last_heartbeat: float


@dataclass
class SlotPool:
    required: int = 0
    slots: dict[str, LogicalSlot] = field(default_factory=dict)  # by allocation id
    task_managers: dict[str, RegisteredTaskManager] = field(default_factory=dict)

    def register_task_manager(self, resource_id: str, rpc_address: str, data_address: str, now: float) -> None:
        self.task_managers[resource_id] = RegisteredTaskManager(resource_id, rpc_address, data_address, now)

    def offer_slots(self, resource_id: str, offers: list[tuple[str, int]]) -> list[str]:
        """``offers``: (allocation id, slot index). Returns the accepted allocation ids."""
        tm = self.task_managers.get(resource_id)
        if tm is None:
            return []
        accepted = []
        for allocation_id, slot_index in offers:
            if allocation_id in self.slots:
                accepted.append(allocation_id)  # a repeated offer is idempotent
            elif len(self.slots) < self.required:
                self.slots[allocation_id] = LogicalSlot(
                    allocation_id, resource_id, tm.rpc_address, tm.data_address, slot_index)
                accepted.append(allocation_id)
        return accepted

    def has_all_slots(self) -> bool:
        return self.required > 0 and len(self.slots) >= self.required

    def release_task_manager(self, resource_id: str) -> list[LogicalSlot]:
        self.task_managers.pop(resource_id, None)
        lost = [s for s in self.slots.values() if s.resource_id == resource_id]
        for s in lost:
            del self.slots[s.allocation_id]
        return lost

    def release_all(self) -> list[LogicalSlot]:
        released = list(self.slots.values())
        self.slots.clear()
        return released
