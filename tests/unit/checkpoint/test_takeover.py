"""Checkpoints continue when a new leader adopts a job's running tasks (issue 18, item 3): the
CheckpointCoordinator's ``TasksAdopted`` (``checkpoint/takeover.py``), the RestorePlanner without
a restore, savepoint triggers of the earlier leader, and the two-phase-commit FileSink receiving a
completion notice twice. Events in, actions out; the sink with real files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.unit.checkpoint.test_coordinator import ALL, TASKS, config, state
from tests.unit.checkpoint.test_restore_planner import VERTICES, done
from tests.unit.operators.test_checkpointed_operators import ctx, snapshot
from yarnflink.checkpoint.coordinator import (
    AcknowledgeCheckpoint,
    CheckpointCoordinator,
    CheckpointsRecovered,
    DiscardIncomplete,
    DiscardState,
    MetadataWritten,
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    RequestSavepoint,
    ScheduleTimeout,
    TasksAdopted,
    Tick,
    TriggerCheckpoint,
    WriteMetadata,
)
from yarnflink.checkpoint.restore import RestoreCounted, RestorePlanner, RestoreState, ResumedFromHa, TaskDeploying
from yarnflink.checkpoint.storage import FsCheckpointStorage
from yarnflink.checkpoint.takeover import IN_FLIGHT_LIMIT, LEADER_CHANGE, abort_reason, in_flight_ids
from yarnflink.common.records import Batch
from yarnflink.operators.sinks import FileSink
from yarnflink.operators.specs import FileSinkSpec

ADOPTED = tuple((t, 3) for t in ALL)  # attempt numbers of the earlier leader's ExecutionGraph


def new_leader(**kw) -> CheckpointCoordinator:  # type: ignore[no-untyped-def]
    """The recovered job's coordinator: its tasks are not running until adopted."""
    return CheckpointCoordinator("job", TASKS, config(**kw), start_time=50_000)


def test_all_present_the_latest_completed_is_notified_and_ids_continue_from_the_counter() -> None:
    c = new_leader()
    actions = c.handle(TasksAdopted(ADOPTED, (), published_id=5, handed_out_below=6, now=10_000))
    # the completion notice may never have reached the tasks: the new leader sends it (again)
    assert actions == [NotifyCheckpointComplete(5, ALL)]
    assert all(c.status[t] == "RUNNING" and c.attempts[t] == 3 for t in ALL)
    assert c.next_checkpoint_id == 6
    # the first checkpoint under the new leader at the next tick (not after a whole interval)
    trigger = c.handle(Tick(10_001))
    assert trigger == [TriggerCheckpoint(6, 10_001, ("src-0", "src-1"), "EXACTLY_ONCE"), ScheduleTimeout(6, 15_001)]
    # the adopted attempts acknowledge it: it completes under the new leader
    for t in ALL:
        last = c.handle(AcknowledgeCheckpoint(6, t, state(t, 6), attempt=3, now=10_100))
    assert [type(a) for a in last] == [WriteMetadata]
    done = c.handle(MetadataWritten(6, "file:///chk/job/chk-6", 10_200))
    assert done == [NotifyCheckpointComplete(6, ALL)]


def test_a_checkpoint_in_flight_at_the_crash_is_aborted_its_files_discarded_and_not_counted() -> None:
    c = new_leader(tolerable_failures=0)
    actions = c.handle(TasksAdopted(ADOPTED, (), published_id=5, handed_out_below=7, now=10_000))
    assert actions[0] == NotifyCheckpointComplete(5, ALL)
    abort = actions[1]
    assert isinstance(abort, NotifyCheckpointAborted)
    assert (abort.checkpoint_id, abort.tasks) == (6, ALL)
    assert abort.reason.startswith(LEADER_CHANGE) and "the latest completed is 5" in abort.reason
    assert actions[2:] == [DiscardIncomplete(6)]
    assert c.consecutive_failures == 0  # a takeover is no checkpoint failure
    # its acknowledgements were queued at the TaskExecutors and reach the new leader late
    late = c.handle(AcknowledgeCheckpoint(6, "src-0", state("src-0", 6), attempt=3, now=10_050))
    assert late == [DiscardState(6, tuple(state("src-0", 6).stream_handles()))]
    # never an id an earlier leader may have used
    assert c.handle(Tick(10_100))[0] == TriggerCheckpoint(7, 10_100, ("src-0", "src-1"), "EXACTLY_ONCE")


def test_no_checkpoint_completed_before_the_takeover_nothing_to_notify() -> None:
    c = new_leader()
    assert c.handle(TasksAdopted(ADOPTED, (), published_id=0, handed_out_below=2, now=1)) == [
        NotifyCheckpointAborted(1, ALL, abort_reason(1, 0)),
        DiscardIncomplete(1),
    ]
    # a job taken over before it ever drew an id: nothing at all
    fresh = new_leader()
    assert fresh.handle(TasksAdopted(ADOPTED, (), published_id=0, handed_out_below=1, now=1)) == []
    assert fresh.next_checkpoint_id == 1


def test_finished_tasks_are_not_notified_and_their_successors_start_the_next_checkpoint() -> None:
    c = new_leader()
    running = tuple((t, 0) for t in ("win-0", "win-1"))
    actions = c.handle(TasksAdopted(running, ("src-0", "src-1"), published_id=4, handed_out_below=5, now=0))
    assert actions == [NotifyCheckpointComplete(4, ("win-0", "win-1"))]
    assert c.handle(Tick(1))[0] == TriggerCheckpoint(5, 1, ("win-0", "win-1"), "EXACTLY_ONCE")


def test_acknowledgements_of_another_attempt_than_the_adopted_one_are_late() -> None:
    c = new_leader()
    c.handle(TasksAdopted(ADOPTED, (), published_id=1, handed_out_below=2, now=0))
    c.handle(Tick(1))
    stale = c.handle(AcknowledgeCheckpoint(2, "src-0", state("src-0", 2), attempt=2, now=2))
    assert [type(a) for a in stale] == [DiscardState]
    assert "src-0" in c.pending[2].not_yet_acknowledged


def test_adoption_after_a_checkpoint_was_triggered_is_refused_and_unknown_tasks_too() -> None:
    c = new_leader()
    c.handle(TasksAdopted(ADOPTED, (), 0, 1, 0))
    c.handle(Tick(1))
    with pytest.raises(ValueError, match="before any checkpoint"):
        c.handle(TasksAdopted(ADOPTED, (), 0, 1, 2))
    with pytest.raises(KeyError, match="nope"):
        new_leader().handle(TasksAdopted((("nope", 0),), (), 0, 1, 0))


def test_in_flight_ids_are_those_handed_out_above_the_latest_completed_at_most_the_limit() -> None:
    assert in_flight_ids(5, 6) == []
    assert in_flight_ids(5, 8) == [6, 7]
    assert in_flight_ids(0, 1) == []
    assert in_flight_ids(2, 100) == list(range(100 - IN_FLIGHT_LIMIT, 100))
    with pytest.raises(ValueError, match="bad takeover state"):
        in_flight_ids(-1, 3)


def test_savepoint_triggers_of_the_earlier_leader_get_a_failed_result_naming_the_takeover() -> None:
    c = new_leader()
    assert c.savepoints.status("abc") is None  # no takeover: unknown stays unknown (REST 404)
    c.handle(TasksAdopted(ADOPTED, (), published_id=5, handed_out_below=7, now=0))
    status = c.savepoints.status("abc")
    assert status is not None and status["status"] == {"id": "COMPLETED"}
    cause = status["operation"]["failure-cause"]["stack-trace"]
    assert "savepoint trigger abc is unknown to this leader" in cause and "Trigger the savepoint again" in cause
    # a savepoint triggered under the new leader is tracked as usual
    c.handle(RequestSavepoint("new", "file:///sp", 1))
    assert c.savepoints.status("new") == {"status": {"id": "IN_PROGRESS"}}


def test_a_stop_with_savepoint_in_flight_at_the_crash_is_aborted_like_any_checkpoint() -> None:
    # the synchronous savepoint 6 had suspended the tasks; its abort notice resumes them (task side)
    c = new_leader()
    actions = c.handle(TasksAdopted(ADOPTED, (), published_id=5, handed_out_below=7, now=0))
    assert any(isinstance(a, NotifyCheckpointAborted) and a.checkpoint_id == 6 for a in actions)
    assert c.savepoint_refusal(synchronous=True) is None  # a new stop-with-savepoint may be triggered


# ----------------------------------------------------------------------------- restore planner
def test_adopted_tasks_restore_nothing_but_a_later_restart_restores_the_latest() -> None:
    planner = RestorePlanner(VERTICES)
    actions = planner.handle(ResumedFromHa(done(5), "file:///chk/job/chk-5", 5, (done(4),), (), 0, adopted=True))
    assert actions == [CheckpointsRecovered(6, (done(4), done(5)))]  # no RestoreCounted: nothing restored
    # a region failover later (attempt 4 of an adopted attempt 3, first restart of this graph)
    later = planner.handle(TaskDeploying("window", 0, 4, 1, done(5), 1))
    assert [type(a) for a in later] == [RestoreCounted, RestoreState]
    assert isinstance(later[1], RestoreState) and later[1].checkpoint_id == 5


def test_the_driver_feeds_recovered_checkpoints_and_the_adoption() -> None:
    c = new_leader()
    cp = done(5)
    c.handle(CheckpointsRecovered(6, (cp,)))
    c.handle(TasksAdopted(ADOPTED, (), published_id=5, handed_out_below=6, now=0))
    assert c.latest_completed() is cp
    c.handle(Tick(1))
    write = ack_all_attempt(c, 6, 3)
    assert isinstance(write[0], WriteMetadata)


def ack_all_attempt(c: CheckpointCoordinator, cid: int, attempt: int) -> list:
    actions: list = []
    for t in ALL:
        actions = c.handle(AcknowledgeCheckpoint(cid, t, state(t, cid), attempt=attempt, now=5))
    return actions


# ----------------------------------------------------------------------------- the sink commits once
def test_the_file_sink_commits_a_checkpoint_exactly_once_when_notified_twice(tmp_path: Path) -> None:
    storage = FsCheckpointStorage(f"file://{tmp_path / 'chk'}", "job")
    out = tmp_path / "out"
    sink = FileSink(FileSinkSpec(str(out), "jsonl"))
    sink.open(ctx())
    sink.process_batch(Batch.from_rows([1, 2]))
    snapshot(sink, storage, 5)
    sink.process_batch(Batch.from_rows([3]))
    snapshot(sink, storage, 6)  # in flight at the crash: aborted by the new leader
    sink.process_batch(Batch.from_rows([4]))
    sink.notify_checkpoint_complete(5)  # the earlier leader's notice
    first = sorted(os.listdir(out))
    sink.notify_checkpoint_complete(5)  # the new leader's, again
    assert sorted(os.listdir(out)) == first
    assert [f for f in first if f.startswith("part-")] == ["part-0-0.jsonl"]
    # checkpoint 6 aborted: its file stays pending and is committed with the next one (7)
    snapshot(sink, storage, 7)
    sink.notify_checkpoint_complete(7)
    sink.notify_checkpoint_complete(7)
    rows = [json.loads(line) for f in sorted(os.listdir(out)) if f.startswith("part-") for line in open(out / f)]
    assert rows == [1, 2, 3, 4]
