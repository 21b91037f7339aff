"""The real JobMaster's checkpoints and savepoints, driven through its JobMasterGateway (a task's
acknowledgement or decline) and through the JobMasterControlGateway the Dispatcher holds
(savepoints, stop-with-savepoint, cancel, the views), with TestingTaskExecutorGateways as its
TaskExecutors: what it triggers, completes, aborts and tells the tasks, and what it writes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.fakes.conditions import wait_until
from tests.fakes.gateways import TestingTaskExecutorGateway
from tests.unit.jobmaster.harness import Harness, StartJobMaster, running_with_one_slot
from yarnflink.executiongraph.executiongraph import ExecutionState, JobStatus
from yarnflink.jobmaster.gateway import (
    AcknowledgeCheckpoint,
    DeclineCheckpoint,
    JobMasterControlGateway,
    SerializedThrowable,
)
from yarnflink.jobmaster.local_gateway import LocalJobMasterGateway
from yarnflink.state.handles import TaskStateSnapshot
from yarnflink.taskexecutor.gateway import NotifyCheckpoint, TriggerCheckpoint

# ---------------------------------------------------------------------------- checkpoints


def _checkpointing(tmp_path: Path) -> dict[str, str]:
    return {"execution.checkpointing.interval": "100 ms", "execution.checkpointing.dir": f"file://{tmp_path}"}


def _acknowledge_all(h: Harness, te: TestingTaskExecutorGateway, checkpoint_id: int) -> None:
    for submit in h.deployed(te):
        ack = AcknowledgeCheckpoint(h.token, submit.tdd.execution_id, checkpoint_id, 0, TaskStateSnapshot())
        h.call(lambda: h.jm.acknowledge_checkpoint(ack))


def test_a_checkpoint_acknowledged_by_every_task_completes_and_the_tasks_are_told(
    start_jobmaster: StartJobMaster, tmp_path: Path
) -> None:
    h, te = running_with_one_slot(start_jobmaster, config=_checkpointing(tmp_path))
    wait_until(lambda: te.count("trigger_checkpoint") >= 1, what="a checkpoint triggered")
    trigger: TriggerCheckpoint = te.requests("trigger_checkpoint")[0]
    src = h.execution_id(te, "src")
    assert (trigger.execution_id, trigger.jobmaster_id) == (src, h.token)  # at the source only

    _acknowledge_all(h, te, trigger.checkpoint_id)

    wait_until(
        lambda: (
            {n.execution_id for n in te.requests("notify_checkpoint_complete")}
            == {s.tdd.execution_id for s in h.deployed(te)}
        ),
        what="every task told of the completion",
    )
    notice: NotifyCheckpoint = te.requests("notify_checkpoint_complete")[0]
    assert notice.checkpoint_id == trigger.checkpoint_id
    assert te.count("notify_checkpoint_aborted") == 0
    wait_until(lambda: (tmp_path / h.jm.job_id / f"chk-{trigger.checkpoint_id}" / "_metadata").exists())


def test_a_declined_checkpoint_is_aborted_at_every_task(start_jobmaster: StartJobMaster, tmp_path: Path) -> None:
    h, te = running_with_one_slot(start_jobmaster, config=_checkpointing(tmp_path))
    wait_until(lambda: te.count("trigger_checkpoint") >= 1, what="a checkpoint triggered")
    cid = te.requests("trigger_checkpoint")[0].checkpoint_id
    sink = h.execution_id(te, "sink")

    h.call(lambda: h.jm.decline_checkpoint(DeclineCheckpoint(h.token, sink, cid, 0, "the snapshot failed")))

    wait_until(
        lambda: cid in {n.checkpoint_id for n in te.requests("notify_checkpoint_aborted")},
        what="the abort sent to the tasks",
    )
    assert cid not in {n.checkpoint_id for n in te.requests("notify_checkpoint_complete")}
    assert not (tmp_path / h.jm.job_id / f"chk-{cid}" / "_metadata").exists()


def test_acknowledgements_of_an_ended_attempt_are_dropped(start_jobmaster: StartJobMaster, tmp_path: Path) -> None:
    config = _checkpointing(tmp_path) | {"execution.checkpointing.interval": "1 h"}
    h, te = running_with_one_slot(start_jobmaster, config=config)
    ack = AcknowledgeCheckpoint(h.token, "an-attempt-that-is-not-here", 1, 0, TaskStateSnapshot())

    h.call(lambda: h.jm.acknowledge_checkpoint(ack))  # no error: dropped

    assert te.count("notify_checkpoint_complete") == 0


# ---------------------------------------------------------------------------- the Dispatcher's calls


def _control(h: Harness) -> JobMasterControlGateway:
    """The JobMasterControlGateway the Dispatcher holds (it hops onto the JobMaster's loop)."""
    return LocalJobMasterGateway(h.jm)


def _savepoint(h: Harness, te: TestingTaskExecutorGateway, target: Path, **kind: bool) -> tuple[str, int]:
    """Triggers a savepoint through the control gateway; the id of its trigger and of its checkpoint."""
    before = te.count("trigger_checkpoint")
    trigger_id = asyncio.run(_control(h).trigger_savepoint(str(target), **kind))
    assert trigger_id is not None
    wait_until(lambda: te.count("trigger_checkpoint") > before, what="the savepoint triggered at the source")
    trigger: TriggerCheckpoint = te.requests("trigger_checkpoint")[-1]
    assert trigger.is_savepoint and trigger.synchronous == kind.get("stop", False)
    return trigger_id, trigger.checkpoint_id


def _result(h: Harness, trigger_id: str) -> dict[str, Any]:
    """The savepoint's result (Flink's operation: its ``location`` or ``failure-cause``); {} while in progress."""
    status = asyncio.run(_control(h).request_savepoint_status(trigger_id))
    assert status is not None
    return dict(status["operation"]) if status["status"]["id"] == "COMPLETED" else {}


def test_the_control_gateway_answers_the_dispatchers_views(start_jobmaster: StartJobMaster) -> None:
    h, te = running_with_one_slot(start_jobmaster)

    details = asyncio.run(_control(h).request_job_details())
    snapshot = asyncio.run(_control(h).request_monitoring_snapshot())
    exceptions = asyncio.run(_control(h).request_job_exceptions())

    assert details["jid"] == h.jm.job_id and details["state"] == "RUNNING"
    assert snapshot["details"]["state"] == "RUNNING"
    assert exceptions["exceptionHistory"]["entries"] == []
    assert asyncio.run(_control(h).trigger_savepoint(None)) is None  # no checkpointing: no savepoint


def test_a_savepoint_triggered_through_the_control_gateway_completes_and_the_job_goes_on(
    start_jobmaster: StartJobMaster, tmp_path: Path
) -> None:
    config = _checkpointing(tmp_path) | {"execution.checkpointing.interval": "1 h"}
    h, te = running_with_one_slot(start_jobmaster, config=config)

    trigger_id, cid = _savepoint(h, te, tmp_path / "savepoints")
    assert _result(h, trigger_id) == {}
    _acknowledge_all(h, te, cid)

    wait_until(lambda: _result(h, trigger_id), what="the savepoint completed")
    assert str(_result(h, trigger_id)["location"]).startswith(f"file://{tmp_path}/savepoints/")
    assert h.jm.eg.status == JobStatus.RUNNING and te.count("cancel_task") == 0


def test_a_stop_with_savepoint_through_the_control_gateway_finishes_the_job(
    start_jobmaster: StartJobMaster, tmp_path: Path
) -> None:
    config = _checkpointing(tmp_path) | {"execution.checkpointing.interval": "1 h"}
    h, te = running_with_one_slot(start_jobmaster, config=config)

    trigger_id, cid = _savepoint(h, te, tmp_path / "savepoints", stop=True)
    _acknowledge_all(h, te, cid)
    wait_until(
        lambda: (
            {n.execution_id for n in te.requests("notify_checkpoint_complete")}
            == {s.tdd.execution_id for s in h.deployed(te)}
        ),
        what="every task told: it finishes",
    )
    assert _result(h, trigger_id) == {}  # until the job has finished
    for submit in h.deployed(te):
        h.update(submit.tdd.execution_id, ExecutionState.FINISHED)

    assert h.terminated.wait(10) and h.jm.eg.status == JobStatus.FINISHED
    wait_until(lambda: _result(h, trigger_id), what="the stop completed")
    assert "location" in _result(h, trigger_id)


def test_a_declined_savepoint_fails_and_the_job_goes_on(start_jobmaster: StartJobMaster, tmp_path: Path) -> None:
    config = _checkpointing(tmp_path) | {"execution.checkpointing.interval": "1 h"}
    h, te = running_with_one_slot(start_jobmaster, config=config)

    trigger_id, cid = _savepoint(h, te, tmp_path / "savepoints", stop=True)
    sink = h.execution_id(te, "sink")
    h.call(lambda: h.jm.decline_checkpoint(DeclineCheckpoint(h.token, sink, cid, 0, "the snapshot failed")))

    wait_until(lambda: _result(h, trigger_id), what="the savepoint failed")
    assert "the snapshot failed" in _result(h, trigger_id)["failure-cause"]["stack-trace"]
    assert cid in {n.checkpoint_id for n in te.requests("notify_checkpoint_aborted")}
    assert h.jm.eg.status == JobStatus.RUNNING  # a failed stop leaves the job running


def test_a_job_cancelled_through_the_control_gateway_cancels_its_tasks(start_jobmaster: StartJobMaster) -> None:
    h, te = running_with_one_slot(start_jobmaster)
    h.reports_cancellations(te)

    assert asyncio.run(_control(h).cancel())

    assert h.terminated.wait(10) and h.jm.eg.status == JobStatus.CANCELED
    assert {c.execution_id for c in te.requests("cancel_task")} == {s.tdd.execution_id for s in h.deployed(te)}
    assert {c.jobmaster_id for c in te.requests("cancel_task")} == {h.token}


def test_a_task_failing_after_the_stops_savepoint_completed_fails_the_job_without_a_restart(
    start_jobmaster: StartJobMaster, tmp_path: Path
) -> None:
    config = _checkpointing(tmp_path) | {
        "execution.checkpointing.interval": "1 h",
        "restart-strategy.type": "fixed-delay",  # (a failover would restart the job)
        "restart-strategy.fixed-delay.delay": "0 ms",
    }
    h, te = running_with_one_slot(start_jobmaster, config=config)
    h.reports_cancellations(te)
    trigger_id, cid = _savepoint(h, te, tmp_path / "savepoints", stop=True)
    _acknowledge_all(h, te, cid)
    wait_until(lambda: te.count("notify_checkpoint_complete") == 2, what="every task told: it finishes")

    h.update(h.execution_id(te, "sink"), ExecutionState.FAILED, SerializedThrowable("OSError", "commit failed"))

    assert h.terminated.wait(10) and h.jm.eg.status == JobStatus.FAILED
    assert "StopWithSavepointStoppingException" in h.failures() and "commit failed" in h.failures()
    assert len(h.deployed(te)) == 2  # not restarted
    assert "failure-cause" in _result(h, trigger_id)
    wait_until(lambda: h.rm.count("disconnect_job_master") == 1, what="the ResourceManager released")


def test_cancel_with_savepoint_notifies_every_task_then_cancels_the_job(
    start_jobmaster: StartJobMaster, tmp_path: Path
) -> None:
    config = _checkpointing(tmp_path) | {"execution.checkpointing.interval": "1 h"}
    h, te = running_with_one_slot(start_jobmaster, config=config)

    trigger_id, cid = _savepoint(h, te, tmp_path / "savepoints", cancel_job=True)
    assert te.count("cancel_task") == 0
    _acknowledge_all(h, te, cid)

    wait_until(lambda: te.count("cancel_task") >= 1, what="the job cancelled after the savepoint")
    notified = {n.execution_id for n in te.requests("notify_checkpoint_complete")}
    assert notified == {s.tdd.execution_id for s in h.deployed(te)}  # every task was told first
    assert str(_result(h, trigger_id)["location"]).startswith(f"file://{tmp_path}/savepoints/")
    wait_until(lambda: not h.jm._io, what="the staging files of the savepoint discarded")


def test_a_savepoint_without_a_target_directory_fails_and_triggers_nothing(
    start_jobmaster: StartJobMaster, tmp_path: Path
) -> None:
    config = _checkpointing(tmp_path) | {"execution.checkpointing.interval": "1 h"}
    h, te = running_with_one_slot(start_jobmaster, config=config)

    trigger_id = asyncio.run(_control(h).trigger_savepoint(None, stop=True))

    assert trigger_id is not None
    assert "no target directory" in _result(h, trigger_id)["failure-cause"]["stack-trace"]
    assert te.count("trigger_checkpoint") == 0 and h.jm.eg.status == JobStatus.RUNNING
