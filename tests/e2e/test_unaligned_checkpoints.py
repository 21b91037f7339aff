"""Unaligned checkpoints across real processes (issue 5, item 2): a parallel-2 source feeds a
keyed exchange into a parallel-2 keyed aggregation and an exactly-once FileSink, with
``execution.checkpointing.unaligned.enabled``. One source subtask is much slower than the other,
so the aggregation's barriers arrive far apart: records of the slow channel that arrive after the
first barrier are persisted as in-flight data (REST: ``persisted_data`` > 0) and replayed on
restore. TaskExecutors are SIGKILLed; the committed output must equal a failure-free run's.
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import httpx
import pytest

from tests.oracles import committed, running_sums
from yarnflink import FileSink, MapFunction, StreamExecutionEnvironment
from yarnflink.api.environment import set_default_executor

from .conftest import Cluster, start_cluster, wait_until
from .kill_drill import kill_taskexecutors

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]
cloudpickle.register_pickle_by_value(sys.modules[__name__])

N = 100_000  # source subtask 0 reads [0, N/2), subtask 1 [N/2, N)
KEY_WIDTH = 100
KILLS = 3


def throttle(flag: str, fast_s: float, slow_s: float) -> MapFunction:
    """While ``flag`` exists: a pause every 256 records, short on source subtask 0's values and
    long on subtask 1's (its channel into each aggregation subtask is the slow one)."""

    class Throttle(MapFunction):
        def map(self, value: Any) -> Any:
            if value % 256 == 0 and os.path.exists(flag):
                time.sleep(slow_s if value >= N // 2 else fast_s)
            return value

    return Throttle()


def expected_running_sums() -> list[tuple[int, int]]:
    return running_sums(N, lambda x: x // KEY_WIDTH)


@pytest.fixture(scope="module")
def ua_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("unaligned-cluster"),
        taskexecutors=3,
        slots=2,
        cluster_evenly__spread__out__slots="true",
    )
    yield c
    set_default_executor(None)
    c.stop()


def _get(cluster: Cluster, path: str) -> Any:
    r = httpx.get(f"{cluster.rest_url}{path}", headers=cluster.auth, timeout=10)
    r.raise_for_status()
    return r.json()


def _submit(tmp_path: Path, flag: Path, fast_s: float, slow_s: float, **extra: str) -> Any:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    for k, v in {
        "execution.checkpointing.interval": "200 ms",
        "execution.checkpointing.unaligned.enabled": "true",
        "execution.checkpointing.dir": f"file://{tmp_path / 'checkpoints'}",
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": "100",
        "restart-strategy.fixed-delay.delay": "100 ms",
        **extra,
    }.items():
        env.get_config().set(k, v)
    (
        env.from_sequence(0, N - 1)
        .map(throttle(str(flag), fast_s, slow_s))
        .map(lambda x: (x // KEY_WIDTH, x))
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .sink_to(FileSink(str(tmp_path / "out"), format="jsonl"))
    )
    return env.execute_async("unaligned keyed sum")


def _persisted(cluster: Cluster, job_id: str) -> list[dict[str, Any]]:
    """Details of the completed checkpoints in the history that persisted in-flight data."""
    out = []
    for h in _get(cluster, f"/jobs/{job_id}/checkpoints")["history"]:
        if h.get("status") != "COMPLETED":
            continue
        d = _get(cluster, f"/jobs/{job_id}/checkpoints/details/{h['id']}")
        if d.get("persisted_data", 0) > 0:
            out.append(d)
    return out


def test_unaligned_checkpoints_persist_in_flight_data_and_are_exactly_once_across_kills(
    ua_cluster: Cluster, tmp_path: Path
) -> None:
    ua_cluster.executor()
    rng = random.Random()
    flag = tmp_path / "slow"
    flag.touch()
    client = _submit(tmp_path, flag, fast_s=0.02, slow_s=0.12)
    job_id = client.get_job_id()
    rest = ua_cluster.rest

    # checkpoints complete with in-flight data of the slow channel
    details = wait_until(
        lambda: _persisted(ua_cluster, job_id) or None,
        timeout=40,
        message="a completed unaligned checkpoint with persisted in-flight data",
    )[0]
    assert details["unaligned_checkpoint"] is True
    agg = [vid for vid, t in details["tasks"].items() if t["persisted_data"] > 0]
    assert agg, details["tasks"]
    sub = _get(ua_cluster, f"/jobs/{job_id}/checkpoints/details/{details['id']}/subtasks/{agg[0]}")
    done_subs = [s for s in sub["subtasks"] if s["status"] == "completed"]
    assert all(s["unaligned_checkpoint"] for s in done_subs)
    assert sum(s["alignment"]["persisted"] for s in done_subs) == sub["persisted_data"] > 0
    assert sub["summary"]["alignment"]["persisted"]["max"] > 0

    kill_taskexecutors(ua_cluster, job_id, KILLS, rng, checkpoint_timeout=60, max_pause_s=0.4)
    flag.unlink()
    client.get_job_execution_result()

    assert rest.job(job_id)["state"] == "FINISHED"
    got = committed(tmp_path / "out")
    expected = expected_running_sums()
    assert len(got) == len(expected), f"{len(got)} committed records, expected {len(expected)}"
    assert got == expected  # replayed in-flight records count exactly once
    stats = _get(ua_cluster, f"/jobs/{job_id}/checkpoints")
    assert stats["counts"]["restored"] >= KILLS


def test_unaligned_checkpoints_complete_while_one_channel_is_slow(ua_cluster: Cluster, tmp_path: Path) -> None:
    """One source subtask pauses 0.4 s every 256 records, the other barely: the aggregation's
    fast channel is never blocked, and checkpoints keep completing (every 200 ms trigger)."""
    ua_cluster.executor()
    flag = tmp_path / "slow"
    flag.touch()
    client = _submit(tmp_path, flag, fast_s=0.01, slow_s=0.4)
    job_id = client.get_job_id()
    # the clock starts once every task runs: a job is RUNNING while its tasks still deploy, which
    # a loaded 2-core CI machine stretches (that is not checkpointing time)
    wait_until(
        lambda: (
            (d := ua_cluster.rest.job(job_id))["state"] == "RUNNING"
            and all(v["status"] == "RUNNING" for v in d["vertices"])
        ),
        timeout=60,
        message="running",
    )
    start = time.monotonic()
    wait_until(
        lambda: _get(ua_cluster, f"/jobs/{job_id}/checkpoints")["counts"]["completed"] >= 5,
        timeout=40,
        message="5 completed unaligned checkpoints while one channel is slow",
    )
    elapsed = time.monotonic() - start
    persisted = _persisted(ua_cluster, job_id)
    assert persisted and all(d["unaligned_checkpoint"] for d in persisted)
    ua_cluster.rest.cancel(job_id)
    wait_until(lambda: ua_cluster.rest.job(job_id)["state"] == "CANCELED", timeout=30, message="cancelled")
    assert elapsed < 40


def test_a_savepoint_is_aligned_under_unaligned_checkpoints_and_restores_rescaled(
    ua_cluster: Cluster, tmp_path: Path
) -> None:
    """With unaligned checkpoints on and one slow channel, a savepoint (REST) is still ALIGNED, as
    in Flink: its ``_metadata`` carries no input channel state, so it restores at another
    parallelism (``assign_state`` refuses channel state when the parallelism changes)."""
    from yarnflink.checkpoint.assignment import RestoreVertex, assign_state
    from yarnflink.checkpoint.storage import read_checkpoint

    ua_cluster.executor()
    flag = tmp_path / "slow"
    flag.touch()
    # a savepoint triggered while a periodic checkpoint is pending subsumes it (its tasks decline
    # it): such declines do not count, so the default tolerance of 0 failed checkpoints holds
    client = _submit(tmp_path, flag, fast_s=0.01, slow_s=0.3)
    job_id = client.get_job_id()
    try:
        # unaligned checkpoints do persist in-flight data of the slow channel in this job
        wait_until(
            lambda: _persisted(ua_cluster, job_id) or None,
            timeout=60,
            message="a completed unaligned checkpoint with persisted in-flight data",
        )
        base = ua_cluster.rest_url
        r = httpx.post(
            f"{base}/jobs/{job_id}/savepoints",
            headers=ua_cluster.auth,
            timeout=10,
            json={"target-directory": f"file://{tmp_path / 'savepoints'}", "cancel-job": False},
        )
        assert r.status_code == 200, r.text
        trigger = r.json()["request-id"]

        def done() -> Any:
            st = httpx.get(f"{base}/jobs/{job_id}/savepoints/{trigger}", headers=ua_cluster.auth, timeout=10).json()
            assert st["status"]["id"] in ("IN_PROGRESS", "COMPLETED"), st
            if st["status"]["id"] != "COMPLETED":
                return None
            assert not st["operation"].get("failure-cause"), (st, _get(ua_cluster, f"/jobs/{job_id}/exceptions"))
            return st

        location = wait_until(done, timeout=90, message="the savepoint")["operation"]["location"]  # type: ignore[index]
        assert location and "savepoints" in location
        sp = read_checkpoint(location)
        assert sp.is_savepoint
        assert sp.operator_states, "the savepoint has operator state"
        channel_state = {
            (op, i): len(s.input_channel_state)
            for op, st in sp.operator_states.items()
            for i, s in st.subtask_states.items()
            if s.input_channel_state
        }
        assert channel_state == {}, f"a savepoint must carry no in-flight data: {channel_state}"
        # relocatable and rescalable: assigning it at parallelism 3 (was 2) does not raise
        vertices = [RestoreVertex(op, 3, st.max_parallelism, (op,)) for op, st in sp.operator_states.items()]
        assigned = assign_state(sp, vertices)
        assert assigned and {sub for _, sub in assigned} <= {0, 1, 2}
        # REST agrees: the savepoint is not an unaligned checkpoint
        sp_entries = [
            h
            for h in _get(ua_cluster, f"/jobs/{job_id}/checkpoints")["history"]
            if h.get("status") == "COMPLETED" and h.get("is_savepoint")
        ]
        for h in sp_entries:
            d = _get(ua_cluster, f"/jobs/{job_id}/checkpoints/details/{h['id']}")
            assert d["checkpoint_type"] == "SAVEPOINT" and d["persisted_data"] == 0 and not d["unaligned_checkpoint"]
    finally:
        ua_cluster.rest.cancel(job_id)
        wait_until(lambda: ua_cluster.rest.job(job_id)["state"] == "CANCELED", timeout=30, message="cancelled")
