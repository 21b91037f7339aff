"""The JobMaster's side of checkpoints: drives the pure ``CheckpointCoordinator`` on the JobMaster's
loop (ticks, task states, acknowledgements) and carries out its actions (TriggerCheckpoint and
NotifyCheckpoint RPCs to tasks, ``_metadata`` written last through ``FsCheckpointStorage`` off the
loop, discards), and hands restarted tasks the state of the latest completed checkpoint
(``assign_state``) in their TaskDeploymentDescriptor.

Savepoints come in Flink's kinds: a plain one (the job goes on), cancel-with-savepoint (REST
``cancel-job``: the tasks are notified of the savepoint, then the job is cancelled) and
stop-with-savepoint (a synchronous savepoint, SUSPEND or TERMINATE with ``drain``: the tasks
finish after it and the job ends FINISHED; its result is kept by a
``StopWithSavepointTerminationHandler``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from yarnflink.checkpoint import coordinator as cc
from yarnflink.checkpoint.assignment import RestoreVertex, assign_state
from yarnflink.checkpoint.config import CheckpointConfig
from yarnflink.checkpoint.metadata import CheckpointMetadataError, CompletedCheckpoint
from yarnflink.common.rpc_errors import RpcException
from yarnflink.executiongraph.executiongraph import Execution, ExecutionState, ExecutionVertex
from yarnflink.jobmaster.gateway import AcknowledgeCheckpoint, DeclineCheckpoint
from yarnflink.jobmaster.stop_with_savepoint import (
    IN_PROGRESS,
    FailWithoutRestart,
    StopWithSavepointTerminationHandler,
    completed_operation,
    failed_operation,
    savepoint_type,
)
from yarnflink.operators.chain import operator_id_of
from yarnflink.state.handles import TaskStateSnapshot
from yarnflink.taskexecutor.gateway import NotifyCheckpoint, TriggerCheckpoint

if TYPE_CHECKING:
    from yarnflink.jobmaster.jobmaster import JobMaster

log = logging.getLogger(__name__)

#: configuration keys of checkpoint storage that tasks need (see ``storage_config``)
STORAGE_KEYS = ("s3.endpoint", "s3.access-key", "s3.secret-key", "s3.path.style.access")

#: checkpoint history kept for the REST API (Flink's web.checkpoints.history default)
HISTORY_SIZE = 10


def task_id_of(ev: ExecutionVertex) -> str:
    return f"{ev.job_vertex.job_vertex.id}#{ev.subtask_index}"


def _now_ms() -> int:
    return int(time.time() * 1000)


class CheckpointDriver:
    def __init__(self, jm: JobMaster) -> None:
        from yarnflink.checkpoint.storage import FsCheckpointStorage, storage_options_from_config

        self.jm = jm
        conf = jm.config
        self.config = CheckpointConfig.from_configuration(conf)
        self.vertices: list[RestoreVertex] = []
        self.coordinator = cc.CheckpointCoordinator(jm.job_id, self._tasks(), self.config, start_time=_now_ms())
        directory = self.config.directory or ""
        self.storage = (
            FsCheckpointStorage(
                directory,
                jm.job_id,
                storage_options=storage_options_from_config(conf, directory),
                inline_threshold=self.config.inline_threshold,
            )
            if directory
            else None
        )
        #: what tasks restore: the checkpoint and its assignment (computed once per checkpoint)
        self._restore: CompletedCheckpoint | None = None
        self._assigned: dict[tuple[str, int], TaskStateSnapshot] = {}
        self._assigned_for = -1
        self._restored_at_restart = 0
        # statistics for GET /jobs/:id/checkpoints
        self.counts = {"restored": 0, "total": 0, "in_progress": 0, "completed": 0, "failed": 0}
        self.history: list[dict[str, Any]] = []
        #: checkpoint id -> vertex id -> subtask index -> its statistics (details/{cid} in the REST API)
        self.subtask_stats: dict[int, dict[str, dict[int, dict[str, Any]]]] = {}
        self.latest_restored: dict[str, Any] | None = None
        self._task: asyncio.Task[None] | None = None
        #: savepoints: trigger id -> Flink's asynchronous operation result; checkpoint id -> trigger id
        self.savepoints: dict[str, dict[str, Any]] = {}
        self._savepoint_of: dict[int, str] = {}
        #: HA (yarnflink.highavailability.checkpoints): ids from the shared counter, pointers in ZooKeeper
        self.ha: Any = getattr(jm, "checkpoint_ha", None)
        self._reserved_id = 0
        self._cancel_after: set[str] = set()  # cancel-with-savepoint trigger ids
        self._cancel_checkpoints: set[int] = set()  # their checkpoint ids, once written
        #: stop-with-savepoint trigger id -> its result (reported once the job terminated)
        self._stops: dict[str, StopWithSavepointTerminationHandler] = {}
        self._validated: set[int] = set()  # checkpoint ids whose files were checked before a restore
        self._validating: asyncio.Future[None] | None = None
        #: checkpoints skipped on restore, and why (GET /jobs/:id/checkpoints: latest.restored.skipped)
        self.restore_warnings: list[str] = []

    def _tasks(self) -> list[cc.CheckpointTask]:
        """The checkpoint tasks of the ExecutionGraph as it is now (``self.vertices`` too)."""
        jm = self.jm
        jg = jm.job_graph
        tasks = []
        self.vertices = []
        for ejv in [jm.eg.vertex(v.id) for v in jg.vertices]:
            jv = ejv.job_vertex
            ops = tuple(operator_id_of(op.node_id, op.uid or "") for op in jv.operators)
            self.vertices.append(RestoreVertex(jv.id, jv.parallelism, jv.max_parallelism, ops))
            upstream = tuple(
                task_id_of(u)
                for e in jg.inputs_of(jv.id)
                for u in jm.eg.vertex(jg.dataset(e.source).producer).task_vertices
            )
            for ev in ejv.task_vertices:
                tasks.append(
                    cc.CheckpointTask(
                        task_id_of(ev), jv.id, ev.subtask_index, jv.parallelism, jv.max_parallelism, ops, upstream
                    )
                )
        return tasks

    def follow_rescale(self) -> bool:
        """The adaptive scheduler rebuilt the ExecutionGraph at another parallelism: checkpoints
        still pending are aborted (one being finalized too: the tasks that took it are gone and
        the new ones restore the latest completed checkpoint, so it must never complete), and the
        coordinator is rebuilt for the new tasks, keeping the completed checkpoints and the id
        counter; the next deployments restore the latest completed checkpoint redistributed to
        the new parallelism (``assign_state``). False: the parallelism did not change."""
        now = {ejv.id: ejv.job_vertex.parallelism for ejv in self.jm.eg.job_vertices}
        if now == {v.vertex_id: v.parallelism for v in self.vertices}:
            return False
        old = self.coordinator
        aborts: list[Any] = []
        for cid in sorted(old.pending):
            if cid in old.pending:
                aborts += old._abort(cid, cc.TASK_FAILURE, _now_ms(), f"the job was rescaled to {now}")
        fresh = cc.CheckpointCoordinator(
            self.jm.job_id,
            self._tasks(),
            self.config,
            completed=list(old.completed),
            next_checkpoint_id=old.next_checkpoint_id,
            start_time=_now_ms(),
        )
        fresh.last_completion = old.last_completion
        fresh.periodic_suspended = old.periodic_suspended
        fresh.stop_checkpoint_id = old.stop_checkpoint_id
        self.coordinator = fresh
        self._assigned_for = -1
        self._restored_at_restart = -1  # the rescale's restore is counted
        self._apply([a for a in aborts if not isinstance(a, cc.FailJob)])
        log.info(
            "job %s: checkpointing follows the rescale to %s (latest completed checkpoint: %s)",
            self.jm.job_id,
            now,
            old.latest_completed().checkpoint_id if old.completed else None,
        )
        return True

    def trigger_savepoint(
        self, target_directory: str | None, stop: bool = False, drain: bool = False, cancel_job: bool = False
    ) -> str:
        """``POST /jobs/:id/savepoints`` (``cancel_job``: cancel-with-savepoint, the job is
        cancelled once the savepoint completed) and ``POST /jobs/:id/stop`` (``stop``: a
        synchronous savepoint, then the job finishes; ``drain``: MAX_WATERMARK first): the
        trigger id whose result ``savepoint_status`` tells. A savepoint that cannot be triggered
        has a failed result naming why; a failed stop leaves the job running."""
        import uuid

        kind = savepoint_type(stop, drain)  # ValueError: drain without stop
        if stop and cancel_job:
            raise ValueError("a savepoint either stops or cancels the job, not both")
        trigger_id = uuid.uuid4().hex
        if stop:
            self._stops[trigger_id] = StopWithSavepointTerminationHandler(self.jm.job_id, drain)
        refusal = self._savepoint_refusal(target_directory, stop)
        if refusal is not None:
            self._savepoint_failed(trigger_id, refusal)
            return trigger_id
        target = target_directory or self.jm.config.get_string("execution.checkpointing.savepoint-dir") or ""
        target = f"{target.rstrip('/')}/savepoint-{self.jm.job_id[:6]}-{trigger_id[:12]}"
        actions = self.coordinator.handle(cc.TriggerSavepoint(_now_ms(), target, synchronous=stop, drain=drain))
        trigger = next((a for a in actions if isinstance(a, cc.TriggerCheckpoint)), None)
        if trigger is None:
            self._savepoint_failed(trigger_id, "the savepoint could not be triggered")
            return trigger_id
        self.savepoints[trigger_id] = dict(IN_PROGRESS)
        self._savepoint_of[trigger.checkpoint_id] = trigger_id
        if cancel_job:
            self._cancel_after.add(trigger_id)
            self.coordinator.periodic_suspended = True
        log.info(
            "job %s: %s %d triggered (trigger %s) to %s",
            self.jm.job_id,
            {"SAVEPOINT": "savepoint"}.get(kind, f"stop-with-savepoint ({kind})"),
            trigger.checkpoint_id,
            trigger_id,
            target,
        )
        self._apply(actions)
        return trigger_id

    def _savepoint_refusal(self, target_directory: str | None, stop: bool) -> str | None:
        """Why no savepoint can be triggered now (None: it can)."""
        if not (target_directory or self.jm.config.get_string("execution.checkpointing.savepoint-dir")):
            return (
                "no target directory: pass one (yarnflink savepoint JOBID DIR, yarnflink stop -p DIR JOBID) "
                "or set execution.checkpointing.savepoint-dir"
            )
        if not self.config.periodic:
            return "checkpointing is not enabled for this job (execution.checkpointing.interval)"
        if self._cancel_after:
            return "a cancel-with-savepoint of this job is in progress"
        return self.coordinator.savepoint_refusal(stop)

    def _savepoint_failed(self, trigger_id: str, reason: str) -> None:
        stop = self._stops.get(trigger_id)
        if stop is None:
            self.savepoints[trigger_id] = failed_operation(reason)
            return
        stop.savepoint_failed(reason)
        self.savepoints[trigger_id] = stop.operation()
        log.warning("job %s: %s", self.jm.job_id, (stop.operation()["operation"]["failure-cause"]["stack-trace"]))

    def _savepoint_completed(self, trigger_id: str, pointer: str) -> None:
        stop = self._stops.get(trigger_id)
        if stop is None:
            self.savepoints[trigger_id] = completed_operation(pointer)
            return
        stop.savepoint_completed(pointer)  # the result waits for the job's end (FINISHED)
        self.savepoints[trigger_id] = stop.operation()
        log.info("job %s: stop-with-savepoint: savepoint %s completed, the tasks finish", self.jm.job_id, pointer)

    def storage_config(self) -> dict[str, str]:
        """The file system keys (``s3.*``) of the cluster's configuration that tasks need to
        read and write state where the job's checkpoints and savepoints are (Flink: the
        TaskManagers' file system configuration)."""
        out = {}
        for key in STORAGE_KEYS:
            value = self.jm.config.get_string(key)
            if value:
                out[key] = value
        return out

    def savepoint_status(self, trigger_id: str) -> dict[str, Any] | None:
        return self.savepoints.get(trigger_id)

    # ------------------------------------------------------------------ lifecycle
    async def load_initial(self) -> None:
        """``execution.savepoint.path`` (``yarnflink run -s PATH``): the job starts from that
        savepoint or checkpoint (or from the newest valid checkpoint of a job's checkpoint
        directory). The state must fit the job (operators matched by uid) unless
        ``execution.savepoint.ignore-unclaimed-state``; else this raises, naming the path and
        the problem, and the job fails."""
        from yarnflink.checkpoint.assignment import check_compatible
        from yarnflink.checkpoint.storage import resolve_restore_location, storage_options_from_config

        if self.ha is not None and await self._load_from_ha():
            return
        path = self.jm.config.get_string("execution.savepoint.path")
        if not path:
            return
        options = storage_options_from_config(self.jm.config, path)
        found = await asyncio.get_running_loop().run_in_executor(None, resolve_restore_location, path, options)
        for skipped in found.skipped:
            log.warning(
                "job %s: not restoring %s: %s (falling back to an older checkpoint)",
                self.jm.job_id,
                skipped.path,
                skipped.problem,
            )
            self.restore_warnings.append(str(skipped))
        checkpoint = found.checkpoint
        assert checkpoint is not None
        problem = check_compatible(
            checkpoint, self.vertices, bool(self.jm.config.get("execution.savepoint.ignore-unclaimed-state"))
        )
        if problem is not None:
            raise ValueError(problem)
        self._restore = checkpoint
        self.latest_restored = {
            "id": checkpoint.checkpoint_id,
            "external_path": checkpoint.external_pointer or path,
            "restore_timestamp": _now_ms(),
            "is_savepoint": checkpoint.is_savepoint,
            "skipped": list(self.restore_warnings),
        }
        self.counts["restored"] += 1
        # new checkpoints of this job continue the numbering (Flink: the restored id + 1)
        self.coordinator.next_checkpoint_id = max(self.coordinator.next_checkpoint_id, checkpoint.checkpoint_id + 1)

    async def prepare_restore(self, execution: Execution) -> None:
        """Before a restarted task is deployed: check (once per checkpoint, one check shared by
        all tasks being deployed) that the files of the checkpoint it would restore are intact; a
        damaged one is dropped and the previous retained checkpoint is restored instead (Flink's
        fallback), logged as a warning and listed in ``restore_warnings``."""
        if execution.attempt_number == 0 or self.storage is None:
            return
        if self._validating is None or self._validating.done():
            latest = self.coordinator.latest_completed()
            if latest is None or latest.checkpoint_id in self._validated:
                return
            self._validating = asyncio.ensure_future(self._validate_latest())
        await asyncio.shield(self._validating)

    async def _validate_latest(self) -> None:
        from yarnflink.checkpoint.storage import validate_checkpoint

        assert self.storage is not None
        while True:
            checkpoint = self.coordinator.latest_completed()
            if checkpoint is None or checkpoint.checkpoint_id in self._validated:
                return
            try:
                await asyncio.get_running_loop().run_in_executor(
                    None, validate_checkpoint, checkpoint, self.storage.storage_options
                )
            except Exception as e:  # noqa: BLE001 - damaged or unreadable: fall back
                if self.coordinator.latest_completed() is checkpoint and len(self.coordinator.completed) > 1:
                    self.coordinator.completed.remove(checkpoint)
                    log.warning(
                        "job %s: checkpoint %d cannot be restored (%s); falling back to checkpoint %d",
                        self.jm.job_id,
                        checkpoint.checkpoint_id,
                        e,
                        self.coordinator.completed[-1].checkpoint_id,
                    )
                    self.restore_warnings.append(f"checkpoint {checkpoint.checkpoint_id} skipped: {e}")
                    continue
                log.warning(
                    "job %s: checkpoint %d may not be restorable: %s", self.jm.job_id, checkpoint.checkpoint_id, e
                )
            self._validated.add(checkpoint.checkpoint_id)
            return

    # ------------------------------------------------------------------ HA (a new leader resumes here)
    async def _load_from_ha(self) -> bool:
        """The latest completed checkpoint whose pointer is in ZooKeeper, if any: a job recovered
        by a new leader resumes from it (ahead of ``execution.savepoint.path``).

        The job owns the checkpoints it resumes from (unlike a savepoint or a checkpoint given
        with ``-s``): the coordinator takes over every retained one, as Flink's new leader
        recovers its CompletedCheckpointStore, so they are subsumed and discarded like the
        checkpoints it completes itself (``num-retained``, the retention policy at the end)."""
        loop = asyncio.get_running_loop()
        retained = await loop.run_in_executor(None, self.ha.retained)
        if not retained or self.storage is None:
            return False
        cid, pointer = retained[-1]
        older: list[CompletedCheckpoint] = []
        try:
            checkpoint = await loop.run_in_executor(None, self.storage.read_metadata, pointer)
            await loop.run_in_executor(None, self.storage.validate, checkpoint)
            older = await loop.run_in_executor(None, self._read_retained, retained[:-1])
        except CheckpointMetadataError as e:  # damaged: the newest valid one of the job's directory
            found = await loop.run_in_executor(None, self.storage.find_latest_valid)
            if found.checkpoint is None:
                raise
            self.restore_warnings += [str(e)] + [str(s) for s in found.skipped if s.path != e.path]
            log.warning(
                "job %s: checkpoint %d cannot be restored (%s); falling back to checkpoint %d",
                self.jm.job_id,
                cid,
                e,
                found.checkpoint.checkpoint_id,
            )
            checkpoint = found.checkpoint
            pointer = checkpoint.external_pointer or pointer
            cid = max(cid, checkpoint.checkpoint_id)  # ids after the damaged one stay unused
        self._restore = checkpoint
        self.coordinator.completed = older + [checkpoint]
        self.latest_restored = {
            "id": checkpoint.checkpoint_id,
            "external_path": pointer,
            "restore_timestamp": _now_ms(),
            "is_savepoint": checkpoint.is_savepoint,
            "skipped": list(self.restore_warnings),
        }
        self.counts["restored"] += 1
        self.coordinator.next_checkpoint_id = max(self.coordinator.next_checkpoint_id, cid + 1)
        log.info("job %s: resuming from checkpoint %d (%s)", self.jm.job_id, cid, pointer)
        return True

    def _read_retained(self, entries: list[tuple[int, str]]) -> list[CompletedCheckpoint]:
        """(Off the loop) the older retained checkpoints' metadata; one that cannot be read is
        logged and left where it is (neither restored nor deleted)."""
        assert self.storage is not None
        found = []
        for cid, pointer in entries:
            try:
                found.append(self.storage.read_metadata(pointer))
            except Exception as e:  # noqa: BLE001 - damaged or unreachable: only this one is left out
                log.warning("job %s: retained checkpoint %d is not taken over: %s", self.jm.job_id, cid, e)
        return found

    async def _reserve_id(self) -> bool:
        """The next checkpoint's id drawn from the job's shared counter in ZooKeeper (once per
        id used), so no leader reuses an id an earlier one may have started. False: not now."""
        wanted = self.coordinator.next_checkpoint_id
        if self._reserved_id == wanted:
            return True
        try:
            cid = await asyncio.get_running_loop().run_in_executor(None, self.ha.reserve_checkpoint_id, wanted)
        except Exception as e:  # noqa: BLE001 - ZooKeeper away or leadership lost: no checkpoint now
            log.warning("job %s: no checkpoint id from ZooKeeper: %s", self.jm.job_id, e)
            return False
        self.coordinator.next_checkpoint_id = max(cid, self.coordinator.next_checkpoint_id)
        self._reserved_id = cid if self.coordinator.next_checkpoint_id == cid else 0
        return self._reserved_id == cid

    async def _publish_pointer(self, cid: int, pointer: str) -> str | None:
        """A checkpoint completes once its ``_metadata`` URL is in ZooKeeper; the error otherwise."""
        from yarnflink.checkpoint.storage import METADATA_FILE_NAME

        metadata = pointer if pointer.endswith(METADATA_FILE_NAME) else f"{pointer.rstrip('/')}/{METADATA_FILE_NAME}"
        try:
            await asyncio.get_running_loop().run_in_executor(None, self.ha.add_pointer, cid, metadata)
        except Exception as e:  # noqa: BLE001
            return f"adding checkpoint {cid} to the HA store failed: {type(e).__name__}: {e}"
        return None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._tick_loop())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _tick_loop(self) -> None:
        while True:
            wake = self.coordinator.next_wakeup()
            delay = 0.1 if wake is None else min(0.1, max(0.005, (wake - _now_ms()) / 1000))
            await asyncio.sleep(delay)
            if self.jm.eg.status.globally_terminal:
                return
            if self.ha is not None and not await self._reserve_id():
                continue
            self._apply(self.coordinator.handle(cc.Tick(_now_ms())))

    # ------------------------------------------------------------------ events
    def task_state_changed(self, execution: Execution, state: ExecutionState) -> None:
        tid = task_id_of(execution.vertex)
        if tid not in self.coordinator.tasks:
            return  # a task of the graph before a rescale
        if state == ExecutionState.RUNNING:
            self._apply(self.coordinator.handle(cc.TaskRunning(tid, execution.attempt_number)))
        elif state == ExecutionState.FINISHED:
            self._apply(self.coordinator.handle(cc.TaskFinished(tid, _now_ms())))
        elif state in (ExecutionState.FAILED, ExecutionState.CANCELED):
            self._stop_task_ended(execution, state)
            self._apply(self.coordinator.handle(cc.TaskFailed(tid, _now_ms())))

    def _stop_task_ended(self, execution: Execution, state: ExecutionState) -> None:
        """A task ended otherwise than FINISHED after a stop's savepoint completed: the stop failed."""
        for trigger_id, stop in self._stops.items():
            if not stop.done and stop.savepoint_path is not None:
                stop.task_ended(execution.vertex.task_name_with_subtask, state.value)
                self.savepoints[trigger_id] = stop.operation()

    def stop_task_failed(self, task: str, cause: str) -> FailWithoutRestart | None:
        """A task failed (``cause``: its exception, one line), before the JobMaster decides on a
        failover: ``FailWithoutRestart`` if a stop's savepoint completed (the job then ends FAILED,
        see ``StopWithSavepointTerminationHandler.task_failed``), else None (fail over as usual)."""
        decision: FailWithoutRestart | None = None
        for trigger_id, stop in self._stops.items():
            verdict = stop.task_failed(task, cause)
            if verdict is not None:
                self.savepoints[trigger_id] = stop.operation()
                decision = decision or verdict
        if decision is not None:
            log.warning("job %s: %s", self.jm.job_id, decision.message)
        return decision

    def deploying(self, execution: Execution) -> None:
        """A (re)deployed attempt: pending checkpoints cannot complete."""
        self.follow_rescale()
        tid = task_id_of(execution.vertex)
        if self.coordinator.status.get(tid) != cc.CREATED or self.coordinator.pending:
            self._apply(self.coordinator.handle(cc.TaskFailed(tid, _now_ms())))

    def restore_state(self, execution: Execution) -> tuple[bytes, int]:
        """(JSON TaskStateSnapshot, checkpoint id) for the TaskDeploymentDescriptor: the latest
        completed checkpoint on a restart, the configured savepoint at the first start."""
        checkpoint = self.coordinator.latest_completed() or self._restore
        if checkpoint is None:
            return b"", 0
        if self._assigned_for != checkpoint.checkpoint_id:
            self._assigned = assign_state(
                checkpoint, self.vertices, bool(self.jm.config.get("execution.savepoint.ignore-unclaimed-state"))
            )
            self._assigned_for = checkpoint.checkpoint_id
        if execution.attempt_number > 0 and self._restored_at_restart != self.jm.eg.num_restarts:
            self._restored_at_restart = self.jm.eg.num_restarts  # one restore per restart
            self.counts["restored"] += 1
            self.latest_restored = {
                "id": checkpoint.checkpoint_id,
                "external_path": checkpoint.external_pointer or "",
                "restore_timestamp": _now_ms(),
                "is_savepoint": checkpoint.is_savepoint,
                "skipped": list(self.restore_warnings),
            }
        ev = execution.vertex
        snap = self._assigned.get((ev.job_vertex.job_vertex.id, ev.subtask_index))
        if snap is None:
            return b"", checkpoint.checkpoint_id
        return json.dumps(snap.to_json()).encode("utf-8"), checkpoint.checkpoint_id

    def acknowledged(self, execution: Execution, ack: AcknowledgeCheckpoint) -> None:
        self._record_subtask_stats(ack.checkpoint_id, execution, ack.metrics.to_json())
        event = cc.AcknowledgeCheckpoint(
            ack.checkpoint_id, task_id_of(execution.vertex), ack.subtask_state, ack.attempt_number, _now_ms()
        )
        self._apply(self.coordinator.handle(event))

    def declined(self, execution: Execution, decline: DeclineCheckpoint) -> None:
        event = cc.DeclineCheckpoint(
            decline.checkpoint_id, task_id_of(execution.vertex), decline.reason, decline.attempt_number, _now_ms()
        )
        self._apply(self.coordinator.handle(event))

    def _record_subtask_stats(self, cid: int, execution: Execution, metrics: Any) -> None:
        """Per-subtask statistics of an acknowledgement (``yarnflink.metrics.checkpoint_stats``),
        kept while the checkpoint is in the history."""
        from yarnflink.metrics.checkpoint_stats import subtask_record

        if not any(h["id"] == cid for h in self.history):
            return
        ev = execution.vertex
        rec = subtask_record(ev.subtask_index, metrics, _now_ms())
        self.subtask_stats.setdefault(cid, {}).setdefault(ev.job_vertex.job_vertex.id, {})[ev.subtask_index] = rec
        live = {h["id"] for h in self.history}
        for old in [c for c in self.subtask_stats if c not in live]:
            del self.subtask_stats[old]

    def job_terminated(self, status: str) -> None:
        self.stop()
        for trigger_id, stop in self._stops.items():
            if not stop.done:
                stop.job_terminated(status)
                self.savepoints[trigger_id] = stop.operation()
        self._apply(self.coordinator.handle(cc.JobTerminated(status)))

    # ------------------------------------------------------------------ actions
    def _execution(self, task_id: str) -> Execution | None:
        vid, sub = task_id.rsplit("#", 1)
        subtasks = self.jm.eg.vertex(vid).task_vertices
        if int(sub) >= len(subtasks):
            return None  # a task of the graph before a rescale
        ev = subtasks[int(sub)]
        return ev.current if ev.current.slot is not None else None

    def _apply(self, actions: list[Any]) -> None:
        for a in actions:
            if isinstance(a, cc.TriggerCheckpoint):
                self.counts["total"] += 1
                self.history.insert(
                    0,
                    {
                        "id": a.checkpoint_id,
                        "status": "IN_PROGRESS",
                        "is_savepoint": a.is_savepoint,
                        "trigger_timestamp": a.timestamp,
                        "latest_ack_timestamp": a.timestamp,
                        "end_to_end_duration": 0,
                        "state_size": 0,
                        "checkpointed_size": 0,
                        "num_subtasks": len(self.coordinator.tasks),
                        "num_acknowledged_subtasks": 0,
                        "external_path": "",
                    },
                )
                del self.history[HISTORY_SIZE:]
                for tid in a.tasks:
                    self._rpc_trigger(tid, a)
            elif isinstance(a, cc.WriteMetadata):
                self.jm._spawn(self._write_metadata(a))
            elif isinstance(a, cc.NotifyCheckpointComplete):
                if a.checkpoint_id in self._cancel_checkpoints:  # cancel-with-savepoint: notify, then cancel
                    self._cancel_checkpoints.discard(a.checkpoint_id)
                    self.jm._spawn(self._notify_then_cancel(a))
                    continue
                for tid in a.tasks:
                    self._rpc_notify(tid, a.checkpoint_id, True)
            elif isinstance(a, cc.NotifyCheckpointAborted):
                self._finish_history(a.checkpoint_id, "FAILED", failure=a.reason)
                if a.checkpoint_id in self._savepoint_of:
                    trigger_id = self._savepoint_of.pop(a.checkpoint_id)
                    if trigger_id in self._cancel_after:  # a failed cancel-with-savepoint leaves the job running
                        self._cancel_after.discard(trigger_id)
                        self.coordinator.periodic_suspended = bool(self._cancel_after)
                    self._savepoint_failed(trigger_id, a.reason)
                for tid in a.tasks:
                    self._rpc_notify(tid, a.checkpoint_id, False)
                if self.storage is not None and not self.coordinator.shutdown:
                    # its directory goes, with what a failing task left there (Flink:
                    # disposeOnFailure; a task still writing late may leave a file) -- but not
                    # when the job ends: a checkpoint being finalized then may already have its
                    # pointer in ZooKeeper, for the next leader to resume from
                    self.jm._spawn(self._off_loop(self.storage.discard_incomplete, a.checkpoint_id))
            elif isinstance(a, cc.DiscardState) and self.storage is not None:
                self.jm._spawn(self._off_loop(self.storage.discard_state, list(a.handles)))
            elif isinstance(a, cc.DiscardCheckpoint) and self.storage is not None:
                self.jm._spawn(self._off_loop(self.storage.discard_checkpoint, a.checkpoint))
            elif isinstance(a, cc.FailJob):
                from yarnflink.executiongraph.executiongraph import Failure, now_ms

                self.jm.fail_job(Failure("CheckpointException", a.reason, "", now_ms()))

    def _finish_history(self, cid: int, status: str, **extra: Any) -> None:
        for h in self.history:
            if h["id"] == cid and h["status"] == "IN_PROGRESS":
                h["status"] = status
                h["latest_ack_timestamp"] = _now_ms()
                h["end_to_end_duration"] = h["latest_ack_timestamp"] - h["trigger_timestamp"]
                h.update(extra)
                self.counts["completed" if status == "COMPLETED" else "failed"] += 1
                return

    def _rpc_trigger(self, tid: str, a: cc.TriggerCheckpoint) -> None:
        execution = self._execution(tid)
        if execution is None:
            return
        req = TriggerCheckpoint(
            jobmaster_id=self.jm.jobmaster_id,
            execution_id=execution.attempt_id,
            checkpoint_id=a.checkpoint_id,
            timestamp=a.timestamp,
            is_savepoint=a.is_savepoint,
            synchronous=a.synchronous,
            drain=a.drain,
        )
        self.jm._spawn(self._call(execution, "trigger_checkpoint", req))

    async def _notify_then_cancel(self, a: cc.NotifyCheckpointComplete) -> None:
        """The last step of cancel-with-savepoint: every task has the savepoint's completion
        notification (its sinks commit what the savepoint covers), then the job is cancelled."""
        calls = []
        for tid in a.tasks:
            execution = self._execution(tid)
            if execution is not None:
                calls.append(
                    self._call(
                        execution,
                        "notify_checkpoint_complete",
                        NotifyCheckpoint(self.jm.jobmaster_id, execution.attempt_id, a.checkpoint_id),
                    )
                )
        await asyncio.gather(*calls)
        log.info(
            "job %s: cancel-with-savepoint: savepoint %d completed, cancelling the job", self.jm.job_id, a.checkpoint_id
        )
        self.jm.cancel()

    def _rpc_notify(self, tid: str, cid: int, completed: bool) -> None:
        execution = self._execution(tid)
        if execution is None:
            return
        req = NotifyCheckpoint(self.jm.jobmaster_id, execution.attempt_id, cid)
        method = "notify_checkpoint_complete" if completed else "notify_checkpoint_aborted"
        self.jm._spawn(self._call(execution, method, req))

    async def _call(self, execution: Execution, method: str, req: TriggerCheckpoint | NotifyCheckpoint) -> None:
        slot = execution.slot
        assert slot is not None
        gateway = self.jm.gateways.task_executor(slot.rpc_address)
        try:
            if isinstance(req, TriggerCheckpoint):
                await gateway.trigger_checkpoint(req)
            elif method == "notify_checkpoint_complete":
                await gateway.notify_checkpoint_complete(req)
            else:
                await gateway.notify_checkpoint_aborted(req)
        except RpcException as e:  # the task is gone: the checkpoint times out or is aborted
            log.debug("%s to %s failed: %s", method, execution.attempt_id, e)

    async def _off_loop(self, fn: Any, *args: Any) -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(None, fn, *args)
        except Exception as e:  # noqa: BLE001
            log.info("checkpoint storage: %s", e)

    async def _write_metadata(self, a: cc.WriteMetadata) -> None:
        from yarnflink.checkpoint.storage import storage_options_from_config, write_savepoint

        cid = a.checkpoint.checkpoint_id
        loop = asyncio.get_running_loop()
        error: str | None = None
        pointer = ""
        try:
            if a.checkpoint.is_savepoint and a.target_directory:
                # self-contained: state files copied under the savepoint directory, relative paths
                options = storage_options_from_config(self.jm.config, a.target_directory)
                pointer, _ = await loop.run_in_executor(
                    None, write_savepoint, a.checkpoint, a.target_directory, options
                )
                if self.storage is not None:  # the staging copies the tasks wrote under chk-<n>
                    self.jm._spawn(self._off_loop(self.storage.discard_incomplete, cid))
            elif self.storage is not None:
                pointer = await loop.run_in_executor(None, self.storage.write_metadata, a.checkpoint, None)
            # else: no storage configured: checkpoints are kept in memory only
        except Exception as e:  # noqa: BLE001
            pointer, error = "", f"{type(e).__name__}: {e}"
        if error is None and self.ha is not None and pointer and not a.checkpoint.is_savepoint:
            error = await self._publish_pointer(cid, pointer)
        if error is not None:
            self._apply(self.coordinator.handle(cc.MetadataWriteFailed(cid, error, _now_ms())))
            return
        self._finish_history(
            cid,
            "COMPLETED",
            external_path=pointer,
            state_size=a.checkpoint.state_size,
            checkpointed_size=a.checkpoint.state_size,
            num_acknowledged_subtasks=len(self.coordinator.tasks),
        )
        if cid in self._savepoint_of and self._savepoint_of[cid] in self._cancel_after:
            self._cancel_checkpoints.add(cid)
        if cid in self._savepoint_of:  # before the notifications: the tasks finish on them
            trigger_id = self._savepoint_of.pop(cid)
            self._savepoint_completed(trigger_id, pointer)
            self._cancel_after.discard(trigger_id)  # (the job is cancelled by _notify_then_cancel)
        self._apply(self.coordinator.handle(cc.MetadataWritten(cid, pointer, _now_ms())))

    # ------------------------------------------------------------------ REST (Flink's shape)
    def stats(self) -> dict[str, Any]:
        in_progress = sum(1 for h in self.history if h["status"] == "IN_PROGRESS")
        counts = dict(self.counts, in_progress=in_progress)
        completed = next((h for h in self.history if h["status"] == "COMPLETED" and not h["is_savepoint"]), None)
        savepoint = next((h for h in self.history if h["status"] == "COMPLETED" and h["is_savepoint"]), None)
        failed = next((h for h in self.history if h["status"] == "FAILED"), None)
        done = [h for h in self.history if h["status"] == "COMPLETED"]

        def summary(key: str) -> dict[str, int]:
            vals = [int(h[key]) for h in done] or [0]
            return {"min": min(vals), "max": max(vals), "avg": sum(vals) // len(vals)}

        return {
            "counts": counts,
            "summary": {
                "state_size": summary("state_size"),
                "checkpointed_size": summary("checkpointed_size"),
                "end_to_end_duration": summary("end_to_end_duration"),
            },
            "latest": {
                "completed": completed,
                "savepoint": savepoint,
                "failed": failed,
                "restored": self.latest_restored,
            },
            "history": [dict(h) for h in self.history],
            # yarnflink: what GET /jobs/:id/checkpoints/details/:cid[/subtasks/:vid] shape (not in
            # /checkpoints itself); see yarnflink.metrics.checkpoint_stats
            "subtask_details": {
                str(cid): {vid: {str(i): dict(r) for i, r in subs.items()} for vid, subs in per_vertex.items()}
                for cid, per_vertex in self.subtask_stats.items()
            },
            "parallelism": {v.vertex_id: v.parallelism for v in self.vertices},
        }
