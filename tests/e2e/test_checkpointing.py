"""Checkpoints and exactly-once recovery across real processes (issue 5): a streaming keyed
aggregation checkpoints every 200 ms into a local directory while TaskExecutors are SIGKILLed at
random points (the drill in kill_drill, which test_checkpoint_s3 runs on S3); the FileSink's
committed output must equal a failure-free run's exactly.

The test module is not importable in the TaskExecutor processes, so cloudpickle ships its
functions by value.
"""

from __future__ import annotations

import glob
import os
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from tests.oracles import committed, running_sums
from yarnflink import FileSink, StreamExecutionEnvironment
from yarnflink.api.environment import set_default_executor

from .conftest import Cluster, wait_until
from .kill_drill import (
    KILLS,
    N,
    assert_exact_after_kills,
    checkpoint_stats,
    checkpointed_env,
    committed_windows,
    expected_windows,
    kill_taskexecutors,
    slow_while,
    start_kill_cluster,
    window_job,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]
cloudpickle.register_pickle_by_value(sys.modules[__name__])

KEY_WIDTH = 100  # key = x // 100: every key's records come from one source subtask, in order


def expected_running_sums() -> list[tuple[int, int]]:
    return running_sums(N, lambda x: x // KEY_WIDTH)


@pytest.fixture(scope="module")
def ckpt_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three TaskExecutors with two slots each; a killed one is replaced by the ResourceManager."""
    c = start_kill_cluster(tmp_path_factory.mktemp("ckpt-cluster"))
    yield c
    set_default_executor(None)
    c.stop()


def test_keyed_aggregation_is_exactly_once_across_taskexecutor_kills(ckpt_cluster: Cluster, tmp_path: Path) -> None:
    ckpt_cluster.executor()
    flag = tmp_path / "slow"
    flag.touch()
    out = tmp_path / "out"
    env = checkpointed_env(f"file://{tmp_path / 'checkpoints'}")
    (
        env.from_sequence(0, N - 1)
        .map(slow_while(str(flag)))
        .map(lambda x: (x // KEY_WIDTH, x))
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .sink_to(FileSink(str(out), format="jsonl"))
    )
    client = env.execute_async("checkpointed keyed sum under kills")
    job_id = client.get_job_id()
    kill_taskexecutors(ckpt_cluster, job_id, KILLS, random.Random())
    flag.unlink()  # full speed to the end
    client.get_job_execution_result()

    stats = assert_exact_after_kills(ckpt_cluster, job_id, KILLS, out, committed(out), expected_running_sums())
    assert len(glob.glob(os.path.join(out, "part-*"))) > 2  # committed file by file, per checkpoint
    assert stats["latest"]["restored"] is not None
    assert stats["history"]
    for h in stats["history"]:
        assert {"id", "status", "end_to_end_duration", "state_size"} <= set(h)
        assert h["status"] in ("COMPLETED", "FAILED", "IN_PROGRESS")
    latest = stats["latest"]["completed"]
    assert latest["status"] == "COMPLETED" and latest["state_size"] > 0


def test_a_job_started_from_a_retained_checkpoint_continues_where_the_cancelled_one_stopped(
    ckpt_cluster: Cluster, tmp_path: Path
) -> None:
    """``execution.savepoint.path`` (``yarnflink run -s``): the new job restores the cancelled job's
    retained checkpoint; the committed output of both together is exactly the expected output."""
    ckpt_cluster.executor()
    flag = tmp_path / "slow"
    flag.touch()
    conf = {
        "execution.checkpointing.interval": "200 ms",
        "execution.checkpointing.dir": f"file://{tmp_path / 'checkpoints'}",
        "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
    }

    def submit(out: Path, **extra: str) -> Any:
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(2)
        for k, v in {**conf, **extra}.items():
            env.get_config().set(k, v)
        (
            env.from_sequence(0, N - 1)
            .map(slow_while(str(flag)))
            .map(lambda x: (x // KEY_WIDTH, x))
            .key_by(lambda t: t[0])
            .reduce(lambda a, b: (a[0], a[1] + b[1]))
            .sink_to(FileSink(str(out), format="jsonl"))
        )
        return env.execute_async("checkpointed keyed sum")

    first = submit(tmp_path / "out")
    job1 = first.get_job_id()

    def two_completed() -> Any:
        stats = checkpoint_stats(ckpt_cluster, job1)
        return stats["latest"]["completed"] if stats["counts"]["completed"] >= 2 else None

    wait_until(two_completed, timeout=90, message="two completed checkpoints")
    ckpt_cluster.rest.cancel(job1)
    wait_until(lambda: ckpt_cluster.rest.job(job1)["state"] == "CANCELED", message="job cancelled")
    latest = checkpoint_stats(ckpt_cluster, job1)["latest"]["completed"]
    assert latest["external_path"]
    flag.unlink()
    second = submit(tmp_path / "out", **{"execution.savepoint.path": latest["external_path"]})
    second.get_job_execution_result()
    job2 = second.get_job_id()
    assert ckpt_cluster.rest.job(job2)["state"] == "FINISHED"
    assert committed(tmp_path / "out") == expected_running_sums()
    assert checkpoint_stats(ckpt_cluster, job2)["latest"]["restored"]["id"] == latest["id"]


def test_event_time_windows_are_exactly_once_across_taskexecutor_kills(ckpt_cluster: Cluster, tmp_path: Path) -> None:
    """The window operator's keyed state (window contents and timers) is checkpointed and restored."""
    ckpt_cluster.executor()
    flag = tmp_path / "slow"
    flag.touch()
    out = tmp_path / "out"
    env = checkpointed_env(f"file://{tmp_path / 'checkpoints'}")
    window_job(env, flag, out)
    client = env.execute_async("checkpointed windows under kills")
    job_id = client.get_job_id()
    rest = ckpt_cluster.rest
    kill_taskexecutors(ckpt_cluster, job_id, 3, random.Random())
    flag.unlink()
    client.get_job_execution_result()
    assert rest.job(job_id)["state"] == "FINISHED"
    assert committed_windows(out) == expected_windows()
    assert checkpoint_stats(ckpt_cluster, job_id)["counts"]["restored"] >= 3


def test_savepoint_via_rest_and_a_job_started_from_it(ckpt_cluster: Cluster, tmp_path: Path) -> None:
    """``POST /jobs/:id/savepoints`` then ``GET /jobs/:id/savepoints/:triggerid``; a new job started
    with ``execution.savepoint.path`` at the savepoint continues exactly where it was taken."""
    import httpx

    ckpt_cluster.executor()
    flag = tmp_path / "slow"
    flag.touch()
    conf = {
        "execution.checkpointing.interval": "200 ms",
        "execution.checkpointing.dir": f"file://{tmp_path / 'checkpoints'}",
    }

    def submit(**extra: str) -> Any:
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(2)
        for k, v in {**conf, **extra}.items():
            env.get_config().set(k, v)
        (
            env.from_sequence(0, N - 1)
            .map(slow_while(str(flag)))
            .map(lambda x: (x // KEY_WIDTH, x))
            .key_by(lambda t: t[0])
            .reduce(lambda a, b: (a[0], a[1] + b[1]))
            .sink_to(FileSink(str(tmp_path / "out"), format="jsonl"))
        )
        return env.execute_async("savepointed keyed sum")

    first = submit()
    job1 = first.get_job_id()
    wait_until(
        lambda: checkpoint_stats(ckpt_cluster, job1)["counts"]["completed"] >= 1,
        timeout=90,
        message="a completed checkpoint",
    )
    base = ckpt_cluster.rest_url
    r = httpx.post(
        f"{base}/jobs/{job1}/savepoints",
        headers=ckpt_cluster.auth,
        timeout=10,
        json={"target-directory": f"file://{tmp_path / 'savepoints'}", "cancel-job": False},
    )
    assert r.status_code == 200, r.text
    trigger = r.json()["request-id"]

    def done() -> Any:
        st = httpx.get(f"{base}/jobs/{job1}/savepoints/{trigger}", headers=ckpt_cluster.auth, timeout=10).json()
        return st if st["status"]["id"] == "COMPLETED" else None

    status = wait_until(done, timeout=60, message="the savepoint")
    location = status["operation"]["location"]  # type: ignore[index]
    assert location and "savepoints" in location
    ckpt_cluster.rest.cancel(job1)  # committed output stays; later checkpoints are not restored
    wait_until(lambda: ckpt_cluster.rest.job(job1)["state"] == "CANCELED", message="job cancelled")
    flag.unlink()
    second = submit(**{"execution.savepoint.path": location})
    second.get_job_execution_result()
    assert checkpoint_stats(ckpt_cluster, second.get_job_id())["latest"]["restored"]["is_savepoint"] is True
    # nothing lost (records the first job committed after the savepoint are written again, as in Flink)
    assert set(committed(tmp_path / "out")) == set(expected_running_sums())
