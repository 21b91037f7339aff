"""The process-wide SparkSession holder on real PySpark: one session serves concurrent steps (as
the slots of a TaskExecutor), configuration reaches it, a cancelled task's Spark job is
cancelled, and ``test_stop.py`` (run last) stops it."""

from __future__ import annotations

import sys
import threading

import pytest

from yarnflink.common.records import Batch
from yarnflink.operators.specs import SparkSpec
from yarnflink.spark.session import holder, session_conf

from .conftest import open_step, run_step, wait_until

pytestmark = pytest.mark.timeout(180)


def test_concurrent_steps_share_one_session_and_keep_their_inputs_apart(spark) -> None:
    starts = holder.starts
    seen: list[str] = []
    ops: list = []
    results: dict[int, list] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def slot(i: int) -> None:
        def fn(df):
            seen.append(df.sparkSession.sparkContext.applicationId)
            barrier.wait(60)  # both steps have their input DataFrame at once
            return df.selectExpr("f0", f"{i} AS slot")

        try:
            data = [[i * 1000 + k for k in range(500)]]
            for _ in range(3):
                op, out = run_step(SparkSpec(fn=fn), data, "BATCH")
                ops.append(op)
                results.setdefault(i, []).append(out.rows)
            op, out = run_step(SparkSpec(query=f"SELECT f0, {i} AS slot FROM input"), data, "BATCH")
            ops.append(op)
            results[i].append(out.rows)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=slot, args=(i,)) for i in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(150)
    assert not errors, errors
    for i in (1, 2):
        expected = [{"f0": i * 1000 + k, "slot": i} for k in range(500)]
        assert results[i] == [expected] * 4  # never the other slot's input view
    assert holder.starts == starts  # no second session
    assert set(seen) == {spark.sparkContext.applicationId}
    assert all(op._spark.sparkContext is spark.sparkContext for op in ops)  # one SparkContext, one JVM
    assert len({id(op._spark) for op in ops}) == 8  # each step its own session (input view, SQL conf)


def test_the_session_is_local_with_a_thread_per_slot_on_loopback_without_ui(spark) -> None:
    conf = spark.sparkContext.getConf()
    assert spark.sparkContext.master == "local[2]"
    assert conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert conf.get("spark.driver.host") == "127.0.0.1"
    assert conf.get("spark.ui.enabled") == "false"
    assert spark.sparkContext.uiWebUrl is None


def test_python_workers_run_this_interpreter(spark) -> None:
    """Local mode starts Python workers with $PYSPARK_PYTHON, not spark.pyspark.python: the holder
    sets it, so UDFs in a Spark step can import yarnflink and pyarrow."""

    def probe(_: object) -> str:
        import sys

        import pyarrow  # noqa: F401 - the worker's interpreter has it

        return sys.executable

    assert spark.sparkContext.parallelize([0], 1).map(probe).collect() == [sys.executable]


def test_spark_keys_of_the_configuration_reach_spark() -> None:
    conf = session_conf(
        {
            "spark.executor.memory": "3g",
            "spark.ui.enabled": "true",
            "parallelism.default": "4",
            "spark.micro-batch.max-rows": "10",
            "spark.sql.shuffle.partitions": "9",
        },
        threads=3,
        local_dir="/tmp/x",
    )
    assert conf["spark.master"] == "local[3]"
    assert conf["spark.executor.memory"] == "3g"
    assert conf["spark.ui.enabled"] == "true"  # an explicit key wins over the default
    assert conf["spark.sql.shuffle.partitions"] == "9"
    assert conf["spark.pyspark.python"] == sys.executable
    assert "spark.micro-batch.max-rows" not in conf and "parallelism.default" not in conf
    # the TaskExecutor's own configuration comes in under the job's
    conf = session_conf(
        {"spark.executor.memory": "3g"},
        threads=1,
        local_dir="/tmp/x",
        process_config={
            "spark.executor.memory": "1g",
            "spark.driver.memory": "2g",
            "spark.source.pushdown": "false",
            "rest.port": "0",
        },
    )
    assert conf["spark.executor.memory"] == "3g" and conf["spark.driver.memory"] == "2g"
    assert "spark.source.pushdown" not in conf and "rest.port" not in conf


def test_a_jobs_sql_keys_apply_to_its_steps_only(spark) -> None:
    def fn(df):
        s = df.sparkSession
        return s.createDataFrame([(s.conf.get("spark.sql.shuffle.partitions"),)], "v STRING")

    _, out = run_step(SparkSpec(fn=fn), [[1]], "BATCH", **{"spark.sql.shuffle.partitions": "7"})
    assert out.rows == [{"v": "7"}]
    _, out = run_step(SparkSpec(fn=fn), [[1]], "BATCH")
    assert out.rows == [{"v": "2"}]  # the session's default: one per slot
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"


def test_a_cancelled_task_cancels_its_spark_job(spark) -> None:
    running = threading.Event()
    running.set()
    op, _ = open_step(
        SparkSpec(fn=lambda df: df.sparkSession.range(0, 10**13, numPartitions=2).selectExpr("sum(id % 7) AS s")),
        "BATCH",
        is_running=running.is_set,
    )
    op.process_batch(Batch.from_rows([1]))
    failure: list[BaseException] = []

    def end() -> None:
        try:
            op.end_input()
        except BaseException as e:  # noqa: BLE001
            failure.append(e)

    t = threading.Thread(target=end)
    t.start()
    tracker = spark.sparkContext.statusTracker()
    wait_until(lambda: tracker.getActiveJobsIds() or not t.is_alive(), timeout=60, message="the Spark job")
    assert t.is_alive(), failure  # the job runs (for hours)
    running.clear()  # the task is cancelled
    t.join(60)
    assert not t.is_alive(), "the Spark job was not cancelled"
    assert failure and "cancel" in str(failure[0]).lower()
    wait_until(lambda: not tracker.getActiveJobsIds(), timeout=30, message="no active Spark job")


class _FlakyBuilder:
    """A SparkSession builder whose first ``failures`` starts fail with ``error``."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures, self.error, self.calls = failures, error, 0

    def getOrCreate(self) -> str:  # noqa: N802 - pyspark's name
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "session"


def test_a_gateway_that_exits_while_starting_is_started_again() -> None:
    from pyspark.errors import PySparkRuntimeError

    from yarnflink.spark.session import SparkSessionHolder

    exited = PySparkRuntimeError(errorClass="JAVA_GATEWAY_EXITED", messageParameters={})
    builder = _FlakyBuilder(1, exited)
    assert SparkSessionHolder._get_or_create(builder) == "session"
    assert builder.calls == 2

    always = _FlakyBuilder(10, exited)  # gives up after a few attempts, with pyspark's error
    with pytest.raises(PySparkRuntimeError, match="JAVA_GATEWAY_EXITED"):
        SparkSessionHolder._get_or_create(always)
    assert always.calls == 3

    other = _FlakyBuilder(1, ValueError("spark.executor.memory: bad size"))  # other errors: at once
    with pytest.raises(ValueError, match="bad size"):
        SparkSessionHolder._get_or_create(other)
    assert other.calls == 1
