"""The TaskExecutor kill drill the checkpointing end-to-end tests share (issue 5 item 9), on a local
directory (test_checkpointing) and on S3 (test_checkpoint_s3): a streaming job at parallelism 2
checkpoints every 200 ms, slowed while a flag file exists; between checkpoints, at a random point,
a TaskExecutor running one of its subtasks is SIGKILLed, and the drill waits for the restart and a
new completed checkpoint before the next kill.

This module is not importable in the TaskExecutor processes, so cloudpickle ships its functions
(the slow map, the window job's lambdas) by value.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

import cloudpickle

from tests.oracles import committed
from yarnflink import FileSink, MapFunction, StreamExecutionEnvironment

from .conftest import Cluster, start_cluster, wait_until

cloudpickle.register_pickle_by_value(sys.modules[__name__])

N = 200_000  # records; source subtask i reads [i * N/2, (i + 1) * N/2)
KILLS = 10
WINDOW_KEYS = 7  # the window job's key = x % 7
WINDOW_SIZE = 10_000  # event time = x ms, tumbling 10 s windows: x // 10_000


def start_kill_cluster(workdir: Path, **conf: str) -> Cluster:
    """Three TaskExecutors with two slots each, slots spread evenly; a killed one is replaced by
    the ResourceManager."""
    return start_cluster(workdir, taskexecutors=3, slots=2, cluster_evenly__spread__out__slots="true", **conf)


def slow_while(flag: str, delay_s: float = 0.0002) -> MapFunction:
    """Slows the pipeline down (``delay_s`` per record) while ``flag`` exists, so the kills (or
    rescales) hit a running job."""

    class Slow(MapFunction):
        def map(self, value: Any) -> Any:
            if os.path.exists(flag):
                time.sleep(delay_s)
            return value

    return Slow()


def checkpointed_env(checkpoints: str) -> StreamExecutionEnvironment:
    """Parallelism 2, a checkpoint every 200 ms into ``checkpoints`` (a URL), and restarts enough
    for the drill."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    for k, v in {
        "execution.checkpointing.interval": "200 ms",
        "execution.checkpointing.dir": checkpoints,
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": "100",
        "restart-strategy.fixed-delay.delay": "100 ms",
    }.items():
        env.get_config().set(k, v)
    return env


def window_job(env: StreamExecutionEnvironment, flag: Path, out: Path) -> None:
    """Event-time tumbling windows: per key ``x % 7`` and 10 s window (event time ``x`` ms), the
    smallest ``x`` and the count, into an exactly-once FileSink at ``out``."""
    from yarnflink import Duration, Time, TumblingEventTimeWindows, WatermarkStrategy

    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1)).with_timestamp_assigner(
        lambda e, _ts: e[1]
    )
    (
        env.from_sequence(0, N - 1)
        .map(slow_while(str(flag)))
        .map(lambda x: (x % WINDOW_KEYS, x, 1))
        .assign_timestamps_and_watermarks(strategy)
        .key_by(lambda t: t[0])
        .window(TumblingEventTimeWindows.of(Time.seconds(WINDOW_SIZE // 1000)))
        .reduce(lambda a, b: (a[0], min(a[1], b[1]), a[2] + b[2]))
        .sink_to(FileSink(str(out), format="jsonl"))
    )


def expected_windows() -> list[tuple[int, int, int]]:
    """The window job's output of a failure-free run, sorted: (key, smallest x, count)."""
    expected: dict[tuple[int, int], list[int]] = {}
    for x in range(N):
        e = expected.setdefault((x % WINDOW_KEYS, x // WINDOW_SIZE), [x, 0])
        e[0] = min(e[0], x)
        e[1] += 1
    return sorted((k, m, c) for (k, _w), (m, c) in expected.items())


def committed_windows(out: Path) -> list[tuple[int, int, int]]:
    return committed(out)  # type: ignore[return-value]


def checkpoint_stats(cluster: Cluster, job_id: str) -> dict[str, Any]:
    import httpx

    r = httpx.get(f"{cluster.rest_url}/jobs/{job_id}/checkpoints", headers=cluster.auth, timeout=10)
    r.raise_for_status()
    return dict(r.json())


def assert_exact_after_kills(
    cluster: Cluster, job_id: str, kills: int, out: Path, got: list, expected: list
) -> dict[str, Any]:
    """What every kill drill checks at the end: the job FINISHED after at least ``kills``
    restarts, its committed output ``got`` equals the failure-free ``expected`` (nothing lost,
    nothing duplicated), no in-progress file is left in ``out``, and a checkpoint completed and
    was restored per kill. Returns the job's checkpoint statistics."""
    details = cluster.rest.job(job_id)
    assert details["state"] == "FINISHED"
    assert details["numRestarts"] >= kills
    assert len(got) == len(expected), f"{len(got)} committed records, expected {len(expected)}"
    assert got == expected  # nothing lost, nothing duplicated
    assert not [f for f in os.listdir(out) if f.endswith(".inprogress")]
    stats = checkpoint_stats(cluster, job_id)
    assert stats["counts"]["completed"] >= kills + 1
    assert stats["counts"]["restored"] >= kills
    return stats


def kill_taskexecutors(
    cluster: Cluster,
    job_id: str,
    kills: int,
    rng: random.Random,
    checkpoint_timeout: float = 90,
    restart_timeout: float = 60,
    max_pause_s: float = 0.6,
) -> int:
    """SIGKILLs a TaskExecutor running a subtask of ``job_id`` ``kills`` times, each at a random
    point after a new completed checkpoint with every subtask running, and waits for the restart;
    at the end, waits until the job runs again with a new completed checkpoint. Returns the number
    of completed checkpoints then."""
    rest = cluster.rest

    def running_with_new_checkpoint(after: int) -> Any:
        d = rest.job(job_id)
        if d["state"] != "RUNNING" or any(s["status"] != "RUNNING" for v in d["vertices"] for s in v["subtasks"]):
            return None
        done = checkpoint_stats(cluster, job_id)["counts"]["completed"]
        return (d, done) if done > after else None

    seen = 0
    for kill in range(kills):
        d, seen = wait_until(
            lambda: running_with_new_checkpoint(seen),
            timeout=checkpoint_timeout,  # type: ignore[misc]
            message=f"a new completed checkpoint before kill {kill + 1}",
        )
        time.sleep(rng.uniform(0.0, max_pause_s))  # a random point between checkpoints
        tms = {s["taskmanager-id"] for v in d["vertices"] for s in v["subtasks"]}
        pids = {tm["id"]: tm["hardware"]["pid"] for tm in rest.taskmanagers()}
        victim = rng.choice(sorted(t for t in tms if t in pids))
        os.kill(pids[victim], signal.SIGKILL)
        wait_until(
            lambda: rest.job(job_id)["numRestarts"] > kill,
            timeout=restart_timeout,
            message=f"restart after kill {kill + 1}",
        )
    _, seen = wait_until(
        lambda: running_with_new_checkpoint(seen),
        timeout=checkpoint_timeout,  # type: ignore[misc]
        message="running again after the last kill",
    )
    return seen
