"""The JobMaster's side of checkpoints: drives the pure ``CheckpointCoordinator`` on the JobMaster's
loop (ticks, task states, acknowledgements) and carries out its actions (TriggerCheckpoint and
NotifyCheckpoint RPCs to tasks, ``_metadata`` written last through ``FsCheckpointStorage`` off the
loop, discards), and hands restarted tasks the state of the latest completed checkpoint
(``assign_state``) in their TaskDeploymentDescriptor.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING, Any, Optional

import grpc

from yarnflink.checkpoint import coordinator as cc
from yarnflink.checkpoint.assignment import RestoreVertex, assign_state
from yarnflink.checkpoint.config import CheckpointConfig
from yarnflink.checkpoint.metadata import CompletedCheckpoint
from yarnflink.executiongraph.executiongraph import Execution, ExecutionState, ExecutionVertex
from yarnflink.operators.chain import operator_id_of
from yarnflink.rpc.gateways import RPC_TIMEOUT_S
from yarnflink.rpc.pb import taskexecutor_pb2
from yarnflink.state.handles import TaskStateSnapshot

if TYPE_CHECKING:
    from yarnflink.jobmaster.jobmaster import JobMaster

log = logging.getLogger(__name__)

#: checkpoint history kept for the REST API (Flink's web.checkpoints.history default)
HISTORY_SIZE = 10


def _failed(reason: str) -> dict[str, Any]:
    return {"status": {"id": "COMPLETED"},
            "operation": {"failure-cause": {"class": "CheckpointException", "stack-trace": reason}}}


def task_id_of(ev: ExecutionVertex) -> str:
    return f"{ev.job_vertex.job_vertex.id}#{ev.subtask_index}"


def _now_ms() -> int:
    return int(time.time() * 1000)


class CheckpointDriver:
    def __init__(self, jm: "JobMaster") -> None:
        from yarnflink.checkpoint.storage import FsCheckpointStorage, storage_options_from_config

        self.jm = jm
        conf = jm.config
        self.config = CheckpointConfig.from_configuration(conf)
        jg = jm.job_graph
        tasks = []
        self.vertices: list[RestoreVertex] = []
        for ejv in [jm.eg.vertex(v.id) for v in jg.vertices]:
            jv = ejv.job_vertex
            ops = tuple(operator_id_of(op.node_id, op.uid or "") for op in jv.operators)
            self.vertices.append(RestoreVertex(jv.id, jv.parallelism, jv.max_parallelism, ops))
            upstream = tuple(task_id_of(u) for e in jg.inputs_of(jv.id)
                             for u in jm.eg.vertex(jg.dataset(e.source).producer).task_vertices)
            for ev in ejv.task_vertices:
                tasks.append(cc.CheckpointTask(task_id_of(ev), jv.id, ev.subtask_index, jv.parallelism,
                                               jv.max_parallelism, ops, upstream))
        self.coordinator = cc.CheckpointCoordinator(jm.job_id, tasks, self.config, start_time=_now_ms())
        directory = self.config.directory or ""
        self.storage = (FsCheckpointStorage(directory, jm.job_id,
                                            storage_options=storage_options_from_config(conf, directory),
                                            inline_threshold=self.config.inline_threshold)
                        if directory else None)
        #: what tasks restore: the checkpoint and its assignment (computed once per checkpoint)
        self._restore: Optional[CompletedCheckpoint] = None
        self._assigned: dict[tuple[str, int], TaskStateSnapshot] = {}
        self._assigned_for = -1
        self._restored_at_restart = 0
        # statistics for GET /jobs/:id/checkpoints
        self.counts = {"restored": 0, "total": 0, "in_progress": 0, "completed": 0, "failed": 0}
        self.history: list[dict[str, Any]] = []
        self.latest_restored: Optional[dict[str, Any]] = None
        self._task: Optional[asyncio.Task[None]] = None
        #: savepoints: trigger id -> Flink's asynchronous operation result; checkpoint id -> trigger id
        self.savepoints: dict[str, dict[str, Any]] = {}
        self._savepoint_of: dict[int, str] = {}

    def trigger_savepoint(self, target_directory: Optional[str]) -> str:
        """``POST /jobs/:id/savepoints``: the trigger id whose result ``savepoint_status`` tells."""
        import uuid

        trigger_id = uuid.uuid4().hex
        target = target_directory or self.jm.config.get_string("execution.checkpointing.savepoint-dir")
        if not target:
            self.savepoints[trigger_id] = _failed("no target directory: pass target-directory or set "
                                                  "execution.checkpointing.savepoint-dir")
            return trigger_id
        target = f"{target.rstrip('/')}/savepoint-{self.jm.job_id[:6]}-{trigger_id[:12]}"
        actions = self.coordinator.handle(cc.TriggerSavepoint(_now_ms(), target))
        trigger = next((a for a in actions if isinstance(a, cc.TriggerCheckpoint)), None)
        if trigger is None:
            self.savepoints[trigger_id] = _failed("not all tasks are running")
            return trigger_id
        self.savepoints[trigger_id] = {"status": {"id": "IN_PROGRESS"}}
        self._savepoint_of[trigger.checkpoint_id] = trigger_id
        self._apply(actions)
        return trigger_id

    def savepoint_status(self, trigger_id: str) -> Optional[dict[str, Any]]:
        return self.savepoints.get(trigger_id)

    # ------------------------------------------------------------------ lifecycle
    async def load_initial(self) -> None:
        """``execution.savepoint.path``: the job starts from that checkpoint/savepoint."""
        path = self.jm.config.get_string("execution.savepoint.path")
        if path and self.storage is not None:
            loop = asyncio.get_running_loop()
            self._restore = await loop.run_in_executor(None, self.storage.read_metadata, path)
            self.latest_restored = {"id": self._restore.checkpoint_id, "external_path": path,
                                    "restore_timestamp": _now_ms(), "is_savepoint": self._restore.is_savepoint}
            self.counts["restored"] += 1

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
            self._apply(self.coordinator.handle(cc.Tick(_now_ms())))

    # ------------------------------------------------------------------ events
    def task_state_changed(self, execution: Execution, state: ExecutionState) -> None:
        tid = task_id_of(execution.vertex)
        if state == ExecutionState.RUNNING:
            self._apply(self.coordinator.handle(cc.TaskRunning(tid, execution.attempt_number)))
        elif state == ExecutionState.FINISHED:
            self._apply(self.coordinator.handle(cc.TaskFinished(tid, _now_ms())))
        elif state in (ExecutionState.FAILED, ExecutionState.CANCELED):
            self._apply(self.coordinator.handle(cc.TaskFailed(tid, _now_ms())))

    def deploying(self, execution: Execution) -> None:
        """A (re)deployed attempt: pending checkpoints cannot complete."""
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
            self._assigned = assign_state(checkpoint, self.vertices, bool(
                self.jm.config.get("execution.savepoint.ignore-unclaimed-state")))
            self._assigned_for = checkpoint.checkpoint_id
        if execution.attempt_number > 0 and self._restored_at_restart != self.jm.eg.num_restarts:
            self._restored_at_restart = self.jm.eg.num_restarts  # one restore per restart
            self.counts["restored"] += 1
            self.latest_restored = {"id": checkpoint.checkpoint_id,
                                    "external_path": checkpoint.external_pointer or "",
                                    "restore_timestamp": _now_ms(), "is_savepoint": checkpoint.is_savepoint}
        ev = execution.vertex
        snap = self._assigned.get((ev.job_vertex.job_vertex.id, ev.subtask_index))
        if snap is None:
            return b"", checkpoint.checkpoint_id
        return json.dumps(snap.to_json()).encode("utf-8"), checkpoint.checkpoint_id

    def acknowledged(self, execution: Execution, payload: bytes, declined: bool) -> None:
        d = json.loads(payload.decode("utf-8"))
        tid = task_id_of(execution.vertex)
        if declined:
            event: Any = cc.DeclineCheckpoint(int(d["checkpoint_id"]), tid, str(d.get("reason", "")),
                                              int(d.get("attempt", 0)), _now_ms())
        else:
            event = cc.AcknowledgeCheckpoint(int(d["checkpoint_id"]), tid,
                                             TaskStateSnapshot.from_json(d.get("state") or {}),
                                             int(d.get("attempt", 0)), _now_ms())
        self._apply(self.coordinator.handle(event))

    def job_terminated(self, status: str) -> None:
        self.stop()
        self._apply(self.coordinator.handle(cc.JobTerminated(status)))

    # ------------------------------------------------------------------ actions
    def _execution(self, task_id: str) -> Optional[Execution]:
        vid, sub = task_id.rsplit("#", 1)
        ev = self.jm.eg.vertex(vid).task_vertices[int(sub)]
        return ev.current if ev.current.slot is not None else None

    def _apply(self, actions: list[Any]) -> None:
        for a in actions:
            if isinstance(a, cc.TriggerCheckpoint):
                self.counts["total"] += 1
                self.history.insert(0, {"id": a.checkpoint_id, "status": "IN_PROGRESS", "is_savepoint": a.is_savepoint,
                                        "trigger_timestamp": a.timestamp, "latest_ack_timestamp": a.timestamp,
                                        "end_to_end_duration": 0, "state_size": 0, "checkpointed_size": 0,
                                        "num_subtasks": len(self.coordinator.tasks),
                                        "num_acknowledged_subtasks": 0, "external_path": ""})
                del self.history[HISTORY_SIZE:]
                for tid in a.tasks:
                    self._rpc_trigger(tid, a)
            elif isinstance(a, cc.WriteMetadata):
                self.jm._spawn(self._write_metadata(a))
            elif isinstance(a, cc.NotifyCheckpointComplete):
                for tid in a.tasks:
                    self._rpc_notify(tid, a.checkpoint_id, True)
            elif isinstance(a, cc.NotifyCheckpointAborted):
                self._finish_history(a.checkpoint_id, "FAILED", failure=a.reason)
                if a.checkpoint_id in self._savepoint_of:
                    self.savepoints[self._savepoint_of.pop(a.checkpoint_id)] = _failed(a.reason)
                for tid in a.tasks:
                    self._rpc_notify(tid, a.checkpoint_id, False)
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
        req = taskexecutor_pb2.CheckpointRequest(jobmaster_id=self.jm.jobmaster_id, execution_id=execution.attempt_id,
                                                 checkpoint_id=a.checkpoint_id, timestamp=a.timestamp,
                                                 is_savepoint=a.is_savepoint)
        self.jm._spawn(self._call(execution, "TriggerCheckpoint", req))

    def _rpc_notify(self, tid: str, cid: int, completed: bool) -> None:
        execution = self._execution(tid)
        if execution is None:
            return
        req = taskexecutor_pb2.CheckpointNotification(jobmaster_id=self.jm.jobmaster_id,
                                                      execution_id=execution.attempt_id,
                                                      checkpoint_id=cid, completed=completed)
        self.jm._spawn(self._call(execution, "NotifyCheckpoint", req))

    async def _call(self, execution: Execution, method: str, req: Any) -> None:
        slot = execution.slot
        assert slot is not None
        try:
            await getattr(self.jm.gateways.task_executor(slot.rpc_address), method)(req, timeout=RPC_TIMEOUT_S)
        except grpc.aio.AioRpcError as e:  # the task is gone: the checkpoint times out or is aborted
            log.debug("%s to %s failed: %s", method, execution.attempt_id, e.details())

    async def _off_loop(self, fn: Any, *args: Any) -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(None, fn, *args)
        except Exception as e:  # noqa: BLE001
            log.info("checkpoint storage: %s", e)

    async def _write_metadata(self, a: cc.WriteMetadata) -> None:
        cid = a.checkpoint.checkpoint_id
        if self.storage is None:
            pointer, error = "", None  # no storage configured: checkpoints are kept in memory only
        else:
            try:
                pointer = await asyncio.get_running_loop().run_in_executor(
                    None, self.storage.write_metadata, a.checkpoint, a.target_directory)
                error = None
            except Exception as e:  # noqa: BLE001
                pointer, error = "", f"{type(e).__name__}: {e}"
        if error is not None:
            self._apply(self.coordinator.handle(cc.MetadataWriteFailed(cid, error, _now_ms())))
            return
        self._finish_history(cid, "COMPLETED", external_path=pointer, state_size=a.checkpoint.state_size,
                             checkpointed_size=a.checkpoint.state_size,
                             num_acknowledged_subtasks=len(self.coordinator.tasks))
        self._apply(self.coordinator.handle(cc.MetadataWritten(cid, pointer, _now_ms())))
        if cid in self._savepoint_of:
            self.savepoints[self._savepoint_of.pop(cid)] = {"status": {"id": "COMPLETED"},
                                                           "operation": {"location": pointer}}

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
            "summary": {"state_size": summary("state_size"), "checkpointed_size": summary("checkpointed_size"),
                        "end_to_end_duration": summary("end_to_end_duration")},
            "latest": {"completed": completed, "savepoint": savepoint, "failed": failed,
                       "restored": self.latest_restored},
            "history": [dict(h) for h in self.history],
        }
