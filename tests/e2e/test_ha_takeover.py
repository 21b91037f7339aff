"""Issue 18, drill 1 (short form): a master failover that the running job does not notice.

A local HA cluster (real ZooKeeper, 2 masters and 2 TaskExecutors as processes, 2 s session
timeout) runs a checkpointed keyed running sum into the exactly-once FileSink, with a user
function that records every ``open()``. The leading master is SIGKILLed (once here; 10 times in a
row with ``YARNFLINK_HA_DRILL_FULL=1``, each killed master restarted as a standby). Checks: another
master leads and reconciles instead of redeploying -- ``open()`` ran once per subtask over the
whole drill, the TaskExecutors received each task once (same execution attempt ids), no checkpoint
was restored, ``numRestarts`` stays 0, checkpoints go on under the new leader, and the committed
output is exact.
"""

from __future__ import annotations

import os
import re
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from tests.ha_jobs import (
    SlowWhile,
    add,
    committed,
    completed_checkpoints,
    expected_running_sums,
    key_of,
    running_with_checkpoint_after,
    takeover,
    to_key,
    wait_until,
)
from tests.zk import unique_root
from yarnflink import FileSink, MapFunction, StreamExecutionEnvironment
from yarnflink.api.environment import set_default_executor
from yarnflink.client.executor import RestClusterExecutor
from yarnflink.common.config import Configuration

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200 if os.environ.get("YARNFLINK_HA_DRILL_FULL") == "1" else 240)]
cloudpickle.register_pickle_by_value(sys.modules[__name__])

FULL = os.environ.get("YARNFLINK_HA_DRILL_FULL") == "1"
KILLS = 10 if FULL else 1
#: records, and the pause per record while the flag exists: the job must outlive every kill
N = 1_000_000 if FULL else 60_000
PAUSE_S = 0.001 if FULL else 0.0005


class CountOpens(MapFunction):
    """Writes a file per ``open()`` (subtask, attempt number): a redeployed task opens again."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def open(self, runtime_context: Any) -> None:
        name = f"open-{runtime_context.get_index_of_this_subtask()}-{runtime_context.get_attempt_number()}"
        Path(self.directory, f"{name}-{uuid.uuid4().hex[:8]}").touch()

    def map(self, value: Any) -> Any:
        return value


def submit(rest_url: str, tmp: Path, flag: Path, opens: Path) -> tuple[str, Path]:
    out = tmp / "out"
    executor = RestClusterExecutor(rest_url)
    set_default_executor(executor)
    try:
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(2)
        for k, v in {
            "execution.checkpointing.interval": "300 ms",
            "execution.checkpointing.dir": f"file://{tmp / 'ckpt'}",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": "1000",
            "restart-strategy.fixed-delay.delay": "0 ms",
        }.items():
            env.get_config().set(k, v)
        (
            env.from_sequence(0, N - 1)
            .map(SlowWhile(str(flag), PAUSE_S))
            .map(CountOpens(str(opens)))
            .map(to_key)
            .key_by(key_of)
            .reduce(add)
            .sink_to(FileSink(str(out), format="jsonl"))
        )
        return str(env.execute_async("takeover drill").get_job_id()), out
    finally:
        set_default_executor(None)
        executor.rest.close()


@pytest.fixture
def cluster(zookeeper: Any, tmp_path: Path) -> Iterator[Any]:
    from yarnflink.deployment.local.ha_session import LocalHaCluster

    config = Configuration(
        {
            "high-availability.type": "zookeeper",
            "high-availability.zookeeper.quorum": zookeeper.address,
            "high-availability.zookeeper.path.root": unique_root("takeover"),
            "high-availability.storageDir": f"file://{tmp_path / 'ha'}",
            "high-availability.zookeeper.client.session-timeout": "2 s",
            "high-availability.zookeeper.client.connection-timeout": "15 s",
            "high-availability.zookeeper.client.retry-wait": "100 ms",
            "taskmanager.numberOfTaskSlots": "2",
            "heartbeat.interval": "1 s",
            "heartbeat.timeout": "10 s",
            "rest.await-leader-timeout": "60 s",
        }
    )
    c = LocalHaCluster(config, tmp_path / "cluster", masters=2, taskexecutors=2, name="takeover")
    c.start()
    yield c
    c.stop()


def received_tasks(cluster: Any) -> list[str]:
    """Execution attempt ids the TaskExecutors received (``received task NAME (ID)`` lines)."""
    text = "".join(p.read_text(errors="replace") for p in cluster.workdir.glob("taskexecutor-*.log"))
    return re.findall(r"received task .* \(([0-9a-f]{32})\)", text)


def test_a_sigkilled_leader_is_replaced_without_the_job_noticing(cluster: Any, tmp_path: Path) -> None:
    flag = tmp_path / "slow"
    flag.touch()
    opens = tmp_path / "opens"
    opens.mkdir()
    job_id, out = submit(cluster.leader_url(), tmp_path, flag, opens)
    with cluster.rest() as rest:
        done = wait_until(lambda: running_with_checkpoint_after(rest, job_id, 0), 120, "the job checkpointing")
    deployed = sorted(received_tasks(cluster))
    assert deployed, "no task deployed"
    opened = sorted(p.name.rsplit("-", 1)[0] for p in opens.iterdir())
    assert opened == ["open-0-0", "open-1-0"], opened
    for i in range(KILLS):
        old = cluster.leader_index()
        t = takeover(cluster, [job_id])
        print(f"\n{t.line()}")
        with cluster.rest() as rest:
            # checkpoints go on under the new leader, and the job was not restarted for it
            done = wait_until(
                lambda d=done: running_with_checkpoint_after(rest, job_id, d), 120, "a checkpoint of the new leader"
            )
            details = rest.job(job_id)
            stats = rest.get_json(f"/jobs/{job_id}/checkpoints")
        assert (stats.get("latest") or {}).get("restored") is None, stats.get("latest")
        assert details["numRestarts"] == 0
        assert [s["attempt"] for v in details["vertices"] for s in v["subtasks"]] == [0] * sum(
            len(v["subtasks"]) for v in details["vertices"]
        )
        assert sorted(received_tasks(cluster)) == deployed, "a task was deployed again"
        if i + 1 < KILLS:
            cluster.restart(old)  # the killed master comes back as a standby for the next round
    flag.unlink()
    with cluster.rest() as rest:
        wait_until(lambda: rest.job(job_id)["state"] in ("FINISHED", "FAILED", "CANCELED"), 600, "the job to end")
        details = rest.job(job_id)
        assert completed_checkpoints(rest, job_id) >= 1
    assert details["state"] == "FINISHED" and details["numRestarts"] == 0
    exceptions = details.get("exceptions") or {}
    assert not exceptions.get("all-exceptions"), exceptions
    assert sorted(p.name.rsplit("-", 1)[0] for p in opens.iterdir()) == ["open-0-0", "open-1-0"]
    assert sorted(received_tasks(cluster)) == deployed
    got = committed(out)
    assert got == expected_running_sums(N)  # nothing lost, nothing duplicated
    assert not [f for f in os.listdir(out) if f.endswith(".inprogress")]
