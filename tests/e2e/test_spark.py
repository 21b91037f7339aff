"""Spark steps in jobs on a real master and a TaskExecutor process with 2 slots: results
equal plain PySpark's on the same data in BATCH and STREAMING mode, one SparkSession per
TaskExecutor serves all its slots with the job's spark.* keys, Spark errors fail tasks with
Spark's message and go through failover, and a stopping TaskExecutor stops its SparkSession."""

from __future__ import annotations

import glob
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from yarnflink import FileSource, RuntimeExecutionMode, StreamExecutionEnvironment
from yarnflink.client.executor import JobExecutionException

from .conftest import Cluster, start_cluster, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

ROWS = 40_000


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # the JVM's quick JIT tier only (a spark.* key of the TaskExecutor's configuration): about half
    # the CPU time for short jobs
    c = start_cluster(
        tmp_path_factory.mktemp("spark-cluster"),
        taskexecutors=1,
        slots=2,
        spark_driver_extraJavaOptions="-XX:TieredStopAtLevel=1",
    )
    yield c
    c.stop()


@pytest.fixture
def spark_executor(spark_cluster: Cluster) -> Iterator[Any]:
    from yarnflink.api.environment import set_default_executor

    yield spark_cluster.executor()
    set_default_executor(None)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two Parquet files: id, key (0..99), value (int), name."""
    d = tmp_path_factory.mktemp("spark-data")
    half = ROWS // 2
    for i in range(2):
        ids = list(range(i * half, (i + 1) * half))
        pq.write_table(
            pa.table(
                {
                    "id": ids,
                    "key": [x % 100 for x in ids],
                    "value": [(x * 7) % 1000 for x in ids],
                    "name": [f"n{x % 13}" for x in ids],
                }
            ),
            d / f"part-{i}.parquet",
        )
    return d


@pytest.fixture(scope="module")
def plain_spark() -> Any:
    """Plain PySpark in this process, on the same files."""
    from yarnflink.spark.session import holder

    return holder.get({"taskmanager.numberOfTaskSlots": "2"}).newSession()


def plain_sql(spark: Any, data: Path, query: str) -> list[dict]:
    spark.read.parquet(str(data)).createOrReplaceTempView("input")
    return spark.sql(query).toArrow().to_pylist()


def env_for(mode: RuntimeExecutionMode, parallelism: int = 2, **config: str) -> StreamExecutionEnvironment:
    """Every job carries a static Spark key; the first Spark step in a TaskExecutor passes it on."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.get_config().set("spark.yarnflink.test.marker", "from-the-job")
    env.set_parallelism(parallelism)
    env.set_runtime_mode(mode)
    for k, v in config.items():
        env.get_config().set(k, v)
    return env


def by_repr(rows: list) -> list:
    return sorted(rows, key=repr)


def test_batch_spark_sql_job_equals_plain_pyspark(spark_executor, data: Path, plain_spark) -> None:
    query = (
        "SELECT key, count(*) AS n, sum(value) AS total, max(name) AS top, min(id) AS first "
        "FROM input WHERE value % 3 <> 0 GROUP BY key"
    )
    env = env_for(RuntimeExecutionMode.BATCH)
    got = list(
        env.from_source(FileSource(str(data), format="parquet"))
        .key_by("key")
        .spark_sql(query)
        .execute_and_collect("spark batch")
    )
    expected = plain_sql(plain_spark, data, query)
    assert len(expected) == 100
    assert by_repr(got) == by_repr(expected)  # one row per key: each step saw its whole partition


def test_batch_step_chained_to_a_parquet_source_equals_plain_pyspark(spark_executor, data: Path, plain_spark) -> None:
    # the step reads the source's files itself (spark.source.pushdown; tests/unit/spark/test_pushdown.py)
    query = "SELECT id, upper(name) AS name, value * 2 AS v2 FROM input WHERE value > 500"
    env = env_for(RuntimeExecutionMode.BATCH)
    got = list(
        env.from_source(FileSource(str(data), format="parquet"))
        .spark_sql(query)
        .execute_and_collect("spark batch pushdown")
    )
    expected = plain_sql(plain_spark, data, query)
    assert len(expected) > 10_000
    assert by_repr(got) == by_repr(expected)


def test_streaming_transform_spark_job_equals_plain_pyspark(spark_executor, data: Path, plain_spark) -> None:
    def fn(df):
        return df.where("value > 500").selectExpr("id", "upper(name) AS name", "value * key AS product")

    env = env_for(RuntimeExecutionMode.STREAMING, **{"spark.micro-batch.max-rows": "3000"})
    got = list(
        env.from_source(FileSource(str(data), format="parquet"))
        .transform_spark(fn)
        .execute_and_collect("spark streaming")
    )
    expected = fn(plain_spark.read.parquet(str(data))).toArrow().to_pylist()
    assert len(expected) > 10_000
    assert by_repr(got) == by_repr(expected)


def java_descendants(pid: int) -> list[psutil.Process]:
    def is_java(p: psutil.Process) -> bool:
        try:
            return p.name() == "java"
        except psutil.NoSuchProcess:  # a short-lived descendant (e.g. a Python worker) just ended
            return False

    return [p for p in psutil.Process(pid).children(recursive=True) if is_java(p)]


def test_one_spark_session_serves_all_slots_of_a_taskexecutor(spark_executor, spark_cluster: Cluster) -> None:
    def fn(df):
        from pyspark.sql import functions as F

        s = df.sparkSession
        sc = s.sparkContext
        return (
            df.groupBy()
            .count()
            .select(
                F.lit(os.getpid()).alias("pid"),
                F.lit(sc.applicationId).alias("app"),
                F.lit(sc.master).alias("master"),
                F.lit(sc.getConf().get("spark.yarnflink.test.marker")).alias("marker"),
                F.lit(s.conf.get("spark.sql.shuffle.partitions")).alias("shuffle"),
            )
        )

    env = env_for(RuntimeExecutionMode.BATCH, parallelism=2, **{"spark.sql.shuffle.partitions": "5"})
    got = list(env.from_sequence(1, 4000).transform_spark(fn).execute_and_collect("spark slots"))
    assert len(got) == 2  # one row per subtask, one subtask per slot
    [te_pid] = spark_cluster.taskexecutor_pids()
    assert {r["pid"] for r in got} == {te_pid}
    assert len({r["app"] for r in got}) == 1  # both slots' tasks on one SparkContext
    assert {r["master"] for r in got} == {"local[2]"}  # a thread per slot
    # the jobs' spark.* keys reached Spark: a static key (as the job that started the session had
    # it, see env_for) and a SQL key of this job
    assert {r["marker"] for r in got} == {"from-the-job"}
    assert {r["shuffle"] for r in got} == {"5"}
    assert len(java_descendants(te_pid)) == 1  # one JVM


def test_spark_error_fails_the_task_with_sparks_message_and_goes_through_failover(
    spark_executor, spark_cluster: Cluster, tmp_path: Path
) -> None:
    marker = tmp_path / "failed-once"

    def fails_once(df):
        if not marker.exists():
            marker.write_text("x")
            return df.sparkSession.sql("SELECT no_such_column FROM range(1)")
        return df.selectExpr("f0 * 2 AS f0")

    env = env_for(
        RuntimeExecutionMode.BATCH,
        parallelism=1,
        **{
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": "2",
            "restart-strategy.fixed-delay.delay": "100 ms",
        },
    )
    stream = env.from_sequence(1, 10).transform_spark(fails_once)
    got = list(stream.execute_and_collect("spark failover"))
    assert sorted(got) == [2 * i for i in range(1, 11)]  # the restarted attempt
    jobs = [j for j in spark_cluster.rest.jobs_overview() if j["name"] == "spark failover"]
    history = spark_cluster.rest.exceptions(jobs[0]["jid"])["exceptionHistory"]["entries"]
    assert history and history[-1]["exceptionName"] == "AnalysisException"
    assert "UNRESOLVED_COLUMN" in str(history[-1]) and "no_such_column" in str(history[-1])

    env = env_for(RuntimeExecutionMode.BATCH, parallelism=1, **{"restart-strategy.type": "none"})
    with pytest.raises(JobExecutionException) as info:
        list(env.from_sequence(1, 10).spark_sql("SELECT f0 FROM no_such_table").execute_and_collect("spark fails"))
    assert info.value.state == "FAILED"
    assert "TABLE_OR_VIEW_NOT_FOUND" in str(info.value) and "no_such_table" in str(info.value)


def test_a_stopping_taskexecutor_stops_its_spark_session(spark_cluster: Cluster) -> None:
    # runs last in this module: it stops the module's cluster
    [te_pid] = spark_cluster.taskexecutor_pids()
    jvms = java_descendants(te_pid)
    workdirs = glob.glob(os.path.join(tempfile.gettempdir(), f"yarnflink-spark-{te_pid}-*"))
    assert len(jvms) == 1 and len(workdirs) == 1  # the earlier tests started the session
    spark_cluster.stop()

    def alive(j: psutil.Process) -> bool:
        try:
            return j.is_running() and j.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:  # it exited between the two calls
            return False

    wait_until(lambda: not any(alive(j) for j in jvms), timeout=60, message="the TaskExecutors' JVMs to exit")
    wait_until(
        lambda: not any(os.path.exists(d) for d in workdirs),
        timeout=30,
        message="the Spark work directories to be removed",
    )
