"""The ``rocksdb`` keyed state backend end to end (issue 21 item 2), with real master and
TaskExecutor processes: the event-time window job of kill_drill (window contents and timers in
keyed state) on ``state.backend.type: rocksdb`` with 200 ms checkpoints, full and incremental,
while TaskExecutors are SIGKILLed (exact output; each finished task's store directory deleted); and a keyed count whose
savepoints move between the backends while the parallelism goes 2 -> 3 -> 1 (rocksdb, hashmap,
rocksdb), exact output.

The short forms run in the suite; ``YARNFLINK_ROCKSDB_FULL=1`` makes the drill do kill_drill's 10
kills.
"""

from __future__ import annotations

import os
import random
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from tests.oracles import committed
from yarnflink import FileSink, KeyedProcessFunction, StreamExecutionEnvironment, ValueStateDescriptor
from yarnflink.api.environment import set_default_executor

from .conftest import Cluster, wait_until
from .kill_drill import (
    KILLS,
    checkpoint_stats,
    checkpointed_env,
    committed_windows,
    expected_windows,
    kill_taskexecutors,
    slow_while,
    start_kill_cluster,
    window_job,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
cloudpickle.register_pickle_by_value(sys.modules[__name__])

FULL = os.environ.get("YARNFLINK_ROCKSDB_FULL") == "1"


@pytest.fixture(scope="module")
def rocks_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_kill_cluster(tmp_path_factory.mktemp("rocksdb-cluster"))
    yield c
    set_default_executor(None)
    c.stop()


@pytest.mark.parametrize("incremental", ["false", "true"])
def test_windows_on_rocksdb_are_exactly_once_across_taskexecutor_kills(
    rocks_cluster: Cluster, tmp_path: Path, incremental: str
) -> None:
    rocks_cluster.executor()
    flag = tmp_path / "slow"
    flag.touch()
    out = tmp_path / "out"
    local = tmp_path / "rocksdb"
    env = checkpointed_env(f"file://{tmp_path / 'checkpoints'}")
    env.get_config().set("state.backend.type", "rocksdb")
    env.get_config().set("state.backend.rocksdb.localdir", str(local))
    env.get_config().set("state.backend.rocksdb.memory.fixed-per-tm", "64 mb")
    env.get_config().set("execution.checkpointing.incremental", incremental)
    window_job(env, flag, out)
    client = env.execute_async("windows on rocksdb under kills")
    job_id = client.get_job_id()
    kills = KILLS if FULL else 2
    pids_before = {tm["hardware"]["pid"] for tm in rocks_cluster.rest.taskmanagers()}
    kill_taskexecutors(rocks_cluster, job_id, kills, random.Random())
    flag.unlink()
    client.get_job_execution_result()
    rest = rocks_cluster.rest
    assert rest.job(job_id)["state"] == "FINISHED"
    assert rest.job(job_id)["numRestarts"] >= kills
    assert committed_windows(out) == expected_windows()  # nothing lost, nothing twice
    stats = checkpoint_stats(rocks_cluster, job_id)
    assert stats["counts"]["restored"] >= kills
    # every task that ended deleted its store; only killed TaskExecutors' directories may be left
    live = {tm["hardware"]["pid"] for tm in rest.taskmanagers()}
    killed = sorted(pids_before - live)
    left = [int(re.match(r"yarnflink-rocksdb-(\d+)-", p.name).group(1)) for p in local.iterdir()]  # type: ignore[union-attr]
    assert not set(left) & live, (left, live, killed)


COUNT_N = 60_000
COUNT_KEYS = 23


class Count(KeyedProcessFunction):
    """Per key, the number of its records so far: its running count in keyed (Value) state."""

    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, value: Any, ctx: Any) -> Any:
        c = (self.count.value() or 0) + 1
        self.count.update(c)
        yield (ctx.get_current_key(), c)


def submit_count(flag: Path, out: Path, parallelism: int, backend: str, local: str, savepoint: str | None) -> Any:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_max_parallelism(128)
    conf = {
        "execution.checkpointing.interval": "200 ms",
        "execution.checkpointing.dir": f"file://{out.parent / 'checkpoints'}",
        "state.backend.type": backend,
        "state.backend.rocksdb.localdir": local,
    }
    if savepoint:
        conf["execution.savepoint.path"] = savepoint
    for k, v in conf.items():
        env.get_config().set(k, v)
    (
        env.from_sequence(0, COUNT_N - 1)
        .set_parallelism(1)
        .uid("source")
        .map(slow_while(str(flag), 0.001))
        .set_parallelism(1)
        .uid("slow")
        .map(lambda x: x % COUNT_KEYS)
        .set_parallelism(1)
        .uid("key")
        .key_by(lambda k: k)
        .process(Count())
        .set_parallelism(parallelism)
        .uid("counter")
        .sink_to(FileSink(str(out), format="jsonl"))
        .set_parallelism(1)
        .uid("sink")
    )
    return env.execute_async(f"keyed count on {backend}")


def test_savepoints_move_between_backends_while_rescaling_2_3_1(rocks_cluster: Cluster, tmp_path: Path) -> None:
    rocks_cluster.executor()
    rest = rocks_cluster.rest
    flag, out, local = tmp_path / "slow", tmp_path / "out", str(tmp_path / "rocksdb")
    flag.touch()

    def checkpointed(job: str) -> bool:
        d = rest.job(job)
        assert d["state"] not in ("FAILED", "CANCELED", "FINISHED"), (d["state"], rest.exceptions(job))
        return d["state"] == "RUNNING" and checkpoint_stats(rocks_cluster, job)["counts"]["completed"] >= 1

    savepoint = None
    for parallelism, backend in ((2, "rocksdb"), (3, "hashmap")):
        job = submit_count(flag, out, parallelism, backend, local, savepoint).get_job_id()
        wait_until(lambda: checkpointed(job), timeout=120, interval=0.1, message=f"{backend} job checkpointed")
        trigger = rest.trigger_savepoint(job, f"file://{tmp_path}/sp", stop=True)
        savepoint = rest.wait_for_savepoint(job, trigger, timeout=120)
        wait_until(lambda: rest.job(job)["state"] == "FINISHED", message=f"{backend} job stopped")
    flag.unlink()
    last = submit_count(flag, out, 1, "rocksdb", local, savepoint)
    last.get_job_execution_result()
    assert rest.job(last.get_job_id())["state"] == "FINISHED"
    restored = checkpoint_stats(rocks_cluster, last.get_job_id())["latest"]["restored"]
    assert restored["is_savepoint"] is True and restored["external_path"] == savepoint
    got = committed(out)
    expected = sorted((k, c) for k in range(COUNT_KEYS) for c in range(1, len(range(k, COUNT_N, COUNT_KEYS)) + 1))
    assert len(got) == len(expected) and got == expected  # counts continued across both backend changes
    assert os.listdir(local) == []  # every task deleted its store
