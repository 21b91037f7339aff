"""MetricStore (Flink's MetricStore of the web monitor): the last known metrics of every task
and TaskExecutor, as fetched by the Dispatcher's MetricFetcher, plus the query helpers of Flink's
metric REST handlers (``?get=a,b``, ``?agg=min,max,sum,avg,skew``, ``?subtasks=0,2-3``). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from yarnflink.metrics import names as n


@dataclass
class TaskMetricsEntry:
    """The metrics of one subtask attempt; ``final`` when they came with its terminal state."""

    job_id: str
    vertex_id: str
    subtask_index: int
    attempt: int
    execution_id: str
    task_manager_id: str
    metrics: dict[str, float]
    final: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "vertex_id": self.vertex_id,
            "subtask_index": self.subtask_index,
            "attempt": self.attempt,
            "execution_id": self.execution_id,
            "task_manager_id": self.task_manager_id,
            "metrics": dict(self.metrics),
            "final": self.final,
        }


def _newer(new: TaskMetricsEntry, old: TaskMetricsEntry | None) -> bool:
    """A later attempt wins; within one attempt final metrics win over live ones."""
    if old is None or new.attempt > old.attempt:
        return True
    return new.attempt == old.attempt and (new.final or not old.final)


def merge_entries(*groups: Iterable[TaskMetricsEntry]) -> dict[tuple[str, int], TaskMetricsEntry]:
    """The newest entry per (vertex id, subtask index)."""
    out: dict[tuple[str, int], TaskMetricsEntry] = {}
    for group in groups:
        for e in group:
            key = (e.vertex_id, e.subtask_index)
            if _newer(e, out.get(key)):
                out[key] = e
    return out


@dataclass
class TaskManagerMetrics:
    metrics: dict[str, float] = field(default_factory=dict)
    reporter_address: str = ""
    updated_ms: int = 0


class MetricStore:
    def __init__(self) -> None:
        self.tasks: dict[tuple[str, str, int], TaskMetricsEntry] = {}
        self.task_managers: dict[str, TaskManagerMetrics] = {}

    def put_task(self, e: TaskMetricsEntry) -> None:
        key = (e.job_id, e.vertex_id, e.subtask_index)
        if _newer(e, self.tasks.get(key)):
            self.tasks[key] = e

    def job_tasks(self, job_id: str) -> list[TaskMetricsEntry]:
        return [e for (j, _, _), e in self.tasks.items() if j == job_id]

    def drop_job(self, job_id: str) -> None:
        for key in [k for k in self.tasks if k[0] == job_id]:
            del self.tasks[key]

    def retain_task_managers(self, ids: Iterable[str]) -> None:
        keep = set(ids)
        for tm in [t for t in self.task_managers if t not in keep]:
            del self.task_managers[tm]


# ---------------------------------------------------------------------------- vertex aggregates
#: How a vertex's value is made from its subtasks' (the rest are summed).
_VERTEX_AGG = {
    n.BACKPRESSURED_TIME_MS_PER_SECOND: "max",
    n.IS_BACKPRESSURED: "max",
    n.CURRENT_INPUT_WATERMARK: "min",
    n.CURRENT_OUTPUT_WATERMARK: "min",
    n.LAST_CHECKPOINT_DURATION: "max",
    n.CHECKPOINT_ALIGNMENT_TIME: "max",
    n.CHECKPOINT_START_DELAY_NANOS: "max",
    n.ACCUMULATED_BACKPRESSURED_TIME_MS: "max",
}


def vertex_aggregate(per_subtask: list[dict[str, float]]) -> dict[str, float]:
    names: list[str] = []
    for m in per_subtask:
        names.extend(k for k in m if k not in names)
    out: dict[str, float] = {}
    for name in names:
        values = [m[name] for m in per_subtask if name in m]
        how = _VERTEX_AGG.get(name, "sum")
        out[name] = max(values) if how == "max" else min(values) if how == "min" else float(sum(values))
    return out


def backpressure_level(ratio: float) -> str:
    """Flink's levels: ok up to 10 % of the time blocked, low up to 50 %, high above."""
    return "ok" if ratio <= 0.10 else "low" if ratio <= 0.5 else "high"


# ---------------------------------------------------------------------------- REST query helpers
class MetricQueryError(ValueError):
    pass


AGGREGATIONS = ("min", "max", "sum", "avg", "skew")


def parse_get(get: str | None) -> list[str] | None:
    """``?get=a,b`` -> ["a", "b"]; None when absent (list the available metrics instead)."""
    if get is None:
        return None
    return [g.strip() for g in get.split(",") if g.strip()]


def parse_aggs(agg: str | None) -> list[str]:
    if agg is None or not agg.strip():
        return list(AGGREGATIONS[:4])
    out = []
    for a in agg.split(","):
        a = a.strip().lower()
        if a not in AGGREGATIONS:
            raise MetricQueryError(f"unknown aggregation {a!r}; supported: {', '.join(AGGREGATIONS)}")
        if a not in out:
            out.append(a)
    return out


def parse_subtasks(spec: str | None, parallelism: int) -> list[int]:
    """``?subtasks=0,2-3`` (Flink's range syntax) -> indices; all when absent."""
    if spec is None or not spec.strip():
        return list(range(parallelism))
    out: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise MetricQueryError(f"invalid subtask index or range {part!r}") from None
        if a < 0 or b < a:
            raise MetricQueryError(f"invalid subtask range {part!r}")
        out.extend(range(a, min(b, parallelism - 1) + 1))
    return sorted(set(out))


def format_value(v: float) -> str:
    """Flink sends metric values as strings: integers without a fraction."""
    if isinstance(v, float) and math.isfinite(v) and v.is_integer() and abs(v) <= 2**63:
        return str(int(v))
    return repr(float(v))


def metric_values(metrics: dict[str, float], get: list[str] | None) -> list[dict[str, str]]:
    """Flink's ``[{"id": name}]`` (without ``get``) or ``[{"id": name, "value": "1"}]``."""
    if get is None:
        return [{"id": k} for k in sorted(metrics)]
    return [{"id": k, "value": format_value(metrics[k])} for k in get if k in metrics]


def aggregate_values(
    per_subtask: list[dict[str, float]], get: list[str] | None, aggs: list[str]
) -> list[dict[str, Any]]:
    """Flink's AggregatingMetricsHandler: ``[{"id": name, "min": .., "max": .., ...}]``."""
    names: list[str] = []
    for m in per_subtask:
        names.extend(k for k in m if k not in names)
    if get is None:
        return [{"id": k} for k in sorted(names)]
    out = []
    for name in get:
        values = [float(m[name]) for m in per_subtask if name in m and math.isfinite(m[name])]
        if not values:
            continue
        row: dict[str, Any] = {"id": name}
        total = sum(values)
        avg = total / len(values)
        hi = max(values)
        for a in aggs:
            row[a] = {
                "min": min(values),
                "max": hi,
                "sum": total,
                "avg": avg,
                "skew": ((hi - avg) / hi * 100.0) if hi > 0 else 0.0,
            }[a]
        out.append(row)
    return out
