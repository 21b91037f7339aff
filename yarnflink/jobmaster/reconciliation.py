"""Reconciliation: what a JobMaster that took over a running job (HA) does with the tasks that kept
running while the job had no leader. Pure: events in, actions out; no I/O and no clock (every
event that needs the time carries ``now``, monotonic seconds).

The new leader does not redeploy. TaskExecutors that kept the job's slots and tasks report them
(``ReconnectTaskManager``: slots with their allocation ids, tasks with their attempt ids, vertex,
subtask, attempt number and latest state). The JobMaster waits for reports until every subtask
of the job is accounted for, or ``high-availability.jobmaster.reconciliation-timeout`` passes;
then it decides once, per subtask:

* a task reported DEPLOYING / INITIALIZING / RUNNING is **adopted**: same attempt id, same slot;
* a task reported FINISHED is adopted as finished (its results, if any, stay where they are);
* a task reported FAILED or CANCELED, and a subtask no report names (its TaskExecutor died, or
  freed it), **fails**: the scheduler's failover strategy (region) restarts what it must, as for
  any task failure; never a global restart;
* two reports naming one subtask: the highest attempt number wins, the other is cancelled;
* tasks of one slot sharing group in different slots: the group keeps the first slot reported,
  the others fail (a shared slot holds a group's tasks at most once);
* a report carrying another JobMaster id (an older leader's epoch, or a leader that is not this
  one) is **rejected** as stale: nothing of it is adopted;
* a task naming a vertex or subtask the job does not have is cancelled;
* a report arriving after the decision (a TaskExecutor that was slow or partitioned) is too late
  for subtasks decided meanwhile: its tasks are cancelled and its slots freed (the restart runs
  elsewhere); a repeated report of tasks already adopted changes nothing.
* A TaskExecutor found lost before the decision: its reported tasks count as failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Union

from yarnflink.executiongraph.executiongraph import ExecutionState
from yarnflink.highavailability.epoch import is_older
from yarnflink.jobmaster.gateway import ReconnectTaskManager, ReportedTask, SlotOffer

__all__ = [
    "Adopt",
    "AdoptSlots",
    "CancelTasks",
    "Decided",
    "FailSubtask",
    "MarkFinished",
    "Reconciliation",
    "RejectStale",
    "ReportReceived",
    "TaskManagerLost",
    "Timeout",
]

_LIVE = frozenset({ExecutionState.DEPLOYING, ExecutionState.INITIALIZING, ExecutionState.RUNNING})

Subtask = tuple[str, int]  # (vertex id, subtask index)


# ----------------------------------------------------------------------------- events
@dataclass(frozen=True, slots=True)
class ReportReceived:
    report: ReconnectTaskManager
    now: float


@dataclass(frozen=True, slots=True)
class TaskManagerLost:
    resource_id: str
    cause: str
    now: float


@dataclass(frozen=True, slots=True)
class Timeout:
    now: float


Event = Union[ReportReceived, TaskManagerLost, Timeout]


# ----------------------------------------------------------------------------- actions
@dataclass(frozen=True, slots=True)
class RejectStale:
    """Refuse the report (the caller answers FencingTokenMismatch): it is not for this leader."""

    resource_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class AdoptSlots:
    """Register the TaskExecutor and take its reported slots into the SlotPool."""

    resource_id: str
    rpc_address: str
    data_address: str
    slots: tuple[SlotOffer, ...]


@dataclass(frozen=True, slots=True)
class Adopt:
    """The subtask's execution is the reported one (same attempt id), running in its slot."""

    resource_id: str
    task: ReportedTask


@dataclass(frozen=True, slots=True)
class MarkFinished:
    """The subtask finished while the job had no leader; its execution is the reported one."""

    resource_id: str
    task: ReportedTask


@dataclass(frozen=True, slots=True)
class FailSubtask:
    """The subtask failed (``task``: the reported attempt, None if no TaskExecutor reported it):
    hand it to the failover strategy."""

    vertex_id: str
    subtask_index: int
    cause: str
    task: ReportedTask | None = None
    resource_id: str = ""


@dataclass(frozen=True, slots=True)
class CancelTasks:
    """Tasks no subtask of this job adopts (duplicates, unknown, too late): cancel them at the
    TaskExecutor and free ``allocation_ids`` there (slots this job does not take)."""

    resource_id: str
    rpc_address: str
    execution_ids: tuple[str, ...]
    allocation_ids: tuple[str, ...]
    cause: str


@dataclass(frozen=True, slots=True)
class Decided:
    """The decision is made (the actions before it carry it out); reports from now on are late."""

    adopted: int
    finished: int
    failed: int
    timed_out: bool


Action = Union[RejectStale, AdoptSlots, Adopt, MarkFinished, FailSubtask, CancelTasks, Decided]


@dataclass
class _Report:
    report: ReconnectTaskManager
    lost: str = ""  # why its TaskExecutor is lost ("" while alive)


@dataclass
class Reconciliation:
    """``subtasks``: the job's (vertex id, subtask index) with the slot sharing key of each;
    ``jobmaster_id``: this leader's session id; ``deadline``: when to decide without every
    report (monotonic seconds)."""

    job_id: str
    jobmaster_id: str
    subtasks: Mapping[Subtask, str]
    deadline: float
    decided: bool = False
    _reports: dict[str, _Report] = field(default_factory=dict)
    _adopted: dict[str, str] = field(default_factory=dict)  # execution id -> resource id, after deciding
    _slots_taken: dict[str, set[str]] = field(default_factory=dict)  # resource id -> allocation ids adopted

    # ------------------------------------------------------------------ events
    def handle(self, event: Event) -> list[Action]:
        if isinstance(event, ReportReceived):
            return self._on_report(event.report, event.now)
        if isinstance(event, TaskManagerLost):
            r = self._reports.get(event.resource_id)
            if r is None or self.decided:
                return []
            r.lost = event.cause
            return self._maybe_decide(event.now)
        return self._maybe_decide(event.now)

    def _on_report(self, report: ReconnectTaskManager, now: float) -> list[Action]:
        if report.job_id != self.job_id:
            return [RejectStale(report.resource_id, f"the report is for job {report.job_id}, not {self.job_id}")]
        if report.jobmaster_id != self.jobmaster_id:
            older = is_older(report.jobmaster_id, self.jobmaster_id)
            return [
                RejectStale(
                    report.resource_id,
                    f"the report names JobMaster {report.jobmaster_id[:16]}"
                    + (", an older leader's epoch" if older else ", not this leader")
                    + f" (this leader: {self.jobmaster_id[:16]})",
                )
            ]
        if self.decided:
            return self._late(report)
        self._reports[report.resource_id] = _Report(report)
        return self._maybe_decide(now)

    def pending_for(self, resource_id: str) -> bool:
        """The TaskExecutor reported (this leader's id) and the decision is still pending: it
        counts as the job's TaskManager, e.g. for its heartbeats, until the decision registers
        it (its slots adopted) or drops it."""
        r = self._reports.get(resource_id)
        return not self.decided and r is not None and not r.lost

    # ------------------------------------------------------------------ deciding
    def _covered(self) -> set[Subtask]:
        return {
            (t.vertex_id, t.subtask_index)
            for r in self._reports.values()
            for t in r.report.tasks
            if (t.vertex_id, t.subtask_index) in self.subtasks
        }

    def _maybe_decide(self, now: float) -> list[Action]:
        if self.decided:
            return []
        timed_out = now >= self.deadline
        if not timed_out and self._covered() != set(self.subtasks):
            return []
        return self._decide(timed_out)

    def _decide(self, timed_out: bool) -> list[Action]:
        self.decided = True
        out: list[Action] = []
        # the best reported attempt of each subtask: alive TaskExecutors first, then the highest attempt
        best: dict[Subtask, tuple[str, ReportedTask]] = {}
        extra: dict[str, tuple[list[str], str]] = {}  # resource id -> (execution ids to cancel, why)

        def drop(rid: str, t: ReportedTask, why: str) -> None:
            ids, _ = extra.setdefault(rid, ([], why))
            ids.append(t.execution_id)

        alive = {rid: r for rid, r in self._reports.items() if not r.lost}
        for rid, r in alive.items():
            for t in r.report.tasks:
                key = (t.vertex_id, t.subtask_index)
                if key not in self.subtasks:
                    drop(rid, t, f"task {t.execution_id} names no subtask of job {self.job_id}")
                    continue
                held = best.get(key)
                if held is None or t.attempt_number > held[1].attempt_number:
                    if held is not None:
                        drop(held[0], held[1], "a newer attempt of the subtask runs elsewhere")
                    best[key] = (rid, t)
                else:
                    drop(rid, t, "a newer attempt of the subtask runs elsewhere")
        # one slot per slot sharing key: the first allocation reported for a key keeps it
        slot_of_key: dict[str, tuple[str, str]] = {}
        failed: list[FailSubtask] = []
        kept: dict[Subtask, tuple[str, ReportedTask]] = {}
        for key in best:  # in the order reported: the first slot reported for a group keeps it
            rid, t = best[key]
            group = self.subtasks[key]
            where = (rid, t.allocation_id)
            if t.state in _LIVE or t.state == ExecutionState.FINISHED:
                if slot_of_key.setdefault(group, where) != where:
                    failed.append(
                        FailSubtask(key[0], key[1], "its slot sharing group's tasks were in more than one slot", t, rid)
                    )
                    drop(rid, t, "its slot sharing group runs in another slot")
                    continue
            kept[key] = (rid, t)
        used_slots: dict[str, set[str]] = {}
        for rid, alloc in slot_of_key.values():
            used_slots.setdefault(rid, set()).add(alloc)
        for rid, r in alive.items():
            rep = r.report
            out.append(AdoptSlots(rid, rep.rpc_address, rep.data_address, rep.slots))
            self._slots_taken[rid] = {s.allocation_id for s in rep.slots}
        adopted = finished = 0
        for key, (rid, t) in sorted(kept.items()):
            if t.state in _LIVE:
                out.append(Adopt(rid, t))
                self._adopted[t.execution_id] = rid
                adopted += 1
            elif t.state == ExecutionState.FINISHED:
                out.append(MarkFinished(rid, t))
                self._adopted[t.execution_id] = rid
                finished += 1
            else:
                why = t.error.message if t.error is not None else ""
                failed.append(
                    FailSubtask(
                        key[0],
                        key[1],
                        f"{t.state.value} while the job had no leader{': ' + why if why else ''}",
                        t,
                        rid,
                    )
                )
        for key in sorted(set(self.subtasks) - set(kept)):
            lost = next(
                (
                    (rid, r.lost)
                    for rid, r in self._reports.items()
                    if r.lost and any((t.vertex_id, t.subtask_index) == key for t in r.report.tasks)
                ),
                None,
            )
            if any(f.vertex_id == key[0] and f.subtask_index == key[1] for f in failed):
                continue
            cause = (
                f"TaskManager {lost[0]} was lost while the job had no leader: {lost[1]}"
                if lost is not None
                else "no TaskExecutor reported this subtask"
                + (" within the reconciliation timeout" if timed_out else "")
            )
            failed.append(FailSubtask(key[0], key[1], cause, None, lost[0] if lost else ""))
        out.extend(failed)
        for rid, (ids, why) in sorted(extra.items()):
            rep = self._reports[rid].report
            out.append(CancelTasks(rid, rep.rpc_address, tuple(ids), (), why))
        out.append(Decided(adopted, finished, len(failed), timed_out))
        return out

    def _late(self, report: ReconnectTaskManager) -> list[Action]:
        """A report after the decision: tasks adopted from it stay; the rest is cancelled and the
        slots this leader did not take are freed."""
        unknown = tuple(t.execution_id for t in report.tasks if self._adopted.get(t.execution_id) != report.resource_id)
        taken = self._slots_taken.get(report.resource_id, set())
        slots = tuple(s.allocation_id for s in report.slots if s.allocation_id not in taken)
        if not unknown and not slots:
            return []
        return [
            CancelTasks(
                report.resource_id,
                report.rpc_address,
                unknown,
                slots,
                "reported after the new leader had decided (its subtasks were restarted elsewhere)",
            )
        ]
