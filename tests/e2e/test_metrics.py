"""Task and process metrics over REST (Flink's names and paths), the Prometheus endpoints of the
master and the TaskExecutors, and the logs over REST."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from yarnflink import StreamExecutionEnvironment
from yarnflink.api.environment import set_default_executor

from .conftest import Cluster, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


@pytest.fixture
def mcluster(monitoring_cluster: Cluster) -> Iterator[Cluster]:
    """2 TaskExecutors x 2 slots; metrics fetched at most every 200 ms; Prometheus on free ports."""
    monitoring_cluster.executor()
    yield monitoring_cluster
    set_default_executor(None)


def get(c: Cluster, path: str, **params: Any) -> Any:
    r = httpx.get(c.rest_url + path, params=params, headers=c.auth, timeout=30)
    assert r.status_code == 200, (path, r.status_code, r.text)
    return r.json() if "json" in r.headers.get("content-type", "") else r.text


def values(c: Cluster, path: str, names: list[str]) -> dict[str, float]:
    return {m["id"]: float(m["value"]) for m in get(c, path, get=",".join(names))}


def vertex_ids(c: Cluster, job_id: str) -> list[str]:
    return [v["id"] for v in c.rest.job(job_id)["vertices"]]


def running(c: Cluster, job_id: str) -> bool:
    d = c.rest.job(job_id)
    return d["state"] == "RUNNING" and all(v["status"] == "RUNNING" for v in d["vertices"])


def test_task_metrics_of_a_running_job(mcluster: Cluster) -> None:
    c = mcluster
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    # source and filter are separate vertices (rebalance), so records cross the network
    env.from_sequence(1, 10**12).rebalance().filter(lambda x: x < 0).print()
    job_id = env.execute_async("metrics-running").get_job_id()
    try:
        wait_until(lambda: running(c, job_id), message="job running")
        source, sink = vertex_ids(c, job_id)

        def flowing() -> bool:
            out = values(c, f"/jobs/{job_id}/vertices/{source}/metrics", ["numRecordsOut", "numRecordsOutPerSecond"])
            inp = values(c, f"/jobs/{job_id}/vertices/{sink}/metrics", ["0.numRecordsIn", "1.numRecordsIn"])
            return (
                out.get("numRecordsOut", 0) > 0
                and out.get("numRecordsOutPerSecond", 0) > 0
                and inp.get("0.numRecordsIn", 0) > 0
                and inp.get("1.numRecordsIn", 0) > 0
            )

        wait_until(flowing, timeout=60, message="records flowing in the metrics")
        # the ids without ?get: Flink's per-subtask ids and the vertex aggregate
        ids = {m["id"] for m in get(c, f"/jobs/{job_id}/vertices/{sink}/metrics")}
        for name in (
            "numRecordsIn",
            "numRecordsOut",
            "numBytesIn",
            "numBytesOut",
            "numRecordsInPerSecond",
            "numRecordsOutPerSecond",
            "backPressuredTimeMsPerSecond",
            "isBackPressured",
            "currentInputWatermark",
            "lastCheckpointDuration",
            "lastCheckpointSize",
        ):
            assert f"0.{name}" in ids and f"1.{name}" in ids and name in ids, name
        sink_vals = values(
            c,
            f"/jobs/{job_id}/vertices/{sink}/metrics",
            ["numBytesIn", "numRecordsInPerSecond", "0.currentInputWatermark"],
        )
        assert sink_vals["numBytesIn"] > 0 and sink_vals["numRecordsInPerSecond"] > 0
        assert sink_vals["0.currentInputWatermark"] == -(2**63)  # Flink's "no watermark yet"
        # aggregated over subtasks
        agg = get(c, f"/jobs/{job_id}/vertices/{sink}/subtasks/metrics", get="numRecordsIn", agg="sum,max,min")
        assert agg[0]["id"] == "numRecordsIn" and agg[0]["sum"] >= agg[0]["max"] >= agg[0]["min"] > 0
        one = get(c, f"/jobs/{job_id}/vertices/{sink}/subtasks/1/metrics", get="numRecordsIn")
        assert one[0]["id"] == "numRecordsIn" and int(one[0]["value"]) > 0
        bp = get(c, f"/jobs/{job_id}/vertices/{source}/backpressure")
        assert bp["backpressure-level"] in ("ok", "low", "high") and len(bp["subtasks"]) == 2
        # the job details carry Flink's per-vertex IO metrics, plus rates
        details = c.rest.job(job_id)
        m = {v["id"]: v["metrics"] for v in details["vertices"]}
        assert m[source]["write-records"] > 0 and m[sink]["read-records"] > 0
        assert not m[source]["write-records-complete"]
        assert details["plan"]["nodes"][1]["inputs"][0]["ship_strategy"] == "REBALANCE"
        # job metrics: no restart, no checkpoint yet; the checkpoint history is empty
        jm = values(c, f"/jobs/{job_id}/metrics", ["numRestarts", "uptime", "numberOfCompletedCheckpoints"])
        assert jm["numRestarts"] == 0 and jm["numberOfCompletedCheckpoints"] == 0 and jm["uptime"] > 0
        assert get(c, f"/jobs/{job_id}/checkpoints")["history"] == []
        # bad queries are 400s, unknown vertices 404s
        r = httpx.get(
            f"{c.rest_url}/jobs/{job_id}/vertices/{sink}/subtasks/metrics",
            params={"get": "numRecordsIn", "agg": "median"},
            headers=c.auth,
            timeout=30,
        )
        assert r.status_code == 400 and "median" in r.json()["errors"][0]
        r = httpx.get(f"{c.rest_url}/jobs/{job_id}/vertices/{'0' * 32}/metrics", headers=c.auth, timeout=30)
        assert r.status_code == 404
    finally:
        c.rest.cancel(job_id)
        wait_until(lambda: c.rest.job(job_id)["state"] == "CANCELED", message="canceled")

    # the final metrics came with the tasks' CANCELED states (a task that ended on its own while
    # the cancel was on its way reports them a moment after the job ended)
    def final() -> dict[str, Any]:
        return {v["id"]: v["metrics"] for v in c.rest.job(job_id)["vertices"]}

    wait_until(
        lambda: all(m["read-records-complete"] for m in final().values()),
        timeout=60,
        message="final metrics of every subtask",
    )
    assert final()[source]["write-records"] > 0 and final()[sink]["read-records"] > 0


def test_finished_job_reports_exact_record_counts(mcluster: Cluster) -> None:
    c = mcluster
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.from_sequence(1, 50_000).rebalance().map(lambda x: x * 2).filter(lambda x: x % 4 == 0).print()
    result = env.execute("metrics-exact")
    details = c.rest.job(result.get_job_id())
    source, rest = details["vertices"]
    assert source["metrics"]["write-records"] == 50_000 and source["metrics"]["write-records-complete"]
    assert rest["metrics"]["read-records"] == 50_000 and rest["metrics"]["read-bytes"] > 0
    assert source["metrics"]["write-bytes"] > 0
    assert sum(s["metrics"]["read-records"] for s in rest["subtasks"]) == 50_000
    # subtask metrics of the archived job over the metrics REST API
    vals = values(c, f"/jobs/{result.get_job_id()}/vertices/{rest['id']}/metrics", ["numRecordsIn", "numRecordsOut"])
    assert vals == {"numRecordsIn": 50_000.0, "numRecordsOut": 0.0}  # a sink chain sends nothing downstream


def test_backpressure_of_a_slow_consumer(mcluster: Cluster) -> None:
    c = mcluster
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)

    def slow(batch: Any) -> Any:  # about 0.2 s per batch: far slower than the source, quick to cancel
        time.sleep(0.2)
        return batch

    env.from_sequence(1, 10**12).rebalance().map_batches(slow).filter(lambda x: x < 0).print()
    job_id = env.execute_async("metrics-backpressure").get_job_id()
    try:
        wait_until(lambda: running(c, job_id), message="job running")
        source = vertex_ids(c, job_id)[0]

        def backpressured() -> bool:
            v = values(
                c, f"/jobs/{job_id}/vertices/{source}/metrics", ["0.backPressuredTimeMsPerSecond", "0.isBackPressured"]
            )
            return v.get("0.backPressuredTimeMsPerSecond", 0) > 500 and v.get("0.isBackPressured") == 1.0

        wait_until(backpressured, timeout=60, message="the source back-pressured")
        assert get(c, f"/jobs/{job_id}/vertices/{source}/backpressure")["backpressure-level"] == "high"
        level = {v["id"]: v["metrics"]["backpressure-level"] for v in c.rest.job(job_id)["vertices"]}
        assert level[source] == "high"
    finally:
        c.rest.cancel(job_id)
        wait_until(lambda: c.rest.job(job_id)["state"] == "CANCELED", message="canceled")


def test_taskmanager_and_master_metrics_and_prometheus(mcluster: Cluster) -> None:
    c = mcluster
    tms = c.rest.taskmanagers()
    tm = tms[0]["id"]
    names = [
        "Status.Python.CPU.Load",
        "Status.Python.Memory.RSS",
        "Status.Python.Threads.Count",
        "Status.Shuffle.Arrow.UsedMemory",
        "Status.Slots.Total",
    ]
    tv = values(c, f"/taskmanagers/{tm}/metrics", names)
    assert set(tv) == set(names) and tv["Status.Python.Memory.RSS"] > 10 * 2**20 and tv["Status.Slots.Total"] == 2
    assert 0 <= tv["Status.Python.CPU.Load"] <= 1
    details = get(c, f"/taskmanagers/{tm}")
    assert len(details["slots"]) == 2 and details["metrics"]["rss"] > 0
    jv = values(c, "/jobmanager/metrics", ["numRegisteredTaskManagers", "taskSlotsTotal", "Status.Python.Memory.RSS"])
    assert jv["numRegisteredTaskManagers"] == 2 and jv["taskSlotsTotal"] == 4 and jv["Status.Python.Memory.RSS"] > 0
    # Prometheus: the master's endpoint (address in /config) and each TaskExecutor's
    master_prom = get(c, "/config")["metric-reporters"]["prom"]
    assert master_prom.startswith("127.0.0.1:")
    text = httpx.get(f"http://{master_prom}/metrics", timeout=30).text
    assert re.search(r"^flink_jobmanager_numRegisteredTaskManagers 2\.0$", text, re.M), text[:2000]
    assert "flink_jobmanager_Status_Python_Memory_RSS" in text
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.from_sequence(1, 10**12).rebalance().filter(lambda x: x < 0).print()
    job_id = env.execute_async("metrics-prometheus").get_job_id()
    try:
        wait_until(lambda: running(c, job_id), message="job running")
        addresses = [get(c, f"/taskmanagers/{t['id']}")["metricReporters"]["prom"] for t in tms]
        assert len(set(addresses)) == 2 and all(a.startswith("127.0.0.1:") for a in addresses)
        pattern = re.compile(
            r'^flink_taskmanager_job_task_numRecordsOut\{[^}]*job_id="%s"[^}]*\} ([0-9.e+]+)$' % job_id, re.M
        )

        def exported() -> bool:
            return any(
                float(v) > 0
                for a in addresses
                for v in pattern.findall(httpx.get(f"http://{a}/metrics", timeout=30).text)
            )

        wait_until(exported, timeout=60, message="numRecordsOut on a TaskExecutor's Prometheus endpoint")
        tm_text = httpx.get(f"http://{addresses[0]}/metrics", timeout=30).text
        assert "flink_taskmanager_Status_Python_CPU_Load{" in tm_text
        assert re.search(
            r'flink_jobmanager_job_uptime\{[^}]*job_id="%s"' % job_id,
            httpx.get(f"http://{master_prom}/metrics", timeout=30).text,
        )
    finally:
        c.rest.cancel(job_id)
        wait_until(lambda: c.rest.job(job_id)["state"] == "CANCELED", message="canceled")


def test_logs_over_rest(mcluster: Cluster) -> None:
    c = mcluster
    logs = {f["name"] for f in get(c, "/jobmanager/logs")["logs"]}
    assert {"master.log", "master.out"} <= logs
    assert " INFO yarnflink." in get(c, "/jobmanager/log")
    assert get(c, "/jobmanager/logs/master.log") == get(c, "/jobmanager/log")
    tm = c.rest.taskmanagers()[0]["id"]
    tm_logs = {f["name"] for f in get(c, f"/taskmanagers/{tm}/logs")["logs"]}
    assert f"{tm}.log" in tm_logs, tm_logs
    assert tm in get(c, f"/taskmanagers/{tm}/log")  # it logs its own id when it registers
    # only the processes' own log files are served
    for path in (
        "/jobmanager/logs/rest-token",
        "/jobmanager/logs/..%2Fsecurity%2Frest-token",
        f"/taskmanagers/{tm}/logs/master.log",
        "/taskmanagers/nope/log",
    ):
        r = httpx.get(c.rest_url + path, headers=c.auth, timeout=30)
        assert r.status_code == 404, (path, r.status_code)


def test_prometheus_port_ranges_and_default() -> None:
    from yarnflink.common.config import Configuration
    from yarnflink.metrics.prometheus import Sample, parse_ports, reporter_enabled, start_reporter, stop_reporter

    assert parse_ports("9250-9252,9260") == [9250, 9251, 9252, 9260]
    with pytest.raises(ValueError):
        parse_ports("9252-9250")
    assert not reporter_enabled(Configuration())
    conf = Configuration()
    conf.set("metrics.reporter.prom.port", "0")
    first = start_reporter(conf, lambda: [Sample("jobmanager_x", 1.0)])
    assert first is not None and first.address.startswith("127.0.0.1:")
    try:
        taken = first.port
        conf.set("metrics.reporter.prom.port", f"{taken},0")  # the first port is taken: the next choice
        second = start_reporter(conf, lambda: [Sample("taskmanager_y", 2.0, {"tm_id": "a"})])
        assert second is not None and second.port not in (0, taken)
        assert 'flink_taskmanager_y{tm_id="a"} 2.0' in httpx.get(f"http://{second.address}/metrics", timeout=30).text
        stop_reporter(second)
    finally:
        stop_reporter(first)
