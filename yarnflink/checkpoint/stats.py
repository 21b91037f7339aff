"""A job's checkpoint statistics for ``GET /jobs/:id/checkpoints`` (Flink's
``CheckpointStatsTracker``), as pure logic: it follows the ``CheckpointCoordinator``'s actions
(a trigger opens a history entry, a metadata write marks the checkpoint being finalized, the
completion and abort notices close it) and is told of restores and of subtask acknowledgements.
Times are passed in (ms).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from yarnflink.checkpoint import coordinator as cc
from yarnflink.checkpoint.metadata import CompletedCheckpoint

#: checkpoint history kept for the REST API (Flink's web.checkpoints.history default)
HISTORY_SIZE = 10


class CheckpointStatsTracker:
    def __init__(self, history_size: int = HISTORY_SIZE) -> None:
        self.history_size = history_size
        self.counts = {"restored": 0, "total": 0, "in_progress": 0, "completed": 0, "failed": 0}
        #: newest first, ``history_size`` at most
        self.history: list[dict[str, Any]] = []
        #: checkpoint id -> vertex id -> subtask index -> its statistics (details/{cid} in the REST API)
        self.subtask_stats: dict[int, dict[str, dict[int, dict[str, Any]]]] = {}
        self.latest_restored: dict[str, Any] | None = None
        #: the checkpoints being finalized (the coordinator sets their pointer when they complete)
        self._finalizing: dict[int, CompletedCheckpoint] = {}

    def observe(self, actions: Sequence[object], now: int, num_subtasks: int) -> None:
        """The coordinator's actions (``num_subtasks``: the tasks it checkpoints)."""
        for a in actions:
            if isinstance(a, cc.TriggerCheckpoint):
                self._triggered(a, num_subtasks)
            elif isinstance(a, cc.WriteMetadata):
                self._finalizing[a.checkpoint.checkpoint_id] = a.checkpoint
            elif isinstance(a, cc.NotifyCheckpointComplete):
                done = self._finalizing.pop(a.checkpoint_id, None)
                if done is not None:
                    self._finish(
                        a.checkpoint_id,
                        "COMPLETED",
                        now,
                        external_path=done.external_pointer or "",
                        state_size=done.state_size,
                        checkpointed_size=done.checkpointed_size,
                    )
            elif isinstance(a, cc.NotifyCheckpointAborted):
                self._finalizing.pop(a.checkpoint_id, None)
                self._finish(a.checkpoint_id, "FAILED", now, failure=a.reason)

    def restored(self, checkpoint: CompletedCheckpoint, external_path: str, skipped: Sequence[str], now: int) -> None:
        self.counts["restored"] += 1
        self.latest_restored = {
            "id": checkpoint.checkpoint_id,
            "external_path": external_path,
            "restore_timestamp": now,
            "is_savepoint": checkpoint.is_savepoint,
            "skipped": list(skipped),
        }

    def subtask_acknowledged(self, checkpoint_id: int, vertex_id: str, record: Mapping[str, Any]) -> None:
        """A subtask's statistics (``record``: ``yarnflink.metrics.checkpoint_stats.subtask_record``),
        kept while the checkpoint is in the history."""
        if not any(h["id"] == checkpoint_id for h in self.history):
            return
        per_vertex = self.subtask_stats.setdefault(checkpoint_id, {}).setdefault(vertex_id, {})
        per_vertex[int(record["index"])] = dict(record)
        live = {h["id"] for h in self.history}
        for old in [c for c in self.subtask_stats if c not in live]:
            del self.subtask_stats[old]

    def _triggered(self, a: cc.TriggerCheckpoint, num_subtasks: int) -> None:
        self.counts["total"] += 1
        self.history.insert(
            0,
            {
                "id": a.checkpoint_id,
                "status": "IN_PROGRESS",
                "is_savepoint": a.is_savepoint,
                "trigger_timestamp": a.timestamp,
                "latest_ack_timestamp": a.timestamp,
                "end_to_end_duration": 0,
                "state_size": 0,
                "checkpointed_size": 0,
                "num_subtasks": num_subtasks,
                "num_acknowledged_subtasks": 0,
                "external_path": "",
            },
        )
        del self.history[self.history_size :]

    def _finish(self, cid: int, status: str, now: int, **extra: Any) -> None:
        for h in self.history:
            if h["id"] == cid and h["status"] == "IN_PROGRESS":
                h["status"] = status
                h["latest_ack_timestamp"] = now
                h["end_to_end_duration"] = now - h["trigger_timestamp"]
                if status == "COMPLETED":
                    h["num_acknowledged_subtasks"] = h["num_subtasks"]
                h.update(extra)
                self.counts["completed" if status == "COMPLETED" else "failed"] += 1
                return

    def to_json(self, parallelism: Mapping[str, int]) -> dict[str, Any]:
        """Flink's shape of ``GET /jobs/:id/checkpoints``, with yarnflink's ``subtask_details``
        (what ``.../checkpoints/details/:cid[/subtasks/:vid]`` shape; see
        ``yarnflink.metrics.checkpoint_stats``) and the vertices' ``parallelism``."""
        in_progress = sum(1 for h in self.history if h["status"] == "IN_PROGRESS")
        counts = dict(self.counts, in_progress=in_progress)
        completed = next((h for h in self.history if h["status"] == "COMPLETED" and not h["is_savepoint"]), None)
        savepoint = next((h for h in self.history if h["status"] == "COMPLETED" and h["is_savepoint"]), None)
        failed = next((h for h in self.history if h["status"] == "FAILED"), None)
        done = [h for h in self.history if h["status"] == "COMPLETED"]

        def summary(key: str) -> dict[str, int]:
            vals = [int(h[key]) for h in done] or [0]
            return {"min": min(vals), "max": max(vals), "avg": sum(vals) // len(vals)}

        return {
            "counts": counts,
            "summary": {
                "state_size": summary("state_size"),
                "checkpointed_size": summary("checkpointed_size"),
                "end_to_end_duration": summary("end_to_end_duration"),
            },
            "latest": {
                "completed": completed,
                "savepoint": savepoint,
                "failed": failed,
                "restored": self.latest_restored,
            },
            "history": [dict(h) for h in self.history],
            "subtask_details": {
                str(cid): {vid: {str(i): dict(r) for i, r in subs.items()} for vid, subs in per_vertex.items()}
                for cid, per_vertex in self.subtask_stats.items()
            },
            "parallelism": dict(parallelism),
        }
