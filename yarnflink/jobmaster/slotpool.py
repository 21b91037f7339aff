"""SlotPool: the slots a JobMaster holds (seed 000, figure 4). Pure: events in, results out; the
caller passes the time (monotonic seconds).

* ``request(key, preferred)``: the scheduler asks for a slot for one shared slot (slot sharing
  group). An idle slot is handed out at once -- the one the key's tasks ran in before if it is
  idle (sticky: failover reuses it and the results its TaskExecutor keeps) -- else the request
  waits (pending) and ``required`` grows, which the JobMaster declares to the ResourceManager.
* ``offer_slots``: TaskExecutors offer slots the ResourceManager assigned to this job. Offers
  fulfil pending requests (one preferring that slot first); offers nobody waits for are rejected,
  so the TaskExecutor frees them again.
* ``release(key)``: the tasks of a shared slot have ended. The slot stays in the pool, idle, for
  the next region or a restart, and is given back (``expire_idle``) after ``slot.idle.timeout``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from yarnflink.executiongraph.executiongraph import LogicalSlot


@dataclass
class RegisteredTaskManager:
    resource_id: str
    rpc_address: str
    data_address: str
    last_heartbeat: float


@dataclass
class PendingRequest:
    key: str
    preferred: Optional[str]  # allocation id of the slot the key had before
    since: float


@dataclass
class SlotPool:
    idle_timeout_s: float = 50.0
    slots: dict[str, LogicalSlot] = field(default_factory=dict)  # by allocation id
    task_managers: dict[str, RegisteredTaskManager] = field(default_factory=dict)
    pending: dict[str, PendingRequest] = field(default_factory=dict)  # by key, oldest first
    rejected_offers: int = 0
    _slot_of_key: dict[str, str] = field(default_factory=dict)  # key -> allocation id
    _key_of_slot: dict[str, str] = field(default_factory=dict)  # allocation id -> key
    _idle_since: dict[str, float] = field(default_factory=dict)  # allocation id -> time

    # ------------------------------------------------------------------ state
    @property
    def required(self) -> int:
        """Slots this job wants from the ResourceManager: in use plus waited for."""
        return len(self._slot_of_key) + len(self.pending)

    def needed_keys(self) -> set[str]:
        """The requests holding a slot or waiting for one."""
        return set(self._slot_of_key) | set(self.pending)

    def slot_for(self, key: str) -> Optional[LogicalSlot]:
        alloc = self._slot_of_key.get(key)
        return self.slots[alloc] if alloc is not None else None

    def idle_slots(self) -> list[LogicalSlot]:
        return [self.slots[a] for a in self._idle_since]

    def register_task_manager(self, resource_id: str, rpc_address: str, data_address: str, now: float) -> None:
        self.task_managers[resource_id] = RegisteredTaskManager(resource_id, rpc_address, data_address, now)

    # ------------------------------------------------------------------ requests
    def request(self, key: str, preferred: Optional[str], now: float) -> Optional[LogicalSlot]:
        """The slot for ``key`` now (it keeps one it has), or None: the request is pending."""
        if key in self._slot_of_key:
            return self.slot_for(key)
        if self._idle_since:
            alloc = preferred if preferred in self._idle_since else next(iter(self._idle_since))
            return self._assign(key, alloc)
        self.pending.setdefault(key, PendingRequest(key, preferred, now))
        return None

    def cancel_request(self, key: str) -> None:
        self.pending.pop(key, None)

    def _assign(self, key: str, alloc: str) -> LogicalSlot:
        self._idle_since.pop(alloc, None)
        self.pending.pop(key, None)
        self._slot_of_key[key] = alloc
        self._key_of_slot[alloc] = key
        return self.slots[alloc]

    def _fulfil(self, alloc: str) -> Optional[tuple[str, LogicalSlot]]:
        """Give the idle slot ``alloc`` to a pending request (one that prefers it first)."""
        if not self.pending:
            return None
        request = next((r for r in self.pending.values() if r.preferred == alloc), None)
        if request is None:
            request = next(iter(self.pending.values()))
        return request.key, self._assign(request.key, alloc)

    def offer_slots(self, resource_id: str, offers: list[tuple[str, int]],
                    now: float = 0.0) -> tuple[list[str], list[tuple[str, LogicalSlot]]]:
        """``offers``: (allocation id, slot index). Returns the accepted allocation ids and the
        requests the new slots fulfilled, as (key, slot)."""
        tm = self.task_managers.get(resource_id)
        if tm is None:
            self.rejected_offers += len(offers)
            return [], []
        accepted: list[str] = []
        fulfilled: list[tuple[str, LogicalSlot]] = []
        for allocation_id, slot_index in offers:
            if allocation_id in self.slots:
                accepted.append(allocation_id)  # a repeated offer is idempotent
                continue
            if not self.pending:
                self.rejected_offers += 1
                continue
            self.slots[allocation_id] = LogicalSlot(
                allocation_id, resource_id, tm.rpc_address, tm.data_address, slot_index)
            accepted.append(allocation_id)
            done = self._fulfil(allocation_id)
            assert done is not None
            fulfilled.append(done)
        return accepted, fulfilled

    # ------------------------------------------------------------------ releasing
    def release(self, key: str, now: float) -> Optional[tuple[str, LogicalSlot]]:
        """The tasks of ``key`` ended: its slot goes idle, or straight to a waiting request
        (returned as (key, slot))."""
        self.pending.pop(key, None)
        alloc = self._slot_of_key.pop(key, None)
        if alloc is None:
            return None
        self._key_of_slot.pop(alloc, None)
        self._idle_since[alloc] = now
        return self._fulfil(alloc)

    def next_idle_expiry(self) -> Optional[float]:
        return min(self._idle_since.values()) + self.idle_timeout_s if self._idle_since else None

    def expire_idle(self, now: float) -> list[LogicalSlot]:
        """Removes and returns the slots idle for ``slot.idle.timeout`` (to be freed)."""
        expired = [a for a, t in self._idle_since.items() if now - t >= self.idle_timeout_s]
        out = []
        for alloc in expired:
            del self._idle_since[alloc]
            out.append(self.slots.pop(alloc))
        return out

    def release_task_manager(self, resource_id: str) -> list[tuple[LogicalSlot, Optional[str]]]:
        """Forgets a lost TaskExecutor; returns its slots with the key each was assigned to."""
        self.task_managers.pop(resource_id, None)
        lost = [s for s in self.slots.values() if s.resource_id == resource_id]
        out = []
        for s in lost:
            del self.slots[s.allocation_id]
            self._idle_since.pop(s.allocation_id, None)
            key = self._key_of_slot.pop(s.allocation_id, None)
            if key is not None:
                self._slot_of_key.pop(key, None)
            out.append((s, key))
        return out

    def release_all(self) -> list[LogicalSlot]:
        released = list(self.slots.values())
        self.slots.clear()
        self._slot_of_key.clear()
        self._key_of_slot.clear()
        self._idle_since.clear()
        self.pending.clear()
        return released

    def oldest_pending(self) -> Optional[float]:
        return min((r.since for r in self.pending.values()), default=None)
