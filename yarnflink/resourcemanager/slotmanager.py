"""SlotManager: the slots of every registered TaskExecutor (free, pending, allocated, each with a
ResourceProfile), the requirements every JobMaster declared, and the workers being started. Pure
decisions, as Flink's FineGrainedSlotManager + ResourceAllocationStrategy: every method takes an
event (with the time, ``now``) and returns the actions to carry out; no I/O, no clock of its own.

Matching. Without fine-grained resource management all slots are equal: a job's requirement is a
number of slots, each TaskExecutor offers ``num_slots`` slots at fixed indexes. With
``cluster.fine-grained-resource-management.enabled`` every slot sharing group declares a profile
and slots are carved out of a TaskExecutor's free resources to fit it (a dynamic slot; an UNKNOWN
profile takes the TaskExecutor's default slot profile). ``cluster.evenly-spread-out-slots`` picks the
least used TaskExecutor that fits; otherwise the first registered one that fits (packing).

Workers (active mode, when a ResourceManagerDriver can start processes): demand that registered
TaskExecutors cannot meet is placed on workers being started, then on new workers, up to
``slotmanager.number-of-slots.max``; ``slotmanager.number-of-slots.min`` slots are kept at all times
(started at once, and never released for being idle); TaskExecutors idle longer than
``resourcemanager.taskmanager-timeout`` are stopped. Failed worker starts are rate-limited
(``FailureRater``). A standalone ResourceManager (not active) only uses TaskExecutors that register
by themselves.

Reconciliation. Each TaskExecutor numbers the changes of its slot table; slot reports (the answer
to the ResourceManager's heartbeat), slot-request acknowledgements and slot-freed notices carry that
version. A report older than what the SlotManager already knows is ignored; a newer one is the truth
for every allocation except those whose slot request is still in flight. So a lost notice is
repaired by the next report and a late, reordered report cannot undo a newer change.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Union

from yarnflink.resourcemanager.heartbeat import FailureRater
from yarnflink.resourcemanager.resources import UNKNOWN, ResourceProfile, WorkerSpec

# ---------------------------------------------------------------------- actions


@dataclass(frozen=True, slots=True)
class AllocateSlot:
    """Ask TaskExecutor ``resource_id`` to give a slot to the job's JobMaster. ``slot_index`` -1:
    a dynamic slot of ``profile`` carved out of its free resources."""

    resource_id: str
    rpc_address: str
    slot_index: int
    profile: ResourceProfile
    job_id: str
    allocation_id: str
    jobmaster_address: str
    jobmaster_id: str


@dataclass(frozen=True, slots=True)
class StartWorker:
    """Start a TaskExecutor of ``spec``; report its id back with ``worker_requested(request_id, ...)``."""

    request_id: str
    spec: WorkerSpec


@dataclass(frozen=True, slots=True)
class StopWorker:
    resource_id: str
    cause: str
    rpc_address: str = ""  # of a registered TaskExecutor


@dataclass(frozen=True, slots=True)
class NotifyTaskManagerLost:
    """Tell a job's JobMaster that a TaskExecutor holding its slots is gone."""

    job_id: str
    jobmaster_address: str
    jobmaster_id: str
    resource_id: str
    cause: str


Action = Union[AllocateSlot, StartWorker, StopWorker, NotifyTaskManagerLost]

# ---------------------------------------------------------------------- state


class AllocationState(str, enum.Enum):
    PENDING = "PENDING"  # slot request sent, not yet acknowledged nor reported
    ALLOCATED = "ALLOCATED"  # acknowledged or reported by the TaskExecutor


@dataclass(slots=True)
class Allocation:
    allocation_id: str
    job_id: str
    profile: ResourceProfile  # what the slot holds
    requirement: ResourceProfile  # which of the job's requirements it serves
    slot_index: int
    state: AllocationState


@dataclass(frozen=True, slots=True)
class ReportedSlot:
    index: int
    allocation_id: str = ""  # empty: free
    job_id: str = ""
    profile: ResourceProfile = UNKNOWN


@dataclass(frozen=True, slots=True)
class SlotReport:
    slots: tuple[ReportedSlot, ...] = ()
    version: int = 0


@dataclass
class TaskExecutorRecord:
    resource_id: str
    rpc_address: str
    data_address: str
    total: ResourceProfile
    default_slot: ResourceProfile
    num_slots: int
    registered_at: float
    seq: int
    hostname: str = ""
    pid: int = 0
    allocations: dict[str, Allocation] = field(default_factory=dict)
    used: ResourceProfile = UNKNOWN
    version: int = -1
    idle_since: float | None = None
    last_report_at: float = 0.0
    #: a slot request to it failed: skip it until its next slot report says where things stand
    blocked: bool = False
    stamp: int = 0

    @property
    def slot_counted(self) -> bool:
        """Slots are counted, not carved (coarse mode, or a TaskExecutor without resources)."""
        return self.total.is_unknown

    def free_static_index(self) -> int:
        taken = {a.slot_index for a in self.allocations.values()}
        return next((i for i in range(self.num_slots) if i not in taken), -1)

    def free_slots(self, fine_grained: bool) -> int:
        if not fine_grained or self.slot_counted:
            return max(0, self.num_slots - len(self.allocations))
        free = self.total - self.used
        n = 0
        if self.default_slot.is_unknown:
            return 0
        while n < self.num_slots and self.default_slot.fits_into(free):
            free, n = free - self.default_slot, n + 1
        return n


@dataclass
class JobRequirements:
    job_id: str
    jobmaster_address: str
    jobmaster_id: str
    requirements: dict[ResourceProfile, int]


@dataclass
class PendingWorker:
    worker_id: str
    spec: WorkerSpec
    requested_at: float


# ---------------------------------------------------------------------- the SlotManager

_NO_ALLOCATIONS: Counter[ResourceProfile] = Counter()


class SlotManager:
    def __init__(
        self,
        *,
        fine_grained: bool = False,
        evenly_spread_out_slots: bool = False,
        worker_spec: WorkerSpec | None = None,
        max_slots: int = 2**31 - 1,
        min_slots: int = 0,
        task_manager_timeout: float = 30.0,
        registration_timeout: float = 300.0,
        max_start_failure_rate: float = 10.0,
        start_retry_interval: float = 3.0,
        new_id: Callable[[], str] | None = None,
    ) -> None:
        """``worker_spec`` given: active mode (workers are started and stopped)."""
        self.fine_grained = fine_grained
        self.evenly_spread_out_slots = evenly_spread_out_slots
        self.worker_spec = worker_spec
        self.max_slots = max_slots
        self.min_slots = min_slots if worker_spec is not None else 0
        self.task_manager_timeout = task_manager_timeout
        self.registration_timeout = registration_timeout
        self.rater = FailureRater(max_start_failure_rate, start_retry_interval)
        # allocation and request ids: a random prefix per SlotManager and a counter (cheap, unique)
        prefix, counter = uuid.uuid4().hex[:16], itertools.count()
        self.new_id = new_id or (lambda: f"{prefix}{next(counter):016x}")
        self.task_executors: dict[str, TaskExecutorRecord] = {}
        self.jobs: dict[str, JobRequirements] = {}
        self.pending_workers: dict[str, PendingWorker] = {}
        #: job id -> requirement profile -> allocations serving it
        self._job_allocations: dict[str, Counter[ResourceProfile]] = {}
        #: jobs that may miss slots (only they are looked at when matching)
        self._unsatisfied: dict[str, None] = {}
        #: TaskExecutors with some free resources, in registration order (fine-grained matching)
        self._not_full: dict[str, None] = {}
        self._seq = itertools.count()
        #: (key, seq, resource id, stamp) of TaskExecutors with a free slot (coarse mode)
        self._free_heap: list[tuple[float, int, str, int]] = []
        #: (job id, requirement) pairs no registered or startable TaskExecutor can serve
        self.unfulfillable: set[tuple[str, ResourceProfile]] = set()

    @property
    def active(self) -> bool:
        return self.worker_spec is not None

    # ------------------------------------------------------------------ TaskExecutors
    def register_task_executor(
        self,
        resource_id: str,
        rpc_address: str,
        data_address: str,
        num_slots: int,
        report: SlotReport,
        now: float,
        *,
        total: ResourceProfile = UNKNOWN,
        default_slot: ResourceProfile | None = None,
        hostname: str = "",
        pid: int = 0,
    ) -> list[Action]:
        """A TaskExecutor registers (again): it replaces any earlier record of that id, and its
        slot report says which slots are taken."""
        self.pending_workers.pop(resource_id, None)
        old = self.task_executors.pop(resource_id, None)
        if old is not None:
            for a in list(old.allocations.values()):
                self._count(a, -1)
                if a.job_id in self.jobs:
                    self._unsatisfied[a.job_id] = None
        te = TaskExecutorRecord(
            resource_id,
            rpc_address,
            data_address,
            total,
            default_slot if default_slot is not None else total.divide(max(1, num_slots)),
            num_slots,
            now,
            next(self._seq),
            hostname,
            pid,
            last_report_at=now,
            idle_since=now,
        )
        self.task_executors[resource_id] = te
        te.version = report.version
        for s in report.slots:
            if s.allocation_id:
                self._add(te, self._reported_allocation(te, s))
        self._changed(te, now)
        return self.check_requirements(now)

    def task_executor_lost(self, resource_id: str, cause: str, now: float) -> list[Action]:
        """Heartbeat timeout, unreachable, its process ended, or it said goodbye: its slots go,
        and the JobMasters with slots on it are told."""
        te = self.task_executors.pop(resource_id, None)
        if te is None:
            return []
        actions: list[Action] = []
        for job_id in sorted({a.job_id for a in te.allocations.values()}):
            job = self.jobs.get(job_id)
            if job is not None:
                actions.append(
                    NotifyTaskManagerLost(job_id, job.jobmaster_address, job.jobmaster_id, resource_id, cause)
                )
        for a in te.allocations.values():
            self._count(a, -1)
            if a.job_id in self.jobs:
                self._unsatisfied[a.job_id] = None
        self._not_full.pop(resource_id, None)
        return actions + self.check_requirements(now)

    def slot_report(self, resource_id: str, report: SlotReport, now: float) -> list[Action]:
        """The payload of a heartbeat: reconcile with what the TaskExecutor says."""
        te = self.task_executors.get(resource_id)
        if te is None:
            return []
        te.last_report_at = now
        if report.version < te.version:
            return []  # older than a change we already know of
        te.version = report.version
        was_blocked, te.blocked = te.blocked, False
        reported = {s.allocation_id: s for s in report.slots if s.allocation_id}
        changed = False
        for a in list(te.allocations.values()):
            s = reported.get(a.allocation_id)
            if s is None:
                if a.state == AllocationState.ALLOCATED:  # freed there; the notice got lost
                    self._remove(te, a)
                    changed = True
            else:
                a.state, a.slot_index = AllocationState.ALLOCATED, s.index
        for alloc_id, s in reported.items():
            if alloc_id not in te.allocations:  # taken there; we did not know
                self._add(te, self._reported_allocation(te, s))
                changed = True
        if not (changed or was_blocked):
            return []
        self._changed(te, now)
        return self.check_requirements(now)

    def allocation_acked(
        self, resource_id: str, allocation_id: str, slot_index: int, version: int, now: float
    ) -> list[Action]:
        te = self.task_executors.get(resource_id)
        if te is None:
            return []
        te.version = max(te.version, version)
        a = te.allocations.get(allocation_id)
        if a is not None:
            a.state, a.slot_index = AllocationState.ALLOCATED, slot_index
        return []

    def allocation_failed(self, resource_id: str, allocation_id: str, now: float) -> list[Action]:
        """The TaskExecutor refused the slot request or could not be reached: try elsewhere."""
        te = self.task_executors.get(resource_id)
        if te is None:
            return self.check_requirements(now)
        a = te.allocations.get(allocation_id)
        if a is not None and a.state == AllocationState.PENDING:
            self._remove(te, a)
            te.blocked = True
            self._changed(te, now)
        return self.check_requirements(now)

    def slot_freed(self, resource_id: str, allocation_id: str, version: int, now: float) -> list[Action]:
        te = self.task_executors.get(resource_id)
        if te is None:
            return []
        te.version = max(te.version, version)
        a = te.allocations.get(allocation_id)
        if a is not None:
            self._remove(te, a)
            self._changed(te, now)
        return self.check_requirements(now)

    # ------------------------------------------------------------------ workers
    def worker_requested(self, request_id: str, worker_id: str) -> None:
        """The driver named the worker it is starting for ``request_id``."""
        p = self.pending_workers.pop(request_id, None)
        if p is not None:
            p.worker_id = worker_id
            self.pending_workers[worker_id] = p

    def worker_terminated(self, worker_id: str, diagnostics: str, now: float) -> list[Action]:
        """A worker's process ended (or could not be started). Before it registered, that is a
        failed start and counts towards the failure rate."""
        if worker_id in self.pending_workers:
            del self.pending_workers[worker_id]
            self.rater.record_failure(now)
            return self.check_requirements(now)
        return self.task_executor_lost(worker_id, f"worker {worker_id} terminated: {diagnostics}", now)

    def tick(self, now: float) -> list[Action]:
        """Time passes: release idle TaskExecutors, give up on workers that never registered,
        and start workers a pause held back."""
        actions: list[Action] = []
        for w in list(self.pending_workers.values()):
            if now - w.requested_at > self.registration_timeout:
                del self.pending_workers[w.worker_id]
                self.rater.record_failure(now)
                actions.append(StopWorker(w.worker_id, f"did not register within {self.registration_timeout:.0f} s"))
        if self.active:
            for te in sorted(self.task_executors.values(), key=lambda t: -t.seq):  # newest first
                if te.idle_since is None or now - te.idle_since < self.task_manager_timeout:
                    continue
                if self._slots_registered() + self._slots_pending() - te.num_slots < self.min_slots:
                    continue
                del self.task_executors[te.resource_id]
                self._not_full.pop(te.resource_id, None)
                actions.append(
                    StopWorker(te.resource_id, f"idle for more than {self.task_manager_timeout:g} s", te.rpc_address)
                )
        return actions + self.check_requirements(now)

    # ------------------------------------------------------------------ jobs
    def declare_requirements(
        self,
        job_id: str,
        jobmaster_address: str,
        jobmaster_id: str,
        requirements: int | dict[ResourceProfile, int],
        now: float,
    ) -> list[Action]:
        """A JobMaster's resource requirements: slots per profile (an int: that many UNKNOWN)."""
        reqs = {UNKNOWN: requirements} if isinstance(requirements, int) else dict(requirements)
        if not self.fine_grained:  # all slots are equal: profiles do not matter
            reqs = {UNKNOWN: sum(reqs.values())}
        self.jobs[job_id] = JobRequirements(
            job_id, jobmaster_address, jobmaster_id, {p: n for p, n in reqs.items() if n > 0}
        )
        self._unsatisfied[job_id] = None
        self.unfulfillable = {u for u in self.unfulfillable if u[0] != job_id}
        return self.check_requirements(now)

    def unregister_job(self, job_id: str, now: float) -> list[Action]:
        self.jobs.pop(job_id, None)
        self._unsatisfied.pop(job_id, None)
        self.unfulfillable = {u for u in self.unfulfillable if u[0] != job_id}
        return self.check_requirements(now)

    def allocated_to(self, job_id: str) -> int:
        return sum(self._job_allocations.get(job_id, _NO_ALLOCATIONS).values())

    def missing_slots(self, job_id: str) -> int:
        job = self.jobs.get(job_id)
        if job is None:
            return 0
        have = self._job_allocations.get(job_id, _NO_ALLOCATIONS)
        return sum(max(0, n - have[p]) for p, n in job.requirements.items())

    def check_requirements(self, now: float) -> list[Action]:
        actions: list[Action] = []
        unmet: list[tuple[str, ResourceProfile]] = []
        for job_id in list(self._unsatisfied):
            job = self.jobs.get(job_id)
            if job is None:
                del self._unsatisfied[job_id]
                continue
            have = self._job_allocations.get(job.job_id, _NO_ALLOCATIONS)
            satisfied = True
            for req, count in job.requirements.items():
                for i in range(count - have[req]):
                    te = self._pick(req)
                    if te is None:
                        unmet.extend([(job.job_id, req)] * (count - have[req] - i))
                        satisfied = False
                        break
                    actions.append(self._allocate(te, job, req, now))
            if satisfied:
                del self._unsatisfied[job_id]
        if self.active:
            actions.extend(self._plan_workers(unmet, now))
        return actions

    # ------------------------------------------------------------------ views
    def totals(self) -> tuple[int, int]:
        """(slots, free slots) of the registered TaskExecutors."""
        return (
            sum(te.num_slots for te in self.task_executors.values()),
            sum(te.free_slots(self.fine_grained) for te in self.task_executors.values()),
        )

    # ------------------------------------------------------------------ internals
    def _slots_registered(self) -> int:
        return sum(te.num_slots for te in self.task_executors.values())

    def _slots_pending(self) -> int:
        return sum(w.spec.num_slots for w in self.pending_workers.values())

    def _slot_profile(self, te: TaskExecutorRecord, req: ResourceProfile) -> ResourceProfile:
        return req if self.fine_grained and not req.is_unknown else te.default_slot

    def _fits(self, te: TaskExecutorRecord, req: ResourceProfile) -> bool:
        if te.blocked:
            return False
        if not self.fine_grained or te.slot_counted:
            return len(te.allocations) < te.num_slots and te.free_static_index() >= 0
        return self._slot_profile(te, req).fits_into(te.total - te.used)

    def _pick(self, req: ResourceProfile) -> TaskExecutorRecord | None:
        if not self.fine_grained:
            return self._pick_counted()
        fitting = (te for rid in self._not_full if (te := self.task_executors[rid]) and self._fits(te, req))
        if self.evenly_spread_out_slots:
            return min(fitting, key=lambda te: (self._utilization(te), te.seq), default=None)
        return next(fitting, None)

    def _pick_counted(self) -> TaskExecutorRecord | None:
        heap = self._free_heap
        while heap:
            _, _, rid, stamp = heap[0]
            te = self.task_executors.get(rid)
            if te is not None and te.stamp == stamp and self._fits(te, UNKNOWN):
                return te
            heapq.heappop(heap)
        return None

    def _utilization(self, te: TaskExecutorRecord) -> float:
        if not self.fine_grained or te.slot_counted:
            return len(te.allocations) / max(1, te.num_slots)
        return te.used.utilization_of(te.total)

    def _allocate(self, te: TaskExecutorRecord, job: JobRequirements, req: ResourceProfile, now: float) -> AllocateSlot:
        profile = self._slot_profile(te, req)
        index = te.free_static_index() if not self.fine_grained or te.slot_counted else -1
        a = Allocation(self.new_id(), job.job_id, profile, req, index, AllocationState.PENDING)
        self._add(te, a)
        self._changed(te, now)
        return AllocateSlot(
            te.resource_id,
            te.rpc_address,
            index,
            profile,
            job.job_id,
            a.allocation_id,
            job.jobmaster_address,
            job.jobmaster_id,
        )

    def _reported_allocation(self, te: TaskExecutorRecord, s: ReportedSlot) -> Allocation:
        profile = te.default_slot if s.profile.is_unknown else s.profile
        req = profile
        job = self.jobs.get(s.job_id)
        if not self.fine_grained:
            req = UNKNOWN
        elif job is not None and profile not in job.requirements:
            if UNKNOWN in job.requirements and profile == te.default_slot:
                req = UNKNOWN
        return Allocation(s.allocation_id, s.job_id, profile, req, s.index, AllocationState.ALLOCATED)

    def _add(self, te: TaskExecutorRecord, a: Allocation) -> None:
        te.allocations[a.allocation_id] = a
        te.used = te.used + a.profile
        self._count(a, +1)

    def _remove(self, te: TaskExecutorRecord, a: Allocation) -> None:
        del te.allocations[a.allocation_id]
        te.used = te.used - a.profile
        self._count(a, -1)
        if a.job_id in self.jobs:
            self._unsatisfied[a.job_id] = None

    def _count(self, a: Allocation, delta: int) -> None:
        c = self._job_allocations.get(a.job_id)
        if c is None:
            c = self._job_allocations[a.job_id] = Counter()
        c[a.requirement] += delta
        if c[a.requirement] <= 0:
            del c[a.requirement]
            if not c:
                del self._job_allocations[a.job_id]

    def _changed(self, te: TaskExecutorRecord, now: float) -> None:
        te.stamp += 1
        free = te.total - te.used
        if te.slot_counted or max(free.cpu_cores, free.task_heap_mb, free.task_off_heap_mb, free.managed_memory_mb) > 0:
            self._not_full.setdefault(te.resource_id, None)
        else:
            self._not_full.pop(te.resource_id, None)
        if te.allocations:
            te.idle_since = None
        elif te.idle_since is None:
            te.idle_since = now
        if not self.fine_grained and len(te.allocations) < te.num_slots:
            key = len(te.allocations) / max(1, te.num_slots) if self.evenly_spread_out_slots else 0.0
            heapq.heappush(self._free_heap, (key, te.seq, te.resource_id, te.stamp))
            if len(self._free_heap) > 4 * len(self.task_executors) + 64:
                self._free_heap = [e for e in self._free_heap if self._heap_entry_valid(e)]
                heapq.heapify(self._free_heap)

    def _heap_entry_valid(self, entry: tuple[float, int, str, int]) -> bool:
        te = self.task_executors.get(entry[2])
        return te is not None and te.stamp == entry[3]

    def _plan_workers(self, unmet: Iterable[tuple[str, ResourceProfile]], now: float) -> list[Action]:
        """Place unmet demand on workers being started, then on new ones; keep the minimum."""
        spec = self.worker_spec
        assert spec is not None
        counted = not self.fine_grained or spec.total.is_unknown
        bins: list[int | ResourceProfile] = [
            w.spec.num_slots if counted else w.spec.total for w in self.pending_workers.values()
        ]
        planned_slots = self._slots_registered() + self._slots_pending()
        new = 0
        for job_id, req in unmet:
            need = spec.default_slot if counted or req.is_unknown else req
            if not counted and not need.fits_into(spec.total):
                self.unfulfillable.add((job_id, req))
                continue
            for i, free in enumerate(bins):
                if isinstance(free, int) and free > 0:
                    bins[i] = free - 1
                    break
                if isinstance(free, ResourceProfile) and need.fits_into(free):
                    bins[i] = free - need
                    break
            else:
                if planned_slots + spec.num_slots > self.max_slots:
                    self.unfulfillable.add((job_id, req))
                    continue
                planned_slots += spec.num_slots
                new += 1
                bins.append(spec.num_slots - 1 if counted else spec.total - need)
        while planned_slots < self.min_slots and planned_slots + spec.num_slots <= self.max_slots:
            planned_slots += spec.num_slots
            new += 1
        if not new or not self.rater.may_start(now):
            return []
        actions: list[Action] = []
        for _ in range(new):
            request_id = self.new_id()
            self.pending_workers[request_id] = PendingWorker(request_id, spec, now)
            actions.append(StartWorker(request_id, spec))
        return actions
