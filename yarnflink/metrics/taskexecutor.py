"""What a TaskExecutor reports about its metrics and logs: the extra fields of
``TaskExecutorInfo`` (asked for by the Dispatcher's MetricFetcher and log handlers), the final
metrics sent with a task's terminal state, and the samples of its Prometheus endpoint.

Called on the TaskExecutor's loop (``fill_info``, ``final_io_metrics``) or from the Prometheus
server thread (``prometheus_samples``, which hops onto the loop to read the task table).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from yarnflink.metrics import names as n
from yarnflink.metrics.logfiles import log_files, read_log
from yarnflink.metrics.process import process_metrics
from yarnflink.metrics.prometheus import Sample, active_reporter_address
from yarnflink.taskexecutor.gateway import LogFileInfo, RequestTaskExecutorInfo, TaskExecutorInfo, TaskMetrics


def task_metrics_of(task: Any) -> dict[str, float]:
    io = getattr(task, "io_metrics", None)
    return io.snapshot() if io is not None else {}


def final_io_metrics(task: Any) -> dict[str, float]:
    """The task's last metrics, sent with its terminal state (Flink's IOMetrics)."""
    io = getattr(task, "io_metrics", None)
    return io.snapshot(final=True) if io is not None else {}


def taskexecutor_metrics(te: Any) -> dict[str, float]:
    out = process_metrics().snapshot()
    slots = te.slot_table.slots
    out[n.SHUFFLE_USED_MEMORY] = float(te.shuffle.memory_in_use())
    out[n.NUM_SLOTS] = float(len(slots))
    out[n.NUM_FREE_SLOTS] = float(sum(1 for s in slots if not s.allocation_id))
    out[n.NUM_RUNNING_TASKS] = float(len(te.tasks))
    # HA: calls refused for a stale fencing token (a deposed leader's ResourceManager or JobMasters)
    out["Status.HighAvailability.StaleRpcsRejected"] = float(getattr(te, "stale_rpcs_rejected", 0))
    return out


def fill_info(info: TaskExecutorInfo, te: Any, request: RequestTaskExecutorInfo) -> TaskExecutorInfo:
    """``info`` with metrics (if asked), the log file list and a log's content (if asked)."""
    extra: dict[str, Any] = {}
    if request.include_metrics:
        extra["task_metrics"] = info.task_metrics + tuple(
            TaskMetrics(
                execution_id=task.execution_id,
                job_id=task.tdd.job_id,
                vertex_id=task.tdd.vertex_id,
                subtask_index=task.tdd.subtask_index,
                attempt_number=task.tdd.attempt_number,
                task_name=task.name,
                metrics=task_metrics_of(task),
            )
            for task in list(te.tasks.values())
        )
        extra["process_metrics"] = {**info.process_metrics, **taskexecutor_metrics(te)}
    extra["log_files"] = info.log_files + tuple(LogFileInfo(f.name, f.size, f.mtime_ms) for f in log_files())
    if request.log_name:
        got = read_log(request.log_name, int(request.log_max_bytes))
        if got is not None:
            extra["log_content"], extra["log_truncated"] = got
    return dataclasses.replace(info, metric_reporter_address=active_reporter_address(), **extra)


def prometheus_samples(te: Any) -> Iterable[Sample]:
    """Samples of a TaskExecutor process (Flink's ``taskmanager`` and ``taskmanager_job_task`` scopes)."""

    async def read() -> tuple[dict[str, float], list[tuple[dict[str, str], dict[str, float]]]]:
        tasks = []
        for task in list(te.tasks.values()):
            tdd = task.tdd
            labels = {
                "tm_id": te.resource_id,
                "job_id": tdd.job_id,
                "job_name": tdd.job_name,
                "task_id": tdd.vertex_id,
                "task_name": tdd.task_name,
                "task_attempt_id": task.execution_id,
                "task_attempt_num": str(tdd.attempt_number),
                "subtask_index": str(tdd.subtask_index),
            }
            tasks.append((labels, task_metrics_of(task)))
        return taskexecutor_metrics(te), tasks

    tm, tasks = te.call(read, timeout=5.0)
    tm_labels = {"tm_id": te.resource_id}
    samples = [Sample("taskmanager_" + k, v, tm_labels) for k, v in tm.items()]
    for labels, metrics in tasks:
        samples.extend(Sample("taskmanager_job_task_" + k, v, labels) for k, v in metrics.items())
    return samples
