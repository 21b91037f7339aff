"""Per-subtask checkpoint statistics and their REST shapes (``yarnflink.metrics.checkpoint_stats``)."""

from __future__ import annotations

from yarnflink.metrics.checkpoint_stats import (
    checkpoint_details,
    min_max_avg,
    public_stats,
    subtask_record,
    task_checkpoint_details,
)


def _stats() -> dict:
    recs = {
        "0": subtask_record(
            0,
            {
                "sync_ms": 2.4,
                "async_ms": 30.0,
                "alignment_ms": 5.0,
                "start_delay_ms": 3,
                "state_size": 1000,
                "checkpointed_size": 1000,
            },
            1_100,
        ),
        "1": subtask_record(
            1,
            {
                "sync_ms": 1.0,
                "async_ms": 10.0,
                "alignment_ms": 15.0,
                "start_delay_ms": 7,
                "state_size": 3000,
                "checkpointed_size": 3000,
            },
            1_200,
        ),
    }
    return {
        "counts": {"completed": 1},
        "history": [
            {
                "id": 7,
                "status": "COMPLETED",
                "is_savepoint": False,
                "trigger_timestamp": 1_000,
                "latest_ack_timestamp": 1_250,
                "end_to_end_duration": 250,
                "state_size": 4000,
                "checkpointed_size": 4000,
                "num_subtasks": 3,
                "num_acknowledged_subtasks": 3,
            }
        ],
        "subtask_details": {"7": {"win": recs, "src": {"0": subtask_record(0, {"sync_ms": 0.5}, 1_050)}}},
        "parallelism": {"src": 1, "win": 3},
    }


def test_a_bad_metrics_payload_gives_zeros_not_errors() -> None:
    r = subtask_record(2, {"sync_ms": "x", "async_ms": float("nan"), "state_size": -5, "alignment_ms": True}, 9)
    assert r == {
        "sync_ms": 0.0,
        "async_ms": 0.0,
        "alignment_ms": 0.0,
        "start_delay_ms": 0.0,
        "state_size": 0,
        "checkpointed_size": 0,
        "index": 2,
        "ack_timestamp": 9,
    }
    assert subtask_record(0, None, 1)["state_size"] == 0


def test_checkpoint_details_has_flinks_shape_with_tasks_per_vertex() -> None:
    d = checkpoint_details(_stats(), 7)
    assert d is not None and d["className"] == "completed" and d["checkpoint_type"] == "CHECKPOINT"
    win = d["tasks"]["win"]
    assert win["num_subtasks"] == 3 and win["num_acknowledged_subtasks"] == 2
    assert win["state_size"] == 4000 and win["checkpointed_size"] == 4000
    assert win["end_to_end_duration"] == 200 and win["latest_ack_timestamp"] == 1_200
    assert d["tasks"]["src"]["num_acknowledged_subtasks"] == 1
    assert checkpoint_details(_stats(), 8) is None


def test_subtask_details_summarise_sync_async_alignment_and_list_every_subtask() -> None:
    d = task_checkpoint_details(_stats(), 7, "win")
    assert d is not None
    s = d["summary"]
    assert s["checkpoint_duration"]["sync"]["max"] == 2 and s["checkpoint_duration"]["async"]["min"] == 10
    assert s["alignment"]["duration"] == min_max_avg([5.0, 15.0]) and s["start_delay"]["max"] == 7
    assert s["state_size"]["min"] == 1000 and s["end_to_end_duration"]["max"] == 200
    sub0, sub1, sub2 = d["subtasks"]
    assert sub0 == {
        "index": 0,
        "status": "completed",
        "ack_timestamp": 1_100,
        "end_to_end_duration": 100,
        "state_size": 1000,
        "checkpointed_size": 1000,
        "checkpoint": {"sync": 2, "async": 30},
        "alignment": {"buffered": 0, "processed": 0, "persisted": 0, "duration": 5},
        "start_delay": 3,
        "unaligned_checkpoint": False,
        "aborted": False,
    }
    assert sub1["alignment"]["duration"] == 15
    assert sub2 == {"index": 2, "status": "pending_or_failed"}
    assert task_checkpoint_details(_stats(), 7, "nope") is None
    assert task_checkpoint_details(_stats(), 6, "win") is None


def test_the_overview_hides_the_details_and_percentiles_interpolate() -> None:
    assert set(public_stats(_stats())) == {"counts", "history"}
    m = min_max_avg([1.0, 2.0, 3.0, 4.0])
    assert (m["min"], m["max"], m["avg"], m["p50"]) == (1, 4, 2, 2.5)
    assert min_max_avg([])["max"] == 0
    assert checkpoint_details({"counts": {}}, 1) is None  # a job without checkpointing
