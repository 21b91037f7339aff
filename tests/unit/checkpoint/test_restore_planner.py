"""What a job restores, as events in and actions out: the ``RestorePlanner`` (the savepoint or HA
checkpoint a job starts from, what each deployed task restores, restores counted once per
restart) and the CheckpointCoordinator's restore events (checkpoints recovered, HA ids, the
fallback from a damaged latest checkpoint, a rescale)."""

from __future__ import annotations

import pytest

from tests.unit.checkpoint.test_coordinator import ALL, TASKS, complete, config, running
from tests.unit.checkpoint.test_metadata_and_assignment import checkpoint
from yarnflink.checkpoint.assignment import RestoreVertex
from yarnflink.checkpoint.coordinator import (
    AcknowledgeCheckpoint,
    CheckpointCoordinator,
    CheckpointIdReserved,
    CheckpointsRecovered,
    CheckpointUnrestorable,
    DiscardIncomplete,
    MetadataWritten,
    NotifyCheckpointAborted,
    RequestSavepoint,
    Rescaled,
    RestoreFallback,
    TaskDeployed,
    TaskFailed,
    TaskRunning,
    Tick,
    TriggerCheckpoint,
    WriteMetadata,
)
from yarnflink.checkpoint.metadata import CheckpointMetadataError, CompletedCheckpoint
from yarnflink.checkpoint.restore import (
    CheckpointSkipped,
    CheckpointValidated,
    GraphRescaled,
    NoRestorableCheckpoint,
    RestoreCounted,
    RestorePlanner,
    RestoreState,
    ResumedFromHa,
    RetainedRead,
    StartedFromSavepoint,
    TaskDeploying,
    resume_from_ha,
)

VERTICES = [RestoreVertex("window", 2, 128, ("window-op", "sink-op"))]


def done(cid: int) -> CompletedCheckpoint:
    return CompletedCheckpoint("job", cid, 100 * cid, external_pointer=f"file:///chk/job/chk-{cid}")


# ----------------------------------------------------------------------------- coordinator
def test_recovered_checkpoints_are_taken_over_and_the_ids_continue() -> None:
    c = running()
    assert c.handle(CheckpointsRecovered(8, (done(7), done(5)))) == []
    assert [x.checkpoint_id for x in c.completed] == [5, 7] and c.next_checkpoint_id == 8
    assert c.handle(CheckpointsRecovered(4)) == []  # a savepoint older than the ids: they never go back
    assert [x.checkpoint_id for x in c.completed] == [5, 7] and c.next_checkpoint_id == 8
    assert c.handle(Tick(1000))[0] == TriggerCheckpoint(8, 1000, ("src-0", "src-1"), "EXACTLY_ONCE")


def test_an_id_reserved_from_the_ha_counter_moves_the_ids_on() -> None:
    c = running()
    assert c.handle(CheckpointIdReserved(12)) == [] and c.next_checkpoint_id == 12
    c.handle(CheckpointIdReserved(3))
    assert c.next_checkpoint_id == 12


def test_a_damaged_latest_checkpoint_falls_back_to_the_previous_retained_one() -> None:
    c = CheckpointCoordinator("job", TASKS, config(), completed=[done(3), done(4)])
    assert c.handle(CheckpointUnrestorable(3, "not the latest")) == []
    assert c.handle(CheckpointUnrestorable(4, "chk-4/keyed-0.arrow is missing")) == [
        RestoreFallback(4, 3, "chk-4/keyed-0.arrow is missing")
    ]
    assert [x.checkpoint_id for x in c.completed] == [3] and c.next_checkpoint_id == 5  # 4 is not reused
    assert c.handle(CheckpointUnrestorable(3, "also damaged")) == []  # the only one: restored anyway
    assert [x.checkpoint_id for x in c.completed] == [3]


def test_a_rescale_aborts_what_is_pending_and_the_continuing_coordinator_keeps_the_rest() -> None:
    c = running()
    c.handle(CheckpointsRecovered(1, (done(1),)))
    trigger = c.handle(Tick(1000))[0]
    acks = [a for t in ALL for a in c.handle(AcknowledgeCheckpoint(trigger.checkpoint_id, t, None, now=1100))]
    assert isinstance(acks[-1], WriteMetadata)  # being finalized
    c.handle(RequestSavepoint("t1", None, 1200))  # a refused one: its result carries on
    aborted = c.handle(Rescaled(1300, "the job was rescaled to 4"))
    assert [type(a) for a in aborted] == [NotifyCheckpointAborted]
    assert aborted[0].checkpoint_id == trigger.checkpoint_id and "rescaled to 4" in aborted[0].reason
    rescaled = CheckpointCoordinator.continuing(c, [TASKS[0], TASKS[1]], 1300)
    assert rescaled is not c and sorted(rescaled.tasks) == ["src-0", "src-1"] and not rescaled.pending
    assert [x.checkpoint_id for x in rescaled.completed] == [1]
    assert rescaled.next_checkpoint_id == trigger.checkpoint_id + 1
    assert rescaled.savepoints.status("t1") is not None
    assert rescaled.handle(MetadataWritten(trigger.checkpoint_id, "file:///chk-2", 1400)) == []  # never completes
    for t in ("src-0", "src-1"):
        rescaled.handle(TaskRunning(t))
    assert rescaled.handle(Tick(2299)) == []  # the interval counts from the rescale
    assert rescaled.handle(Tick(2300))[0].checkpoint_id == trigger.checkpoint_id + 1


def test_a_rescale_lifts_an_aborted_stops_suspension_and_keeps_a_completed_cancels() -> None:
    c = running()
    c.handle(RequestSavepoint("stop", "file:///sp", 500, stop=True))
    c.handle(Rescaled(600, "rescaled"))  # the stop's savepoint is aborted: the job goes on
    assert not c.periodic_suspended and not CheckpointCoordinator.continuing(c, TASKS, 600).periodic_suspended
    c = running()
    c.handle(RequestSavepoint("cancel", "file:///sp", 500, cancel_job=True))
    complete(c, 1, 600)  # the job is being cancelled
    assert c.handle(Rescaled(700, "rescaled")) == []
    rescaled = CheckpointCoordinator.continuing(c, TASKS, 700)
    assert rescaled.periodic_suspended and rescaled.cancel_checkpoint_id == 1


def test_a_redeployed_task_counts_as_failed_and_pending_checkpoints_cannot_complete() -> None:
    c = CheckpointCoordinator("job", TASKS, config())
    assert c.handle(TaskDeployed("src-0", 10)) == []  # the first deployment
    for t in ALL:
        c.handle(TaskRunning(t))
    assert c.handle(TaskDeployed("src-1", 20)) == [] and c.status["src-1"] == "CREATED"  # redeployed
    c.handle(TaskRunning("src-1", attempt=1))
    assert c.handle(Tick(1000))[0].checkpoint_id == 1
    c.handle(TaskFailed("win-1", 1100))  # (aborts 1; win-1 is CREATED again)
    assert c.handle(Tick(2000)) == []  # not all tasks run
    c.handle(TaskRunning("win-1", attempt=1))
    assert c.handle(Tick(2000))[0].checkpoint_id == 2
    aborted, discard = c.handle(TaskDeployed("win-1", 2100))  # a CREATED task, but a checkpoint is pending
    assert isinstance(aborted, NotifyCheckpointAborted) and aborted.checkpoint_id == 2 and not c.pending
    assert discard == DiscardIncomplete(2)


# ----------------------------------------------------------------------------- planner
def test_a_savepoint_that_fits_the_job_is_restored_at_the_first_start() -> None:
    planner = RestorePlanner(VERTICES)
    sp = checkpoint()
    actions = planner.handle(StartedFromSavepoint(sp, "file:///given", ("chk-4 skipped: damaged",), 50))
    assert actions == [CheckpointsRecovered(4), RestoreCounted(sp, "s3://b/job/chk-3", ("chk-4 skipped: damaged",), 50)]
    (state,) = planner.handle(TaskDeploying("window", 1, 0, 0, None, 60))  # first start: not counted again
    assert isinstance(state, RestoreState) and state.checkpoint_id == 3 and state.state is not None
    assert set(state.state.subtask_states) == {"window-op"}


def test_a_savepoint_that_does_not_fit_the_job_is_refused_naming_the_problem() -> None:
    with pytest.raises(ValueError, match="window-op"):
        RestorePlanner([RestoreVertex("other", 2, 128, ("other-op",))]).handle(
            StartedFromSavepoint(checkpoint(), "file:///given", (), 50)
        )
    planner = RestorePlanner([RestoreVertex("other", 2, 128, ("other-op",))], allow_non_restored_state=True)
    assert planner.handle(StartedFromSavepoint(checkpoint(), "file:///given", (), 50))[0] == CheckpointsRecovered(4)


def test_a_job_resumed_from_ha_owns_the_retained_checkpoints_and_skips_the_ids_of_a_damaged_one() -> None:
    planner = RestorePlanner(VERTICES)
    planner.handle(CheckpointSkipped("earlier warning"))
    actions = planner.handle(ResumedFromHa(done(5), "file:///chk/job/chk-5", 7, (done(4),), ("chk-7: damaged",), 9))
    assert actions == [
        CheckpointsRecovered(8, (done(4), done(5))),
        RestoreCounted(done(5), "file:///chk/job/chk-5", ("earlier warning", "chk-7: damaged"), 9),
    ]
    assert planner.initial == done(5)


def test_a_recovering_leader_skips_retained_pointers_without_valid_files_for_the_previous_valid_one() -> None:
    reads = [
        RetainedRead(4, "file:///chk/job/chk-4/_metadata", done(4)),
        RetainedRead(6, "file:///chk/job/chk-6/_metadata", problem="the file does not exist (...)"),
        RetainedRead(3, "file:///chk/job/chk-3/_metadata", problem="checksum mismatch"),
        RetainedRead(5, "file:///chk/job/chk-5/_metadata", done(5)),
        RetainedRead(7, "file:///chk/job/chk-7/_metadata", done(2)),  # a pointer to another checkpoint's files
    ]
    resumed = resume_from_ha(reads, 9)
    assert resumed.checkpoint == done(5) and resumed.pointer == "file:///chk/job/chk-5/_metadata"
    assert resumed.published_id == 7 and resumed.older == (done(4),)  # 3 is neither restored nor owned
    assert resumed.skipped == (
        "checkpoint 7 (file:///chk/job/chk-7/_metadata) skipped on recovery: its _metadata describes "
        "checkpoint 2; checkpoint 5 restored instead",
        "checkpoint 6 (file:///chk/job/chk-6/_metadata) skipped on recovery: the file does not exist (...); "
        "checkpoint 5 restored instead",
    )
    assert resume_from_ha([RetainedRead(4, "p4", done(4))], 1).skipped == ()


def test_a_recovering_leader_that_finds_no_valid_checkpoint_fails_naming_each() -> None:
    """As Flink's CompletedCheckpointStore: it reads none of its checkpoints, the job does not
    start from scratch silently."""
    with pytest.raises(NoRestorableCheckpoint) as e:
        resume_from_ha([RetainedRead(6, "p6", problem="gone"), RetainedRead(5, "p5", problem="corrupt")], 1)
    assert "none of the 2 checkpoint(s)" in str(e.value)
    assert "checkpoint 6 (p6) skipped on recovery: gone" in str(e.value) and "checkpoint 5 (p5)" in str(e.value)


def test_a_restarted_task_restores_the_latest_checkpoint_counted_once_per_restart() -> None:
    planner = RestorePlanner(VERTICES)
    assert planner.handle(TaskDeploying("window", 0, 0, 0, None, 10)) == [RestoreState(0, None)]
    latest = checkpoint()
    first = planner.handle(TaskDeploying("window", 0, 1, 1, latest, 20))
    assert first[0] == RestoreCounted(latest, "s3://b/job/chk-3", (), 20)
    assert isinstance(first[1], RestoreState) and first[1].checkpoint_id == 3
    assert [type(a) for a in planner.handle(TaskDeploying("window", 1, 1, 1, latest, 21))] == [RestoreState]
    assert [type(a) for a in planner.handle(TaskDeploying("window", 1, 2, 2, latest, 22))] == [
        RestoreCounted,
        RestoreState,
    ]
    assert planner.handle(GraphRescaled((RestoreVertex("window", 4, 128, ("window-op", "sink-op")),))) == []
    rescaled = planner.handle(TaskDeploying("window", 3, 2, 2, latest, 23))  # the rescale's restore counts
    assert isinstance(rescaled[0], RestoreCounted) and isinstance(rescaled[1], RestoreState)
    assert rescaled[1].state is not None  # subtask 3 of 4 gets its key groups


def test_a_checkpoint_that_no_longer_fits_the_rescaled_job_fails_the_deployment() -> None:
    planner = RestorePlanner([RestoreVertex("window", 2, 256, ("window-op", "sink-op"))])
    with pytest.raises(CheckpointMetadataError, match="max parallelism"):
        planner.handle(TaskDeploying("window", 0, 1, 1, checkpoint(), 10))


def test_checkpoints_are_validated_once() -> None:
    planner = RestorePlanner(VERTICES)
    assert planner.needs_validation(3)
    assert planner.handle(CheckpointValidated(3)) == []
    assert not planner.needs_validation(3) and planner.needs_validation(4)
