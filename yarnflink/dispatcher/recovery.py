"""What a master process does about its leadership, as a pure state machine: events in, actions
out (Flink's ``DispatcherLeaderProcess`` and the ResourceManager's leadership, in one place).

With ``high-availability.type: zookeeper`` a master process serves its endpoints from the start
but acts only as leader. The driver (``yarnflink.dispatcher.leadership``) feeds the events below
and carries out the actions; nothing here does I/O.

* ``Granted(session_id)``: fence the ResourceManager with the new leader session id, then read
  the recovery plan (JobGraphStore x JobResultStore).
* ``RecoveryRead(session_id, plan)``: finish the cleanup of jobs that ended for good under an
  earlier leader, drop JobGraphs whose job has a result, recover every other job, and only then
  accept jobs (REST) and publish the Dispatcher's address. A plan of an older grant is ignored.
* ``JobEnded(job_id, status)``: a globally terminal job's result goes to the JobResultStore
  (dirty), its HA data is removed, the entry is marked clean. A job that did not end for good
  (its JobMaster was suspended) keeps its HA data for the next leader.
* ``Revoked(reason)`` / ``RecoveryFailed``: the process stops acting at once (ResourceManager
  fenced with no token, JobMasters suspended, HA data kept) and steps down: it is replaced by a
  fresh process that rejoins the election as a standby. A process leads at most once.
* ``Closing``: an orderly shutdown; a revocation then only fences.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from yarnflink.highavailability.stores import GLOBALLY_TERMINAL, JobResult, RecoveryPlan

__all__ = [
    "AcceptJobs",
    "CleanupJob",
    "Closing",
    "FenceResourceManager",
    "Granted",
    "JobEnded",
    "MasterLeadership",
    "ReadRecoveryPlan",
    "RecoverJob",
    "RecoveryFailed",
    "RecoveryRead",
    "Revoked",
    "StepDown",
    "SuspendJobs",
]


# ----------------------------------------------------------------------------- events
@dataclass(frozen=True, slots=True)
class Granted:
    session_id: str


@dataclass(frozen=True, slots=True)
class Revoked:
    reason: str


@dataclass(frozen=True, slots=True)
class RecoveryRead:
    session_id: str
    plan: RecoveryPlan


@dataclass(frozen=True, slots=True)
class RecoveryFailed:
    session_id: str
    error: str


@dataclass(frozen=True, slots=True)
class JobEnded:
    job_id: str
    status: str
    net_runtime_ms: int = 0
    failure_cause: str | None = None


@dataclass(frozen=True, slots=True)
class Closing:
    pass


Event = Union[Granted, Revoked, RecoveryRead, RecoveryFailed, JobEnded, Closing]


# ----------------------------------------------------------------------------- actions
@dataclass(frozen=True, slots=True)
class FenceResourceManager:
    """The ResourceManager's fencing token becomes ``token`` ("": it refuses everything)."""

    token: str


@dataclass(frozen=True, slots=True)
class ReadRecoveryPlan:
    session_id: str


@dataclass(frozen=True, slots=True)
class CleanupJob:
    """Write ``result`` to the JobResultStore as dirty (None: it is there already), remove the
    job's HA data (JobGraph, checkpoint counter and pointers, JobMaster leader node), mark the
    result clean; every write fenced by ``session_id``."""

    job_id: str
    session_id: str
    result: JobResult | None = None


@dataclass(frozen=True, slots=True)
class RecoverJob:
    job_id: str
    session_id: str


@dataclass(frozen=True, slots=True)
class AcceptJobs:
    """Recovery is done: serve the job endpoints and publish the Dispatcher's and REST address."""

    session_id: str


@dataclass(frozen=True, slots=True)
class SuspendJobs:
    """Stop every JobMaster now (tasks cancelled, slots freed), keeping the jobs' HA data."""


@dataclass(frozen=True, slots=True)
class StepDown:
    reason: str


Action = Union[FenceResourceManager, ReadRecoveryPlan, CleanupJob, RecoverJob, AcceptJobs, SuspendJobs, StepDown]


# ----------------------------------------------------------------------------- the state machine
@dataclass
class MasterLeadership:
    #: The current grant (None: not leading).
    session_id: str | None = None
    #: Recovery is done and jobs are accepted under ``session_id``.
    accepting: bool = False
    #: This process led and stopped: it never acts again (it is being replaced).
    stepped_down: bool = False
    closing: bool = False
    #: Jobs whose cleanup was decided under the current grant (each is cleaned up once).
    cleaned: set[str] = field(default_factory=set)

    @property
    def leading(self) -> bool:
        return self.session_id is not None

    def handle(self, event: Event) -> list[Action]:
        if isinstance(event, Granted):
            return self._granted(event)
        if isinstance(event, Revoked):
            return self._stop_leading(event.reason)
        if isinstance(event, RecoveryFailed):
            if event.session_id != self.session_id:
                return []
            return self._stop_leading(f"recovering the jobs failed: {event.error}")
        if isinstance(event, RecoveryRead):
            return self._recovery_read(event)
        if isinstance(event, JobEnded):
            return self._job_ended(event)
        if isinstance(event, Closing):
            self.closing = True
            return []
        raise TypeError(f"unknown event {event!r}")  # pragma: no cover - the Event union is closed

    def _granted(self, e: Granted) -> list[Action]:
        if not e.session_id:
            raise ValueError("a leader session id must not be empty")
        if self.stepped_down or self.closing:
            return []  # this process is going away; a fresh one competes instead
        if self.session_id is not None:  # granted again without a revocation: never act on two grants
            return self._stop_leading("granted a new leader session while leading")
        self.session_id = e.session_id
        self.accepting = False
        self.cleaned.clear()
        return [FenceResourceManager(e.session_id), ReadRecoveryPlan(e.session_id)]

    def _stop_leading(self, reason: str) -> list[Action]:
        if self.closing:
            self.session_id, self.accepting = None, False
            return [FenceResourceManager("")]
        if self.session_id is None or self.stepped_down:
            return []
        self.session_id, self.accepting, self.stepped_down = None, False, True
        return [FenceResourceManager(""), SuspendJobs(), StepDown(reason)]

    def _recovery_read(self, e: RecoveryRead) -> list[Action]:
        if e.session_id != self.session_id or self.accepting:
            return []
        sid = e.session_id
        actions: list[Action] = []
        for r in e.plan.dirty_results:  # ended for good under an earlier leader, cleanup unfinished
            self.cleaned.add(r.job_id)
            actions.append(CleanupJob(r.job_id, sid))
        for job_id in e.plan.stale_job_graphs:  # a result exists: never run again
            self.cleaned.add(job_id)
            actions.append(CleanupJob(job_id, sid))
        actions.extend(RecoverJob(job_id, sid) for job_id in e.plan.jobs_to_recover)
        self.accepting = True
        actions.append(AcceptJobs(sid))
        return actions

    def _job_ended(self, e: JobEnded) -> list[Action]:
        if self.session_id is None or e.status not in GLOBALLY_TERMINAL or e.job_id in self.cleaned:
            return []  # suspended (not terminal), or not leading: the HA data stays
        self.cleaned.add(e.job_id)
        return [CleanupJob(e.job_id, self.session_id, JobResult(e.job_id, e.status, e.net_runtime_ms, e.failure_cause))]
