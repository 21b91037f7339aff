"""Spark step benchmarks (issue 8, item 6): a Spark SQL filter-and-project step inside a yarnflink
BATCH job against the same query in plain PySpark on the same Parquet files, and the per-micro-
batch latency of a Spark step in STREAMING mode.

    scripts/bench --suite spark [--rows N] [--repeat R] [--json]

* plain PySpark: ``spark.read.parquet(files)``, the query, ``toArrow()`` (the result as Arrow in
  Python, where a yarnflink step delivers it), in a ``local[2]`` session with the TaskExecutor's
  settings; also with the result discarded in the JVM (``write.format("noop")``).
* yarnflink BATCH: a local cluster of one TaskExecutor with 2 slots (one ``local[2]`` SparkSession),
  ``FileSource(files) -> spark_sql(query) -> DiscardingSink`` at parallelism 2; rows/s from the
  job's net runtime (deployment included). A first run starts the TaskExecutor's SparkSession and
  is not counted, as the plain session is started before it is timed.
* yarnflink STREAMING: the same job in STREAMING mode (micro-batches of
  ``spark.micro-batch.max-rows``), and the Spark step's time per micro-batch measured on the
  operator in this process (input rows in, result rows out, as a Task drives it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from yarnflink import DiscardingSink, FileSource, RuntimeExecutionMode, StreamExecutionEnvironment
from yarnflink.api.environment import set_default_executor
from yarnflink.client.executor import RestClusterExecutor
from yarnflink.common.config import Configuration
from yarnflink.deployment.local.cluster import start_local_cluster, stop_process

QUERY = "SELECT id, key, value * 2 AS v2 FROM input WHERE value > 0.5"
SLOTS = 2


def write_input(directory: Path, rows: int, files: int) -> None:
    """``files`` Parquet files (snappy, pyarrow's defaults) of id int64, key int64, value double."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(42)
    per = -(-rows // files)
    for i in range(files):
        lo, hi = i * per, min(rows, (i + 1) * per)
        ids = np.arange(lo, hi, dtype=np.int64)
        pq.write_table(pa.table({"id": ids, "key": ids % 1000, "value": rng.random(hi - lo)}),
                       directory / f"part-{i}.parquet")


def _median_run(fn: Any, repeat: int) -> float:
    fn()  # warm-up (JIT, caches)
    return statistics.median(_timed(fn) for _ in range(repeat))


def _timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def plain_spark(data: Path, rows: int, repeat: int, spark_conf: dict[str, str]) -> dict[str, Any]:
    from yarnflink.spark.session import holder

    spark = holder.get({"taskmanager.numberOfTaskSlots": str(SLOTS), **spark_conf})
    out: dict[str, Any] = {}

    def to_arrow() -> None:
        spark.read.parquet(str(data)).createOrReplaceTempView("input")
        out["result_rows"] = spark.sql(QUERY).toArrow().num_rows

    def noop() -> None:
        spark.read.parquet(str(data)).createOrReplaceTempView("input")
        spark.sql(QUERY).write.format("noop").mode("overwrite").save()

    t_arrow = _median_run(to_arrow, repeat)
    t_noop = _median_run(noop, repeat)
    holder.stop()
    return {"toArrow_s": round(t_arrow, 3), "toArrow_rows_per_s": round(rows / t_arrow),
            "noop_s": round(t_noop, 3), "noop_rows_per_s": round(rows / t_noop), "result_rows": out["result_rows"]}


def yarnflink_jobs(data: Path, rows: int, repeat: int, workdir: Path, max_rows: int,
                   spark_conf: dict[str, str]) -> dict[str, Any]:
    config = Configuration()
    config.set("taskmanager.numberOfTaskSlots", str(SLOTS))
    proc, info = start_local_cluster(config, taskexecutors=1, workdir=workdir / "cluster", detached=False)
    try:
        set_default_executor(RestClusterExecutor(str(info["rest_url"])))
        results: dict[str, Any] = {}
        for mode in (RuntimeExecutionMode.BATCH, RuntimeExecutionMode.STREAMING):
            def job(mode: RuntimeExecutionMode = mode) -> float:
                env = StreamExecutionEnvironment.get_execution_environment()
                env.set_parallelism(SLOTS)
                env.set_runtime_mode(mode)
                env.get_config().set("spark.micro-batch.max-rows", str(max_rows))
                for k, v in spark_conf.items():
                    env.get_config().set(k, v)
                (env.from_source(FileSource(str(data), format="parquet")).spark_sql(QUERY)
                 .sink_to(DiscardingSink()))
                return env.execute(f"spark-{mode.name.lower()}").get_net_runtime() / 1000

            job()  # starts the TaskExecutor's SparkSession (BATCH) / warms up (STREAMING)
            seconds = statistics.median(job() for _ in range(repeat))
            results[mode.name] = {"seconds": round(seconds, 3), "rows_per_s": round(rows / seconds)}
        return results
    finally:
        set_default_executor(None)
        stop_process(proc.pid)


def micro_batch_latency(sizes: list[int], batches: int, spark_conf: dict[str, str]) -> list[dict[str, Any]]:
    """The Spark step's time per micro-batch, on the operator as a Task drives it."""
    from yarnflink.common.records import Batch
    from yarnflink.operators.base import OperatorContext
    from yarnflink.operators.spark import SparkOperator
    from yarnflink.operators.specs import SparkSpec
    from yarnflink.spark.session import holder

    class Discard:
        rows = 0

        def emit(self, batch: Batch) -> None:
            Discard.rows += len(batch)

        def end_input(self) -> None:
            pass

    rng = np.random.default_rng(7)
    out = []
    for size in sizes:
        op = SparkOperator(SparkSpec(query=QUERY, runtime_mode="STREAMING"))
        op.output = Discard()
        op.open(OperatorContext(task_name="bench", operator_name="Spark SQL", subtask_index=0, parallelism=1,
                                max_parallelism=128, config={"taskmanager.numberOfTaskSlots": str(SLOTS),
                                                             "spark.micro-batch.max-rows": str(size), **spark_conf}))
        for b in range(batches + 3):
            ids = np.arange(b * size, (b + 1) * size, dtype=np.int64)
            op.process_batch(Batch.from_arrow(pa.record_batch(
                [ids, ids % 1000, rng.random(size)], names=["id", "key", "value"])))
        op.end_input()
        op.close()
        secs = sorted(s for _, s in list(op.runs)[3:])  # the first runs warm up the step's session
        out.append({"max_rows": size, "micro_batches": len(secs), "p50_ms": round(1000 * secs[len(secs) // 2], 1),
                    "p90_ms": round(1000 * secs[int(len(secs) * 0.9)], 1), "max_ms": round(1000 * secs[-1], 1),
                    "rows_per_s": round(size * len(secs) / sum(secs))})
    holder.stop()
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per figure; the median is shown")
    parser.add_argument("--max-rows", type=int, default=100_000, help="spark.micro-batch.max-rows of the STREAMING job")
    parser.add_argument("--driver-memory", default="2g", help="spark.driver.memory of every SparkSession")
    parser.add_argument("--only", default="plain,jobs,latency", help="parts to run: plain, jobs, latency")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    spark_conf = {"spark.driver.memory": args.driver_memory}
    only = set(args.only.split(","))
    import pyspark

    print(f"# {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"python {platform.python_version()}, pyarrow {pa.__version__}, pyspark {pyspark.__version__}")
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="yarnflink-bench-spark-") as tmp:
        data = Path(tmp) / "input"
        write_input(data, args.rows, SLOTS)
        plain = plain_spark(data, args.rows, args.repeat, spark_conf) if "plain" in only else None
        jobs = yarnflink_jobs(data, args.rows, args.repeat, Path(tmp), args.max_rows, spark_conf) \
            if "jobs" in only else {}
    latency = micro_batch_latency([1_000, 10_000, 100_000], 20, spark_conf) if "latency" in only else []
    result = {"rows": args.rows, "query": QUERY, "plain": plain, "yarnflink": jobs, "micro_batches": latency}
    if args.json:
        print(json.dumps(result))
        return
    print(f"query: {QUERY}   rows: {args.rows:,}   load average before: {load[0]:.1f}, after: {os.getloadavg()[0]:.1f}")
    if plain is not None:
        for label, key in (("result toArrow()", "toArrow"), ("result discarded", "noop")):
            print(f"plain PySpark, {label:<21} {plain[key + '_s']:7.3f} s = {plain[key + '_rows_per_s']:>12,} rows/s")
    for mode, r in jobs.items():
        print(f"yarnflink {mode:<9} job (net runtime) {r['seconds']:7.3f} s = {r['rows_per_s']:>12,} rows/s")
    if plain is not None and jobs:
        batch = jobs["BATCH"]["rows_per_s"]
        print(f"BATCH job / plain toArrow(): {batch / plain['toArrow_rows_per_s']:.2f}x;  "
              f"/ plain discarded: {batch / plain['noop_rows_per_s']:.2f}x")
    for r in latency:
        print(f"STREAMING micro-batch of {r['max_rows']:>7,} rows: p50 {r['p50_ms']:7.1f} ms, "
              f"p90 {r['p90_ms']:7.1f} ms, max {r['max_ms']:7.1f} ms "
              f"({r['micro_batches']} batches, {r['rows_per_s']:,} rows/s)")


if __name__ == "__main__":
    main()
