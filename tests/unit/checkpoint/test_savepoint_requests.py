"""Savepoints by trigger id in the CheckpointCoordinator (``RequestSavepoint``, its
``SavepointTracker``): refusals, statuses, cancel-with-savepoint and stop-with-savepoint
outcomes, as events in and actions out."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.checkpoint.test_coordinator import ALL, config, running
from yarnflink.checkpoint.coordinator import (
    AcknowledgeCheckpoint,
    CheckpointCoordinator,
    CheckpointTimeout,
    DeclineCheckpoint,
    JobTerminated,
    MetadataWritten,
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    RequestSavepoint,
    ScheduleTimeout,
    StopTaskEnded,
    StopTaskFailed,
    TaskFailed,
    Tick,
    TriggerCheckpoint,
)
from yarnflink.checkpoint.savepoints import NO_TARGET_DIRECTORY
from yarnflink.checkpoint.stop_with_savepoint import (
    IN_PROGRESS,
    STOPPING_EXCEPTION,
    FailWithoutRestart,
    completed_operation,
    failed_operation,
)

TRIGGER = "0123456789abcdef0123456789abcdef"
LOCATION = "file:///sp/savepoint-job-0123456789ab"


def request(c: CheckpointCoordinator, now: int = 500, target: str | None = "file:///sp", **kw: Any) -> list[Any]:
    return c.handle(RequestSavepoint(kw.pop("trigger_id", TRIGGER), target, now, **kw))


def complete(c: CheckpointCoordinator, cid: int, now: int, location: str = LOCATION) -> list[Any]:
    for t in ALL:
        c.handle(AcknowledgeCheckpoint(cid, t, None, now=now))
    return c.handle(MetadataWritten(cid, location, now))


def failure(c: CheckpointCoordinator, trigger_id: str = TRIGGER) -> str:
    status = c.savepoints.status(trigger_id)
    assert status is not None and "failure-cause" in status["operation"], status
    return str(status["operation"]["failure-cause"]["stack-trace"])


def test_a_requested_savepoint_is_triggered_into_its_own_directory_and_completes() -> None:
    c = running()
    assert c.savepoints.status(TRIGGER) is None
    trigger, timeout = request(c, target="file:///sp/")
    assert trigger == TriggerCheckpoint(1, 500, ("src-0", "src-1"), "EXACTLY_ONCE", is_savepoint=True)
    assert timeout == ScheduleTimeout(1, 5500)
    assert c.pending[1].target_directory == f"file:///sp/savepoint-job-{TRIGGER[:12]}"
    assert c.savepoints.status(TRIGGER) == IN_PROGRESS
    assert complete(c, 1, 700) == [NotifyCheckpointComplete(1, ALL)]
    assert c.savepoints.status(TRIGGER) == completed_operation(LOCATION)


@pytest.mark.parametrize(
    ("coordinator", "target", "reason"),
    [
        (running, None, NO_TARGET_DIRECTORY),
        (lambda: running(interval_ms=None), "file:///sp", "checkpointing is not enabled for this job"),
        (lambda: CheckpointCoordinator("job", list(running().tasks.values()), config()), "file:///sp", "not all tasks"),
    ],
)
def test_a_savepoint_that_cannot_be_triggered_has_a_failed_result_naming_why(
    coordinator: Any, target: str | None, reason: str
) -> None:
    c = coordinator()
    assert request(c, target=target) == []
    assert not c.pending
    assert failure(c).startswith(reason)
    assert c.savepoints.status(TRIGGER)["operation"]["failure-cause"]["class"] == "CheckpointException"  # type: ignore[index]


def test_an_aborted_savepoint_fails_with_the_abort_reason() -> None:
    c = running()
    request(c)
    aborted = c.handle(DeclineCheckpoint(1, "win-0", "no space left", now=600))
    assert isinstance(aborted[0], NotifyCheckpointAborted)
    assert c.savepoints.status(TRIGGER) == failed_operation(aborted[0].reason)
    assert "no space left" in failure(c)


def test_a_savepoint_that_is_not_a_valid_kind_is_refused_before_anything_is_recorded() -> None:
    c = running()
    with pytest.raises(ValueError, match="drain"):
        request(c, drain=True)
    with pytest.raises(ValueError, match="either stops or cancels"):
        request(c, stop=True, cancel_job=True)
    assert c.savepoints.status(TRIGGER) is None and not c.pending


def test_cancel_with_savepoint_suspends_checkpoints_refuses_other_savepoints_and_cancels_on_completion() -> None:
    c = running()
    trigger, _ = request(c, cancel_job=True)
    assert c.periodic_suspended and c.cancel_checkpoint_id == trigger.checkpoint_id
    assert c.handle(Tick(2000)) == []  # due, but suspended
    assert request(c, trigger_id="other") == []
    assert failure(c, "other") == "a cancel-with-savepoint of this job is in progress"
    assert complete(c, 1, 700) == [NotifyCheckpointComplete(1, ALL, cancel_job=True)]
    assert c.savepoints.status(TRIGGER) == completed_operation(LOCATION)
    assert c.periodic_suspended  # the job is being cancelled: no checkpoint after the savepoint


def test_a_failed_cancel_with_savepoint_leaves_the_job_checkpointing() -> None:
    c = running()
    request(c, cancel_job=True)
    c.handle(CheckpointTimeout(1, 6000))
    assert not c.periodic_suspended and c.cancel_checkpoint_id == 0
    assert "CHECKPOINT_EXPIRED" in failure(c)
    assert isinstance(c.handle(Tick(6000))[0], TriggerCheckpoint)
    assert request(c, now=6100, trigger_id="again")[0].is_savepoint  # another savepoint may be taken


def test_a_refused_stop_fails_and_says_the_job_keeps_running() -> None:
    c = running()
    request(c, stop=True)
    assert request(c, trigger_id="second", stop=True) == []
    assert "keeps running" in failure(c, "second") and "stop-with-savepoint of this job is in progress" in failure(
        c, "second"
    )


def test_a_stop_succeeds_only_once_the_job_finished() -> None:
    c = running()
    request(c, stop=True, drain=True)
    complete(c, 1, 700)
    assert c.savepoints.status(TRIGGER) == IN_PROGRESS  # the tasks finish now
    assert c.handle(StopTaskEnded("win (1/2)", "FINISHED")) == []
    c.handle(JobTerminated("FINISHED"))
    assert c.savepoints.status(TRIGGER) == completed_operation(LOCATION)


def test_a_stop_whose_job_ends_before_the_savepoint_completed_fails_naming_the_status() -> None:
    c = running()
    request(c, stop=True)
    c.handle(JobTerminated("CANCELED"))
    assert "the job ended CANCELED before the savepoint completed" in failure(c)


def test_a_task_failing_after_the_stops_savepoint_completed_is_decided_without_restart() -> None:
    c = running()
    request(c, stop=True)
    assert c.handle(StopTaskFailed("win (1/2)", "RuntimeError: boom")) == []  # before: fail over as usual
    complete(c, 1, 700)
    (decision,) = c.handle(StopTaskFailed("win (1/2)", "RuntimeError: boom"))
    assert isinstance(decision, FailWithoutRestart) and decision.exception_class == STOPPING_EXCEPTION
    assert LOCATION in decision.message and failure(c) == decision.message
    c.handle(TaskFailed("win-0", 800))
    c.handle(JobTerminated("FAILED"))
    assert failure(c) == decision.message  # the first outcome is final


def test_a_task_cancelled_after_the_stops_savepoint_completed_fails_the_stop() -> None:
    c = running()
    request(c, stop=True)
    assert c.handle(StopTaskEnded("win (1/2)", "CANCELED")) == []
    assert c.savepoints.status(TRIGGER) == IN_PROGRESS  # before the savepoint completed: nothing decided
    complete(c, 1, 700)
    c.handle(StopTaskEnded("win (1/2)", "CANCELED"))
    assert "task win (1/2) ended CANCELED instead of FINISHED" in failure(c)
