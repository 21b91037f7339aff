"""The JSON the dashboard and the monitoring REST handlers show, in Flink's shapes: the plan, job
configuration, vertex and subtask metrics, backpressure, checkpoint statistics, job metrics and
TaskExecutor details. Plain functions over dicts and MetricStore entries; what a JobMaster reports
for them (its monitoring snapshot) is read in ``yarnflink.jobmaster.views``.
"""

from __future__ import annotations

import logging
from typing import Any

from yarnflink.jobgraph.jobgraph import JobGraph
from yarnflink.jobgraph.options import CoreOptions
from yarnflink.metrics import names as n
from yarnflink.metrics.store import TaskMetricsEntry, backpressure_level, vertex_aggregate
from yarnflink.resourcemanager.gateway import TaskManagerInfo
from yarnflink.scheduler.options import RestartStrategyOptions
from yarnflink.taskexecutor.gateway import TaskExecutorInfo

log = logging.getLogger(__name__)

SHIP_STRATEGIES = {
    "forward": "FORWARD",
    "hash": "HASH",
    "rebalance": "REBALANCE",
    "rescale": "RESCALE",
    "shuffle": "SHUFFLE",
    "broadcast": "BROADCAST",
}
TERMINAL = ("FINISHED", "FAILED", "CANCELED")


# ---------------------------------------------------------------------------- job graph
def plan_json(g: JobGraph) -> dict[str, Any]:
    """Flink's ``/jobs/:jobid/plan``: one node per JobVertex with its inputs (and, as yarnflink
    adds, the names of its chained operators)."""
    producer = {d.id: d.producer for d in g.datasets}
    nodes = []
    for v in g.vertices:
        node: dict[str, Any] = {
            "id": v.id,
            "parallelism": v.parallelism,
            "operator": "",
            "operator_strategy": "",
            "description": v.name,
            "operators": [o.name for o in v.operators],
            "optimizer_properties": {},
        }
        inputs = [
            {
                "num": i,
                "id": producer.get(e.source, ""),
                "ship_strategy": SHIP_STRATEGIES.get(e.partitioning, e.partitioning.upper()),
                "exchange": "pipelined_bounded",
            }
            for i, e in enumerate(g.inputs_of(v.id))
        ]
        if inputs:
            node["inputs"] = inputs
        nodes.append(node)
    return {"jid": g.job_id, "name": g.job_name, "type": g.runtime_mode, "nodes": nodes}


def job_config_json(g: JobGraph, cluster_config: dict[str, str]) -> dict[str, Any]:
    """Flink's ``/jobs/:jobid/config``."""
    conf = dict(g.config)
    # the raw strings, read leniently: this view must not fail on an odd value in a job's configuration
    parallelism_key, restart_key = CoreOptions.DEFAULT_PARALLELISM.key, RestartStrategyOptions.RESTART_STRATEGY.key
    try:
        parallelism = int(conf.get(parallelism_key) or cluster_config.get(parallelism_key) or -1)
    except ValueError:
        parallelism = -1
    return {
        "jid": g.job_id,
        "name": g.job_name,
        "execution-config": {
            "execution-mode": "PIPELINED",
            "restart-strategy": conf.get(restart_key) or cluster_config.get(restart_key) or "none",
            "job-parallelism": parallelism,
            "object-reuse-mode": True,
            "user-config": {str(k): str(v) for k, v in conf.items()},
        },
    }


# ---------------------------------------------------------------------------- vertex metrics
def io_metrics_json(per_subtask: list[dict[str, float]], complete: bool) -> dict[str, Any]:
    """Flink's IOMetricsInfo (``read-records`` ...) plus yarnflink's rates and backpressure."""
    agg = vertex_aggregate(per_subtask) if per_subtask else {}

    def g(name: str, default: float = 0.0) -> float:
        return float(agg.get(name, default))

    bp = g(n.BACKPRESSURED_TIME_MS_PER_SECOND)
    return {
        "read-bytes": int(g(n.NUM_BYTES_IN)),
        "read-bytes-complete": complete,
        "write-bytes": int(g(n.NUM_BYTES_OUT)),
        "write-bytes-complete": complete,
        "read-records": int(g(n.NUM_RECORDS_IN)),
        "read-records-complete": complete,
        "write-records": int(g(n.NUM_RECORDS_OUT)),
        "write-records-complete": complete,
        "accumulated-backpressured-time": int(g(n.ACCUMULATED_BACKPRESSURED_TIME_MS)),
        "read-records-per-second": g(n.NUM_RECORDS_IN_PER_SECOND),
        "write-records-per-second": g(n.NUM_RECORDS_OUT_PER_SECOND),
        "read-bytes-per-second": g(n.NUM_BYTES_IN_PER_SECOND),
        "write-bytes-per-second": g(n.NUM_BYTES_OUT_PER_SECOND),
        "backpressured-time-ms-per-second": bp,
        "backpressure-level": backpressure_level(bp / 1000.0),
        "current-input-watermark": int(g(n.CURRENT_INPUT_WATERMARK, n.MIN_WATERMARK)),
    }


def with_metrics(
    details: dict[str, Any], entries: dict[tuple[str, int], TaskMetricsEntry], plan: dict[str, Any] | None
) -> dict[str, Any]:
    """Job details with ``metrics`` on every vertex and subtask, and Flink's ``plan``."""
    out = dict(details)
    vertices = []
    for v in details.get("vertices", []):
        v = dict(v)
        subtasks = []
        per_subtask = []
        complete = True
        for s in v.get("subtasks") or [{"subtask": i} for i in range(v["parallelism"])]:
            e = entries.get((v["id"], s["subtask"]))
            m = e.metrics if e is not None else {}
            complete = complete and e is not None and e.final
            per_subtask.append(m)
            s = dict(s)
            s["metrics"] = io_metrics_json([m] if m else [], e is not None and e.final)
            subtasks.append(s)
        if "subtasks" in v:
            v["subtasks"] = subtasks
        v["metrics"] = io_metrics_json([m for m in per_subtask if m], complete)
        vertices.append(v)
    out["vertices"] = vertices
    if plan is not None:
        out["plan"] = plan
    return out


def find_vertex(details: dict[str, Any], vertex_id: str) -> dict[str, Any] | None:
    return next((v for v in details.get("vertices", []) if v["id"] == vertex_id), None)


def subtask_metrics(vertex: dict[str, Any], entries: dict[tuple[str, int], TaskMetricsEntry]) -> list[dict[str, float]]:
    """Each subtask's metrics by index (empty for a subtask with none yet)."""
    out = []
    for i in range(int(vertex["parallelism"])):
        e = entries.get((vertex["id"], i))
        out.append(dict(e.metrics) if e is not None else {})
    return out


def vertex_metric_ids(per_subtask: list[dict[str, float]]) -> dict[str, float]:
    """Flink's ``<subtask>.<name>`` ids, plus the vertex aggregate under the bare names."""
    out: dict[str, float] = {}
    for i, m in enumerate(per_subtask):
        for k, v in m.items():
            out[f"{i}.{k}"] = v
    out.update(vertex_aggregate([m for m in per_subtask if m]))
    return out


def backpressure_json(vertex: dict[str, Any], per_subtask: list[dict[str, float]], now_ms: int) -> dict[str, Any]:
    """Flink's ``/jobs/:jobid/vertices/:vertexid/backpressure`` from backPressuredTimeMsPerSecond."""
    attempts = {s["subtask"]: s.get("attempt", 0) for s in vertex.get("subtasks", [])}
    subtasks = []
    worst = 0.0
    for i, m in enumerate(per_subtask):
        ratio = min(1.0, max(0.0, m.get(n.BACKPRESSURED_TIME_MS_PER_SECOND, 0.0) / 1000.0))
        worst = max(worst, ratio)
        subtasks.append(
            {
                "subtask": i,
                "attempt-number": attempts.get(i, 0),
                "backpressure-level": backpressure_level(ratio),
                "ratio": ratio,
                "idleRatio": 0.0,
                "busyRatio": max(0.0, 1.0 - ratio) if m else 0.0,
            }
        )
    return {
        "status": "ok",
        "backpressure-level": backpressure_level(worst),
        "end-timestamp": now_ms,
        "subtasks": subtasks,
    }


def job_metrics(details: dict[str, Any], checkpoints: dict[str, Any], num_restarts: int) -> dict[str, float]:
    """Job-scope metrics (Flink's names) as the master knows them."""
    state = details.get("state")
    running_since = details.get("timestamps", {}).get("RUNNING", 0)
    uptime = (
        -1
        if state in TERMINAL
        else (details.get("now", 0) - running_since if state == "RUNNING" and running_since else 0)
    )
    counts = checkpoints.get("counts", {})
    latest = (checkpoints.get("latest") or {}).get("completed") or {}
    return {
        n.UPTIME_JOB: float(uptime),
        n.NUM_RESTARTS: float(num_restarts),
        n.LAST_CHECKPOINT_DURATION_JOB: float(latest.get("end_to_end_duration", -1)),
        n.LAST_CHECKPOINT_SIZE_JOB: float(latest.get("checkpointed_size", latest.get("state_size", -1))),
        n.NUM_COMPLETED_CHECKPOINTS: float(counts.get("completed", 0)),
        n.NUM_FAILED_CHECKPOINTS: float(counts.get("failed", 0)),
        n.NUM_IN_PROGRESS_CHECKPOINTS: float(counts.get("in_progress", 0)),
        "totalNumberOfCheckpoints": float(counts.get("total", 0)),
    }


# ---------------------------------------------------------------------------- TaskExecutors
def task_manager_json(tm: TaskManagerInfo) -> dict[str, Any]:
    """Flink's TaskManagerInfoWithSlots: a TaskExecutor as the ResourceManager knows it."""
    return {
        "id": tm.resource_id,
        "path": tm.rpc_address,
        "dataPort": tm.data_port,
        "timeSinceLastHeartbeat": tm.time_since_last_heartbeat_ms,
        "slotsNumber": tm.number_slots,
        "freeSlots": tm.number_available_slots,
        "totalResource": tm.total_resource.to_json(),
        "freeResource": tm.free_resource.to_json(),
        "hardware": {"pid": tm.pid, "host": tm.hostname, "cpuCores": tm.total_resource.cpu_cores},
        "allocatedSlots": [{"jobId": a.job_id, "resource": a.resource.to_json()} for a in tm.allocated_slots],
        "slots": [
            {
                "index": s.index,
                "allocationId": s.allocation_id,
                "jobId": s.job_id,
                "status": s.status,
                "resource": s.resource.to_json(),
            }
            for s in tm.slots
        ],
    }


def taskmanager_details(tm: TaskManagerInfo, info: TaskExecutorInfo) -> dict[str, Any]:
    """Flink's TaskManagerDetailsInfo with a Python process's memory and the tasks in each slot."""
    pm = dict(info.process_metrics)
    task_metrics = {t.execution_id: dict(t.metrics) for t in info.task_metrics}
    tasks_by_slot: dict[int, list[dict[str, Any]]] = {}
    for t in info.tasks:
        tasks_by_slot.setdefault(t.slot_index, []).append(
            {
                "execution-id": t.execution_id,
                "job-id": t.job_id,
                "vertex-id": t.vertex_id,
                "task-name": t.task_name,
                "subtask": t.subtask_index,
                "attempt": t.attempt_number,
                "status": t.state,
                "metrics": task_metrics.get(t.execution_id, {}),
            }
        )
    slots = [
        {
            "index": s.index,
            "allocationId": s.allocation_id or None,
            "jobId": s.job_id or None,
            "tasks": tasks_by_slot.get(s.index, []),
        }
        for s in info.slot_report.slots
    ]
    gcs = [{"name": f"gen{i}", "count": int(pm.get(n.GC_COUNT.format(i), 0)), "time": -1} for i in range(3)]
    out = task_manager_json(tm)
    out.update(
        {
            "metrics": {
                "rss": int(pm.get(n.MEMORY_RSS, info.rss_bytes)),
                "vms": int(pm.get(n.MEMORY_VMS, 0)),
                "arrowAllocated": int(pm.get(n.MEMORY_ARROW, 0)),
                "shuffleMemoryUsed": int(pm.get(n.SHUFFLE_USED_MEMORY, info.network_memory_in_use)),
                "cpuLoad": float(pm.get(n.CPU_LOAD, 0.0)),
                "cpuCores": int(pm.get(n.CPU_CORES, 0)),
                "threads": int(pm.get(n.THREADS, 0)),
                "garbageCollectors": gcs,
            },
            "slots": slots,
            "logs": [{"name": f.name, "size": f.size, "mtime": f.mtime_ms} for f in info.log_files],
            "metricReporters": {"prom": info.metric_reporter_address} if info.metric_reporter_address else {},
        }
    )
    return out
