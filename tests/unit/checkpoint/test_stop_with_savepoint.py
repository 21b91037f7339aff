"""Stop-with-savepoint as pure decisions, events in and actions out: the task's
``StopWithSavepointLatch``, the ``CheckpointCoordinator``'s synchronous savepoints, and the
JobMaster's ``StopWithSavepointTerminationHandler`` (the result the REST API reports)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from yarnflink.checkpoint.barriers import (
    AdvanceToEndOfEventTime,
    FinishTask,
    ResumeProcessing,
    StopWithSavepointLatch,
)
from yarnflink.checkpoint.coordinator import (
    SUBSUMED,
    AcknowledgeCheckpoint,
    CheckpointCoordinator,
    DeclineCheckpoint,
    MetadataWriteFailed,
    MetadataWritten,
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    ScheduleTimeout,
    TaskFailed,
    TaskRunning,
    Tick,
    TriggerCheckpoint,
    TriggerSavepoint,
    WriteMetadata,
)
from yarnflink.checkpoint.stop_with_savepoint import (
    SAVEPOINT,
    STOPPING_EXCEPTION,
    SUSPEND,
    TERMINATE,
    FailWithoutRestart,
    StopWithSavepointTerminationHandler,
    savepoint_type,
)

from .test_coordinator import ALL, TASKS, ack_all, running


# ----------------------------------------------------------------------------- the task's latch
def test_latch_suspends_after_the_snapshot_and_finishes_on_completion() -> None:
    latch = StopWithSavepointLatch()
    assert latch.on_trigger(3, synchronous=True, drain=False) == []
    assert not latch.processing_suspended
    assert latch.on_snapshot_taken(3, synchronous=True) == []
    assert latch.is_suspended and latch.processing_suspended
    assert latch.on_checkpoint_complete(2) == []  # an older checkpoint: still suspended
    assert latch.on_checkpoint_aborted(2) == [] and latch.is_suspended
    assert latch.on_checkpoint_complete(3) == [FinishTask(3)]
    assert latch.is_finishing and latch.processing_suspended and not latch.is_suspended
    assert latch.on_checkpoint_aborted(3) == [] and latch.is_finishing  # the outcome is final


def test_latch_drain_advances_event_time_before_the_snapshot() -> None:
    latch = StopWithSavepointLatch()
    assert latch.on_trigger(5, synchronous=True, drain=True) == [AdvanceToEndOfEventTime(5)]
    assert latch.on_trigger(6, synchronous=False, drain=False) == []


def test_latch_resumes_on_abort_and_can_stop_again() -> None:
    latch = StopWithSavepointLatch()
    latch.on_snapshot_taken(4, synchronous=True)
    assert latch.on_checkpoint_aborted(4) == [ResumeProcessing(4)]
    assert not latch.processing_suspended
    latch.on_snapshot_taken(7, synchronous=True)
    assert latch.on_checkpoint_complete(7) == [FinishTask(7)]


def test_latch_ignores_plain_checkpoints_and_savepoints() -> None:
    latch = StopWithSavepointLatch()
    assert latch.on_snapshot_taken(1, synchronous=False) == []
    assert not latch.processing_suspended
    assert latch.on_checkpoint_complete(1) == [] and latch.on_checkpoint_aborted(1) == []
    assert latch.state == "IDLE"


def test_latch_an_abort_that_overtook_its_trigger_suspends_nothing() -> None:
    latch = StopWithSavepointLatch()
    latch.on_checkpoint_aborted(9)
    assert latch.on_trigger(9, synchronous=True, drain=True) == []
    latch.on_snapshot_taken(9, synchronous=True)
    assert not latch.processing_suspended


# ----------------------------------------------------------------------------- the coordinator
def test_synchronous_savepoint_triggers_with_its_type_and_suspends_periodic_checkpoints() -> None:
    c = running(interval_ms=1000, timeout_ms=5000)
    t, timeout = c.handle(TriggerSavepoint(500, "file:///sp", synchronous=True, drain=True))
    assert t == TriggerCheckpoint(
        1, 500, ("src-0", "src-1"), "EXACTLY_ONCE", is_savepoint=True, synchronous=True, drain=True
    )
    assert timeout == ScheduleTimeout(1, 5500)
    assert c.stop_checkpoint_id == 1 and c.periodic_suspended
    assert c.handle(Tick(2000)) == []  # due, but nothing after the stop's savepoint
    assert c.savepoint_refusal() == "a stop-with-savepoint of this job is in progress (savepoint 1)"
    assert c.handle(TriggerSavepoint(2100, "file:///sp")) == []  # another savepoint is refused too


def test_a_completed_stop_aborts_the_pending_checkpoints_and_stays_stopped() -> None:
    c = running(interval_ms=1000, max_concurrent=2)
    assert isinstance(c.handle(Tick(1000))[0], TriggerCheckpoint)  # checkpoint 1 stays pending
    c.handle(TriggerSavepoint(1100, "file:///sp", synchronous=True))
    (write,) = ack_all(c, 2, 1200)
    assert isinstance(write, WriteMetadata) and write.checkpoint.is_savepoint
    actions = c.handle(MetadataWritten(2, "file:///sp/savepoint-2", 1300))
    aborted = [a for a in actions if isinstance(a, NotifyCheckpointAborted)]
    assert [a.checkpoint_id for a in aborted] == [1] and aborted[0].reason.startswith(SUBSUMED)
    assert actions[-1] == NotifyCheckpointComplete(2, ALL)  # the tasks finish on it
    assert c.pending == {} and c.completed == []  # a savepoint is never a retained checkpoint
    assert c.handle(Tick(5000)) == []
    assert c.savepoint_refusal() == "a stop-with-savepoint of this job is completed; the job is finishing (savepoint 2)"


@pytest.mark.parametrize("failure", ["decline", "timeout", "metadata", "task"])
def test_a_failed_stop_lets_the_job_go_on_checkpointing(failure: str) -> None:
    c = running(interval_ms=1000, timeout_ms=5000, tolerable_failures=0)
    c.handle(TriggerSavepoint(500, "file:///unwritable", synchronous=True))
    if failure == "decline":
        actions = c.handle(DeclineCheckpoint(1, "win-0", "task not ready"))
    elif failure == "timeout":
        actions = c.handle(Tick(6000))
    elif failure == "metadata":
        ack_all(c, 1, 600)
        actions = c.handle(MetadataWriteFailed(1, "NotADirectoryError: /unwritable", 700))
    else:
        actions = c.handle(TaskFailed("src-0", 600))
    (aborted,) = [a for a in actions if isinstance(a, NotifyCheckpointAborted)]
    assert aborted.checkpoint_id == 1
    assert not any(type(a).__name__ == "FailGlobal" for a in actions)  # a savepoint failure is not counted
    assert c.stop_checkpoint_id == 0 and not c.periodic_suspended
    if failure != "task":
        assert c.savepoint_refusal() is None
        later = actions + c.handle(Tick(7000))  # (a timeout's Tick may trigger the next one at once)
        assert [a.is_savepoint for a in later if isinstance(a, TriggerCheckpoint)] == [False]


def test_a_task_failing_after_the_completed_stop_lets_the_job_checkpoint_again() -> None:
    c = running(interval_ms=1000)
    c.handle(TriggerSavepoint(100, "file:///sp", synchronous=True))
    ack_all(c, 1, 200)
    c.handle(MetadataWritten(1, "file:///sp/savepoint-1", 300))
    assert c.handle(Tick(2000)) == []
    c.handle(TaskFailed("win-1", 2100))  # the job fails over instead of finishing
    assert c.stop_checkpoint_id == 0 and not c.periodic_suspended
    for t in ALL:
        c.handle(TaskRunning(t, attempt=1))
    assert isinstance(c.handle(Tick(3000))[0], TriggerCheckpoint)


def test_a_savepoint_is_refused_with_the_tasks_not_running_named() -> None:
    c = CheckpointCoordinator("job", TASKS, running().config)
    assert c.savepoint_refusal(True) == "not all tasks are running (not running: src-0, src-1, win-0, win-1)"
    assert c.handle(TriggerSavepoint(100, "file:///sp", synchronous=True)) == []
    assert c.stop_checkpoint_id == 0


def test_drain_without_stop_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="drain applies to a stop-with-savepoint"):
        running().handle(TriggerSavepoint(100, "file:///sp", drain=True))


def test_a_late_acknowledgement_of_the_stopped_savepoint_is_discarded() -> None:
    c = running()
    c.handle(TriggerSavepoint(100, "file:///sp", synchronous=True))
    c.handle(DeclineCheckpoint(1, "src-0", "no"))
    assert c.handle(AcknowledgeCheckpoint(1, "src-1", None)) == []


# ----------------------------------------------------------------------------- the operation's result
def test_savepoint_type_names() -> None:
    assert (savepoint_type(False, False), savepoint_type(True, False), savepoint_type(True, True)) == (
        SAVEPOINT,
        SUSPEND,
        TERMINATE,
    )
    with pytest.raises(ValueError, match="drain applies to stop-with-savepoint only"):
        savepoint_type(False, True)


def test_result_is_the_path_once_the_job_finished() -> None:
    h = StopWithSavepointTerminationHandler("job-1", drain=True)
    assert h.savepoint_type == TERMINATE
    assert h.operation() == {"status": {"id": "IN_PROGRESS"}}
    h.savepoint_completed("file:///sp/savepoint-1")
    assert h.operation() == {"status": {"id": "IN_PROGRESS"}}  # Flink reports it once the job ended
    h.job_terminated("FINISHED")
    assert h.operation() == {"status": {"id": "COMPLETED"}, "operation": {"location": "file:///sp/savepoint-1"}}
    h.job_terminated("FAILED")
    assert h.operation()["operation"] == {"location": "file:///sp/savepoint-1"}  # final


def test_result_of_a_failed_savepoint_says_the_job_keeps_running() -> None:
    h = StopWithSavepointTerminationHandler("job-1")
    h.savepoint_failed("FINALIZE_CHECKPOINT_FAILURE: writing the metadata of checkpoint 3 failed")
    cause = h.operation()["operation"]["failure-cause"]
    assert cause["class"] == "CheckpointException"
    assert cause["stack-trace"] == (
        "stop-with-savepoint of job job-1 failed, the job keeps running: "
        "FINALIZE_CHECKPOINT_FAILURE: writing the metadata of checkpoint 3 failed"
    )
    h.savepoint_completed("file:///late")
    h.job_terminated("FINISHED")
    assert "location" not in h.operation()["operation"]


def test_result_when_a_task_does_not_finish_after_the_savepoint() -> None:
    h = StopWithSavepointTerminationHandler("job-1")
    h.task_ended("windows (1/2)", "FAILED")  # before the savepoint completed: the abort tells
    assert not h.done
    h.savepoint_completed("file:///sp/s")
    h.task_ended("sink (1/1)", "FINISHED")
    assert not h.done
    h.task_ended("windows (2/2)", "FAILED")
    assert h.operation()["operation"]["failure-cause"]["stack-trace"] == (
        "stop-with-savepoint of job job-1: the savepoint file:///sp/s completed, but task windows (2/2) ended "
        "FAILED instead of FINISHED, so the job did not stop with it"
    )
    h.job_terminated("FINISHED")
    assert "location" not in h.operation()["operation"]


def test_a_task_failure_after_the_savepoint_completed_fails_the_job_without_restart() -> None:
    """FLINK-26783: once the stop's savepoint completed, a task failure ends the job FAILED (no
    failover, which would restore an older checkpoint and could commit its interval twice), and
    the result names the savepoint and says how to commit its side effects."""
    h = StopWithSavepointTerminationHandler("job-1")
    h.savepoint_completed("file:///sp/savepoint-1")
    decision = h.task_failed("sink (1/1)", "RuntimeError: commit failed")
    assert isinstance(decision, FailWithoutRestart)
    assert decision.exception_class == STOPPING_EXCEPTION == "StopWithSavepointStoppingException"
    message = decision.message
    for part in (
        "file:///sp/savepoint-1",
        "task sink (1/1) failed",
        "RuntimeError: commit failed",
        "complete and consistent",
        "may not have been committed",
        "FileSink",
        "is not restarted",
        "yarnflink run -s file:///sp/savepoint-1",
    ):
        assert part in message, (part, message)
    op = h.operation()
    assert op["status"] == {"id": "COMPLETED"} and "location" not in op["operation"]
    assert op["operation"]["failure-cause"] == {"class": STOPPING_EXCEPTION, "stack-trace": message}
    # the job then ends FAILED: the result stays; another task failing decides the same, result unchanged
    h.job_terminated("FAILED")
    assert h.task_failed("windows (2/2)", "PartitionException: gone") is not None
    assert h.operation()["operation"]["failure-cause"]["stack-trace"] == message


def test_a_task_failure_before_the_savepoint_completed_is_left_to_the_failover() -> None:
    h = StopWithSavepointTerminationHandler("job-1")
    assert h.task_failed("windows (1/2)", "RuntimeError: boom") is None  # the job fails over as usual
    assert not h.done and h.operation() == {"status": {"id": "IN_PROGRESS"}}
    h.savepoint_failed("TASK_FAILURE: task win-0 failed")  # the coordinator aborts the savepoint
    assert "the job keeps running" in h.operation()["operation"]["failure-cause"]["stack-trace"]
    assert h.task_failed("windows (1/2)", "RuntimeError: again") is None
    h.savepoint_completed("file:///late")  # an aborted savepoint never completes the stop
    assert h.task_failed("sink (1/1)", "RuntimeError: x") is None


@pytest.mark.parametrize(
    "completed,status,expected",
    [
        (True, "CANCELED", "the savepoint file:///sp/s completed, but the job ended CANCELED instead of FINISHED"),
        (True, "FAILED", "the savepoint file:///sp/s completed, but the job ended FAILED instead of FINISHED"),
        (False, "CANCELED", "failed: the job ended CANCELED before the savepoint completed"),
    ],
)
def test_result_when_the_job_ends_otherwise(completed: bool, status: str, expected: str) -> None:
    h = StopWithSavepointTerminationHandler("job-1")
    if completed:
        h.savepoint_completed("file:///sp/s")
    h.job_terminated(status)
    assert h.operation()["status"] == {"id": "COMPLETED"}
    assert expected in h.operation()["operation"]["failure-cause"]["stack-trace"]


def test_the_result_module_imports_no_io_library() -> None:
    code = textwrap.dedent("""
        import builtins, sys
        real = builtins.__import__
        def guard(name, *args, **kwargs):
            if name.split(".")[0] in ("grpc", "kazoo", "skein", "fsspec", "pyspark"):
                raise ImportError("forbidden import: " + name)
            return real(name, *args, **kwargs)
        builtins.__import__ = guard
        import yarnflink.checkpoint.stop_with_savepoint
    """)
    subprocess.run([sys.executable, "-c", code], check=True)
