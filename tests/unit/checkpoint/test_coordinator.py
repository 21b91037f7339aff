"""CheckpointCoordinator: events in, actions out, with explicit times (a fake clock)."""

from __future__ import annotations

import pytest

from yarnflink.checkpoint.config import CheckpointConfig
from yarnflink.checkpoint.coordinator import (
    AcknowledgeCheckpoint,
    CheckpointCoordinator,
    CheckpointTask,
    CheckpointTimeout,
    DeclineCheckpoint,
    DiscardCheckpoint,
    DiscardIncomplete,
    DiscardState,
    FailGlobal,
    JobTerminated,
    MetadataWriteFailed,
    MetadataWritten,
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    Rescaled,
    ScheduleTimeout,
    TaskFailed,
    TaskFinished,
    TaskRunning,
    Tick,
    TriggerCheckpoint,
    TriggerSavepoint,
    WriteMetadata,
)
from yarnflink.state.handles import (
    FileStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorSubtaskState,
    TaskStateSnapshot,
)

# source (2 subtasks) -> window (2 subtasks), all-to-all
TASKS = [
    CheckpointTask("src-0", "src", 0, 2, 128, ("op-src",)),
    CheckpointTask("src-1", "src", 1, 2, 128, ("op-src",)),
    CheckpointTask("win-0", "win", 0, 2, 128, ("op-win",), ("src-0", "src-1")),
    CheckpointTask("win-1", "win", 1, 2, 128, ("op-win",), ("src-0", "src-1")),
]
ALL = tuple(t.task_id for t in TASKS)


def config(**kw) -> CheckpointConfig:  # type: ignore[no-untyped-def]
    base = dict(
        interval_ms=1000, timeout_ms=5000, min_pause_ms=0, max_concurrent=1, tolerable_failures=0, num_retained=2
    )
    base.update(kw)
    return CheckpointConfig(**base)


def running(**kw) -> CheckpointCoordinator:  # type: ignore[no-untyped-def]
    c = CheckpointCoordinator("job", TASKS, config(**kw))
    for t in ALL:
        assert c.handle(TaskRunning(t)) == []
    return c


def state(task: str, cid: int) -> TaskStateSnapshot:
    t = next(x for x in TASKS if x.task_id == task)
    h = KeyGroupsStateHandle(KeyGroupRange(0, 63), FileStateHandle(f"file:///chk-{cid}/{task}", 10))
    return TaskStateSnapshot({t.operator_ids[0]: OperatorSubtaskState([h])})


def ack_all(c: CheckpointCoordinator, cid: int, now: int) -> list:
    actions: list = []
    for t in ALL:
        actions = c.handle(AcknowledgeCheckpoint(cid, t, state(t, cid), now=now))
    return actions


def complete(c: CheckpointCoordinator, cid: int, now: int) -> list:
    (write,) = ack_all(c, cid, now)
    assert isinstance(write, WriteMetadata) and write.checkpoint.checkpoint_id == cid
    return c.handle(MetadataWritten(cid, f"file:///chk/job/chk-{cid}", now))


def test_periodic_trigger_goes_to_the_sources_and_completes_after_every_ack_and_the_metadata() -> None:
    c = running()
    assert c.handle(Tick(999)) == []
    actions = c.handle(Tick(1000))
    assert actions == [TriggerCheckpoint(1, 1000, ("src-0", "src-1"), "EXACTLY_ONCE"), ScheduleTimeout(1, 6000)]
    for t in ALL[:-1]:
        assert c.handle(AcknowledgeCheckpoint(1, t, state(t, 1), now=1100)) == []
    (write,) = c.handle(AcknowledgeCheckpoint(1, "win-1", state("win-1", 1), now=1200))
    cp = write.checkpoint
    assert cp.checkpoint_id == 1 and cp.timestamp == 1000 and set(cp.operator_states) == {"op-src", "op-win"}
    assert sorted(cp.operator_states["op-win"].subtask_states) == [0, 1]
    assert cp.operator_states["op-win"].max_parallelism == 128
    assert c.latest_completed() is None  # not before the metadata is written
    assert c.handle(MetadataWritten(1, "file:///chk/job/chk-1", 1300)) == [NotifyCheckpointComplete(1, ALL)]
    assert c.latest_completed().external_pointer == "file:///chk/job/chk-1"
    assert c.next_wakeup() == 2000


def test_no_trigger_until_every_task_runs_and_never_more_than_max_concurrent() -> None:
    c = CheckpointCoordinator("job", TASKS, config(max_concurrent=2))
    for t in ALL[:-1]:
        c.handle(TaskRunning(t))
    assert c.handle(Tick(1000)) == []  # win-1 is not running yet: no checkpoint, no failure
    c.handle(TaskRunning("win-1"))
    assert [type(a) for a in c.handle(Tick(1001))] == [TriggerCheckpoint, ScheduleTimeout]
    assert [type(a) for a in c.handle(Tick(2001))] == [TriggerCheckpoint, ScheduleTimeout]
    assert c.handle(Tick(3001)) == []  # two pending
    assert sorted(c.pending) == [1, 2]


def test_min_pause_counts_from_the_last_completion() -> None:
    c = running(min_pause_ms=1500)
    c.handle(Tick(1000))
    complete(c, 1, now=1800)
    assert c.handle(Tick(2000)) == []  # due by interval, but paused until 3300
    assert c.next_wakeup() == 3300
    assert c.handle(Tick(3299)) == []
    assert isinstance(c.handle(Tick(3300))[0], TriggerCheckpoint)


def test_decline_aborts_discards_acknowledged_state_and_fails_the_job_past_the_threshold() -> None:
    c = running(tolerable_failures=1)
    c.handle(Tick(1000))
    c.handle(AcknowledgeCheckpoint(1, "src-0", state("src-0", 1)))
    actions = c.handle(DeclineCheckpoint(1, "win-0", "disk full"))
    assert actions[0] == NotifyCheckpointAborted(
        1, ALL, "CHECKPOINT_DECLINED: task win-0 declined checkpoint 1: disk full"
    )
    assert actions[1] == DiscardState(1, tuple(state("src-0", 1).stream_handles()))
    assert actions[2] == DiscardIncomplete(1)  # its directory, with what a failing task left there
    assert len(actions) == 3 and c.consecutive_failures == 1
    # a late ack of the aborted checkpoint: its state is discarded
    assert c.handle(AcknowledgeCheckpoint(1, "src-1", state("src-1", 1))) == [
        DiscardState(1, tuple(state("src-1", 1).stream_handles()))
    ]
    c.handle(Tick(2000))
    actions = c.handle(DeclineCheckpoint(2, "src-1", "broken"))
    assert isinstance(actions[-1], FailGlobal)
    assert "Exceeded checkpoint tolerable failure threshold (1)" in actions[-1].reason
    assert "task src-1 declined checkpoint 2: broken" in actions[-1].reason


def test_a_completed_checkpoint_resets_the_failure_count() -> None:
    c = running(tolerable_failures=1)
    c.handle(Tick(1000))
    c.handle(CheckpointTimeout(1, 6000))
    c.handle(Tick(6000))
    complete(c, 2, 6500)
    c.handle(Tick(7000))
    actions = c.handle(CheckpointTimeout(3, 12000))
    assert not any(isinstance(a, FailGlobal) for a in actions)


def test_failures_past_the_threshold_fail_the_job_over_and_the_count_starts_again() -> None:
    """FailGlobal is a global failover (the restart strategy decides), not the job's end: the
    coordinator goes on, and it takes as many failures again for the next failover."""
    c = running(tolerable_failures=1, max_concurrent=1)
    failovers = []
    for n in range(4):
        c.handle(Tick(1000 + 10_000 * n))
        actions = c.handle(CheckpointTimeout(n + 1, 7000 + 10_000 * n))
        assert actions[0].reason.startswith("CHECKPOINT_EXPIRED")  # type: ignore[union-attr]
        failovers.append(any(isinstance(a, FailGlobal) for a in actions))
    assert failovers == [False, True, False, True]
    assert not c.shutdown


def test_timeout_by_event_and_by_tick() -> None:
    c = running(tolerable_failures=5, max_concurrent=2)
    c.handle(Tick(1000))
    c.handle(Tick(2000))
    assert c.handle(CheckpointTimeout(1, 5999))[0].reason.startswith("CHECKPOINT_EXPIRED")
    actions = c.handle(Tick(7000))  # checkpoint 2 expired at 7000; 3 is triggered
    assert isinstance(actions[0], NotifyCheckpointAborted) and actions[0].checkpoint_id == 2
    assert actions[1] == DiscardIncomplete(2)
    assert isinstance(actions[2], TriggerCheckpoint) and actions[2].checkpoint_id == 3
    assert c.consecutive_failures == 2
    assert c.handle(CheckpointTimeout(2, 8000)) == []  # already gone


def test_completion_subsumes_older_pending_checkpoints_and_retention_discards_old_ones() -> None:
    c = running(max_concurrent=3, num_retained=2)
    for now in (1000, 2000, 3000):
        c.handle(Tick(now))
    c.handle(AcknowledgeCheckpoint(1, "src-0", state("src-0", 1)))
    actions = complete(c, 2, 3500)
    assert actions[0] == NotifyCheckpointAborted(1, ALL, "CHECKPOINT_SUBSUMED: subsumed by checkpoint 2")
    assert actions[1] == DiscardState(1, tuple(state("src-0", 1).stream_handles()))
    assert actions[2] == DiscardIncomplete(1)
    assert actions[3] == NotifyCheckpointComplete(2, ALL)
    assert c.consecutive_failures == 0 and sorted(c.pending) == [3]
    complete(c, 3, 4000)
    c.handle(Tick(5000))
    actions = complete(c, 4, 5500)
    assert isinstance(actions[-1], DiscardCheckpoint) and actions[-1].checkpoint.checkpoint_id == 2
    assert [cp.checkpoint_id for cp in c.completed] == [3, 4]


def test_finished_tasks_count_as_acknowledged_and_their_successors_are_triggered() -> None:
    c = running()
    c.handle(Tick(1000))
    for t in ("win-0", "win-1", "src-1"):
        c.handle(AcknowledgeCheckpoint(1, t, state(t, 1)))
    (write,) = c.handle(TaskFinished("src-0"))
    assert "op-src" in write.checkpoint.operator_states
    assert sorted(write.checkpoint.operator_states["op-src"].subtask_states) == [1]
    c.handle(MetadataWritten(1, "p", 1100))
    c.handle(TaskFinished("src-1"))
    trigger = c.handle(Tick(2000))[0]
    assert trigger.tasks == ("win-0", "win-1")  # the sources are done: their successors start it
    c.handle(TaskFinished("win-0"))
    c.handle(TaskFinished("win-1"))
    assert c.handle(Tick(10_000)) == []  # every task finished: no more checkpoints


def test_acks_from_an_old_attempt_and_duplicates_are_discarded() -> None:
    c = running()
    c.handle(TaskRunning("src-0", attempt=1))
    c.handle(Tick(1000))
    assert c.handle(AcknowledgeCheckpoint(1, "src-0", state("src-0", 1), attempt=0)) == [
        DiscardState(1, tuple(state("src-0", 1).stream_handles()))
    ]
    assert c.handle(AcknowledgeCheckpoint(1, "src-0", state("src-0", 1), attempt=1)) == []
    assert isinstance(c.handle(AcknowledgeCheckpoint(1, "src-0", state("src-0", 1), attempt=1))[0], DiscardState)


def test_declines_for_a_newer_barrier_or_an_upstream_cancellation_do_not_count() -> None:
    c = running(tolerable_failures=0, max_concurrent=2)
    c.handle(Tick(1000))
    actions = c.handle(DeclineCheckpoint(1, "win-0", "CHECKPOINT_DECLINED_SUBSUMED: barrier of checkpoint 2 arrived"))
    assert actions[0].reason.startswith("CHECKPOINT_DECLINED_SUBSUMED: task win-0 declined checkpoint 1")
    assert not any(isinstance(a, FailGlobal) for a in actions) and c.consecutive_failures == 0
    c.handle(Tick(2000))
    actions = c.handle(DeclineCheckpoint(2, "win-1", "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER: cancelled"))
    assert not any(isinstance(a, FailGlobal) for a in actions) and c.consecutive_failures == 0
    c.handle(Tick(3000))
    assert isinstance(c.handle(DeclineCheckpoint(3, "win-1", "disk full"))[-1], FailGlobal)  # a real decline counts


def test_task_failure_aborts_pending_checkpoints_without_counting() -> None:
    c = running()
    c.handle(Tick(1000))
    actions = c.handle(TaskFailed("win-1"))
    assert actions[0].reason.startswith("TASK_FAILURE") and "win-1" not in actions[0].tasks
    assert c.consecutive_failures == 0
    assert c.handle(Tick(2000)) == []  # win-1 must run again first


def test_failed_metadata_write_aborts_and_counts() -> None:
    c = running(tolerable_failures=0)
    c.handle(Tick(1000))
    ack_all(c, 1, 1100)
    actions = c.handle(MetadataWriteFailed(1, "s3 unreachable", 1200))
    assert actions[0].reason.startswith("FINALIZE_CHECKPOINT_FAILURE")
    assert isinstance(actions[-1], FailGlobal)
    assert c.latest_completed() is None


def test_savepoints_ignore_the_interval_are_not_retained_and_do_not_count() -> None:
    c = running(interval_ms=None, num_retained=1)
    assert c.next_wakeup() is None and c.handle(Tick(10_000)) == []
    t = c.handle(TriggerSavepoint(500, "s3://bucket/savepoints"))[0]
    assert t == TriggerCheckpoint(1, 500, ("src-0", "src-1"), "EXACTLY_ONCE", is_savepoint=True)
    (write,) = ack_all(c, 1, 600)
    assert write.target_directory == "s3://bucket/savepoints" and write.checkpoint.is_savepoint
    assert c.handle(MetadataWritten(1, "s3://bucket/savepoints/savepoint-1", 700)) == [NotifyCheckpointComplete(1, ALL)]
    assert c.completed == []
    c.handle(TriggerSavepoint(800))
    assert not any(isinstance(a, FailGlobal) for a in c.handle(DeclineCheckpoint(2, "src-0", "no")))


@pytest.mark.parametrize(
    "retention,status,discarded",
    [
        ("NO_EXTERNALIZED_CHECKPOINTS", "CANCELED", True),
        ("NO_EXTERNALIZED_CHECKPOINTS", "FAILED", True),
        ("DELETE_ON_CANCELLATION", "CANCELED", True),
        ("DELETE_ON_CANCELLATION", "FAILED", False),
        ("RETAIN_ON_CANCELLATION", "CANCELED", False),
        ("RETAIN_ON_CANCELLATION", "FINISHED", True),
    ],
)
def test_retention_when_the_job_ends(retention: str, status: str, discarded: bool) -> None:
    c = running(externalized_retention=retention, max_concurrent=2)
    c.handle(Tick(1000))
    complete(c, 1, 1500)
    c.handle(Tick(2000))
    actions = c.handle(JobTerminated(status))
    assert actions[0].reason.startswith("CHECKPOINT_COORDINATOR_SHUTDOWN")
    assert any(isinstance(a, DiscardCheckpoint) for a in actions) == discarded
    assert c.handle(Tick(50_000)) == []


def test_restarted_coordinator_continues_the_id_sequence() -> None:
    c = running()
    c.handle(Tick(1000))
    complete(c, 1, 1100)
    c2 = CheckpointCoordinator("job", TASKS, config(), completed=list(c.completed))
    for t in ALL:
        c2.handle(TaskRunning(t))
    assert c2.handle(Tick(5000))[0].checkpoint_id == 2


def test_config_from_flink_keys() -> None:
    cfg = CheckpointConfig.from_configuration(
        {
            "execution.checkpointing.interval": "10 s",
            "execution.checkpointing.timeout": "1 min",
            "execution.checkpointing.min-pause": "500 ms",
            "execution.checkpointing.max-concurrent-checkpoints": "2",
            "execution.checkpointing.mode": "at_least_once",
            "execution.checkpointing.tolerable-failed-checkpoints": "3",
            "execution.checkpointing.num-retained": "4",
            "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
            "execution.checkpointing.dir": "s3://bucket/chk",
        }
    )
    assert cfg == CheckpointConfig(
        10_000, 60_000, 500, 2, "AT_LEAST_ONCE", 3, 4, "RETAIN_ON_CANCELLATION", "s3://bucket/chk", 20 * 1024
    )
    assert not CheckpointConfig.from_configuration(None).periodic


def test_stop_with_savepoint_suspends_periodic_checkpoints_but_not_expiry() -> None:
    c = running(interval_ms=1000, timeout_ms=5000)
    assert isinstance(c.handle(TriggerSavepoint(500, "file:///sp"))[0], TriggerCheckpoint)
    c.periodic_suspended = True
    assert c.handle(Tick(2000)) == []  # due, but no checkpoint after the stop's savepoint
    aborted = c.handle(Tick(6000))  # the savepoint still expires
    assert isinstance(aborted[0], NotifyCheckpointAborted) and aborted[0].checkpoint_id == 1
    c.periodic_suspended = False  # the stop failed: the job goes on checkpointing
    assert isinstance(c.handle(Tick(7000))[0], TriggerCheckpoint)


def test_a_checkpoint_whose_metadata_is_in_flight_keeps_its_files_when_the_job_ends_or_is_rescaled() -> None:
    """Its pointer may yet land in the HA store (the write goes on): neither its state nor its
    directory may go. Once the job ended no directory goes at all; a failed metadata write
    discards both."""
    for end, directories in ((JobTerminated("CANCELED"), []), (Rescaled(5000, "rescaled"), [2])):
        c = running(max_concurrent=2)
        c.handle(Tick(1000))
        c.handle(Tick(2000))
        ack_all(c, 1, 2500)  # checkpoint 1 is being finalized; 2 is pending
        c.handle(AcknowledgeCheckpoint(2, "src-0", state("src-0", 2)))
        actions = c.handle(end)
        assert sorted(a.checkpoint_id for a in actions if isinstance(a, NotifyCheckpointAborted)) == [1, 2]
        assert [a.checkpoint_id for a in actions if isinstance(a, DiscardState)] == [2]
        assert [a.checkpoint_id for a in actions if isinstance(a, DiscardIncomplete)] == directories
    c = running()
    c.handle(Tick(1000))
    ack_all(c, 1, 1500)
    actions = c.handle(MetadataWriteFailed(1, "disk full", 1600))
    assert DiscardIncomplete(1) in actions and any(isinstance(a, DiscardState) for a in actions)
