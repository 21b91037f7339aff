"""Per-subtask checkpoint statistics and Flink's REST shapes for one checkpoint (pure).

A Task acknowledges a checkpoint with its statistics (``metrics`` in the ack payload: the
synchronous and asynchronous parts of its snapshot, its alignment time, the delay from the trigger
to its first barrier, its state size). The JobMaster keeps them per checkpoint of its history
(``record``) and the REST API shapes them as Flink does:

* ``GET /jobs/{jobid}/checkpoints/details/{checkpointid}``: ``checkpoint_details`` -- the
  checkpoint (``CheckpointStatistics``) with ``tasks``: one ``TaskCheckpointStatistics`` per vertex;
* ``GET /jobs/{jobid}/checkpoints/details/{checkpointid}/subtasks/{vertexid}``:
  ``task_checkpoint_details`` -- the vertex's statistics with a ``summary`` (min/max/avg and
  percentiles of ``end_to_end_duration``, ``state_size``, ``checkpointed_size``,
  ``checkpoint_duration.sync`` / ``.async``, ``alignment.duration``, ``start_delay``) and its
  ``subtasks``.

Unaligned checkpoints (``execution.checkpointing.unaligned.enabled``): a subtask reports
``unaligned`` and ``persisted_data`` (bytes of in-flight input data written with its state);
they give ``unaligned_checkpoint`` and ``alignment.persisted`` per subtask and ``persisted_data``
per vertex and checkpoint. Nothing is buffered by alignment in yarnflink's sense of Flink's
``alignment.buffered`` / ``processed`` / ``processed_data``: those are 0.
Durations are milliseconds, sizes bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: what a Task reports per checkpoint (the ack payload's ``metrics``)
FIELDS = ("sync_ms", "async_ms", "alignment_ms", "start_delay_ms", "state_size", "checkpointed_size")
#: reported by the subtasks of unaligned checkpoints only
UNALIGNED_FIELDS = ("persisted_data", "unaligned")
#: keys of the JobMaster's checkpoint statistics that are not part of ``/jobs/{id}/checkpoints``
PRIVATE_KEYS = ("subtask_details", "parallelism")


def _number(value: Any) -> float:
    """A finite, non-negative number, else 0 (a bad value from a task never breaks the REST API)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0.0
    return max(0.0, float(value))


def subtask_record(index: int, metrics: Any, ack_timestamp: int) -> dict[str, Any]:
    """A subtask's statistics from its acknowledgement (``metrics`` may be missing or malformed)."""
    m = metrics if isinstance(metrics, Mapping) else {}
    rec: dict[str, Any] = {f: _number(m.get(f)) for f in FIELDS}
    rec["state_size"] = int(rec["state_size"])
    rec["checkpointed_size"] = int(rec["checkpointed_size"])
    if m.get("unaligned"):
        rec["persisted_data"] = int(_number(m.get("persisted_data")))
        rec["unaligned"] = True
    rec["index"] = int(index)
    rec["ack_timestamp"] = int(ack_timestamp)
    return rec


def public_stats(stats: Mapping[str, Any]) -> dict[str, Any]:
    """``GET /jobs/{id}/checkpoints``: the statistics without the per-subtask details."""
    return {k: v for k, v in stats.items() if k not in PRIVATE_KEYS}


def min_max_avg(values: list[float]) -> dict[str, Any]:
    """Flink's ``StatsSummaryDto``: min, max, avg and percentiles (0 for no values)."""
    if not values:
        return {"min": 0, "max": 0, "avg": 0, "p50": 0.0, "p90": 0.0, "p95": 0.0, "p99": 0.0, "p999": 0.0}
    s = sorted(values)

    def pct(q: float) -> float:
        pos = q * (len(s) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(s) - 1)
        return float(s[lo] + (s[hi] - s[lo]) * (pos - lo))

    return {
        "min": round(s[0]),
        "max": round(s[-1]),
        "avg": round(sum(s) / len(s)),
        "p50": pct(0.5),
        "p90": pct(0.9),
        "p95": pct(0.95),
        "p99": pct(0.99),
        "p999": pct(0.999),
    }


def _entry(stats: Mapping[str, Any], checkpoint_id: int) -> Mapping[str, Any] | None:
    return next((h for h in stats.get("history", []) if h.get("id") == checkpoint_id), None)


def _subtasks(stats: Mapping[str, Any], checkpoint_id: int, vertex_id: str) -> list[dict[str, Any]]:
    per_vertex = (stats.get("subtask_details") or {}).get(str(checkpoint_id)) or {}
    return sorted((dict(r) for r in (per_vertex.get(vertex_id) or {}).values()), key=lambda r: r["index"])


def _duration(entry: Mapping[str, Any], rec: Mapping[str, Any]) -> int:
    return max(0, int(rec["ack_timestamp"]) - int(entry.get("trigger_timestamp") or rec["ack_timestamp"]))


def _task_stats(
    entry: Mapping[str, Any], vertex_id: str, parallelism: int, subs: list[dict[str, Any]]
) -> dict[str, Any]:
    latest = max((int(r["ack_timestamp"]) for r in subs), default=0)
    return {
        "id": entry["id"],
        "status": entry.get("status", "IN_PROGRESS"),
        "latest_ack_timestamp": latest,
        "checkpointed_size": sum(int(r["checkpointed_size"]) for r in subs),
        "state_size": sum(int(r["state_size"]) for r in subs),
        "end_to_end_duration": max((_duration(entry, r) for r in subs), default=0),
        "alignment_buffered": 0,
        "processed_data": 0,
        "persisted_data": sum(int(r.get("persisted_data", 0)) for r in subs),
        "unaligned_checkpoint": any(r.get("unaligned") for r in subs),
        "num_subtasks": parallelism,
        "num_acknowledged_subtasks": len(subs),
    }


def checkpoint_details(stats: Mapping[str, Any], checkpoint_id: int) -> dict[str, Any] | None:
    """Flink's ``CheckpointStatistics`` of one checkpoint of the history, with ``tasks``; None if
    the checkpoint is unknown (never taken, or no longer in the history)."""
    entry = _entry(stats, checkpoint_id)
    if entry is None:
        return None
    parallelism: Mapping[str, int] = stats.get("parallelism") or {}
    status = str(entry.get("status", "IN_PROGRESS"))
    out = {k: v for k, v in entry.items()}
    tasks = {
        vid: _task_stats(entry, vid, int(p), _subtasks(stats, checkpoint_id, vid)) for vid, p in parallelism.items()
    }
    out.update(
        {
            "className": {"COMPLETED": "completed", "FAILED": "failed"}.get(status, "in_progress"),
            "checkpoint_type": "SAVEPOINT" if entry.get("is_savepoint") else "CHECKPOINT",
            "alignment_buffered": 0,
            "processed_data": 0,
            "persisted_data": sum(t["persisted_data"] for t in tasks.values()),
            "unaligned_checkpoint": any(t["unaligned_checkpoint"] for t in tasks.values()),
            "tasks": tasks,
        }
    )
    return out


def task_checkpoint_details(stats: Mapping[str, Any], checkpoint_id: int, vertex_id: str) -> dict[str, Any] | None:
    """Flink's ``TaskCheckpointStatisticsWithSubtaskDetails``; None if the checkpoint or the
    vertex is unknown."""
    entry = _entry(stats, checkpoint_id)
    parallelism: Mapping[str, int] = stats.get("parallelism") or {}
    if entry is None or vertex_id not in parallelism:
        return None
    subs = _subtasks(stats, checkpoint_id, vertex_id)
    out = _task_stats(entry, vertex_id, int(parallelism[vertex_id]), subs)
    out["summary"] = {
        "checkpointed_size": min_max_avg([r["checkpointed_size"] for r in subs]),
        "state_size": min_max_avg([r["state_size"] for r in subs]),
        "end_to_end_duration": min_max_avg([_duration(entry, r) for r in subs]),
        "checkpoint_duration": {
            "sync": min_max_avg([r["sync_ms"] for r in subs]),
            "async": min_max_avg([r["async_ms"] for r in subs]),
        },
        "alignment": {
            "buffered": min_max_avg([]),
            "processed": min_max_avg([]),
            "persisted": min_max_avg([r.get("persisted_data", 0) for r in subs]),
            "duration": min_max_avg([r["alignment_ms"] for r in subs]),
        },
        "start_delay": min_max_avg([r["start_delay_ms"] for r in subs]),
    }
    acked = {r["index"]: r for r in subs}
    subtasks: list[dict[str, Any]] = []
    for i in range(int(parallelism[vertex_id])):
        r = acked.get(i)
        if r is None:
            subtasks.append({"index": i, "status": "pending_or_failed"})
            continue
        subtasks.append(
            {
                "index": i,
                "status": "completed",
                "ack_timestamp": r["ack_timestamp"],
                "end_to_end_duration": _duration(entry, r),
                "state_size": r["state_size"],
                "checkpointed_size": r["checkpointed_size"],
                "checkpoint": {"sync": round(r["sync_ms"]), "async": round(r["async_ms"])},
                "alignment": {
                    "buffered": 0,
                    "processed": 0,
                    "persisted": int(r.get("persisted_data", 0)),
                    "duration": round(r["alignment_ms"]),
                },
                "start_delay": round(r["start_delay_ms"]),
                "unaligned_checkpoint": bool(r.get("unaligned")),
                "aborted": False,
            }
        )
    out["subtasks"] = subtasks
    return out
