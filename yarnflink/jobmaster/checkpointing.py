"""The JobMaster's checkpoint driver: the I/O of the pure checkpoint cores, on the JobMaster's loop.

The decisions are the cores' (``yarnflink.checkpoint``): the ``CheckpointCoordinator`` (the
protocol, savepoints by trigger id with their ``SavepointTracker``, the restore fallback), the
``RestorePlanner`` (what a deployed task restores) and the ``CheckpointStatsTracker`` (REST). This
module feeds them events (ticks, task states, acknowledgements, what storage and ZooKeeper
answered) and carries out their actions: TriggerCheckpoint and NotifyCheckpoint RPCs to tasks,
``_metadata`` written last through ``FsCheckpointStorage`` off the loop, pointers published to
the HA store, ids reserved from it, files discarded, the job failed or cancelled.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import signal
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from yarnflink.checkpoint import cleanup as cu
from yarnflink.checkpoint import coordinator as cc
from yarnflink.checkpoint import restore as rp
from yarnflink.checkpoint.assignment import RestoreVertex
from yarnflink.checkpoint.config import CheckpointConfig
from yarnflink.checkpoint.options import CheckpointingOptions, S3Options, SavepointConfigOptions
from yarnflink.checkpoint.stats import CheckpointStatsTracker
from yarnflink.checkpoint.stop_with_savepoint import FailWithoutRestart
from yarnflink.checkpoint.storage import (
    METADATA_FILE_NAME,
    FsCheckpointStorage,
    storage_options_from_config,
    validate_checkpoint,
    write_savepoint,
)
from yarnflink.common.config import ConfigOption
from yarnflink.common.rpc_errors import RpcException
from yarnflink.executiongraph.executiongraph import Execution, ExecutionState, ExecutionVertex, Failure, now_ms
from yarnflink.highavailability.errors import HaStoreError, LeadershipLostError
from yarnflink.jobmaster.checkpoint_recovery import (
    orphaned_directories,
    orphaned_shared_files,
    read_initial_state,
    run_off_loop,
)
from yarnflink.jobmaster.gateway import AcknowledgeCheckpoint, DeclineCheckpoint
from yarnflink.metrics.checkpoint_stats import subtask_record
from yarnflink.operators.chain import operator_id_of
from yarnflink.state.handles import FileStateHandle
from yarnflink.taskexecutor.gateway import NotifyCheckpoint, TriggerCheckpoint

if TYPE_CHECKING:
    from yarnflink.highavailability.checkpoints import JobCheckpointRecovery
    from yarnflink.jobmaster.jobmaster import JobMaster

log = logging.getLogger(__name__)

#: options of checkpoint storage that tasks need (see ``storage_config``)
STORAGE_OPTIONS = (S3Options.ENDPOINT, S3Options.ACCESS_KEY, S3Options.SECRET_KEY, S3Options.PATH_STYLE_ACCESS)


def task_id_of(ev: ExecutionVertex) -> str:
    return f"{ev.job_vertex.job_vertex.id}#{ev.subtask_index}"


def _now_ms() -> int:
    return int(time.time() * 1000)


def checkpoint_tasks(jm: JobMaster) -> tuple[list[cc.CheckpointTask], list[RestoreVertex]]:
    """The checkpoint tasks and restore vertices of the ExecutionGraph as it is now."""
    jg, tasks, vertices = jm.job_graph, [], []
    for ejv in [jm.eg.vertex(v.id) for v in jg.vertices]:
        jv = ejv.job_vertex
        ops = tuple(operator_id_of(op.node_id, op.uid or "") for op in jv.operators)
        vertices.append(RestoreVertex(jv.id, jv.parallelism, jv.max_parallelism, ops))
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
    return tasks, vertices


class CheckpointDriver:
    def __init__(self, jm: JobMaster) -> None:
        self.jm = jm
        self.config = CheckpointConfig.from_configuration(jm.config)
        tasks, vertices = checkpoint_tasks(jm)
        self.coordinator = cc.CheckpointCoordinator(jm.job_id, tasks, self.config, start_time=_now_ms())
        allow_non_restored = bool(jm.config.get(SavepointConfigOptions.SAVEPOINT_IGNORE_UNCLAIMED_STATE))
        self.restore = rp.RestorePlanner(vertices, allow_non_restored)
        self.stats_tracker = CheckpointStatsTracker()
        directory = self.config.directory or ""
        options = storage_options_from_config(jm.config, directory) if directory else {}
        self.storage = (
            FsCheckpointStorage(
                directory, jm.job_id, storage_options=options, inline_threshold=self.config.inline_threshold
            )
            if directory
            else None
        )
        #: HA (yarnflink.highavailability.checkpoints): ids from the shared counter, pointers in ZooKeeper
        self.ha = jm.checkpoint_ha
        #: when files may be deleted: with HA, never while a pointer may name them (checkpoint/cleanup.py)
        self.cleanup = cu.CheckpointCleanup(ha=self.ha is not None)
        self._reserved_id = 0
        #: HA takeover (read before this leader draws an id): the newest checkpoint whose pointer
        #: is in the HA store and the counter's value (every id below it was an earlier leader's)
        self._published_id = 0
        self._handed_out_below = 1
        self._task: asyncio.Task[None] | None = None
        self._validating: asyncio.Future[None] | None = None

    @property
    def vertices(self) -> list[RestoreVertex]:
        return self.restore.vertices

    @property
    def history(self) -> list[dict[str, Any]]:
        return self.stats_tracker.history

    @property
    def savepoints(self) -> dict[str, dict[str, Any]]:
        """Savepoint results by trigger id (read-only: the coordinator's ``SavepointTracker`` keeps them)."""
        return self.coordinator.savepoints.results

    def storage_config(self) -> dict[str, str]:
        """The file system keys (``s3.*``) of the cluster's configuration that tasks need to read
        and write state where the job's checkpoints and savepoints are."""
        return {o.key: value for o in STORAGE_OPTIONS if (value := self.jm.config.get_string(o))}

    def stats(self) -> dict[str, Any]:
        return self.stats_tracker.to_json({v.vertex_id: v.parallelism for v in self.vertices})

    # ------------------------------------------------------------------ requests from the JobMaster
    def follow_rescale(self) -> bool:
        """The adaptive scheduler rebuilt the ExecutionGraph at another parallelism: the
        coordinator aborts what was pending and one for the new tasks continues it; the next
        deployments restore the latest completed checkpoint at the new parallelism. False: the
        parallelism did not change."""
        now = {ejv.id: ejv.job_vertex.parallelism for ejv in self.jm.eg.job_vertices}
        if now == {v.vertex_id: v.parallelism for v in self.vertices}:
            return False
        old = self.coordinator
        aborts = old.handle(cc.Rescaled(_now_ms(), f"the job was rescaled to {now}"))
        tasks, vertices = checkpoint_tasks(self.jm)
        self.coordinator = cc.CheckpointCoordinator.continuing(old, tasks, _now_ms())
        self.restore.handle(rp.GraphRescaled(tuple(vertices)))
        self._apply(aborts)
        log.info("job %s: checkpointing follows the rescale to %s", self.jm.job_id, now)
        return True

    def trigger_savepoint(
        self, target_directory: str | None, stop: bool = False, drain: bool = False, cancel_job: bool = False
    ) -> str:
        """``POST /jobs/:id/savepoints`` (``cancel_job``: cancel-with-savepoint) and ``POST
        /jobs/:id/stop`` (``stop``; ``drain``: MAX_WATERMARK first): the trigger id whose result
        ``savepoint_status`` tells (a refused one has a failed result naming why)."""
        trigger_id = uuid.uuid4().hex
        target = target_directory or self.jm.config.get_string(CheckpointingOptions.SAVEPOINT_DIRECTORY) or None
        actions = self.coordinator.handle(cc.RequestSavepoint(trigger_id, target, _now_ms(), stop, drain, cancel_job))
        log.info("job %s: savepoint trigger %s: %s", self.jm.job_id, trigger_id, self.savepoint_status(trigger_id))
        self._apply(actions)
        return trigger_id

    def savepoint_status(self, trigger_id: str) -> dict[str, Any] | None:
        return self.coordinator.savepoints.status(trigger_id)

    def task_state_changed(self, execution: Execution, state: ExecutionState) -> None:
        tid = task_id_of(execution.vertex)
        if tid not in self.coordinator.tasks:
            return  # a task of the graph before a rescale
        if state == ExecutionState.RUNNING:
            self._handle(cc.TaskRunning(tid, execution.attempt_number))
        elif state == ExecutionState.FINISHED:
            self._handle(cc.TaskFinished(tid, _now_ms()))
        elif state in (ExecutionState.FAILED, ExecutionState.CANCELED):
            self._handle(cc.StopTaskEnded(execution.vertex.task_name_with_subtask, state.value))
            self._handle(cc.TaskFailed(tid, _now_ms()))

    def stop_task_failed(self, task: str, cause: str) -> FailWithoutRestart | None:
        """A task failed, before the JobMaster decides on a failover: ``FailWithoutRestart`` if a
        stop's savepoint completed (the job then ends FAILED), else None (fail over as usual)."""
        actions = self.coordinator.handle(cc.StopTaskFailed(task, cause))
        decision = next((a for a in actions if isinstance(a, FailWithoutRestart)), None)
        if decision is not None:
            log.warning("job %s: %s", self.jm.job_id, decision.message)
        return decision

    def deploying(self, execution: Execution) -> None:
        """A (re)deployed attempt: pending checkpoints cannot complete."""
        self.follow_rescale()
        self._handle(cc.TaskDeployed(task_id_of(execution.vertex), _now_ms()))

    def restore_state(self, execution: Execution) -> tuple[bytes, int]:
        """(JSON TaskStateSnapshot, checkpoint id) for the TaskDeploymentDescriptor."""
        ev = execution.vertex
        actions = self.restore.handle(
            rp.TaskDeploying(
                ev.job_vertex.job_vertex.id,
                ev.subtask_index,
                execution.attempt_number,
                self.jm.eg.num_restarts,
                self.coordinator.latest_completed(),
                _now_ms(),
            )
        )
        self._apply(actions)
        restore = next(a for a in actions if isinstance(a, rp.RestoreState))
        state = json.dumps(restore.state.to_json()).encode("utf-8") if restore.state is not None else b""
        return state, restore.checkpoint_id

    def acknowledged(self, execution: Execution, ack: AcknowledgeCheckpoint) -> None:
        ev = execution.vertex
        record = subtask_record(ev.subtask_index, ack.metrics.to_json(), _now_ms())
        self.stats_tracker.subtask_acknowledged(ack.checkpoint_id, ev.job_vertex.job_vertex.id, record)
        self._handle(
            cc.AcknowledgeCheckpoint(
                ack.checkpoint_id, task_id_of(ev), ack.subtask_state, ack.attempt_number, _now_ms()
            )
        )

    def declined(self, execution: Execution, decline: DeclineCheckpoint) -> None:
        tid = task_id_of(execution.vertex)
        self._handle(
            cc.DeclineCheckpoint(decline.checkpoint_id, tid, decline.reason, decline.attempt_number, _now_ms())
        )

    def job_terminated(self, status: str) -> None:
        self.stop()
        # with HA the completed checkpoints go with the job's HA data, after its result is recorded
        # (dispatcher/leadership.py); SUSPENDED: the next leader owns them
        self._clean(cu.JobEnded(status))
        self._handle(cc.JobTerminated(status))
        if status in ("FINISHED", "CANCELED", "FAILED") and self.storage is not None:
            self.jm._spawn(self._delete_unreferenced_shared(self.storage, self.coordinator.next_checkpoint_id))

    async def _delete_unreferenced_shared(self, storage: FsCheckpointStorage, written_below: int) -> None:
        """The job ended for good: shared state files no retained checkpoint refers to go (after a
        fenced check with HA), e.g. one a TaskExecutor wrote and was killed before acknowledging,
        which no checkpoint ever registered. Every checkpoint it started is decided by now."""
        referenced = set(self.coordinator.shared.referenced())
        try:
            files = await run_off_loop(storage.shared_files)
        except Exception as e:  # noqa: BLE001 - a leak at worst
            log.warning("job %s: shared state files not looked over at the job's end: %s", self.jm.job_id, e)
            return
        orphans = cu.unreferenced_shared(files, referenced, written_below)
        if orphans:
            log.info("job %s: deleting %d shared state files no checkpoint refers to", self.jm.job_id, len(orphans))
            self._clean(cu.DiscardFiles(0, tuple(FileStateHandle(url, 0) for url in orphans)))

    def suspended(self, cause: str) -> None:
        """Leadership lost (the JobMaster is suspended): no checkpoint file is deleted any more."""
        self.stop()
        self._clean(cu.LeadershipLost(cause))

    # ------------------------------------------------------------------ restore (storage and HA reads)
    async def load_initial(self, tasks_adopted: bool = False) -> None:
        """What the job starts from (``checkpoint_recovery``): with HA the latest checkpoint in
        ZooKeeper, else ``execution.savepoint.path``. Raises, naming the path and the problem, if
        that state cannot be read or does not fit the job; the job then fails.

        ``tasks_adopted`` (HA takeover, issue 18): a new leader adopts the job's running tasks:
        they keep their state, so nothing is restored or counted now (the retained checkpoints
        are owned for later restarts: a region failover restores the latest); call
        ``on_tasks_adopted`` once the JobMaster knows which executions it adopted."""
        if self.ha is not None:
            self._handed_out_below = int(await run_off_loop(self.ha.next_id))
            if self._handed_out_below > 1:  # an earlier leader ran this job: its triggers are lost
                self.coordinator.savepoints.taken_over(self._handed_out_below)
        started = await read_initial_state(self.jm.config, self.storage, self.ha, self.jm.job_id)
        if started is not None:
            if tasks_adopted:
                started = dataclasses.replace(started, adopted=True)
            if isinstance(started, rp.ResumedFromHa):
                self._published_id = started.published_id
            for skipped in started.skipped:
                self._note_skipped(skipped)
            self._apply(self.restore.handle(started))  # adopted: nothing restored (restore.py)
        if self.ha is not None and self.storage is not None:
            await self._delete_orphans(self.ha, self.storage)
            if started is None or not started.skipped:  # (a retained one unread: its files unknown)
                await self._delete_orphaned_shared(self.ha, self.storage)

    async def _delete_orphans(self, ha: JobCheckpointRecovery, storage: FsCheckpointStorage) -> None:
        """What earlier leaders of this job kept and no pointer can name goes (after a fenced check)."""
        try:
            orphans = await orphaned_directories(storage, ha)
        except Exception as e:  # noqa: BLE001 - a leak at worst
            log.warning("job %s: checkpoints left by earlier leaders not looked for: %s", self.jm.job_id, e)
            return
        for cid in orphans:
            log.info("job %s: deleting chk-%d, left by an earlier leader (no pointer names it)", self.jm.job_id, cid)
            self._clean(cu.DiscardDirectory(cid))

    def on_tasks_adopted(self, running: Sequence[Execution], finished: Sequence[Execution] = ()) -> None:
        """The JobMaster adopted these executions of an earlier leader (issue 18) instead of
        deploying them: the coordinator notifies the latest completed checkpoint (its notice may
        not have reached the tasks: the FileSink commits it exactly once), aborts what was in flight
        at the crash (files discarded through ``checkpoint/cleanup.py``) and continues the ids
        (``checkpoint/takeover.py``). Call after ``load_initial(tasks_adopted=True)``, on the loop."""
        known = self.coordinator.tasks
        adopted = tuple((tid, e.attempt_number) for e in running if (tid := task_id_of(e.vertex)) in known)
        done = tuple(tid for e in finished if (tid := task_id_of(e.vertex)) in known)
        log.info(
            "job %s: checkpointing continues on %d adopted task(s): checkpoint %d notified, ids from %d",
            self.jm.job_id,
            len(adopted),
            self._published_id,
            max(self._handed_out_below, self._published_id + 1),
        )
        self._handle(cc.TasksAdopted(adopted, done, self._published_id, self._handed_out_below, _now_ms()))

    async def _delete_orphaned_shared(self, ha: JobCheckpointRecovery, storage: FsCheckpointStorage) -> None:
        """Shared state files earlier leaders left that no retained checkpoint refers to go
        (after a fenced check): e.g. those a deposed leader freed but could no longer delete."""
        referenced = set(self.coordinator.shared.referenced())
        try:
            orphans = await orphaned_shared_files(storage, ha, referenced)
        except Exception as e:  # noqa: BLE001 - a leak at worst
            log.warning("job %s: shared state left by earlier leaders not looked for: %s", self.jm.job_id, e)
            return
        if orphans:
            log.info(
                "job %s: deleting %d shared state files no retained checkpoint refers to", self.jm.job_id, len(orphans)
            )
            self._clean(cu.DiscardFiles(0, tuple(FileStateHandle(url, 0) for url in orphans)))

    def _note_skipped(self, message: str) -> None:
        """A checkpoint not restored, and why, goes to the job's exception history (REST
        ``/jobs/:id/exceptions``) besides ``latest.restored.skipped`` of its checkpoint statistics."""
        self.jm.eg.failures.append(Failure("CheckpointException", message, "", now_ms()))

    async def prepare_restore(self, execution: Execution) -> None:
        """Before a restarted task is deployed: the files of the checkpoint it would restore are
        checked (once per checkpoint, one check shared by the tasks being deployed)."""
        if execution.attempt_number == 0 or self.storage is None:
            return
        if self._validating is None or self._validating.done():
            latest = self.coordinator.latest_completed()
            if latest is None or not self.restore.needs_validation(latest.checkpoint_id):
                return
            self._validating = asyncio.ensure_future(self._validate_latest())
        await asyncio.shield(self._validating)

    async def _validate_latest(self) -> None:
        assert self.storage is not None
        while (checkpoint := self.coordinator.latest_completed()) is not None:
            if not self.restore.needs_validation(checkpoint.checkpoint_id):
                return
            try:
                await run_off_loop(validate_checkpoint, checkpoint, self.storage.storage_options)
            except Exception as e:  # noqa: BLE001 - damaged or unreadable: the coordinator may fall back
                fallback = self.coordinator.handle(cc.CheckpointUnrestorable(checkpoint.checkpoint_id, str(e)))
                self._apply(fallback)
                if fallback:
                    continue
                log.warning(
                    "job %s: checkpoint %d may not be restorable: %s", self.jm.job_id, checkpoint.checkpoint_id, e
                )
            self.restore.handle(rp.CheckpointValidated(checkpoint.checkpoint_id))
            return

    # ------------------------------------------------------------------ the tick loop and HA ids
    def start(self) -> None:
        self._task = asyncio.ensure_future(self._tick_loop())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _tick_loop(self) -> None:
        while True:
            wake = self.coordinator.next_wakeup()
            await asyncio.sleep(0.1 if wake is None else min(0.1, max(0.005, (wake - _now_ms()) / 1000)))
            if self.jm.eg.status.globally_terminal:
                return
            if self.ha is not None and not await self._reserve_id(self.ha):
                continue
            self._handle(cc.Tick(_now_ms()))

    async def _reserve_id(self, ha: JobCheckpointRecovery) -> bool:
        """The next checkpoint's id drawn from the job's shared counter in ZooKeeper (once per id
        used), so no leader reuses an id an earlier one may have started. False: not now."""
        wanted = self.coordinator.next_checkpoint_id
        if self._reserved_id == wanted:
            return True
        try:
            cid = await run_off_loop(ha.reserve_checkpoint_id, wanted)
        except Exception as e:  # noqa: BLE001 - ZooKeeper away or leadership lost: no checkpoint now
            log.warning("job %s: no checkpoint id from ZooKeeper: %s", self.jm.job_id, e)
            if isinstance(e, LeadershipLostError):
                self._clean(cu.LeadershipLost(f"drawing a checkpoint id was refused: {e}"))
            return False
        self._handle(cc.CheckpointIdReserved(cid))
        self._reserved_id = cid if self.coordinator.next_checkpoint_id == cid else 0
        return self._reserved_id == cid

    # ------------------------------------------------------------------ actions
    def _handle(self, event: cc.Event) -> None:
        self._apply(self.coordinator.handle(event))

    def _apply(self, actions: Sequence[cc.Action | rp.Action]) -> None:
        self.stats_tracker.observe(actions, _now_ms(), len(self.coordinator.tasks))
        for a in actions:
            if isinstance(a, cc.TriggerCheckpoint):
                for tid in a.tasks:
                    self._rpc_trigger(tid, a)
            elif isinstance(a, cc.WriteMetadata):
                self.jm._spawn(self._write_metadata(a))
            elif isinstance(a, cc.NotifyCheckpointComplete):
                if a.cancel_job:  # cancel-with-savepoint: notify, then cancel
                    self.jm._spawn(self._notify_then_cancel(a))
                else:
                    for tid in a.tasks:
                        self._rpc_notify(tid, a.checkpoint_id, True)
            elif isinstance(a, cc.NotifyCheckpointAborted):
                for tid in a.tasks:
                    self._rpc_notify(tid, a.checkpoint_id, False)
            elif isinstance(a, cc.DiscardIncomplete):
                self._clean(cu.DiscardDirectory(a.checkpoint_id))
            elif isinstance(a, cc.DiscardState):
                self._clean(cu.DiscardFiles(a.checkpoint_id, a.handles))
            elif isinstance(a, cc.DiscardCheckpoint):
                self._clean(cu.DiscardCompleted(a.checkpoint, a.shared))
            elif isinstance(a, cc.FailGlobal):  # the restart strategy decides: a failover, or the end
                self.jm.fail_global(Failure("CheckpointException", a.reason, "", now_ms()))
            elif isinstance(a, cc.RestoreFallback):
                log.warning(
                    "job %s: restoring checkpoint %d instead of %d", self.jm.job_id, a.fallback_id, a.checkpoint_id
                )
                skipped = (
                    f"checkpoint {a.checkpoint_id} skipped: {a.reason}; checkpoint {a.fallback_id} restored instead"
                )
                self.restore.handle(rp.CheckpointSkipped(skipped))
                self._note_skipped(skipped)
            elif isinstance(a, cc.CheckpointsRecovered):
                self._handle(a)
            elif isinstance(a, rp.RestoreCounted):
                self.stats_tracker.restored(a.checkpoint, a.external_path, a.skipped, a.now)

    async def _write_metadata(self, a: cc.WriteMetadata) -> None:
        """``_metadata`` last (a savepoint: self-contained under its directory, the staging
        copies under chk-<n> discarded); with HA, a checkpoint completes once its pointer is in
        ZooKeeper. Without storage, checkpoints are kept in memory only."""
        cid, error, pointer = a.checkpoint.checkpoint_id, None, ""
        try:
            if a.checkpoint.is_savepoint and a.target_directory:
                options = storage_options_from_config(self.jm.config, a.target_directory)
                pointer, _ = await run_off_loop(write_savepoint, a.checkpoint, a.target_directory, options)
                self._clean(cu.DiscardDirectory(cid))  # the staging copies under chk-<n>
            elif self.storage is not None:
                pointer = await run_off_loop(self.storage.write_metadata, a.checkpoint, None)
        except Exception as e:  # noqa: BLE001
            pointer, error = "", f"{type(e).__name__}: {e}"
        if error is None and pointer and not a.checkpoint.is_savepoint:
            self._testing_kill(CheckpointingOptions.TESTING_KILL_MASTER_AFTER_METADATA, cid)
        if error is None and self.ha is not None and pointer and not a.checkpoint.is_savepoint:
            error = await self._publish_pointer(self.ha, cid, pointer)
            if error is None:
                self._testing_kill(CheckpointingOptions.TESTING_KILL_MASTER_AFTER_POINTER, cid)
        self._handle(
            cc.MetadataWritten(cid, pointer, _now_ms())
            if error is None
            else cc.MetadataWriteFailed(cid, error, _now_ms())
        )

    def _testing_kill(self, option: ConfigOption, checkpoint_id: int) -> None:
        """The HA drills' fault hook (test only): SIGKILL of this master in the middle of finalizing
        a checkpoint, armed by the file the option names (deleted first: the next leader, which
        has the same configuration, goes on)."""
        trigger = self.jm.config.get_string(option)
        if not trigger or not os.path.exists(trigger):
            return
        os.remove(trigger)
        with open(f"{trigger}.fired", "w") as f:
            f.write(str(checkpoint_id))
        log.warning("job %s: %s: SIGKILL of this master at checkpoint %d", self.jm.job_id, option.key, checkpoint_id)
        for handler in logging.getLogger().handlers:
            handler.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    async def _publish_pointer(self, ha: JobCheckpointRecovery, cid: int, pointer: str) -> str | None:
        """A checkpoint's ``_metadata`` URL added to ZooKeeper; the error otherwise."""
        metadata = pointer if pointer.endswith(METADATA_FILE_NAME) else f"{pointer.rstrip('/')}/{METADATA_FILE_NAME}"
        try:
            await run_off_loop(ha.add_pointer, cid, metadata)
        except Exception as e:  # noqa: BLE001
            error = f"{type(e).__name__}: {e}"
            refused = isinstance(e, HaStoreError)  # the store wrote nothing (e.g. the job's HA data is gone)
            self._clean(cu.PublishFailed(cid, error, isinstance(e, LeadershipLostError), refused))
            if refused and self.coordinator.shutdown:  # the job ended meanwhile: nobody else deletes it
                self._clean(cu.DiscardDirectory(cid))
            return f"adding checkpoint {cid} to the HA store failed: {error}"
        return None

    # ------------------------------------------------------------------ deleting files (checkpoint/cleanup.py decides)
    def _clean(self, event: cu.Event) -> None:
        if self.storage is None:
            return  # checkpoints in memory only: no files
        if self.ha is not None and not self.jm.jobmaster_id and self.cleanup.deposed is None:
            self.cleanup.handle(cu.LeadershipLost("its JobMaster was fenced: leadership lost"))
        storage = self.storage
        for a in self.cleanup.handle(event):
            if isinstance(a, cu.RemovePointer) and self.ha is not None:
                self.jm._spawn(self._ask_ha(a.ticket, self.ha.remove_pointer, a.checkpoint_id))
            elif isinstance(a, cu.CheckLeadership) and self.ha is not None:
                self.jm._spawn(self._ask_ha(a.ticket, self.ha.check_leadership))
            elif isinstance(a, cu.DeleteCheckpoint):
                self._discard(storage.discard_checkpoint, a.checkpoint, list(a.shared))
            elif isinstance(a, cu.DeleteState):
                self._discard(storage.discard_state, list(a.handles))
            elif isinstance(a, cu.DeleteDirectory):
                self._discard(storage.discard_incomplete, a.checkpoint_id)
            elif isinstance(a, cu.Kept):
                level = logging.INFO if a.expected else logging.WARNING
                log.log(level, "job %s: files of checkpoint %d kept: %s", self.jm.job_id, a.checkpoint_id, a.reason)

    async def _ask_ha(self, ticket: int, fn: Callable[..., Any], *args: Any) -> None:
        try:
            await run_off_loop(fn, *args)
        except Exception as e:  # noqa: BLE001 - the files stay
            answer = cu.HaAnswered(ticket, f"{type(e).__name__}: {e}", isinstance(e, LeadershipLostError))
        else:
            answer = cu.HaAnswered(ticket)
        self._clean(answer)

    def _discard(self, fn: Callable[..., Any], *args: Any) -> None:
        async def discard() -> None:
            try:
                await run_off_loop(fn, *args)
            except Exception as e:  # noqa: BLE001
                log.info("checkpoint storage: %s", e)

        self.jm._spawn(discard())

    # ------------------------------------------------------------------ RPCs to tasks
    def _execution(self, task_id: str) -> Execution | None:
        vid, sub = task_id.rsplit("#", 1)
        subtasks = self.jm.eg.vertex(vid).task_vertices
        if int(sub) >= len(subtasks):
            return None  # a task of the graph before a rescale
        ev = subtasks[int(sub)]
        return ev.current if ev.current.slot is not None else None

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

    def _rpc_notify(self, tid: str, cid: int, completed: bool) -> None:
        execution = self._execution(tid)
        if execution is None:
            return
        req = NotifyCheckpoint(self.jm.jobmaster_id, execution.attempt_id, cid)
        method = "notify_checkpoint_complete" if completed else "notify_checkpoint_aborted"
        self.jm._spawn(self._call(execution, method, req))

    async def _notify_then_cancel(self, a: cc.NotifyCheckpointComplete) -> None:
        """Cancel-with-savepoint's last step: every task has the savepoint's completion
        notification (its sinks commit what the savepoint covers), then the job is cancelled."""
        calls = [
            self._call(
                execution,
                "notify_checkpoint_complete",
                NotifyCheckpoint(self.jm.jobmaster_id, execution.attempt_id, a.checkpoint_id),
            )
            for execution in map(self._execution, a.tasks)
            if execution is not None
        ]
        await asyncio.gather(*calls)
        log.info("job %s: cancel-with-savepoint: savepoint %d completed, cancelling", self.jm.job_id, a.checkpoint_id)
        self.jm.cancel()

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
