"""Watermark and per-task checkpoint metrics of a running checkpointed event-time job: REST
(Flink's ``/jobs/{id}/checkpoints/details/{cid}`` and ``.../subtasks/{vid}``, vertex metrics) and
the TaskExecutors' Prometheus endpoints. Real master and TaskExecutor processes on loopback."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import httpx
import pytest

from yarnflink import StreamExecutionEnvironment, Time, TumblingEventTimeWindows, WatermarkStrategy
from yarnflink.api.connectors import DiscardingSink, FileSource
from yarnflink.api.environment import set_default_executor

from .conftest import Cluster, start_cluster, wait_until
from .test_watermarks import CountWindow, Gate, _write_events

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
cloudpickle.register_pickle_by_value(sys.modules[__name__])
MIN_WATERMARK = -(2**63)


@pytest.fixture(scope="module")
def metrics_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("ckpt-metrics"),
        cluster_evenly__spread__out__slots="true",
        metrics_fetcher_update__interval="200 ms",
        metrics_reporter_prom_port="0",
    )
    c.executor()
    yield c
    set_default_executor(None)
    c.stop()


def _get(c: Cluster, path: str, **params: Any) -> Any:
    r = httpx.get(c.rest_url + path, params=params, headers=c.auth, timeout=30)
    assert r.status_code == 200, (path, r.status_code, r.text)
    return r.json()


def _values(c: Cluster, path: str, names: list[str]) -> dict[str, float]:
    return {m["id"]: float(m["value"]) for m in _get(c, path, get=",".join(names))}


@pytest.mark.parametrize("snapshot_mode", ["thread", "fork"])
def test_watermark_and_checkpoint_metrics_of_a_running_job(
    metrics_cluster: Cluster, tmp_path: Path, snapshot_mode: str
) -> None:
    """Also with the keyed state serialized by forked children of the TaskExecutors (a real
    TaskExecutor process with its gRPC and data threads)."""
    c = metrics_cluster
    n = 40
    _write_events(tmp_path / "in", [{"k": "ab"[i % 2], "t": i * 1000, "i": i} for i in range(n)])
    release = tmp_path / "release"
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    for k, v in {
        "pipeline.auto-watermark-interval": "50 ms",
        "execution.checkpointing.interval": "300 ms",
        "execution.checkpointing.dir": f"file://{tmp_path / 'checkpoints'}",
        "state.backend.hashmap.snapshot-mode": snapshot_mode,
    }.items():
        env.get_config().set(k, v)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _ts: e["t"])
    (
        env.from_source(FileSource(str(tmp_path / "in"), format="jsonl"), name="events")
        .set_parallelism(1)
        .map(Gate(str(release), hold_at=n - 1))
        .set_parallelism(1)
        .assign_timestamps_and_watermarks(strategy)
        .set_parallelism(1)
        .key_by(lambda e: e["k"])
        .window(TumblingEventTimeWindows.of(Time.seconds(5)))
        .process(CountWindow())
        .sink_to(DiscardingSink())
    )
    job_id = env.execute_async("checkpoint metrics").get_job_id()
    try:
        source, window = [v["id"] for v in c.rest.job(job_id)["vertices"]]

        # --- watermarks crossing the exchange, as metrics
        def watermarks() -> Any:
            out = _values(c, f"/jobs/{job_id}/vertices/{source}/metrics", ["currentOutputWatermark"])
            inp = _values(
                c,
                f"/jobs/{job_id}/vertices/{window}/metrics",
                ["currentInputWatermark", "0.currentInputWatermark", "1.currentInputWatermark"],
            )
            # (the metric fetcher may not have every subtask's metrics yet: wait for them to be
            # there, the assertions below check their values)
            return (
                (out, inp)
                if out.get("currentOutputWatermark", MIN_WATERMARK) >= 30_000
                and inp.get("currentInputWatermark", MIN_WATERMARK) >= 30_000
                and all(f"{i}.currentInputWatermark" in inp for i in (0, 1))
                else None
            )

        out, inp = wait_until(watermarks, timeout=120, message="watermarks in the vertex metrics")  # type: ignore[misc]
        assert out["currentOutputWatermark"] < n * 1000  # the source is held: no end-of-input watermark yet
        for i in (0, 1):  # both window subtasks get every watermark (broadcast); still no end of input
            assert 30_000 <= inp[f"{i}.currentInputWatermark"] < n * 1000

        # --- a completed checkpoint with per-subtask statistics
        def completed() -> Any:
            stats = _get(c, f"/jobs/{job_id}/checkpoints")
            latest = stats["latest"]["completed"]
            return latest if latest and latest["id"] >= 2 else None

        latest = wait_until(completed, timeout=120, message="two completed checkpoints")
        cid = latest["id"]  # type: ignore[index]
        assert "subtask_details" not in _get(c, f"/jobs/{job_id}/checkpoints")
        details = _get(c, f"/jobs/{job_id}/checkpoints/details/{cid}")
        assert details["id"] == cid and details["status"] == "COMPLETED" and details["className"] == "completed"
        assert set(details["tasks"]) == {source, window}
        for vid, parallelism in ((source, 1), (window, 2)):
            t = details["tasks"][vid]
            assert t["num_subtasks"] == t["num_acknowledged_subtasks"] == parallelism
            assert 0 <= t["end_to_end_duration"] <= details["end_to_end_duration"]
        assert details["tasks"][window]["state_size"] > 0  # window contents and timers
        sub = _get(c, f"/jobs/{job_id}/checkpoints/details/{cid}/subtasks/{window}")
        assert sub["num_acknowledged_subtasks"] == 2 and len(sub["subtasks"]) == 2
        for s in sub["subtasks"]:
            assert s["status"] == "completed"
            assert s["checkpoint"]["sync"] >= 0 and s["checkpoint"]["async"] >= 0
            assert 0 <= s["end_to_end_duration"] < 60_000
            assert s["alignment"]["duration"] >= 0 and s["start_delay"] >= 0
            assert s["state_size"] == s["checkpointed_size"]
        summary = sub["summary"]
        assert {"checkpoint_duration", "alignment", "start_delay", "state_size", "end_to_end_duration"} <= set(summary)
        assert summary["state_size"]["max"] > 0 and summary["checkpoint_duration"]["sync"]["max"] < 10_000
        r = httpx.get(f"{c.rest_url}/jobs/{job_id}/checkpoints/details/999999", headers=c.auth, timeout=30)
        assert r.status_code == 404
        r = httpx.get(
            f"{c.rest_url}/jobs/{job_id}/checkpoints/details/{cid}/subtasks/{'0' * 32}", headers=c.auth, timeout=30
        )
        assert r.status_code == 404

        # --- the task checkpoint metrics (-1 until a task took part in a checkpoint)
        def task_checkpoint_metrics() -> Any:
            names = [
                "0.lastCheckpointDuration",
                "1.lastCheckpointDuration",
                "lastCheckpointSize",
                "0.checkpointAlignmentTime",
                "0.checkpointStartDelayNanos",
            ]
            v = _values(c, f"/jobs/{job_id}/vertices/{window}/metrics", names)
            # all of them (a metric not fetched yet is absent, not -1), then none at -1
            return v if set(v) >= set(names) and min(v.values()) >= 0 else None

        v = wait_until(task_checkpoint_metrics, timeout=60, message="checkpoint metrics of the window subtasks")
        assert v["lastCheckpointSize"] > 0  # type: ignore[index]

        # --- the same watermark metrics on the TaskExecutors' Prometheus endpoints
        addresses = [_get(c, f"/taskmanagers/{t['id']}")["metricReporters"]["prom"] for t in c.rest.taskmanagers()]
        pattern = re.compile(
            r"^flink_taskmanager_job_task_(currentInputWatermark|currentOutputWatermark)"
            r'\{[^}]*job_id="%s"[^}]*\} (\S+)$' % job_id,
            re.M,
        )

        def exported() -> Any:
            found: dict[str, float] = {}
            for a in addresses:
                for name, value in pattern.findall(httpx.get(f"http://{a}/metrics", timeout=30).text):
                    found[name] = max(found.get(name, MIN_WATERMARK), float(value))
            return (
                found
                if all(
                    found.get(k, MIN_WATERMARK) >= 30_000 for k in ("currentInputWatermark", "currentOutputWatermark")
                )
                else None
            )

        wait_until(exported, timeout=60, message="watermarks on the Prometheus endpoints")
    finally:
        release.touch()
    wait_until(lambda: c.rest.job(job_id)["state"] == "FINISHED", timeout=120, message="the job finished")
    # an archived job keeps its checkpoint details
    assert _get(c, f"/jobs/{job_id}/checkpoints/details/{cid}")["id"] == cid
    json.dumps(details)
