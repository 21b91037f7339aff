"""The JobMaster's part of FLINK-26783: a task that fails after a stop-with-savepoint's savepoint
completed (and before the job FINISHED) ends the job FAILED, with no failover or restart, the
stop's result and the job's root exception naming the savepoint; a failure before the savepoint
completed fails over as before. A real JobMaster and DefaultScheduler, no servers: the
scheduler's actions are recorded instead of carried out."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.scheduler.helpers import Driver, ev, graph
from yarnflink.checkpoint import coordinator as cc
from yarnflink.checkpoint.stop_with_savepoint import IN_PROGRESS, STOPPING_EXCEPTION
from yarnflink.executiongraph.executiongraph import ExecutionState, JobStatus
from yarnflink.jobmaster.checkpointing import task_id_of
from yarnflink.jobmaster.jobmaster import JobMaster
from yarnflink.jobmaster.views import exceptions_json
from yarnflink.rpc.pb import common_pb2
from yarnflink.scheduler.scheduler import CancelTask, DeployTask, JobTerminated

SAVEPOINT = "file:///sp/savepoint-ab12cd-0123"
TRIGGER = "trigger-1"


class Job:
    """A JobMaster of a running ``src (2) -> sink (2)`` job with checkpointing and a restart
    strategy that would restart it, and a stop-with-savepoint in progress."""

    def __init__(self) -> None:
        jg = graph([("src", 2), ("sink", 2)], [("src", "sink", "rebalance", "P")])
        jg.config = {
            "execution.checkpointing.interval": "1 s",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": "5",
            "restart-strategy.fixed-delay.delay": "0 s",
        }
        self.jm = JobMaster(jg, "127.0.0.1", "127.0.0.1:1", on_terminated=lambda jm: None)
        self.actions: list[Any] = []
        self.jm._apply = self.actions.extend  # type: ignore[method-assign]
        self.driver = Driver(self.jm.scheduler)
        self.driver.start()
        for v in self.jm.eg.all_vertices():
            self.report(v, ExecutionState.RUNNING)
        assert self.jm.eg.status == JobStatus.RUNNING
        self.checkpoints = self.jm.checkpoints
        assert self.checkpoints is not None
        self.jm._spawn = lambda coro: coro.close()  # type: ignore[method-assign]  # no task serves the RPCs
        coordinator = self.checkpoints.coordinator
        (trigger, *_) = coordinator.handle(cc.RequestSavepoint(TRIGGER, "file:///sp", 0, stop=True))
        assert isinstance(trigger, cc.TriggerCheckpoint)
        self.savepoint_id = trigger.checkpoint_id
        assert self.status() == IN_PROGRESS
        self.actions.clear()

    def savepoint_completed(self) -> None:
        coordinator = self.checkpoints.coordinator  # type: ignore[union-attr]
        for tid in coordinator.tasks:
            coordinator.handle(cc.AcknowledgeCheckpoint(self.savepoint_id, tid, None, 0, 0))
        coordinator.handle(cc.MetadataWritten(self.savepoint_id, SAVEPOINT, 0))

    def report(self, v: Any, state: ExecutionState, error: common_pb2.SerializedThrowable | None = None) -> None:
        self.jm.update_task_state(v.current.attempt_id, state, error)

    def fail(self, v: Any) -> None:
        self.report(
            v,
            ExecutionState.FAILED,
            common_pb2.SerializedThrowable(
                exception_class="RuntimeError",
                message="commit failed",
                traceback="Traceback (most recent call last):\n  ...\nRuntimeError: commit failed\n",
            ),
        )

    def confirm_cancels(self) -> None:
        for v in self.jm.eg.all_vertices():
            if v.current.state == ExecutionState.CANCELING:
                self.report(v, ExecutionState.CANCELED)

    def status(self) -> dict[str, Any]:
        result = self.checkpoints.savepoint_status(TRIGGER)  # type: ignore[union-attr]
        assert result is not None
        return result


def test_a_task_failing_after_the_stops_savepoint_completed_fails_the_job_without_restart() -> None:
    job = Job()
    job.savepoint_completed()
    sink = ev(job.jm.eg, "sink", 0)
    job.fail(sink)
    eg = job.jm.eg
    assert eg.status == JobStatus.FAILING
    assert job.jm.scheduler.restarts == [] and eg.num_restarts == 0  # no failover
    assert sink.current.state == ExecutionState.FAILED and sink.current.attempt_number == 0
    cancelled = {a.execution.vertex.task_name_with_subtask for a in job.actions if isinstance(a, CancelTask)}
    assert cancelled >= {"src (1/2)", "src (2/2)", "sink (2/2)"}
    job.confirm_cancels()
    assert eg.status == JobStatus.FAILED
    assert [a.status for a in job.actions if isinstance(a, JobTerminated)] == [JobStatus.FAILED]
    assert not any(isinstance(a, DeployTask) for a in job.actions)
    assert all(v.current.attempt_number == 0 for v in eg.all_vertices())
    # the stop's result and the job's failure cause name the savepoint and what to do
    cause = job.status()["operation"]["failure-cause"]
    assert cause["class"] == STOPPING_EXCEPTION
    for part in (
        SAVEPOINT,
        "sink (1/2)",
        "RuntimeError: commit failed",
        "complete and consistent",
        "may not have been committed",
        f"yarnflink run -s {SAVEPOINT}",
    ):
        assert part in cause["stack-trace"], (part, cause)
    root = exceptions_json(eg)["root-exception"]
    assert root.startswith(f"{STOPPING_EXCEPTION}: {cause['stack-trace']}")
    assert "Caused by: Traceback" in root and "RuntimeError: commit failed" in root
    # the job's end does not overwrite the stop's result
    job.checkpoints.job_terminated("FAILED")  # type: ignore[union-attr]
    assert job.status()["operation"]["failure-cause"] == cause


def test_a_lost_taskexecutor_after_the_stops_savepoint_completed_fails_the_job_without_restart() -> None:
    job = Job()
    job.savepoint_completed()
    job.jm.task_manager_lost("te0", "heartbeat of TaskManager te0 timed out")
    assert job.jm.eg.status in (JobStatus.FAILING, JobStatus.FAILED)
    assert job.jm.scheduler.restarts == [] and job.jm.eg.num_restarts == 0
    job.confirm_cancels()
    assert job.jm.eg.status == JobStatus.FAILED
    assert (
        "TaskManagerLostException: heartbeat of TaskManager te0 timed out"
        in (job.status()["operation"]["failure-cause"]["stack-trace"])
    )


@pytest.mark.parametrize("aborted", [False, True])
def test_a_task_failing_before_the_stops_savepoint_completed_fails_over_as_before(aborted: bool) -> None:
    job = Job()
    if aborted:  # the savepoint was aborted by the failure: the stop failed, the job keeps running
        job.checkpoints.coordinator.handle(cc.TaskFailed(task_id_of(ev(job.jm.eg, "sink", 0))))  # type: ignore[union-attr]
    job.fail(ev(job.jm.eg, "sink", 0))
    eg = job.jm.eg
    assert eg.status == JobStatus.RUNNING and eg.num_restarts == 1
    assert job.jm.scheduler.restarts, "a restart is pending"
    assert eg.failures[-1].exception_class == "RuntimeError"
    assert STOPPING_EXCEPTION not in str(job.status())
