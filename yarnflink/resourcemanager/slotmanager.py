"""SlotManager: which slot of which TaskExecutor is free, pending or allocated, and which job needs
how many. Pure decisions: every method takes an event and returns the actions to carry out;
no I/O, no clock of its own (callers pass ``now``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class AllocateSlot:
    """Ask TaskExecutor ``resource_id`` to give slot ``slot_index`` to the job's JobMaster."""

    resource_id: str
    rpc_address: str
    slot_index: int
    job_id: str
    allocation_id: str
    jobmaster_address: str
    jobmaster_id: str


Action = AllocateSlot


@dataclass
class Slot:
    index: int
    allocation_id: str = ""
    job_id: str = ""
    pending: bool = False  # allocation sent, not yet confirmed by a slot report

    @property
    def free(self) -> bool:
        return not self.allocation_id


@dataclass
class TaskExecutorRecord:
    resource_id: str
    rpc_address: str
    data_address: str
    slots: dict[int, Slot]
    registered_at: float
    last_heartbeat: float
    hostname: str = ""
    pid: int = 0

    def free_slots(self) -> list[Slot]:
        return [s for s in self.slots.values() if s.free]


@dataclass
class JobRequirement:
    job_id: str
    jobmaster_address: str
    jobmaster_id: str
    slots: int = 0


@dataclass
class SlotManager:
    evenly_spread_out_slots: bool = False
    task_executors: dict[str, TaskExecutorRecord] = field(default_factory=dict)
    jobs: dict[str, JobRequirement] = field(default_factory=dict)

    # ------------------------------------------------------------------ TaskExecutors
    def register_task_executor(self, resource_id: str, rpc_address: str, data_address: str,
                               num_slots: int, reported: dict[int, tuple[str, str]], now: float,
                               hostname: str = "", pid: int = 0) -> list[Action]:
        """``reported``: slot index -> (allocation id, job id) for slots already allocated."""
        slots = {i: Slot(i) for i in range(num_slots)}
        for i, (alloc, job) in reported.items():
            if i in slots and alloc:
                slots[i].allocation_id, slots[i].job_id = alloc, job
        self.task_executors[resource_id] = TaskExecutorRecord(
            resource_id, rpc_address, data_address, slots, now, now, hostname, pid
        )
        return self.check_requirements()

    def unregister_task_executor(self, resource_id: str) -> list[Action]:
        self.task_executors.pop(resource_id, None)
        return self.check_requirements()

    def heartbeat(self, resource_id: str, reported: dict[int, tuple[str, str]], now: float) -> bool:
        """Reconciles with the TaskExecutor's slot report; returns False for an unknown sender."""
        te = self.task_executors.get(resource_id)
        if te is None:
            return False
        te.last_heartbeat = now
        for slot in te.slots.values():
            alloc, job = reported.get(slot.index, ("", ""))
            if alloc:
                slot.allocation_id, slot.job_id, slot.pending = alloc, job, False
            elif not slot.pending:
                slot.allocation_id, slot.job_id = "", ""
        return True

    def timed_out(self, now: float, timeout: float) -> list[str]:
        return [r for r, te in self.task_executors.items() if now - te.last_heartbeat > timeout]

    def slot_freed(self, resource_id: str, slot_index: int, allocation_id: str) -> list[Action]:
        te = self.task_executors.get(resource_id)
        if te is not None:
            slot = te.slots.get(slot_index)
            if slot is not None and slot.allocation_id == allocation_id:
                slot.allocation_id, slot.job_id, slot.pending = "", "", False
        return self.check_requirements()

    def allocation_failed(self, resource_id: str, allocation_id: str) -> list[Action]:
        """The TaskExecutor did not take the allocation (RPC failed or it refused)."""
        te = self.task_executors.get(resource_id)
        if te is not None:
            for slot in te.slots.values():
                if slot.allocation_id == allocation_id:
                    slot.allocation_id, slot.job_id, slot.pending = "", "", False
        return self.check_requirements()

    # ------------------------------------------------------------------ jobs
    def declare_requirements(self, job_id: str, jobmaster_address: str, jobmaster_id: str,
                             slots: int) -> list[Action]:
        self.jobs[job_id] = JobRequirement(job_id, jobmaster_address, jobmaster_id, slots)
        return self.check_requirements()

    def unregister_job(self, job_id: str) -> list[Action]:
        self.jobs.pop(job_id, None)
        return self.check_requirements()

    def allocated_to(self, job_id: str) -> int:
        return sum(
            1 for te in self.task_executors.values() for s in te.slots.values() if s.job_id == job_id
        )

    def missing_slots(self, job_id: str) -> int:
        job = self.jobs.get(job_id)
        return 0 if job is None else max(0, job.slots - self.allocated_to(job_id))

    def check_requirements(self) -> list[Action]:
        actions: list[Action] = []
        for job in self.jobs.values():
            for _ in range(self.missing_slots(job.job_id)):
                chosen = self._pick_free_slot()
                if chosen is None:
                    return actions
                te, slot = chosen
                slot.allocation_id = uuid.uuid4().hex
                slot.job_id = job.job_id
                slot.pending = True
                actions.append(
                    AllocateSlot(te.resource_id, te.rpc_address, slot.index, job.job_id,
                                 slot.allocation_id, job.jobmaster_address, job.jobmaster_id)
                )
        return actions

    def _pick_free_slot(self) -> Optional[tuple[TaskExecutorRecord, Slot]]:
        candidates = [te for te in self.task_executors.values() if te.free_slots()]
        if not candidates:
            return None
        if self.evenly_spread_out_slots:
            # the TaskExecutor with the lowest share of used slots first
            te = min(candidates, key=lambda t: (1 - len(t.free_slots()) / len(t.slots), t.registered_at))
        else:
            te = min(candidates, key=lambda t: t.registered_at)
        return te, te.free_slots()[0]

    # ------------------------------------------------------------------ views
    def totals(self) -> tuple[int, int]:
        total = sum(len(te.slots) for te in self.task_executors.values())
        free = sum(len(te.free_slots()) for te in self.task_executors.values())
        return total, free
