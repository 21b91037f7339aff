"""Recovery times and figures of a chaos run, from the monitor's samples (pure).

A sample is what the monitor saw of one job at one moment: its state, whether every task ran, and
the trigger time of its latest completed checkpoint. A fault's **recovery time** is the time from
the moment it was lifted (the process resumed or started again, the endpoint listening, the disk
writable and fast) until every job that had not finished ran all its tasks with a completed
checkpoint *triggered after* that moment: durable progress again. Its **disruption** is the same
measured from the fault's begin. A fault during which every job finished is not measured.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["FaultTiming", "Sample", "output_diff", "recovery", "summarize"]


@dataclass(frozen=True)
class Sample:
    at: float  # wall-clock seconds
    job: str
    state: str
    all_running: bool
    latest_checkpoint_trigger: float | None  # wall-clock seconds of the latest completed checkpoint's trigger


@dataclass(frozen=True)
class FaultTiming:
    fault_id: int
    kind: str
    began: float
    ended: float


def _recovered_at(samples: Sequence[Sample], jobs: Iterable[str], since: float) -> float | None:
    """The first moment from ``since`` on at which every job is finished or running everywhere
    with a checkpoint triggered at or after ``since``."""
    latest: dict[str, Sample] = {}
    jobs = set(jobs)
    for s in samples:
        if s.job not in jobs:
            continue
        latest[s.job] = s
        if s.at < since or len(latest) < len(jobs):
            continue

        def ok(x: Sample) -> bool:
            if x.state == "FINISHED":
                return True
            trig = x.latest_checkpoint_trigger
            return x.all_running and trig is not None and trig >= since

        if all(ok(latest[j]) for j in jobs):
            return s.at
    return None


def recovery(
    samples: Sequence[Sample], faults: Sequence[FaultTiming], jobs: Iterable[str]
) -> dict[int, tuple[float | None, float | None]]:
    """Per fault id: (recovery time, disruption) in seconds; None if never reached or if every job
    had finished by the fault's end (nothing to recover)."""
    samples = sorted(samples, key=lambda s: s.at)
    jobs = list(jobs)
    out: dict[int, tuple[float | None, float | None]] = {}
    for f in faults:
        state_then = {s.job: s.state for s in samples if s.at <= f.ended}
        if jobs and all(state_then.get(j) == "FINISHED" for j in jobs):
            out[f.fault_id] = (None, None)
            continue
        t = _recovered_at(samples, jobs, f.ended)
        out[f.fault_id] = (None, None) if t is None else (t - f.ended, t - f.began)
    return out


def summarize(
    faults: Sequence[FaultTiming], times: Mapping[int, tuple[float | None, float | None]]
) -> dict[str, dict[str, float | int]]:
    """Per kind: how many injected, how many measured, median and max of recovery and disruption."""
    by_kind: dict[str, list[tuple[float, float]]] = {}
    count: Counter[str] = Counter()
    for f in faults:
        count[f.kind] += 1
        rec, dis = times.get(f.fault_id, (None, None))
        if rec is not None and dis is not None:
            by_kind.setdefault(f.kind, []).append((rec, dis))
    out: dict[str, dict[str, float | int]] = {}
    for kind in sorted(count):
        vals = by_kind.get(kind, [])
        recs = [r for r, _ in vals]
        diss = [d for _, d in vals]
        out[kind] = {
            "injected": count[kind],
            "measured": len(vals),
            "recovery_median_s": round(statistics.median(recs), 2) if recs else float("nan"),
            "recovery_max_s": round(max(recs), 2) if recs else float("nan"),
            "disruption_median_s": round(statistics.median(diss), 2) if diss else float("nan"),
            "disruption_max_s": round(max(diss), 2) if diss else float("nan"),
        }
    return out


def output_diff(got: Sequence[object], expected: Sequence[object]) -> tuple[int, int]:
    """(duplicates, gaps): records committed more often than expected, and expected records missing."""
    if len(got) == len(expected) and list(got) == list(expected):
        return 0, 0  # the usual case, without counting millions of records
    g, e = Counter(got), Counter(expected)
    return sum((g - e).values()), sum((e - g).values())
