"""Issue 20's workloads W1-W3 in both API styles, on a local session of a master and two
TaskExecutors with one slot each, parallelism 2. Prints rows/s, rows per CPU second of the two
TaskExecutors (user + system time, far less disturbed by other load on the machine), the
session's start-up time and the peak RSS (VmHWM) of every process. See docs/PERFORMANCE.md.

    scripts/bench --suite workloads [--rows N] [--only W3-vectorized,...] [--repeat R] [--no-warmup]

Before the measured jobs, a small job of each workload (200,000 rows) runs on the session, so
that no figure includes the TaskExecutors' one-time loading of modules (``--no-warmup``: none).

The input is generated inside the job (``from_sequence(0, N - 1)``); for row i:
key = i mod 10,000, value = h(i) = ((i * 2654435761) >> 16) mod 1000 (a multiplicative hash),
event time = i div 100 ms.

* W1 map + filter: x * 3, keep the even ones.
* W2 keyed running sum of the value over the 10,000 keys (one output per input).
* W3 1 s tumbling event-time window sum of the value per key (monotonous timestamps).

"vectorized": ``map_batches`` with numpy / pyarrow.compute, ``with_timestamp_column``, field keys,
``sum``; "per-record": one Python value per record (``map``, ``filter``, a timestamp assigner, a key
function, ``reduce``). Each job ends in a verifying ``map_batches`` step that returns a few numbers
per batch, collected by the client and checked exactly:

* W1: the count and sum of the outputs;
* W2: per verifying subtask, the rows seen and the sum over keys of the latest running sum (a
  running sum never exceeds its key's total, so equal sums mean every key's total is right);
* W3: the number of windows and of windows whose sum differs from the one computed from i.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from benchmarks.runtime import peak_rss_mb
from yarnflink import StreamExecutionEnvironment
from yarnflink.api.datastream import DataStream
from yarnflink.api.environment import set_default_executor
from yarnflink.client.executor import RestClusterExecutor
from yarnflink.client.rest_client import RestClient
from yarnflink.common.config import Configuration
from yarnflink.common.records import arrow_to_records
from yarnflink.deployment.local.cluster import start_local_cluster, stop_process
from yarnflink.operators.specs import CollectSinkSpec
from yarnflink.operators.watermarks import WatermarkStrategy
from yarnflink.operators.windows import Time, TumblingEventTimeWindows

KEYS = 10_000
ROWS_PER_MS = 100
WINDOW_MS = 1_000
MULT = 2654435761


def h(i: Any) -> Any:
    """The value of row i (numpy arrays or Python ints alike)."""
    return ((i * MULT) >> 16) % 1000


def _i(rb: pa.RecordBatch) -> np.ndarray:
    return rb.column(0).to_numpy(zero_copy_only=False)


def _values(rb: pa.RecordBatch, column: int | str) -> np.ndarray:
    return rb.column(column).to_numpy(zero_copy_only=False).astype(np.int64)


# ----------------------------------------------------------------------------- verifiers
def verify_w1(rb: pa.RecordBatch) -> pa.RecordBatch:
    v = _values(rb, 0)
    return pa.record_batch([pa.array([len(v)]), pa.array([int(v.sum())])], names=["n", "s"])


class VerifyW2:
    """Per subtask: rows seen and the sum over keys of each key's latest running sum."""

    def __init__(self) -> None:
        self.latest: np.ndarray | None = None
        self.seen = 0
        self.id = ""

    def __call__(self, rb: pa.RecordBatch) -> pa.RecordBatch:
        if self.latest is None:
            self.latest = np.zeros(KEYS, dtype=np.int64)
            self.id = uuid.uuid4().hex
        keys, sums = _values(rb, 0), _values(rb, 1)
        np.maximum.at(self.latest, keys, sums)  # running sums of non-negative values only grow
        self.seen += len(keys)
        return pa.record_batch(
            [pa.array([self.id]), pa.array([self.seen]), pa.array([int(self.latest.sum())])], names=["id", "n", "s"]
        )


def verify_w3(rb: pa.RecordBatch) -> pa.RecordBatch:
    # an output row is its window's first row (key, value sum, event time of the first row): a
    # window's rows all come from one source subtask, in order, so that is row window * 100,000 + key
    keys, sums, first_ts = _values(rb, 0), _values(rb, 1), _values(rb, 2)
    window = first_ts // WINDOW_MS
    first = window * (WINDOW_MS * ROWS_PER_MS) + keys
    per_window = WINDOW_MS * ROWS_PER_MS // KEYS  # rows of one key in one window
    expected = sum(h(first + j * KEYS) for j in range(per_window))
    bad = (expected != sums) | (first // ROWS_PER_MS != first_ts)
    return pa.record_batch([pa.array([len(keys)]), pa.array([int(bad.sum())])], names=["n", "bad"])


# ----------------------------------------------------------------------------- workloads
def w1_vectorized(env: StreamExecutionEnvironment, rows: int) -> DataStream:
    def map_filter(rb: pa.RecordBatch) -> pa.RecordBatch:
        v = pc.multiply(rb.column(0), 3)
        return pa.record_batch([v.filter(pc.equal(pc.bit_wise_and(v, 1), 0))], names=["f0"])

    return env.from_sequence(0, rows - 1).map_batches(map_filter).map_batches(verify_w1)


def w1_per_record(env: StreamExecutionEnvironment, rows: int) -> DataStream:
    return env.from_sequence(0, rows - 1).map(lambda x: x * 3).filter(lambda x: x % 2 == 0).map_batches(verify_w1)


def _key_value(rb: pa.RecordBatch) -> pa.RecordBatch:
    i = _i(rb)
    return pa.record_batch([pa.array(i % KEYS), pa.array(h(i))], names=["key", "v"])


def w2_vectorized(env: StreamExecutionEnvironment, rows: int) -> DataStream:
    return env.from_sequence(0, rows - 1).map_batches(_key_value).key_by("key").sum("v").map_batches(VerifyW2())


def w2_per_record(env: StreamExecutionEnvironment, rows: int) -> DataStream:
    return (
        env.from_sequence(0, rows - 1)
        .map(lambda i: (i % KEYS, ((i * MULT) >> 16) % 1000))
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .map_batches(VerifyW2())
    )


def _events(rb: pa.RecordBatch) -> pa.RecordBatch:
    i = _i(rb)
    return pa.record_batch([pa.array(i % KEYS), pa.array(h(i)), pa.array(i // ROWS_PER_MS)], names=["key", "v", "ts"])


def w3_vectorized(env: StreamExecutionEnvironment, rows: int) -> DataStream:
    return (
        env.from_sequence(0, rows - 1)
        .map_batches(_events)
        .assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps().with_timestamp_column("ts"))
        .key_by("key")
        .window(TumblingEventTimeWindows.of(Time.milliseconds(WINDOW_MS)))
        .sum("v")
        .map_batches(verify_w3)
    )


def w3_per_record(env: StreamExecutionEnvironment, rows: int) -> DataStream:
    return (
        env.from_sequence(0, rows - 1)
        .map(lambda i: (i % KEYS, ((i * MULT) >> 16) % 1000, i // ROWS_PER_MS))
        .assign_timestamps_and_watermarks(
            WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: e[2])
        )
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(WINDOW_MS)))
        .reduce(lambda a, b: (a[0], a[1] + b[1], a[2]))
        .map_batches(verify_w3)
    )


def check(name: str, rows: int, results: list[dict]) -> None:
    """Raise unless the verifiers' numbers are exactly the expected ones."""
    i = np.arange(rows, dtype=np.int64)
    if name.startswith("W1"):
        x = i * 3
        x = x[x % 2 == 0]
        got = (sum(r["n"] for r in results), sum(r["s"] for r in results))
        want = (len(x), int(x.sum()))
    elif name.startswith("W2"):
        last: dict[str, dict] = {}
        for r in results:
            if r["n"] >= last.get(r["id"], {"n": -1})["n"]:
                last[r["id"]] = r
        got = (sum(r["n"] for r in last.values()), sum(r["s"] for r in last.values()))
        want = (rows, int(h(i).sum()))
    else:
        windows = len(np.unique(i // (WINDOW_MS * ROWS_PER_MS) * KEYS + i % KEYS))
        got = (sum(r["n"] for r in results), sum(r["bad"] for r in results))
        want = (windows, 0)
    if got != want:
        raise AssertionError(f"{name}: wrong results: got {got}, expected {want}")


WORKLOADS: dict[str, Callable[[StreamExecutionEnvironment, int], DataStream]] = {
    "W1-vectorized": w1_vectorized,
    "W1-per-record": w1_per_record,
    "W2-vectorized": w2_vectorized,
    "W2-per-record": w2_per_record,
    "W3-vectorized": w3_vectorized,
    "W3-per-record": w3_per_record,
}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_job(
    env: StreamExecutionEnvironment, executor: RestClusterExecutor, name: str, rows: int
) -> tuple[float, float]:
    stream = WORKLOADS[name](env, rows)
    stream._add("Collect", CollectSinkSpec(), "sink")
    job_graph = env.get_job_graph(name, clear_transformations=True)
    t0 = time.perf_counter()
    result = executor.wait(executor.submit(job_graph), name)
    wall = time.perf_counter() - t0
    results: list[dict] = []
    for payload in result.accumulators.get("collect", []):
        with pa.ipc.open_stream(base64.b64decode(payload)) as reader:
            for rb in reader:
                results.extend(arrow_to_records(rb))
    check(name, rows, results)
    return result.get_net_runtime() / 1000, wall


WARMUP_ROWS = 2 * WINDOW_MS * ROWS_PER_MS


def run_session(names: list[str], rows: int, workdir: Path, repeat: int, warmup: bool = True) -> list[dict[str, Any]]:
    config = Configuration()
    config.set("taskmanager.numberOfTaskSlots", "1")
    t0 = time.perf_counter()
    proc, info = start_local_cluster(config, taskexecutors=2, workdir=workdir, detached=False)
    startup = time.perf_counter() - t0
    out = []
    try:
        rest = RestClient(str(info["rest_url"]))
        executor = RestClusterExecutor(str(info["rest_url"]))
        set_default_executor(executor)
        pids = {"master": int(info["pid"])}
        for i, tm in enumerate(rest.taskmanagers()):
            pids[f"te{i}"] = tm["hardware"]["pid"]
        if warmup:
            # a first job pays the TaskExecutors' one-time loading of the task modules (~1 s):
            # a small job of each workload beforehand, so the figures are the jobs' own
            for name in names:
                env = StreamExecutionEnvironment.get_execution_environment()
                env.set_parallelism(2)
                run_job(env, executor, name, WARMUP_ROWS)
        for name in names:
            env = StreamExecutionEnvironment.get_execution_environment()
            env.set_parallelism(2)
            tes = [pid for k, pid in pids.items() if k != "master"]
            cpu0 = sum(cpu_seconds(p) for p in tes)
            runs = sorted(run_job(env, executor, name, rows) for _ in range(repeat))
            cpu = (sum(cpu_seconds(p) for p in tes) - cpu0) / repeat
            runtime_s, wall = runs[len(runs) // 2]  # the median run
            out.append(
                {
                    "workload": name,
                    "rows": rows,
                    "seconds": round(runtime_s, 3),
                    "wall_seconds": round(wall, 3),
                    "rows_per_s": round(rows / runtime_s),
                    "rows_per_te_cpu_s": round(rows / cpu) if cpu > 0 else None,
                    "startup_s": round(startup, 2),
                    "peak_rss_mb": {k: round(peak_rss_mb(pid), 1) for k, pid in pids.items()},
                    "load": os.getloadavg()[0],
                }
            )
        rest.close()
    finally:
        set_default_executor(None)
        stop_process(proc.pid)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--only", default=",".join(WORKLOADS))
    parser.add_argument("--repeat", type=int, default=3, help="runs per workload; the median is shown")
    parser.add_argument("--fresh", action="store_true", help="a new session per workload (peak RSS per workload)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--no-warmup", action="store_true", help="measure the session's first jobs as they come (no small job first)"
    )
    args = parser.parse_args()
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}")
    if args.rows < WINDOW_MS * ROWS_PER_MS or args.rows % (WINDOW_MS * ROWS_PER_MS * 2):
        parser.error(f"--rows must be a positive multiple of {WINDOW_MS * ROWS_PER_MS * 2} (whole windows per source)")
    print(
        f"# {platform.node()} {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}, "
        f"pyarrow {pa.__version__}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    with tempfile.TemporaryDirectory(prefix="yarnflink-bench-") as tmp:
        groups = [[n] for n in names] if args.fresh else [names]
        for k, group in enumerate(groups):
            for r in run_session(group, args.rows, Path(tmp) / str(k), args.repeat, not args.no_warmup):
                if args.json:
                    print(json.dumps(r), flush=True)
                    continue
                mem = " / ".join(f"{v:.0f}" for v in r["peak_rss_mb"].values())
                print(
                    f"{r['workload']:<14} {r['rows_per_s']:>13,} rows/s ({r['rows']:,} rows in {r['seconds']:.2f} s, "
                    f"wall {r['wall_seconds']:.2f} s)  {r['rows_per_te_cpu_s'] or 0:,} rows per TaskExecutor CPU-s  "
                    f"start-up {r['startup_s']:.2f} s  "
                    f"peak RSS master/te0/te1 {mem} MB  load {r['load']:.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
