"""The CheckpointStatsTracker follows the coordinator's actions (pure, times passed in): the
history and counts of ``GET /jobs/:id/checkpoints``, restores, per-subtask statistics."""

from __future__ import annotations

from tests.unit.checkpoint.test_coordinator import ack_all, running, state
from yarnflink.checkpoint.coordinator import DeclineCheckpoint, MetadataWritten, Tick
from yarnflink.checkpoint.metadata import CompletedCheckpoint
from yarnflink.checkpoint.stats import CheckpointStatsTracker


def test_a_completed_checkpoint_is_in_the_history_with_its_pointer_and_size() -> None:
    c, stats = running(), CheckpointStatsTracker()
    stats.observe(c.handle(Tick(1000)), 1000, 4)
    (entry,) = stats.history
    assert entry["status"] == "IN_PROGRESS" and entry["num_subtasks"] == 4 and entry["trigger_timestamp"] == 1000
    assert stats.to_json({})["counts"] == {"restored": 0, "total": 1, "in_progress": 1, "completed": 0, "failed": 0}
    stats.observe(ack_all(c, 1, 1200), 1200, 4)
    assert stats.history[0]["status"] == "IN_PROGRESS"  # being finalized
    stats.observe(c.handle(MetadataWritten(1, "file:///chk/job/chk-1", 1300)), 1350, 4)
    entry = stats.history[0]
    assert entry["status"] == "COMPLETED" and entry["external_path"] == "file:///chk/job/chk-1"
    assert entry["state_size"] == 40 == state("src-0", 1).stream_handles()[0].size * 4
    assert entry["end_to_end_duration"] == 350 and entry["num_acknowledged_subtasks"] == 4
    out = stats.to_json({"src": 2})
    assert out["latest"]["completed"] == entry and out["latest"]["failed"] is None
    assert out["summary"]["state_size"] == {"min": 40, "max": 40, "avg": 40} and out["parallelism"] == {"src": 2}


def test_an_aborted_checkpoint_is_failed_with_its_reason() -> None:
    c, stats = running(), CheckpointStatsTracker()
    stats.observe(c.handle(Tick(1000)), 1000, 4)
    stats.observe(c.handle(DeclineCheckpoint(1, "win-0", "disk full", now=1100)), 1100, 4)
    entry = stats.history[0]
    assert entry["status"] == "FAILED" and "disk full" in entry["failure"] and entry["end_to_end_duration"] == 100
    assert stats.to_json({})["counts"]["failed"] == 1 and stats.to_json({})["latest"]["failed"] == entry


def test_the_history_is_bounded_and_subtask_statistics_go_with_it() -> None:
    c, stats = running(), CheckpointStatsTracker(history_size=2)
    stats.observe(c.handle(Tick(1000)), 1000, 4)
    stats.subtask_acknowledged(1, "src", {"index": 0, "state_size": 10})
    stats.subtask_acknowledged(9, "src", {"index": 0})  # not in the history: dropped
    assert stats.to_json({})["subtask_details"] == {"1": {"src": {"0": {"index": 0, "state_size": 10}}}}
    for now in (2000, 3000):
        stats.observe(c.handle(DeclineCheckpoint(len(stats.history), "win-0", "x", now=now)), now, 4)
        stats.observe(c.handle(Tick(now)), now, 4)
    assert [h["id"] for h in stats.history] == [3, 2]
    stats.subtask_acknowledged(3, "src", {"index": 1})
    assert list(stats.to_json({})["subtask_details"]) == ["3"]


def test_restores_are_counted_and_the_latest_is_shown() -> None:
    stats = CheckpointStatsTracker()
    stats.restored(CompletedCheckpoint("job", 7, 0, is_savepoint=True), "file:///sp", ["chk-8: damaged"], 50)
    out = stats.to_json({})
    assert out["counts"]["restored"] == 1
    assert out["latest"]["restored"] == {
        "id": 7,
        "external_path": "file:///sp",
        "restore_timestamp": 50,
        "is_savepoint": True,
        "skipped": ["chk-8: damaged"],
    }
