"""The main example, ``examples/clickstream.py``, on a real master and a TaskExecutor with 2 slots:
its committed Parquet sessions equal a reference computed with plain PySpark (the same cleaning
SQL) and plain Python (the sessions) on the same generated events; and with a Spark step that
fails once in the JVM after a checkpoint completed, failover restores the checkpoint and the
committed output is still exactly the reference, from one SparkSession serving both slots.
"""

from __future__ import annotations

import collections
import glob
import importlib.util
import os
import runpy
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import numpy as np
import pyarrow as pa
import pytest

from yarnflink import StreamExecutionEnvironment
from yarnflink.api.environment import set_default_executor

from .conftest import Cluster, start_cluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "clickstream.py"
EVENTS, SEED, GAP_S = 12_000, 7, 30.0
JIT = "-XX:TieredStopAtLevel=1"


def _load_example() -> Any:
    spec = importlib.util.spec_from_file_location("yarnflink_example_clickstream", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    cloudpickle.register_pickle_by_value(module)  # not importable in the TaskExecutor
    return module


cs = _load_example()
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def cs_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One TaskExecutor with 2 slots: both subtasks of the Spark step share its SparkSession. A
    spark.* key of the TaskExecutor's configuration reaches it: the JIT's quick tier only, which
    halves the JVM's CPU time for short jobs on a busy machine."""
    c = start_cluster(
        tmp_path_factory.mktemp("clickstream-cluster"), taskexecutors=1, slots=2, spark_driver_extraJavaOptions=JIT
    )
    yield c
    set_default_executor(None)
    c.stop()


@pytest.fixture(scope="module")
def reference() -> list[dict]:
    """The sessions of EVENTS events (SEED) computed without yarnflink: the cleaning SQL in plain
    PySpark on all events at once, then sessions per user in Python (Flink's session windows
    merge windows [ts, ts + gap) that overlap or touch: a gap longer than ``gap`` ends a session)."""
    from yarnflink.spark.session import holder

    spark = holder.get({"taskmanager.numberOfTaskSlots": "2", "spark.driver.extraJavaOptions": JIT}).newSession()
    spark.createDataFrame(pa.Table.from_batches([cs.generate(np.arange(EVENTS), SEED)])).createOrReplaceTempView(
        "input"
    )
    clicks = spark.sql(cs.CLEAN_SQL).toArrow().to_pylist()
    assert 0.9 * EVENTS < len(clicks) < EVENTS  # bots and malformed rows went
    by_user: dict[str, list[dict]] = collections.defaultdict(list)
    for c in clicks:
        by_user[c["user_id"]].append(c)
    gap_ms = int(GAP_S * 1000)
    sessions = []
    for user, cl in by_user.items():
        cl.sort(key=lambda c: (c["ts"], c["page"], c["device"], c["source"]))
        current: list[dict] = []
        for c in cl + [None]:  # type: ignore[list-item]
            if current and (c is None or c["ts"] - current[-1]["ts"] > gap_ms):
                first = current[0]
                sessions.append(
                    cs.session_record(
                        user,
                        len(current),
                        {x["page"] for x in current},
                        first["ts"],
                        current[-1]["ts"],
                        first["page"],
                        first["device"],
                        first["source"],
                        any(x["page"] == "/checkout" for x in current),
                    )
                )
                current = []
            if c is not None:
                current.append(c)
    return sorted(sessions, key=_order)


def _order(s: dict) -> tuple:
    return (s["user_id"], s["session_start_ms"])


def committed(output: Path) -> list[dict]:
    assert not glob.glob(str(output / ".*inprogress")), "in-progress files left behind"
    return sorted(cs.read_sessions(str(output)).to_pylist(), key=_order)


def test_clickstream_example_output_equals_a_plain_pyspark_reference(
    cs_cluster: Cluster,
    reference: list[dict],
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cs_cluster.executor()
    out = tmp_path / "sessions"
    # as `yarnflink run examples/clickstream.py ...` runs it: the script as __main__ with the
    # cluster's executor installed
    monkeypatch.setattr(
        sys,
        "argv",
        [str(EXAMPLE), "--events", str(EVENTS), "--seed", str(SEED), "--gap", str(GAP_S), "--output", str(out)],
    )
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    got = committed(out)
    assert len(reference) > 500
    assert got == reference
    printed = capsys.readouterr().out
    assert f"{len(reference):,} sessions of {len({s['user_id'] for s in reference}):,} users" in printed
    assert "top landing pages" in printed


def fails_once_after_a_checkpoint(checkpoints: Path, marks: Path) -> Callable[[Any], Any]:
    """The example's cleaning step as a ``transform_spark`` function that, on the first micro-batch
    after a checkpoint completed, fails inside Spark (``raise_error`` in the JVM) -- once in the
    whole job; every run records the Spark application and process it ran in."""

    def clean(df: Any) -> Any:
        from pyspark.sql import functions as F

        spark = df.sparkSession
        (marks / f"app-{os.getpid()}-{spark.sparkContext.applicationId}").write_text(
            spark.sparkContext.getConf().get("spark.driver.extraJavaOptions") or ""
        )
        df.createOrReplaceTempView("input")
        out = spark.sql(cs.CLEAN_SQL)
        if glob.glob(str(checkpoints / "*" / "chk-*" / "_metadata")):
            try:
                os.close(os.open(marks / "failed", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return out
            return out.withColumn("user_id", F.raise_error(F.lit("injected failure in the Spark step")).cast("string"))
        if not (marks / "failed").exists():
            time.sleep(0.1)  # until then, slow enough that a checkpoint completes between micro-batches
        return out

    return clean


def test_a_spark_step_failing_mid_run_keeps_the_committed_sessions_exact(
    cs_cluster: Cluster, reference: list[dict], tmp_path: Path
) -> None:
    cs_cluster.executor()
    out, checkpoints, marks = tmp_path / "sessions", tmp_path / "checkpoints", tmp_path / "marks"
    marks.mkdir()
    env = StreamExecutionEnvironment.get_execution_environment()
    cs.configure(env)
    for k, v in {
        "execution.checkpointing.interval": "300 ms",
        "execution.checkpointing.dir": f"file://{checkpoints}",
        "spark.micro-batch.max-rows": "500",  # many micro-batches: the failure comes mid-run
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": "3",
        "restart-strategy.fixed-delay.delay": "200 ms",
    }.items():
        env.get_config().set(k, v)
    clean = fails_once_after_a_checkpoint(checkpoints, marks)
    cs.build(
        env,
        events=EVENTS,
        seed=SEED,
        output=str(out),
        gap_s=GAP_S,
        clean=lambda s: s.transform_spark(clean, schema=cs.SCHEMA),
    )
    client = env.execute_async("clickstream with a failing Spark step")
    client.get_job_execution_result()
    job = cs_cluster.rest.job(client.get_job_id())
    assert job["state"] == "FINISHED"
    assert (marks / "failed").exists() and job["numRestarts"] >= 1
    history = cs_cluster.rest.exceptions(client.get_job_id())["exceptionHistory"]["entries"]
    assert any("injected failure in the Spark step" in str(e) for e in history)
    assert committed(out) == reference  # restored from the checkpoint: nothing lost, nothing twice
    import httpx

    r = httpx.get(f"{cs_cluster.rest_url}/jobs/{client.get_job_id()}/checkpoints", headers=cs_cluster.auth, timeout=10)
    assert r.json()["counts"]["restored"] >= 1

    # one SparkSession served both slots of the TaskExecutor, before and after the restart
    [te_pid] = cs_cluster.taskexecutor_pids()
    runs = [p.name.split("-", 2)[1:] for p in marks.glob("app-*")]  # [pid, application id]
    assert {pid for pid, _ in runs} == {str(te_pid)}
    assert len({app for _, app in runs}) == 1
    assert all(p.read_text().endswith(JIT) for p in marks.glob("app-*"))  # the TaskExecutor's spark.* key


@pytest.mark.skipif(
    not os.environ.get("YARNFLINK_E2E_CLICKSTREAM_2X2"),
    reason="on demand (two more SparkSessions): YARNFLINK_E2E_CLICKSTREAM_2X2=1; the suite's short form is "
    "test_jobs.py, whose keyed vertex runs on both TaskExecutors of a cluster with the default placement",
)
@pytest.mark.timeout(900)
def test_on_two_task_executors_of_two_slots_the_example_uses_both_processes(
    reference: list[dict],
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A TaskExecutor's slots share one interpreter lock: on a session of 2 TaskExecutors x 2
    slots with the default configuration, every vertex of the example (parallelism 2) runs one
    subtask in each process, and the output is still exactly the reference."""
    c = start_cluster(
        tmp_path_factory.mktemp("clickstream-2x2"), taskexecutors=2, slots=2, spark_driver_extraJavaOptions=JIT
    )
    try:
        c.executor()
        out = tmp_path / "sessions"
        monkeypatch.setattr(
            sys,
            "argv",
            [str(EXAMPLE), "--events", str(EVENTS), "--seed", str(SEED), "--gap", str(GAP_S), "--output", str(out)],
        )
        runpy.run_path(str(EXAMPLE), run_name="__main__")
        assert committed(out) == reference
        (job,) = c.rest.jobs_overview()
        vertices = c.rest.job(job["jid"])["vertices"]
        assert vertices and {v["parallelism"] for v in vertices} == {2}
        for v in vertices:
            assert len({s["taskmanager-id"] for s in v["subtasks"]}) == 2, v["name"]
    finally:
        set_default_executor(None)
        c.stop()
