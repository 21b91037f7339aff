"""Runtime benchmarks (issue: the runtime end to end): W1 stateless map/filter and W2 keyed
running sum over generated rows, per-record and batch functions, on the local cluster at
parallelism 2. Prints rows/s and the peak memory (VmHWM) of every process.

    scripts/bench [--rows N] [--keys K] [--only W1-batch,...]
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from yarnflink import DiscardingSink, StreamExecutionEnvironment
from yarnflink.api.environment import set_default_executor
from yarnflink.client.executor import RestClusterExecutor
from yarnflink.client.rest_client import RestClient
from yarnflink.common.config import Configuration
from yarnflink.deployment.local.cluster import start_local_cluster, stop_process


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def w1_records(env: StreamExecutionEnvironment, rows: int, keys: int) -> None:
    (env.from_sequence(1, rows).map(lambda x: x * 3).filter(lambda x: x % 2 == 0).sink_to(DiscardingSink()))


def w1_batch(env: StreamExecutionEnvironment, rows: int, keys: int) -> None:
    def map_filter(rb: pa.RecordBatch) -> pa.RecordBatch:
        v = pc.multiply(rb.column(0), 3)
        return pa.record_batch([v.filter(pc.equal(pc.bit_wise_and(v, 1), 0))], names=["f0"])

    env.from_sequence(1, rows).map_batches(map_filter).sink_to(DiscardingSink())


def w2_records(env: StreamExecutionEnvironment, rows: int, keys: int) -> None:
    (
        env.from_sequence(1, rows)
        .map(lambda x: (x % keys, x))
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .sink_to(DiscardingSink())
    )


def w2_batch(env: StreamExecutionEnvironment, rows: int, keys: int) -> None:
    def pairs(rb: pa.RecordBatch) -> pa.RecordBatch:
        v = rb.column(0)
        # integer division of int64 arrays is floor division in pyarrow: v - (v // keys) * keys
        return pa.record_batch([pc.subtract(v, pc.multiply(pc.divide(v, keys), keys)), v], names=["f0", "f1"])

    env.from_sequence(1, rows).map_batches(pairs).key_by(0).sum(1).sink_to(DiscardingSink())


WORKLOADS: dict[str, Callable[[StreamExecutionEnvironment, int, int], None]] = {
    "W1-batch": w1_batch,
    "W1-records": w1_records,
    "W2-batch": w2_batch,
    "W2-records": w2_records,
}


def run_one(name: str, rows: int, keys: int, workdir: Path, repeat: int) -> dict[str, Any]:
    config = Configuration()
    config.set("taskmanager.numberOfTaskSlots", "1")
    proc, info = start_local_cluster(config, taskexecutors=2, workdir=workdir / name, detached=False)
    try:
        rest = RestClient(str(info["rest_url"]))
        set_default_executor(RestClusterExecutor(str(info["rest_url"])))
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(2)
        runs = []
        for _ in range(repeat):
            WORKLOADS[name](env, rows, keys)
            t0 = time.perf_counter()
            result = env.execute(name)
            runs.append((result.get_net_runtime() / 1000, time.perf_counter() - t0))
        runtime_s, wall = sorted(runs)[len(runs) // 2]  # the median run
        pids = {"master": int(info["pid"])}
        for i, tm in enumerate(rest.taskmanagers()):
            pids[f"taskexecutor-{i}"] = tm["hardware"]["pid"]
        memory = {k: round(peak_rss_mb(pid), 1) for k, pid in pids.items()}
        rest.close()
        return {
            "workload": name,
            "rows": rows,
            "seconds": round(runtime_s, 3),
            "wall_seconds": round(wall, 3),
            "rows_per_s": round(rows / runtime_s),
            "peak_rss_mb": memory,
        }
    finally:
        set_default_executor(None)
        stop_process(proc.pid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--only", default=",".join(WORKLOADS))
    parser.add_argument("--repeat", type=int, default=3, help="runs per workload; the median is shown")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    print(
        f"# {platform.node()} {platform.processor() or platform.machine()}, "
        f"{__import__('os').cpu_count()} cores, python {platform.python_version()}, pyarrow {pa.__version__}"
    )
    with tempfile.TemporaryDirectory(prefix="yarnflink-bench-") as tmp:
        for name in args.only.split(","):
            r = run_one(name.strip(), args.rows, args.keys, Path(tmp), args.repeat)
            if args.json:
                print(json.dumps(r))
            else:
                mem = ", ".join(f"{k} {v} MB" for k, v in r["peak_rss_mb"].items())
                print(
                    f"{r['workload']:<11} {r['rows']:>11,} rows in {r['seconds']:>7.2f} s "
                    f"= {r['rows_per_s']:>12,} rows/s (wall {r['wall_seconds']:.2f} s)   peak RSS: {mem}"
                )


if __name__ == "__main__":
    main()
