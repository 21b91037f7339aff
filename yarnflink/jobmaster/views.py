"""The JSON the REST API shows of a job, in Flink's shapes (``/jobs/:jobid``, exceptions), and the
monitoring snapshot the Dispatcher reads off a JobMaster (final task metrics, checkpoint
statistics, restarts), on the JobMaster's loop.

Checkpoint statistics and restarts come from the JobMaster when it offers them
(``JobMaster.checkpoint_stats()`` returning Flink's ``/jobs/:jobid/checkpoints`` shape,
``JobMaster.num_restarts``); until then the history is empty and restarts are read off the
execution attempts.
"""

from __future__ import annotations

import logging
from typing import Any

from yarnflink.executiongraph.executiongraph import ExecutionGraph, Failure, now_ms
from yarnflink.metrics.store import TaskMetricsEntry

log = logging.getLogger(__name__)

#: Savepoint results an ended job's archive keeps (the newest).
MAX_ARCHIVED_SAVEPOINTS = 64


def job_details(eg: ExecutionGraph) -> dict[str, Any]:
    now = now_ms()
    start, end = eg.start_time, eg.end_time
    vertices = []
    status_counts: dict[str, int] = {}
    for ejv in eg.job_vertices:
        jv = ejv.job_vertex
        counts = ejv.state_counts()
        for k, v in counts.items():
            status_counts[k] = status_counts.get(k, 0) + v
        starts = [e.current.timestamps.get("DEPLOYING", -1) for e in ejv.task_vertices]
        v_start = min((s for s in starts if s > 0), default=-1)
        state = ejv.aggregate_state()
        ends = [max(e.current.timestamps.values()) for e in ejv.task_vertices]
        v_end = max(ends) if state.terminal else -1
        vertices.append(
            {
                "id": jv.id,
                "name": jv.name,
                "parallelism": jv.parallelism,
                "maxParallelism": jv.max_parallelism,
                "status": state.value,
                "start-time": v_start,
                "end-time": v_end,
                "duration": (v_end if v_end > 0 else now) - v_start if v_start > 0 else -1,
                "tasks": counts,
                "operators": [op.name for op in jv.operators],
                "slotSharingGroup": jv.slot_sharing_group,
                "subtasks": [
                    {
                        "subtask": ev.subtask_index,
                        "status": ev.current.state.value,
                        "attempt": ev.current.attempt_number,
                        "taskmanager-id": ev.current.slot.resource_id if ev.current.slot else None,
                        "endpoint": ev.current.slot.data_address if ev.current.slot else None,
                        "slot": ev.current.slot.slot_index if ev.current.slot else None,
                        "allocation-id": ev.current.slot.allocation_id if ev.current.slot else None,
                        **_concurrent_attempts(ev),
                    }
                    for ev in ejv.task_vertices
                ],
            }
        )
    return {
        "jid": eg.job_id,
        "name": eg.job_graph.job_name,
        "isStoppable": False,
        "state": eg.status.value,
        "job-type": eg.job_graph.runtime_mode,
        "start-time": start,
        "end-time": end,
        "duration": (end if end > 0 else now) - start,
        "maxParallelism": max((v.max_parallelism for v in eg.job_graph.vertices), default=-1),
        "now": now,
        "timestamps": dict(eg.timestamps),
        "vertices": vertices,
        "status-counts": status_counts,
        "numRestarts": eg.num_restarts,
    }


def _concurrent_attempts(ev: Any) -> dict[str, Any]:
    """Flink's ``other-concurrent-attempts`` of a subtask (speculative execution): the attempts
    that ran beside the current one, running, or cancelled once another attempt finished."""
    others = [*ev.speculative, *ev.concurrent]
    if not others:
        return {}
    return {
        "other-concurrent-attempts": [
            {
                "attempt": e.attempt_number,
                "status": e.state.value,
                "taskmanager-id": e.slot.resource_id if e.slot else None,
                "endpoint": e.slot.data_address if e.slot else None,
            }
            for e in others
        ]
    }


def job_overview(details: dict[str, Any]) -> dict[str, Any]:
    tasks = {k.lower(): v for k, v in details["status-counts"].items()}
    tasks["total"] = sum(details["status-counts"].values())
    return {
        "jid": details["jid"],
        "name": details["name"],
        "state": details["state"],
        "start-time": details["start-time"],
        "end-time": details["end-time"],
        "duration": details["duration"],
        "last-modification": max(details["timestamps"].values()),
        "tasks": tasks,
    }


def failure_json(f: Failure, concurrent: bool = True) -> dict[str, Any]:
    """One exception history entry (Flink's shape). yarnflink adds ``restartedTasks``: the tasks
    the failure restarted (empty when it failed the job) and ``partitionId``: the upstream result
    a consumer could not read."""
    out: dict[str, Any] = {
        "exceptionName": f.exception_class,
        "message": f.message,
        "stacktrace": f.traceback or f"{f.exception_class}: {f.message}",
        "timestamp": f.timestamp_ms,
        "taskName": f.task_name or None,
        "endpoint": f.endpoint or None,
        "taskManagerId": f.task_manager_id or None,
        "failureLabels": {},
        "restartedTasks": list(f.restarted_tasks),
        "partitionId": f.partition_id or None,
    }
    if concurrent:
        out["concurrentExceptions"] = [failure_json(c, concurrent=False) for c in f.concurrent]
    return out


def exceptions_json(eg: ExecutionGraph) -> dict[str, Any]:
    """Every failure of the job, newest first (``web.exception-history-size`` of them); the root
    exception is the newest one (the one that failed the job, once it failed)."""
    size = eg.exception_history_size
    entries = [failure_json(f) for f in reversed(eg.failures)]
    root = eg.failures[-1] if eg.failures else None
    return {
        "root-exception": (root.traceback or f"{root.exception_class}: {root.message}") if root else None,
        "timestamp": root.timestamp_ms if root else None,
        "all-exceptions": [],
        "truncated": len(entries) > size,
        "exceptionHistory": {"entries": entries[:size], "truncated": len(entries) > size},
    }


# ---------------------------------------------------------------------------- monitoring (for the Dispatcher)
def empty_checkpoint_stats() -> dict[str, Any]:
    """Flink's ``/jobs/:jobid/checkpoints`` for a job that has taken no checkpoint."""
    return {
        "counts": {"restored": 0, "total": 0, "in_progress": 0, "completed": 0, "failed": 0},
        "summary": {},
        "latest": {"completed": None, "savepoint": None, "failed": None, "restored": None},
        "history": [],
    }


def checkpoint_stats_of(jm: Any) -> dict[str, Any]:
    fn = getattr(jm, "checkpoint_stats", None)
    if callable(fn):
        stats = fn()
        if isinstance(stats, dict):
            return stats
    return empty_checkpoint_stats()


def num_restarts_of(jm: Any) -> int:
    value = getattr(jm, "num_restarts", None)
    if callable(value):
        value = value()
    if isinstance(value, int):
        return value
    return max((ev.current.attempt_number for ejv in jm.eg.job_vertices for ev in ejv.task_vertices), default=0)


def monitoring_snapshot(jm: Any) -> dict[str, Any]:
    """On the JobMaster's loop: what the Dispatcher shows beyond the details. Never raises (it is
    part of archiving an ended job): a part that cannot be read is left empty and logged."""
    try:
        return _monitoring_snapshot(jm)
    except Exception:  # noqa: BLE001
        log.warning("monitoring data of job %s not read", getattr(jm, "job_id", "?"), exc_info=True)
        return {"finals": [], "checkpoints": empty_checkpoint_stats(), "num_restarts": 0, "savepoints": {}}


def job_archive(jm: Any) -> dict[str, Any]:
    """On the JobMaster's loop, when its job ended for good: what stays of the job once its
    JobMaster is gone (Flink's ArchivedExecutionGraph): details, exceptions, collected results and
    the monitoring snapshot (final task metrics, checkpoint statistics, restarts, savepoints)."""
    return {
        "details": jm.details(),
        "exceptions": exceptions_json(jm.eg),
        "collected": jm.collected_payloads(),
        "collect_log": jm.collect_log.frozen(jm.is_current_attempt),
        **monitoring_snapshot(jm),
    }


def _monitoring_snapshot(jm: Any) -> dict[str, Any]:
    finals = []
    for ejv in jm.eg.job_vertices:
        for ev in ejv.task_vertices:
            for ex in [*getattr(ev, "prior", ()), ev.current]:
                m = jm.final_io_metrics.get(ex.attempt_id)
                if m is not None:
                    finals.append(
                        TaskMetricsEntry(
                            jm.job_id,
                            ejv.job_vertex.id,
                            ev.subtask_index,
                            ex.attempt_number,
                            ex.attempt_id,
                            ex.slot.resource_id if ex.slot else "",
                            dict(m),
                            final=True,
                        )
                    )
    return {
        "finals": finals,
        "checkpoints": checkpoint_stats_of(jm),
        "num_restarts": num_restarts_of(jm),
        "savepoints": savepoint_results(jm),
    }


def savepoint_results(jm: Any) -> dict[str, dict[str, Any]]:
    """The results of the job's savepoints by trigger id, the newest ``MAX_ARCHIVED_SAVEPOINTS``,
    as plain values: an ended job's archive keeps them (a client polls a stop-with-savepoint's
    result after the job ended), and nothing of the JobMaster."""
    driver = jm.checkpoints
    if driver is None:
        return {}
    newest = list(driver.savepoints.items())[-MAX_ARCHIVED_SAVEPOINTS:]
    return {trigger_id: dict(result) for trigger_id, result in newest}
