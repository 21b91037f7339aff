"""SlotPool: the slots a JobMaster holds (seed 000, figure 4). Pure: events in, results out; the
caller passes the time (monotonic seconds).

* ``request(key, preferred)``: the scheduler asks for a slot for one shared slot (slot sharing
  group). An idle slot is handed out at once -- the one the key's tasks ran in before if it is
  idle (sticky: failover reuses it and the results its TaskExecutor keeps) -- else the request
  waits (pending) and ``required`` grows, which the JobMaster declares to the ResourceManager.
* ``offer_slots``: TaskExecutors offer slots the ResourceManager assigned to this job. Offers
  fulfil pending requests (one preferring that slot first); offers nobody waits for are rejected,
  so the TaskExecutor frees them again.
* Profiles (Flink's DeclarativeSlotPool matching): a request names the ResourceProfile its slot
  sharing group needs (UNKNOWN: any slot). An offered or idle slot goes only to a request whose
  profile it matches -- an equal profile first, then one that fits into the slot -- so a group
  with declared resources never lands in a smaller slot meant for another group. With
  ``match_profiles=False`` (no fine-grained resource management) profiles are ignored.
* Blocked TaskExecutors: a request may exclude TaskExecutors (speculative execution asks for a
  slot away from the slow attempt's TaskExecutor).
* ``release(key)``: the tasks of a shared slot have ended. The slot stays in the pool, idle, for
  the next region or a restart, and is given back (``expire_idle``) after ``slot.idle.timeout``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Union

from yarnflink.executiongraph.executiongraph import LogicalSlot
from yarnflink.resourcemanager.resources import UNKNOWN, ResourceProfile

#: An offer: (allocation id, slot index) or (allocation id, slot index, the slot's profile).
Offer = Union[tuple[str, int], tuple[str, int, ResourceProfile]]


@dataclass
class RegisteredTaskManager:
    resource_id: str
    rpc_address: str
    data_address: str
    last_heartbeat: float


@dataclass
class PendingRequest:
    key: str
    preferred: str | None  # allocation id of the slot the key had before
    since: float
    profile: ResourceProfile = UNKNOWN
    excluded: frozenset[str] = frozenset()  # resource ids whose slots this request must not take


@dataclass(frozen=True)
class SlotRequest:
    """A slot the JobMaster declares beyond its shared slots (a speculative attempt's, one an
    adaptive job would like, an idle one held while others wait), under a slot sharing group."""

    group_name: str
    key: str


@dataclass
class SlotPool:
    idle_timeout_s: float = 50.0
    match_profiles: bool = True
    slots: dict[str, LogicalSlot] = field(default_factory=dict)  # by allocation id
    task_managers: dict[str, RegisteredTaskManager] = field(default_factory=dict)
    pending: dict[str, PendingRequest] = field(default_factory=dict)  # by key, oldest first
    rejected_offers: int = 0
    _slot_of_key: dict[str, str] = field(default_factory=dict)  # key -> allocation id
    _key_of_slot: dict[str, str] = field(default_factory=dict)  # allocation id -> key
    _idle_since: dict[str, float] = field(default_factory=dict)  # allocation id -> time
    _profile_of: dict[str, ResourceProfile] = field(default_factory=dict)  # allocation id -> profile
    _last_key: dict[str, str] = field(default_factory=dict)  # idle allocation id -> the key it served

    # ------------------------------------------------------------------ state
    @property
    def required(self) -> int:
        """Slots this job wants from the ResourceManager: in use plus waited for -- plus idle ones
        that a waiting request may not take (see ``idle_held_while_pending``)."""
        return len(self._slot_of_key) + len(self.pending) + len(self.idle_held_while_pending())

    def needed_keys(self) -> set[str]:
        """The requests holding a slot or waiting for one."""
        return set(self._slot_of_key) | set(self.pending)

    def slot_for(self, key: str) -> LogicalSlot | None:
        alloc = self._slot_of_key.get(key)
        return self.slots[alloc] if alloc is not None else None

    def idle_slots(self) -> list[LogicalSlot]:
        return [self.slots[a] for a in self._idle_since]

    def idle_held_while_pending(self) -> list[SlotRequest]:
        """Idle slots that would serve a waiting request but for its blocked TaskExecutors, as slot
        requests of the slot sharing group they last served: declared on top, so the
        ResourceManager allocates the waiting request a slot instead of counting the idle one
        as its. (An idle slot of another profile needs nothing: the ResourceManager matches
        requirements by profile.)"""
        out = []
        for a in self._idle_since:
            rid = self.slots[a].resource_id
            if any(
                rid in r.excluded and self._matches(dataclasses.replace(r, excluded=frozenset()), a)
                for r in self.pending.values()
            ):
                out.append(SlotRequest(self._last_key.get(a, "default").split("/")[0], f"idle:{a}"))
        return out

    def register_task_manager(self, resource_id: str, rpc_address: str, data_address: str, now: float) -> None:
        self.task_managers[resource_id] = RegisteredTaskManager(resource_id, rpc_address, data_address, now)

    # ------------------------------------------------------------------ requests
    def request(
        self,
        key: str,
        preferred: str | None,
        now: float,
        profile: ResourceProfile = UNKNOWN,
        excluded: frozenset[str] = frozenset(),
    ) -> LogicalSlot | None:
        """The slot for ``key`` now (it keeps one it has), or None: the request is pending.
        ``profile``: what the key's slot sharing group needs; ``excluded``: TaskExecutors whose
        slots it must not take."""
        if key in self._slot_of_key:
            return self.slot_for(key)
        request = PendingRequest(key, preferred, now, profile if self.match_profiles else UNKNOWN, excluded)
        idle = [a for a in self._idle_since if self._matches(request, a)]
        if idle:
            alloc = preferred if preferred in idle else self._best(request, idle)
            return self._assign(key, alloc)
        old = self.pending.get(key)
        self.pending[key] = (
            request
            if old is None
            else dataclasses.replace(
                request, since=old.since, preferred=old.preferred if preferred is None else preferred
            )
        )
        return None

    def cancel_request(self, key: str) -> None:
        self.pending.pop(key, None)

    def profile_of(self, allocation_id: str) -> ResourceProfile:
        return self._profile_of.get(allocation_id, UNKNOWN)

    # ------------------------------------------------------------------ matching
    def _matches(self, request: PendingRequest, alloc: str) -> bool:
        if self.slots[alloc].resource_id in request.excluded:
            return False
        if not self.match_profiles or request.profile.is_unknown:
            return True
        offered = self._profile_of.get(alloc, UNKNOWN)
        # a slot of unknown size (a TaskExecutor that did not say) takes any request
        return offered.is_unknown or request.profile.fits_into(offered)

    def _best(self, request: PendingRequest, allocs: Sequence[str]) -> str:
        """An equal profile before a larger one (the larger slot stays for a larger request)."""
        return next((a for a in allocs if self._profile_of.get(a, UNKNOWN) == request.profile), allocs[0])

    def _assign(self, key: str, alloc: str) -> LogicalSlot:
        self._idle_since.pop(alloc, None)
        self._last_key.pop(alloc, None)
        self.pending.pop(key, None)
        self._slot_of_key[key] = alloc
        self._key_of_slot[alloc] = key
        return self.slots[alloc]

    def _fulfil(self, alloc: str) -> tuple[str, LogicalSlot] | None:
        """Give the idle slot ``alloc`` to a pending request it matches: one that prefers it
        first, then one of an equal profile, then the oldest that fits."""
        candidates = [r for r in self.pending.values() if self._matches(r, alloc)]
        if not candidates:
            return None
        offered = self._profile_of.get(alloc, UNKNOWN)
        request = (
            next((r for r in candidates if r.preferred == alloc), None)
            or next((r for r in candidates if r.profile == offered), None)
            or candidates[0]
        )
        return request.key, self._assign(request.key, alloc)

    def offer_slots(
        self, resource_id: str, offers: Sequence[Offer], now: float = 0.0
    ) -> tuple[list[str], list[tuple[str, LogicalSlot]]]:
        """``offers``: (allocation id, slot index[, profile]). Returns the accepted allocation ids
        and the requests the new slots fulfilled, as (key, slot). An offer that no pending request
        matches (profile, excluded TaskExecutor) is rejected."""
        tm = self.task_managers.get(resource_id)
        if tm is None:
            self.rejected_offers += len(offers)
            return [], []
        accepted: list[str] = []
        fulfilled: list[tuple[str, LogicalSlot]] = []
        for offer in offers:
            allocation_id, slot_index = offer[0], offer[1]
            profile = offer[2] if len(offer) > 2 else UNKNOWN
            if allocation_id in self.slots:
                accepted.append(allocation_id)  # a repeated offer is idempotent
                continue
            self.slots[allocation_id] = LogicalSlot(
                allocation_id, resource_id, tm.rpc_address, tm.data_address, slot_index
            )
            self._profile_of[allocation_id] = profile
            done = self._fulfil(allocation_id)
            if done is None:
                del self.slots[allocation_id]
                del self._profile_of[allocation_id]
                self.rejected_offers += 1
                continue
            accepted.append(allocation_id)
            fulfilled.append(done)
        return accepted, fulfilled

    def adopt_slots(self, resource_id: str, offers: Sequence[Offer], now: float) -> list[str]:
        """HA reconciliation: slots a TaskExecutor kept for this job while it had no leader join
        the pool idle, whatever is pending (``assign`` then gives them to the keys whose tasks run
        in them). Returns the allocation ids taken."""
        tm = self.task_managers.get(resource_id)
        if tm is None:
            return []
        taken = []
        for offer in offers:
            allocation_id, slot_index = offer[0], offer[1]
            if allocation_id in self.slots:
                continue
            self.slots[allocation_id] = LogicalSlot(
                allocation_id, resource_id, tm.rpc_address, tm.data_address, slot_index
            )
            self._profile_of[allocation_id] = offer[2] if len(offer) > 2 else UNKNOWN
            self._idle_since[allocation_id] = now
            taken.append(allocation_id)
        return taken

    def assign(self, key: str, allocation_id: str) -> LogicalSlot | None:
        """HA reconciliation: ``key``'s tasks run in the idle slot ``allocation_id`` (None if the
        pool does not hold it idle, or ``key`` holds another slot)."""
        held = self._slot_of_key.get(key)
        if held is not None:
            return self.slots[held] if held == allocation_id else None
        if allocation_id not in self._idle_since:
            return None
        return self._assign(key, allocation_id)

    # ------------------------------------------------------------------ releasing
    def release(self, key: str, now: float) -> tuple[str, LogicalSlot] | None:
        """The tasks of ``key`` ended: its slot goes idle, or straight to a waiting request
        (returned as (key, slot))."""
        self.pending.pop(key, None)
        alloc = self._slot_of_key.pop(key, None)
        if alloc is None:
            return None
        self._key_of_slot.pop(alloc, None)
        self._idle_since[alloc] = now
        self._last_key[alloc] = key
        return self._fulfil(alloc)

    def next_idle_expiry(self) -> float | None:
        return min(self._idle_since.values()) + self.idle_timeout_s if self._idle_since else None

    def expire_idle(self, now: float) -> list[LogicalSlot]:
        """Removes and returns the slots idle for ``slot.idle.timeout`` (to be freed)."""
        expired = [a for a, t in self._idle_since.items() if now - t >= self.idle_timeout_s]
        out = []
        for alloc in expired:
            del self._idle_since[alloc]
            self._profile_of.pop(alloc, None)
            self._last_key.pop(alloc, None)
            out.append(self.slots.pop(alloc))
        return out

    def release_task_manager(self, resource_id: str) -> list[tuple[LogicalSlot, str | None]]:
        """Forgets a lost TaskExecutor; returns its slots with the key each was assigned to."""
        self.task_managers.pop(resource_id, None)
        lost = [s for s in self.slots.values() if s.resource_id == resource_id]
        out = []
        for s in lost:
            del self.slots[s.allocation_id]
            self._profile_of.pop(s.allocation_id, None)
            self._last_key.pop(s.allocation_id, None)
            self._idle_since.pop(s.allocation_id, None)
            key = self._key_of_slot.pop(s.allocation_id, None)
            if key is not None:
                self._slot_of_key.pop(key, None)
            out.append((s, key))
        return out

    def unassign_all(self, now: float) -> None:
        """Every held slot goes idle and every pending request is dropped (the adaptive scheduler
        re-plans its shared slots after a rescale)."""
        self.pending.clear()
        for key in list(self._slot_of_key):
            self.release(key, now)

    def release_all(self) -> list[LogicalSlot]:
        released = list(self.slots.values())
        self.slots.clear()
        self._slot_of_key.clear()
        self._key_of_slot.clear()
        self._idle_since.clear()
        self._profile_of.clear()
        self._last_key.clear()
        self.pending.clear()
        return released

    def oldest_pending(self) -> float | None:
        return min((r.since for r in self.pending.values()), default=None)
