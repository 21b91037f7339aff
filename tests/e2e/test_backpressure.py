"""A slow sink slows its producers; the producing TaskExecutor's memory stays bounded."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

from yarnflink import StreamExecutionEnvironment

from .conftest import start_cluster, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def test_slow_sink_keeps_upstream_memory_bounded(tmp_path: Path) -> None:
    # two TaskExecutors with one slot each; source and sink in different slot sharing groups,
    # so they run on different TaskExecutors and every record crosses the network
    cluster = start_cluster(tmp_path, taskexecutors=2, slots=1)
    try:
        cluster.executor()
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(1)

        def slow(x: int) -> bool:
            time.sleep(0.0005)
            return False

        # ~8 GB of int64 rows if nothing held the source back
        env.from_sequence(1, 10**9).slot_sharing_group("source").rebalance().filter(slow).slot_sharing_group(
            "sink"
        ).print()
        client = env.execute_async("backpressure")
        job_id = client.get_job_id()
        wait_until(
            lambda: all(v["status"] == "RUNNING" for v in cluster.rest.job(job_id)["vertices"]),
            message="both tasks running",
        )
        tms = cluster.rest.taskmanagers()
        assert len({tm["id"] for tm in tms}) == 2 and all(tm["freeSlots"] == 0 for tm in tms)
        procs = [psutil.Process(pid) for pid in cluster.taskexecutor_pids()]
        baseline = [p.memory_info().rss for p in procs]
        peak = list(baseline)
        deadline = time.monotonic() + 12
        while time.monotonic() < deadline:
            for i, p in enumerate(procs):
                peak[i] = max(peak[i], p.memory_info().rss)
            time.sleep(0.2)
        # unbounded buffering would grow by gigabytes within seconds (the source makes >100 MB/s)
        growth_mb = [(pk - b) / 2**20 for pk, b in zip(peak, baseline)]
        assert max(growth_mb) < 150, growth_mb
        assert cluster.rest.job(job_id)["state"] == "RUNNING"
        client.cancel()
        wait_until(lambda: cluster.rest.job(job_id)["state"] == "CANCELED", message="canceled")
    finally:
        cluster.stop()
