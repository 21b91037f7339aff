"""Spark step benchmarks (issue 8, item 6): a Spark SQL filter-and-project step inside a yarnflink
BATCH job against the same query in plain PySpark on the same Parquet files, and the per-micro-
batch latency of a Spark step in STREAMING mode.

    scripts/bench --suite spark [--rows N] [--repeat R] [--json]

* plain PySpark: ``spark.read.parquet(files)``, the query, ``toArrow()`` (the result as Arrow in
  Python, where a yarnflink step delivers it) in a ``local[2]`` session with the TaskExecutor's
  settings, at Spark's default Arrow batch size (10,000 rows) and at the step's (up to 1M rows);
  also with the result discarded in the JVM (``write.format("noop")``).
* yarnflink BATCH: a local cluster of one TaskExecutor with 2 slots (one ``local[2]`` SparkSession),
  ``FileSource(files) -> spark_sql(query) -> DiscardingSink`` at parallelism 2; the job's net
  runtime (scheduling and deployment included). Twice: as it runs by default (the step reads the
  source's Parquet files itself, ``spark.source.pushdown``) and with the records handed to Spark
  as Arrow batches (``spark.source.pushdown: false``: the source decodes the files in Python, the
  step spills them to an uncompressed Parquet file that Spark reads). Three untimed jobs start and warm up the
  TaskExecutor's SparkSession, as three untimed plain runs warm up the plain session.
  Plain runs and jobs alternate, round by round, so both see the same load on a shared machine
  (with a 1 s pause before each timed run for the other JVM to settle); the ratio is the median
  of the rounds' ratios.
* yarnflink STREAMING: the same job in STREAMING mode on ``--streaming-rows`` rows (micro-batches
  of ``spark.micro-batch.max-rows``), and the Spark step's time per micro-batch measured on the
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
from collections.abc import Callable
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
PLAIN = ("toArrow", "toArrow_1M", "noop")
#: Pause before each timed run: lets the other JVM's JIT compiler and GC settle after its turn.
SETTLE_S = 1.0


def write_input(directory: Path, rows: int, files: int) -> None:
    """``files`` Parquet files (snappy, pyarrow's defaults) of id int64, key int64, value double."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(42)
    per = -(-rows // files)
    for i in range(files):
        lo, hi = i * per, min(rows, (i + 1) * per)
        ids = np.arange(lo, hi, dtype=np.int64)
        pq.write_table(
            pa.table({"id": ids, "key": ids % 1000, "value": rng.random(hi - lo)}), directory / f"part-{i}.parquet"
        )


def _timed(fn: Callable[[], Any]) -> float:
    time.sleep(SETTLE_S)
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def plain_runs(data: Path, spark_conf: dict[str, str]) -> dict[str, Callable[[], Any]]:
    """The query in plain PySpark, three ways (see the module docstring)."""
    from yarnflink.spark.session import holder

    root = holder.get({"taskmanager.numberOfTaskSlots": str(SLOTS), **spark_conf})
    default, tuned = root.newSession(), root.newSession()
    tuned.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(1 << 20))

    def to_arrow(spark: Any) -> None:
        spark.read.parquet(str(data)).createOrReplaceTempView("input")
        spark.sql(QUERY).toArrow()

    def noop() -> None:
        default.read.parquet(str(data)).createOrReplaceTempView("input")
        default.sql(QUERY).write.format("noop").mode("overwrite").save()

    return {"toArrow": lambda: to_arrow(default), "toArrow_1M": lambda: to_arrow(tuned), "noop": noop}


def job_run(
    path: Path, mode: RuntimeExecutionMode, max_rows: int, spark_conf: dict[str, str], pushdown: bool = True
) -> float:
    """One ``FileSource -> spark_sql -> DiscardingSink`` job; its net runtime in seconds."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(SLOTS)
    env.set_runtime_mode(mode)
    env.get_config().set("spark.micro-batch.max-rows", str(max_rows))
    env.get_config().set("spark.source.pushdown", str(pushdown).lower())
    for k, v in spark_conf.items():
        env.get_config().set(k, v)
    env.from_source(FileSource(str(path), format="parquet")).spark_sql(QUERY).sink_to(DiscardingSink())
    return env.execute(f"spark-{mode.name.lower()}").get_net_runtime() / 1000


def micro_batch_latency(sizes: list[int], batches: int, spark_conf: dict[str, str]) -> list[dict[str, Any]]:
    """The Spark step's time per micro-batch, on the operator as a Task drives it."""
    from yarnflink.common.records import Batch
    from yarnflink.operators.base import OperatorContext
    from yarnflink.operators.spark import SparkOperator
    from yarnflink.operators.specs import SparkSpec

    class Discard:
        def emit(self, batch: Batch) -> None:
            pass

        def end_input(self) -> None:
            pass

    rng = np.random.default_rng(7)
    out = []
    for size in sizes:
        op = SparkOperator(SparkSpec(query=QUERY, runtime_mode="STREAMING"))
        op.output = Discard()
        op.open(
            OperatorContext(
                task_name="bench",
                operator_name="Spark SQL",
                subtask_index=0,
                parallelism=1,
                max_parallelism=128,
                config={
                    "taskmanager.numberOfTaskSlots": str(SLOTS),
                    "spark.micro-batch.max-rows": str(size),
                    **spark_conf,
                },
            )
        )
        for b in range(batches + 3):
            ids = np.arange(b * size, (b + 1) * size, dtype=np.int64)
            op.process_batch(
                Batch.from_arrow(pa.record_batch([ids, ids % 1000, rng.random(size)], names=["id", "key", "value"]))
            )
        op.end_input()
        op.close()
        secs = sorted(s for _, s in list(op.runs)[3:])  # the first runs warm up the step's session

        def pct(q: float) -> float:
            return round(1000 * secs[min(len(secs) - 1, int(len(secs) * q))], 1)

        out.append(
            {
                "max_rows": size,
                "micro_batches": len(secs),
                "p50_ms": pct(0.5),
                "p90_ms": pct(0.9),
                "p99_ms": pct(0.99),
                "max_ms": round(1000 * secs[-1], 1),
                "rows_per_s": round(size * len(secs) / sum(secs)),
            }
        )
    return out


def run(
    rows: int, stream_rows: int, repeat: int, max_rows: int, spark_conf: dict[str, str], tmp: Path, batches: int = 50
) -> dict[str, Any]:
    from yarnflink.spark.session import holder

    data, stream_data = tmp / "input", tmp / "stream-input"
    write_input(data, rows, SLOTS)
    write_input(stream_data, stream_rows, SLOTS)
    config = Configuration()
    config.set("taskmanager.numberOfTaskSlots", str(SLOTS))
    proc, info = start_local_cluster(config, taskexecutors=1, workdir=tmp / "cluster", detached=False)
    try:
        set_default_executor(RestClusterExecutor(str(info["rest_url"])))

        def batch_job(pushdown: bool = True) -> float:
            return job_run(data, RuntimeExecutionMode.BATCH, max_rows, spark_conf, pushdown)

        plain = plain_runs(data, spark_conf)
        for i, fn in enumerate(plain.values()):  # warm-up: runs in each JVM (the first job starts the session)
            fn()
            batch_job(i % 2 == 0)
        rounds = []
        for _ in range(repeat):
            r = {k: _timed(fn) for k, fn in plain.items()}
            time.sleep(SETTLE_S)
            r["BATCH"] = batch_job()
            time.sleep(SETTLE_S)
            r["BATCH_arrow"] = batch_job(pushdown=False)
            r["load"] = os.getloadavg()[0]
            rounds.append(r)
        latency = micro_batch_latency([1_000, 10_000, 100_000], batches, spark_conf)
        holder.stop()
        job_run(stream_data, RuntimeExecutionMode.STREAMING, max_rows, spark_conf)  # warm-up
        streaming = statistics.median(
            job_run(stream_data, RuntimeExecutionMode.STREAMING, max_rows, spark_conf) for _ in range(repeat)
        )
    finally:
        set_default_executor(None)
        stop_process(proc.pid)
    med = {k: statistics.median(r[k] for r in rounds) for k in (*PLAIN, "BATCH", "BATCH_arrow")}
    return {
        "rows": rows,
        "query": QUERY,
        "rounds": rounds,
        "seconds": {k: round(v, 3) for k, v in med.items()},
        "rows_per_s": {k: round(rows / v) for k, v in med.items()},
        "batch_vs_plain_toArrow": round(
            statistics.median(min(r["toArrow"], r["toArrow_1M"]) / r["BATCH"] for r in rounds), 2
        ),
        "batch_vs_plain_noop": round(statistics.median(r["noop"] / r["BATCH"] for r in rounds), 2),
        "batch_arrow_vs_plain_toArrow": round(
            statistics.median(min(r["toArrow"], r["toArrow_1M"]) / r["BATCH_arrow"] for r in rounds), 2
        ),
        "streaming": {
            "rows": stream_rows,
            "max_rows": max_rows,
            "seconds": round(streaming, 3),
            "rows_per_s": round(stream_rows / streaming),
        },
        "micro_batches": latency,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=5, help="rounds (plain runs + a job each); medians shown")
    parser.add_argument("--max-rows", type=int, default=100_000, help="spark.micro-batch.max-rows of the STREAMING job")
    parser.add_argument("--streaming-rows", type=int, default=2_000_000, help="rows of the STREAMING job")
    parser.add_argument("--driver-memory", default="2g", help="spark.driver.memory of every SparkSession")
    parser.add_argument("--micro-batches", type=int, default=50, help="timed micro-batches per size (latency)")
    parser.add_argument(
        "--java-options",
        default=None,
        help="spark.driver.extraJavaOptions of every SparkSession (e.g. -XX:TieredStopAtLevel=1)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    import pyspark

    print(
        f"# {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"python {platform.python_version()}, pyarrow {pa.__version__}, pyspark {pyspark.__version__}"
    )
    with tempfile.TemporaryDirectory(prefix="yarnflink-bench-spark-") as tmp:
        conf = {"spark.driver.memory": args.driver_memory}
        if args.java_options:
            conf["spark.driver.extraJavaOptions"] = args.java_options
        r = run(args.rows, args.streaming_rows, args.repeat, args.max_rows, conf, Path(tmp), args.micro_batches)
    if args.json:
        print(json.dumps(r))
        return
    print(
        f"query: {QUERY}   rows: {args.rows:,}   load average per round: "
        + ", ".join(f"{x['load']:.1f}" for x in r["rounds"])
    )
    labels = {
        "toArrow": "plain PySpark, result toArrow()",
        "toArrow_1M": "plain PySpark, toArrow(), 1M-row batches",
        "noop": "plain PySpark, result discarded",
        "BATCH": "yarnflink BATCH job (net runtime)",
        "BATCH_arrow": "yarnflink BATCH job, Arrow hand-off",
    }
    for k, label in labels.items():
        print(f"{label:<42} {r['seconds'][k]:7.3f} s = {r['rows_per_s'][k]:>12,} rows/s")
    print(
        f"BATCH job / plain toArrow() (the faster of the two): {r['batch_vs_plain_toArrow']:.2f}x;  "
        f"/ plain discarded: {r['batch_vs_plain_noop']:.2f}x  (medians of the rounds' ratios)"
    )
    print(
        f"BATCH job with the Arrow hand-off (spark.source.pushdown: false) / plain toArrow(): "
        f"{r['batch_arrow_vs_plain_toArrow']:.2f}x"
    )
    s = r["streaming"]
    print(
        f"yarnflink STREAMING job, {s['rows']:,} rows, micro-batches of {s['max_rows']:,}: {s['seconds']:.3f} s "
        f"= {s['rows_per_s']:,} rows/s"
    )
    for m in r["micro_batches"]:
        print(
            f"STREAMING micro-batch of {m['max_rows']:>7,} rows: p50 {m['p50_ms']:7.1f} ms, "
            f"p90 {m['p90_ms']:7.1f} ms, p99 {m['p99_ms']:7.1f} ms "
            f"({m['micro_batches']} batches, {m['rows_per_s']:,} rows/s)"
        )


if __name__ == "__main__":
    main()
