"""CheckpointCoordinator: the JobMaster's checkpoint protocol as pure logic.

``handle(event) -> list[action]``: events are what happened (a timer tick, a task's
acknowledgement or decline, a timeout, a task finishing, the metadata write's outcome); actions
are what the driver must do (trigger tasks, write ``_metadata``, notify tasks, delete state, fail
the job). No I/O, no clock: every event carries the time (ms).

Protocol (Flink's):

1. ``Tick(now)``: when periodic checkpointing is due (``interval``, ``min-pause`` after the last
   completion, fewer than ``max-concurrent-checkpoints`` pending, every unfinished task running),
   a PendingCheckpoint is created and ``TriggerCheckpoint`` goes to the tasks that start it: the
   unfinished tasks whose upstream tasks have all finished (the sources while they run).
   ``ScheduleTimeout`` asks the driver for a ``CheckpointTimeout`` at ``now + timeout`` (a later
   ``Tick`` expires it too).
2. Every unfinished task acknowledges with its ``TaskStateSnapshot``; a finished task counts as
   acknowledged. When all have, the checkpoint is finalized: ``WriteMetadata``.
3. ``MetadataWritten``: the checkpoint is complete. Older pending checkpoints are subsumed
   (aborted, not counted as failures), the completed-checkpoint store keeps ``num-retained``
   (``DiscardCheckpoint`` for older ones), and tasks get ``NotifyCheckpointComplete``.
4. A decline, a timeout or a failed metadata write aborts the checkpoint: ``NotifyCheckpointAborted``,
   ``DiscardState`` of what was acknowledged and ``DiscardIncomplete`` of its directory (neither
   for one whose ``_metadata`` write is still in flight when the job ends or is rescaled: its
   pointer may yet land in the HA store; no directory once the job ended); it counts as a failure. More than
   ``tolerable-failed-checkpoints`` consecutive failures: ``FailGlobal``, a global failover of
   the job (Flink's CheckpointFailureManager -> ``ExecutionGraph.failGlobal``): the restart
   strategy decides whether every task restarts from the latest completed checkpoint or the job
   fails. The count starts again after that and after every completed checkpoint.
5. Acknowledgements for unknown, aborted or completed checkpoints, or from an old attempt, are
   late: their state is discarded.
6. Stop-with-savepoint (FLIP-34): ``TriggerSavepoint(synchronous=True)`` triggers a synchronous
   savepoint (``drain``: Flink's TERMINATE, else SUSPEND). From then on no periodic checkpoint is
   triggered and no other savepoint (``savepoint_refusal`` says why); its abort lifts that (the
   job goes on). Its completion aborts the checkpoints still pending (the tasks finish after it,
   and a finished task must not count as acknowledging an older checkpoint). A task failing
   after the completion (the job fails over instead of finishing) lifts it too.
7. ``RequestSavepoint`` is a savepoint asked for by trigger id (REST): refused (no target
   directory, checkpointing off, a cancel- or stop-with-savepoint in progress, tasks not running)
   or triggered; its result by trigger id is kept in ``savepoints`` (``SavepointTracker``), with
   the stop's outcome (``StopTaskFailed`` may decide ``FailWithoutRestart``). Cancel-with-savepoint
   suspends periodic checkpoints like a stop; its completion is notified with ``cancel_job``
   (the driver cancels the job once the tasks have it), its abort lifts the suspension.
8. Restore (the driver reads the files, these decide): ``CheckpointsRecovered`` takes over the
   checkpoints a job resumes from and continues the ids; ``CheckpointIdReserved`` moves the ids
   past what the HA counter handed out; ``CheckpointUnrestorable`` drops a damaged latest
   checkpoint for the previous retained one (``RestoreFallback``). ``Rescaled``: the graph was
   rebuilt at another parallelism; every pending checkpoint is aborted (one being finalized too:
   the tasks that took it are gone) and ``CheckpointCoordinator.continuing`` builds the
   coordinator of the new tasks, with the completed checkpoints and the ids.
9. Shared state (incremental checkpoints): the ``SharedStateRegistry`` (``shared``) counts which
   completed checkpoints refer to which shared file. A checkpoint's files are registered when it
   is finalized; one that refers to a file already let go is aborted (``FINALIZE_FAILURE``).
   ``DiscardCheckpoint.shared`` carries the files no retained checkpoint refers to any more
   (subsumed beyond ``num-retained``, or all when the job ends and its checkpoints go); an
   aborted checkpoint's or a late acknowledgement's shared files that the registry never saw go
   with its ``DiscardState``. The registry is rebuilt from the checkpoints a coordinator takes
   over (``CheckpointsRecovered``, ``continuing``). A savepoint that refers to shared files
   (it must be self-contained) is aborted.
10. Takeover without a restore (issue 18): ``TasksAdopted`` -- a new leader adopted the running
    tasks of the job (with their attempt numbers); it notifies the latest completed checkpoint,
    aborts what an earlier leader had in flight and continues the ids (``checkpoint/takeover.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Union

from yarnflink.checkpoint.config import CheckpointConfig
from yarnflink.checkpoint.metadata import CompletedCheckpoint, OperatorState
from yarnflink.checkpoint.savepoints import NO_TARGET_DIRECTORY, SavepointTracker, savepoint_directory
from yarnflink.checkpoint.shared import SharedStateDiscardedError, SharedStateRegistry
from yarnflink.checkpoint.stop_with_savepoint import FailWithoutRestart
from yarnflink.checkpoint.takeover import abort_reason, in_flight_ids
from yarnflink.state.handles import StreamStateHandle, TaskStateSnapshot

CREATED, RUNNING, FINISHED = "CREATED", "RUNNING", "FINISHED"

# abort reasons (Flink's CheckpointFailureReason); those in COUNTED fail the job over past the threshold
DECLINED = "CHECKPOINT_DECLINED"
EXPIRED = "CHECKPOINT_EXPIRED"
FINALIZE_FAILURE = "FINALIZE_CHECKPOINT_FAILURE"
SUBSUMED = "CHECKPOINT_SUBSUMED"
TASK_FAILURE = "TASK_FAILURE"
COORDINATOR_SHUTDOWN = "CHECKPOINT_COORDINATOR_SHUTDOWN"
JOB_FAILING = "JOB_FAILOVER"
COUNTED = frozenset({DECLINED, EXPIRED, FINALIZE_FAILURE})
#: declines a task sends because a newer barrier overtook the checkpoint or it was cancelled
#: upstream: aborted under their own reason, never counted (as Flink's CheckpointFailureManager)
DECLINED_SUBSUMED = "CHECKPOINT_DECLINED_SUBSUMED"
DECLINED_ON_CANCELLATION_BARRIER = "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER"


# ----------------------------------------------------------------------------- topology
@dataclass(frozen=True)
class CheckpointTask:
    """One subtask (ExecutionVertex) as the coordinator sees it."""

    task_id: str
    vertex_id: str
    subtask_index: int
    parallelism: int
    max_parallelism: int
    operator_ids: tuple[str, ...] = ()
    upstream: tuple[str, ...] = ()  # task ids this task reads from


# ----------------------------------------------------------------------------- events
@dataclass(frozen=True)
class Tick:
    now: int


@dataclass(frozen=True)
class TriggerSavepoint:
    """``synchronous``: stop-with-savepoint; ``drain`` (only with it): MAX_WATERMARK first."""

    now: int
    target_directory: str | None = None
    synchronous: bool = False
    drain: bool = False


@dataclass(frozen=True)
class TaskRunning:
    task_id: str
    attempt: int = 0


@dataclass(frozen=True)
class TaskFinished:
    task_id: str
    now: int = 0


@dataclass(frozen=True)
class TaskFailed:
    """The task failed or is restarted: pending checkpoints cannot complete (not counted)."""

    task_id: str
    now: int = 0


@dataclass(frozen=True)
class TaskDeployed:
    """A (re)deployed attempt: a task that ran before counts as failed, and pending checkpoints
    cannot complete (the new attempt never saw their barriers)."""

    task_id: str
    now: int = 0


@dataclass(frozen=True)
class AcknowledgeCheckpoint:
    checkpoint_id: int
    task_id: str
    state: TaskStateSnapshot | None = None
    attempt: int = 0
    now: int = 0


@dataclass(frozen=True)
class DeclineCheckpoint:
    checkpoint_id: int
    task_id: str
    reason: str = ""
    attempt: int = 0
    now: int = 0


@dataclass(frozen=True)
class CheckpointTimeout:
    checkpoint_id: int
    now: int


@dataclass(frozen=True)
class MetadataWritten:
    checkpoint_id: int
    external_pointer: str
    now: int


@dataclass(frozen=True)
class MetadataWriteFailed:
    checkpoint_id: int
    reason: str
    now: int


@dataclass(frozen=True)
class JobTerminated:
    status: str  # FINISHED | CANCELED | FAILED | SUSPENDED


@dataclass(frozen=True)
class RequestSavepoint:
    """A savepoint asked for (REST), known by ``trigger_id``: ``stop``: stop-with-savepoint
    (``drain``: MAX_WATERMARK first); ``cancel_job``: cancel-with-savepoint. ``target_directory``
    None: none given and none configured (refused)."""

    trigger_id: str
    target_directory: str | None
    now: int
    stop: bool = False
    drain: bool = False
    cancel_job: bool = False


@dataclass(frozen=True)
class StopTaskFailed:
    """A task failed (``task``: its name with subtask; ``cause``: one line), before the job
    decides on a failover."""

    task: str
    cause: str


@dataclass(frozen=True)
class StopTaskEnded:
    """A task ended FAILED or CANCELED (``state``)."""

    task: str
    state: str


@dataclass(frozen=True)
class Rescaled:
    """The ExecutionGraph was rebuilt at another parallelism (``reason`` names it)."""

    now: int
    reason: str


@dataclass(frozen=True)
class CheckpointsRecovered:
    """The job resumes: new checkpoints get ids from ``next_checkpoint_id`` on; ``completed``
    (None: unchanged) are the checkpoints it owns now, oldest first (HA: the retained ones)."""

    next_checkpoint_id: int
    completed: tuple[CompletedCheckpoint, ...] | None = None


@dataclass(frozen=True)
class CheckpointIdReserved:
    """The HA counter handed out ``checkpoint_id`` for the next checkpoint."""

    checkpoint_id: int


@dataclass(frozen=True)
class CheckpointUnrestorable:
    """Checking the files of a completed checkpoint before a restore failed (``reason``)."""

    checkpoint_id: int
    reason: str


@dataclass(frozen=True)
class TasksAdopted:
    """A new leader adopted the job's tasks instead of redeploying them: ``running`` (task id,
    attempt number) keep running with their state, ``finished`` had finished; ``published_id`` is
    the newest checkpoint whose pointer is in the HA store (0: none), ``handed_out_below`` the
    shared id counter's value before this leader drew an id (see ``checkpoint/takeover.py``)."""

    running: tuple[tuple[str, int], ...]
    finished: tuple[str, ...]
    published_id: int
    handed_out_below: int
    now: int


Event = Union[
    Tick,
    TriggerSavepoint,
    TaskRunning,
    TaskFinished,
    TaskFailed,
    TaskDeployed,
    AcknowledgeCheckpoint,
    DeclineCheckpoint,
    CheckpointTimeout,
    MetadataWritten,
    MetadataWriteFailed,
    JobTerminated,
    RequestSavepoint,
    StopTaskFailed,
    StopTaskEnded,
    Rescaled,
    CheckpointsRecovered,
    CheckpointIdReserved,
    CheckpointUnrestorable,
    TasksAdopted,
]


# ----------------------------------------------------------------------------- actions
@dataclass(frozen=True)
class TriggerCheckpoint:
    checkpoint_id: int
    timestamp: int
    tasks: tuple[str, ...]
    mode: str
    is_savepoint: bool = False
    synchronous: bool = False
    drain: bool = False


@dataclass(frozen=True)
class ScheduleTimeout:
    checkpoint_id: int
    deadline: int


@dataclass(frozen=True)
class WriteMetadata:
    checkpoint: CompletedCheckpoint
    target_directory: str | None = None  # savepoints: where to; checkpoints: the job's chk-<n>


@dataclass(frozen=True)
class NotifyCheckpointComplete:
    """``cancel_job``: a cancel-with-savepoint's savepoint; once every task has the
    notification (its sinks commit what the savepoint covers), the job is cancelled."""

    checkpoint_id: int
    tasks: tuple[str, ...]
    cancel_job: bool = False


@dataclass(frozen=True)
class NotifyCheckpointAborted:
    checkpoint_id: int
    tasks: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class DiscardState:
    """Delete state files of an aborted checkpoint or of a late acknowledgement."""

    checkpoint_id: int
    handles: tuple[StreamStateHandle, ...]


@dataclass(frozen=True)
class DiscardIncomplete:
    """Delete the directory of a checkpoint that did not complete, with whatever a failing task
    left there (Flink: ``disposeOnFailure``)."""

    checkpoint_id: int


@dataclass(frozen=True)
class DiscardCheckpoint:
    """Delete a completed checkpoint (its directory and files) and ``shared``: the shared files
    no retained checkpoint refers to any more."""

    checkpoint: CompletedCheckpoint
    shared: tuple[StreamStateHandle, ...] = ()


@dataclass(frozen=True)
class FailGlobal:
    """A global failover of the job, whose restart strategy decides (not the end of the job)."""

    reason: str


@dataclass(frozen=True)
class RestoreFallback:
    """Checkpoint ``checkpoint_id`` was dropped as unrestorable; ``fallback_id`` is restored."""

    checkpoint_id: int
    fallback_id: int
    reason: str


Action = Union[
    TriggerCheckpoint,
    ScheduleTimeout,
    WriteMetadata,
    NotifyCheckpointComplete,
    NotifyCheckpointAborted,
    DiscardState,
    DiscardIncomplete,
    DiscardCheckpoint,
    FailGlobal,
    FailWithoutRestart,
    RestoreFallback,
]


# ----------------------------------------------------------------------------- state
@dataclass
class PendingCheckpoint:
    checkpoint_id: int
    timestamp: int
    deadline: int
    is_savepoint: bool
    target_directory: str | None
    not_yet_acknowledged: set[str]
    acknowledged: dict[str, TaskStateSnapshot | None] = field(default_factory=dict)
    finalizing: CompletedCheckpoint | None = None
    synchronous: bool = False  # stop-with-savepoint
    drain: bool = False

    def handles(self) -> tuple[StreamStateHandle, ...]:
        return tuple(h for s in self.acknowledged.values() if s is not None for h in s.stream_handles())


# Which completed checkpoints are deleted when the job ends, per retention policy (Flink's
# CheckpointProperties: discardFinished / discardCancelled / discardFailed / discardSuspended).
_DISCARD_ON = {
    "NO_EXTERNALIZED_CHECKPOINTS": {"FINISHED", "CANCELED", "FAILED", "SUSPENDED"},
    "DELETE_ON_CANCELLATION": {"FINISHED", "CANCELED"},
    "RETAIN_ON_CANCELLATION": {"FINISHED"},
}


def discards_on(retention: str, status: str) -> bool:
    """Whether a job ending ``status`` deletes its completed checkpoints under ``retention``
    (``execution.checkpointing.externalized-checkpoint-retention``)."""
    return status in _DISCARD_ON.get(retention, set())


class CheckpointCoordinator:
    def __init__(
        self,
        job_id: str,
        tasks: list[CheckpointTask],
        config: CheckpointConfig,
        *,
        completed: list[CompletedCheckpoint] | None = None,
        next_checkpoint_id: int | None = None,
        start_time: int = 0,
    ):
        if config.mode not in ("EXACTLY_ONCE", "AT_LEAST_ONCE"):
            raise ValueError(f"unknown checkpointing mode {config.mode!r}")
        self.job_id = job_id
        self.config = config
        self.tasks = {t.task_id: t for t in tasks}
        for t in tasks:
            for u in t.upstream:
                if u not in self.tasks:
                    raise ValueError(f"task {t.task_id} reads from unknown task {u}")
        self.status = {t: CREATED for t in self.tasks}
        self.attempts = {t: 0 for t in self.tasks}
        self.pending: dict[int, PendingCheckpoint] = {}
        self.completed: list[CompletedCheckpoint] = sorted(completed or [], key=lambda c: c.checkpoint_id)
        #: which completed checkpoints refer to which shared state file (incremental checkpoints)
        self.shared = SharedStateRegistry.rebuilt(self.completed)
        last = self.completed[-1].checkpoint_id if self.completed else 0
        self.next_checkpoint_id = max(next_checkpoint_id or 1, last + 1)
        self.consecutive_failures = 0
        self.last_completion: int | None = None
        self.next_trigger = start_time + (config.interval_ms or 0)
        self.shutdown = False
        #: stop-with-savepoint: no periodic checkpoint after the savepoint (its sinks would commit
        #: records the savepoint does not cover); lifted if the savepoint fails
        self.periodic_suspended = False
        #: the synchronous savepoint (stop-with-savepoint) pending or completed, 0: none
        self.stop_checkpoint_id = 0
        #: a cancel-with-savepoint's savepoint pending or completed, 0: none
        self.cancel_checkpoint_id = 0
        #: savepoint results by trigger id (REST), stop-with-savepoint outcomes
        self.savepoints = SavepointTracker(job_id)

    @classmethod
    def continuing(
        cls, previous: CheckpointCoordinator, tasks: list[CheckpointTask], start_time: int
    ) -> CheckpointCoordinator:
        """The coordinator of a rescaled graph's ``tasks`` (after ``Rescaled`` aborted what was
        pending): the completed checkpoints, the ids, the last completion, savepoint results and
        a stop- or cancel-with-savepoint's suspension carry on."""
        fresh = cls(
            previous.job_id,
            tasks,
            previous.config,
            completed=list(previous.completed),
            next_checkpoint_id=previous.next_checkpoint_id,
            start_time=start_time,
        )
        fresh.last_completion = previous.last_completion
        fresh.periodic_suspended = previous.periodic_suspended
        fresh.stop_checkpoint_id = previous.stop_checkpoint_id
        fresh.cancel_checkpoint_id = previous.cancel_checkpoint_id
        fresh.savepoints = previous.savepoints
        fresh.shared = previous.shared
        return fresh

    # ------------------------------------------------------------------ queries
    def latest_completed(self) -> CompletedCheckpoint | None:
        return self.completed[-1] if self.completed else None

    def next_wakeup(self) -> int | None:
        """When the driver should send the next ``Tick`` (None: only on events)."""
        times = [p.deadline for p in self.pending.values() if p.finalizing is None]
        if self.config.periodic and not self.shutdown:
            times.append(self.next_trigger)
        return min(times) if times else None

    def savepoint_refusal(self, synchronous: bool = False) -> str | None:
        """Why a savepoint (``synchronous``: a stop-with-savepoint) cannot be triggered now, or
        None (then ``TriggerSavepoint`` triggers it)."""
        if self.shutdown:
            return "the job is no longer running"
        if self.stop_checkpoint_id:
            what = "in progress" if self.stop_checkpoint_id in self.pending else "completed; the job is finishing"
            return f"a stop-with-savepoint of this job is {what} (savepoint {self.stop_checkpoint_id})"
        unfinished = self._unfinished()
        if not unfinished:
            return "every task of the job has finished"
        waiting = sorted(t for t in unfinished if self.status[t] != RUNNING)
        if waiting:
            shown = ", ".join(waiting[:5]) + (f" and {len(waiting) - 5} more" if len(waiting) > 5 else "")
            return f"not all tasks are running (not running: {shown})"
        return None

    def _unfinished(self) -> list[str]:
        return [t for t, s in self.status.items() if s != FINISHED]

    def _trigger_tasks(self) -> tuple[str, ...]:
        return tuple(
            sorted(t for t in self._unfinished() if all(self.status[u] == FINISHED for u in self.tasks[t].upstream))
        )

    # ------------------------------------------------------------------ dispatch
    def handle(self, event: Event) -> list[Action]:
        method: Callable[[Event], list[Action]] | None = getattr(self, "_on_" + type(event).__name__, None)
        if method is None:
            raise TypeError(f"unknown event {event!r}")
        return method(event)

    def _on_Tick(self, e: Tick) -> list[Action]:
        actions: list[Action] = []
        for p in sorted(self.pending.values(), key=lambda p: p.checkpoint_id):
            if p.finalizing is None and p.deadline <= e.now and p.checkpoint_id in self.pending:
                actions += self._abort(
                    p.checkpoint_id, EXPIRED, e.now, f"checkpoint {p.checkpoint_id} expired before completing"
                )
        if self.config.periodic and not self.shutdown and not self.periodic_suspended and e.now >= self.next_trigger:
            actions += self._try_trigger(e.now, savepoint=False, target=None)
        return actions

    def _on_TriggerSavepoint(self, e: TriggerSavepoint) -> list[Action]:
        if e.drain and not e.synchronous:
            raise ValueError("drain applies to a stop-with-savepoint (synchronous) only")
        if self.savepoint_refusal(e.synchronous) is not None:
            return []
        actions = self._try_trigger(
            e.now, savepoint=True, target=e.target_directory, synchronous=e.synchronous, drain=e.drain
        )
        if e.synchronous and actions:
            self.stop_checkpoint_id = actions[0].checkpoint_id  # type: ignore[union-attr]
            self.periodic_suspended = True
        return actions

    def _try_trigger(
        self, now: int, savepoint: bool, target: str | None, synchronous: bool = False, drain: bool = False
    ) -> list[Action]:
        if self.shutdown or self.stop_checkpoint_id:
            return []
        unfinished = self._unfinished()
        if not unfinished:
            return []
        if not savepoint:
            if len(self.pending) >= self.config.max_concurrent:
                return []  # stays due: triggered on the first tick after a pending one ends
            if self.config.min_pause_ms > 0 and self.last_completion is not None:
                earliest = self.last_completion + self.config.min_pause_ms
                if now < earliest or self.pending:
                    self.next_trigger = max(self.next_trigger, earliest)
                    return []
        if any(self.status[t] != RUNNING for t in unfinished):
            return []  # not all required tasks are running yet (not a failure)
        cid = self.next_checkpoint_id
        self.next_checkpoint_id += 1
        deadline = now + self.config.timeout_ms
        self.pending[cid] = PendingCheckpoint(
            cid, now, deadline, savepoint, target, set(unfinished), synchronous=synchronous, drain=drain
        )
        if not savepoint:
            self.next_trigger = now + (self.config.interval_ms or 0)
        return [
            TriggerCheckpoint(cid, now, self._trigger_tasks(), self.config.mode, savepoint, synchronous, drain),
            ScheduleTimeout(cid, deadline),
        ]

    def _on_TaskRunning(self, e: TaskRunning) -> list[Action]:
        self._check_task(e.task_id)
        self.status[e.task_id] = RUNNING
        self.attempts[e.task_id] = e.attempt
        return []

    def _on_TaskFinished(self, e: TaskFinished) -> list[Action]:
        self._check_task(e.task_id)
        self.status[e.task_id] = FINISHED
        actions: list[Action] = []
        for cid in sorted(self.pending):
            p = self.pending.get(cid)
            if p is not None and e.task_id in p.not_yet_acknowledged:
                actions += self._acknowledged(p, e.task_id, None)
        return actions

    def _on_TaskFailed(self, e: TaskFailed) -> list[Action]:
        self._check_task(e.task_id)
        self.status[e.task_id] = CREATED
        if self.stop_checkpoint_id and self.stop_checkpoint_id not in self.pending:
            # a task failed after its stop's savepoint ended: if the savepoint was aborted, the
            # job fails over and goes on, checkpointing again; if it completed, the JobMaster has
            # already failed the whole job, with no restart (FLINK-26783, jobmaster.py)
            self.stop_checkpoint_id = 0
            self.periodic_suspended = False
        actions: list[Action] = []
        for cid in sorted(self.pending):
            if self.pending[cid].finalizing is None:
                actions += self._abort(cid, TASK_FAILURE, e.now, f"task {e.task_id} failed")
        return actions

    def _on_TaskDeployed(self, e: TaskDeployed) -> list[Action]:
        if self.status.get(e.task_id) == CREATED and not self.pending:
            return []
        return self._on_TaskFailed(TaskFailed(e.task_id, e.now))

    def _on_AcknowledgeCheckpoint(self, e: AcknowledgeCheckpoint) -> list[Action]:
        self._check_task(e.task_id)
        p = self.pending.get(e.checkpoint_id)
        late = (
            p is None
            or p.finalizing is not None
            or e.attempt != self.attempts[e.task_id]
            or e.task_id not in p.not_yet_acknowledged
        )
        if p is None or late:
            handles = tuple(e.state.stream_handles()) if e.state is not None else ()
            unknown = tuple(h.as_file() for h in self.shared.unknown(e.state.shared_handles())) if e.state else ()
            return [DiscardState(e.checkpoint_id, handles + unknown)] if handles or unknown else []
        return self._acknowledged(p, e.task_id, e.state, e.now)

    def _acknowledged(
        self, p: PendingCheckpoint, task_id: str, state: TaskStateSnapshot | None, now: int = 0
    ) -> list[Action]:
        p.not_yet_acknowledged.discard(task_id)
        p.acknowledged[task_id] = state
        if p.not_yet_acknowledged:
            return []
        done = self._build_completed(p)
        shared = done.shared_handles()
        if shared and p.is_savepoint:
            return self._abort(
                p.checkpoint_id,
                FINALIZE_FAILURE,
                now,
                f"savepoint {p.checkpoint_id} refers to shared state files (a savepoint must be self-contained)",
            )
        try:
            self.shared.register(p.checkpoint_id, shared)
        except SharedStateDiscardedError as e:
            return self._abort(p.checkpoint_id, FINALIZE_FAILURE, now, str(e))
        p.finalizing = done
        return [WriteMetadata(p.finalizing, p.target_directory)]

    def _build_completed(self, p: PendingCheckpoint) -> CompletedCheckpoint:
        ops: dict[str, OperatorState] = {}
        for t in self.tasks.values():
            for op_id in t.operator_ids:
                ops.setdefault(op_id, OperatorState(op_id, t.parallelism, t.max_parallelism))
        for task_id, snap in p.acknowledged.items():
            if snap is None:
                continue
            t = self.tasks[task_id]
            for op_id, st in snap.subtask_states.items():
                if st.is_empty():
                    continue
                op = ops.setdefault(op_id, OperatorState(op_id, t.parallelism, t.max_parallelism))
                op.subtask_states[t.subtask_index] = st
        return CompletedCheckpoint(self.job_id, p.checkpoint_id, p.timestamp, ops, is_savepoint=p.is_savepoint)

    def _on_DeclineCheckpoint(self, e: DeclineCheckpoint) -> list[Action]:
        self._check_task(e.task_id)
        p = self.pending.get(e.checkpoint_id)
        if p is None or p.finalizing is not None or e.attempt != self.attempts[e.task_id]:
            return []
        reason = next(
            (r for r in (DECLINED_SUBSUMED, DECLINED_ON_CANCELLATION_BARRIER) if e.reason.startswith(r)), DECLINED
        )
        return self._abort(
            e.checkpoint_id, reason, e.now, f"task {e.task_id} declined checkpoint {e.checkpoint_id}: {e.reason}"
        )

    def _on_CheckpointTimeout(self, e: CheckpointTimeout) -> list[Action]:
        p = self.pending.get(e.checkpoint_id)
        if p is None or p.finalizing is not None:
            return []
        return self._abort(e.checkpoint_id, EXPIRED, e.now, f"checkpoint {e.checkpoint_id} expired before completing")

    def _on_MetadataWriteFailed(self, e: MetadataWriteFailed) -> list[Action]:
        p = self.pending.get(e.checkpoint_id)
        if p is None or p.finalizing is None:
            return []
        return self._abort(
            e.checkpoint_id,
            FINALIZE_FAILURE,
            e.now,
            f"writing the metadata of checkpoint {e.checkpoint_id} failed: {e.reason}",
        )

    def _on_MetadataWritten(self, e: MetadataWritten) -> list[Action]:
        p = self.pending.get(e.checkpoint_id)
        if p is None or p.finalizing is None:
            return []
        del self.pending[e.checkpoint_id]
        self.savepoints.completed(e.checkpoint_id, e.external_pointer)  # (a stop: the tasks finish on the notice)
        done = p.finalizing
        done.external_pointer = e.external_pointer
        done.completion_timestamp = e.now
        actions: list[Action] = []
        if not p.is_savepoint:
            self.consecutive_failures = 0
            self.last_completion = e.now
            for cid in sorted(self.pending):
                q = self.pending[cid]
                if cid < e.checkpoint_id and not q.is_savepoint and q.finalizing is None:
                    actions += self._abort(cid, SUBSUMED, e.now, f"subsumed by checkpoint {e.checkpoint_id}")
        if p.synchronous:  # the tasks finish now: what is still pending can never complete
            for cid in sorted(self.pending):
                if self.pending[cid].finalizing is None:
                    actions += self._abort(cid, SUBSUMED, e.now, f"the job stops with savepoint {e.checkpoint_id}")
        notify = tuple(sorted(t for t in p.acknowledged if self.status[t] == RUNNING))
        actions.append(NotifyCheckpointComplete(e.checkpoint_id, notify, e.checkpoint_id == self.cancel_checkpoint_id))
        if not p.is_savepoint:
            self.completed.append(done)
            while len(self.completed) > self.config.num_retained:
                actions.append(self._discard_completed(self.completed.pop(0)))
        return actions

    def _discard_completed(self, c: CompletedCheckpoint) -> DiscardCheckpoint:
        return DiscardCheckpoint(c, tuple(h.as_file() for h in self.shared.unregister(c.checkpoint_id)))

    def _on_JobTerminated(self, e: JobTerminated) -> list[Action]:
        self.shutdown = True
        self.savepoints.job_terminated(e.status)  # before the aborts: a stop's result names the status
        actions: list[Action] = []
        for cid in sorted(self.pending):
            actions += self._abort(cid, COORDINATOR_SHUTDOWN, 0, f"the job is {e.status}")
        if discards_on(self.config.externalized_retention, e.status):
            actions += [self._discard_completed(c) for c in self.completed]
            self.completed = []
        return actions

    # ------------------------------------------------------------------ savepoints by trigger id
    def _on_RequestSavepoint(self, e: RequestSavepoint) -> list[Action]:
        self.savepoints.requested(e.trigger_id, e.stop, e.drain, e.cancel_job)  # ValueError: not a valid kind
        refusal = self._request_refusal(e)
        actions: list[Action] = []
        if refusal is None and e.target_directory:
            target = savepoint_directory(e.target_directory, self.job_id, e.trigger_id)
            actions = self._on_TriggerSavepoint(TriggerSavepoint(e.now, target, synchronous=e.stop, drain=e.drain))
        trigger = next((a for a in actions if isinstance(a, TriggerCheckpoint)), None)
        if trigger is None:
            self.savepoints.refused(e.trigger_id, refusal or "the savepoint could not be triggered")
            return []
        self.savepoints.triggered(e.trigger_id, trigger.checkpoint_id)
        if e.cancel_job:  # no checkpoint after it: its sinks would commit what the savepoint misses
            self.cancel_checkpoint_id = trigger.checkpoint_id
            self.periodic_suspended = True
        return actions

    def _request_refusal(self, e: RequestSavepoint) -> str | None:
        if not e.target_directory:
            return NO_TARGET_DIRECTORY
        if not self.config.periodic:
            return "checkpointing is not enabled for this job (execution.checkpointing.interval)"
        if self.cancel_checkpoint_id in self.pending:
            return "a cancel-with-savepoint of this job is in progress"
        return self.savepoint_refusal(e.stop)

    def _on_StopTaskFailed(self, e: StopTaskFailed) -> list[Action]:
        decision = self.savepoints.task_failed(e.task, e.cause)
        return [decision] if decision is not None else []

    def _on_StopTaskEnded(self, e: StopTaskEnded) -> list[Action]:
        self.savepoints.task_ended(e.task, e.state)
        return []

    # ------------------------------------------------------------------ restore and rescale
    def _on_Rescaled(self, e: Rescaled) -> list[Action]:
        actions: list[Action] = []
        for cid in sorted(self.pending):
            if cid in self.pending:
                actions += self._abort(cid, TASK_FAILURE, e.now, e.reason)
        return actions

    def _on_CheckpointsRecovered(self, e: CheckpointsRecovered) -> list[Action]:
        if e.completed is not None:
            self.completed = sorted(e.completed, key=lambda c: c.checkpoint_id)
            self.shared = SharedStateRegistry.rebuilt(self.completed)
        self.next_checkpoint_id = max(self.next_checkpoint_id, e.next_checkpoint_id)
        return []

    def _on_CheckpointIdReserved(self, e: CheckpointIdReserved) -> list[Action]:
        self.next_checkpoint_id = max(self.next_checkpoint_id, e.checkpoint_id)
        return []

    def _on_CheckpointUnrestorable(self, e: CheckpointUnrestorable) -> list[Action]:
        """Flink's fallback: a damaged latest checkpoint is left out when an older one is
        retained; the only one is restored anyway (the task then fails, naming the problem)."""
        latest = self.latest_completed()
        if latest is None or latest.checkpoint_id != e.checkpoint_id or len(self.completed) < 2:
            return []
        dropped = self.completed.pop()
        self.shared.unregister(dropped.checkpoint_id)  # (nothing deleted: its pointer may remain)
        return [RestoreFallback(e.checkpoint_id, self.completed[-1].checkpoint_id, e.reason)]

    # ------------------------------------------------------------------ takeover without a restore
    def _on_TasksAdopted(self, e: TasksAdopted) -> list[Action]:
        if self.pending:
            raise ValueError("tasks are adopted before any checkpoint is triggered")
        for task_id, attempt in e.running:
            self._check_task(task_id)
            self.status[task_id] = RUNNING
            self.attempts[task_id] = attempt
        for task_id in e.finished:
            self._check_task(task_id)
            self.status[task_id] = FINISHED
        in_flight = in_flight_ids(e.published_id, e.handed_out_below)
        self.next_checkpoint_id = max(self.next_checkpoint_id, e.handed_out_below, e.published_id + 1)
        self.savepoints.taken_over(e.handed_out_below)
        running = tuple(sorted(t for t, _ in e.running))
        actions: list[Action] = []
        if e.published_id and running:
            actions.append(NotifyCheckpointComplete(e.published_id, running))
        for cid in in_flight:
            if running:
                actions.append(NotifyCheckpointAborted(cid, running, abort_reason(cid, e.published_id)))
            actions.append(DiscardIncomplete(cid))
        # the first checkpoint under the new leader as soon as every task runs: it proves the takeover
        self.next_trigger = min(self.next_trigger, e.now)
        return actions

    # ------------------------------------------------------------------ aborting
    def _abort(self, cid: int, reason: str, now: int, message: str) -> list[Action]:
        p = self.pending.pop(cid)
        if p.synchronous and cid == self.stop_checkpoint_id:  # the stop failed: the job goes on
            self.stop_checkpoint_id = 0
            self.periodic_suspended = False
        if cid == self.cancel_checkpoint_id:  # the cancel-with-savepoint failed: the job goes on
            self.cancel_checkpoint_id = 0
            self.periodic_suspended = False
        self.savepoints.aborted(cid, f"{reason}: {message}")
        tasks = tuple(sorted(t for t in set(p.acknowledged) | p.not_yet_acknowledged if self.status[t] == RUNNING))
        actions: list[Action] = [NotifyCheckpointAborted(cid, tasks, f"{reason}: {message}")]
        # its files stay while its _metadata write and pointer publication are in flight (the job
        # ended or was rescaled meanwhile): the pointer may still land in the HA store
        in_flight = p.finalizing is not None and reason != FINALIZE_FAILURE
        handles = p.handles()
        if not in_flight:
            # shared files: those only it referred to (registered when it was finalized), and
            # those never registered (a backend refers only to files of confirmed checkpoints)
            freed = self.shared.unregister(cid) if p.finalizing is not None else []
            acked = [h for s in p.acknowledged.values() if s is not None for h in s.shared_handles()]
            handles += tuple(h.as_file() for h in [*freed, *self.shared.unknown(acked)])
        if handles and not in_flight:
            actions.append(DiscardState(cid, handles))
        if not in_flight and not self.shutdown:  # (once the job ended, no directory goes)
            actions.append(DiscardIncomplete(cid))
        if reason in COUNTED and not p.is_savepoint:
            self.consecutive_failures += 1
            if self.consecutive_failures > self.config.tolerable_failures:
                self.consecutive_failures = 0
                actions.append(
                    FailGlobal(
                        "Exceeded checkpoint tolerable failure threshold "
                        f"({self.config.tolerable_failures}); the latest checkpoint failed with {reason}: {message}"
                    )
                )
                for other in sorted(self.pending):
                    if self.pending[other].finalizing is None:
                        actions += self._abort(other, JOB_FAILING, now, "the job fails")
        return actions

    def _check_task(self, task_id: str) -> None:
        if task_id not in self.tasks:
            raise KeyError(f"unknown task {task_id!r}")
