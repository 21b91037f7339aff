"""The HA drills' job and takeover measurement, shared by tests/e2e, integration/ and the HA takeover
benchmark (benchmarks/ha.py): a checkpointed keyed running sum into an exactly-once FileSink, slowed
down while a flag file exists; and the time from killing the leading master to the job RUNNING again.

The job functions are pickled by value: TaskExecutors cannot import ``tests``.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cloudpickle

from tests.oracles import committed, running_sums
from yarnflink import FileSink, MapFunction, StreamExecutionEnvironment
from yarnflink.api.environment import set_default_executor
from yarnflink.client.executor import RestClusterExecutor
from yarnflink.client.rest_client import RestClient, RestClientError
from yarnflink.client.sessions import pid_alive
from yarnflink.deployment.local.ha_session import LocalHaCluster

cloudpickle.register_pickle_by_value(sys.modules[__name__])

__all__ = [
    "KEY_WIDTH",
    "SlowWhile",
    "Takeover",
    "add",
    "all_running",
    "committed",
    "completed_checkpoints",
    "expected_running_sums",
    "key_of",
    "running_with_checkpoint_after",
    "submit_checkpointed_sum",
    "takeover",
    "to_key",
    "wait_until",
]

KEY_WIDTH = 100
POLL_S = 0.02


# ----------------------------------------------------------------------------- the job
class SlowWhile(MapFunction):
    """Slows the pipeline down while ``flag`` exists, so failovers hit a running job."""

    def __init__(self, flag: str, pause_s: float = 0.0003) -> None:
        self.flag = flag
        self.pause_s = pause_s

    def map(self, value: Any) -> Any:
        if os.path.exists(self.flag):
            time.sleep(self.pause_s)
        return value


def to_key(x: int) -> tuple[int, int]:
    return (x // KEY_WIDTH, x)


def key_of(t: tuple[int, int]) -> int:
    return t[0]


def add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return (a[0], a[1] + b[1])


def submit_checkpointed_sum(
    rest_url: str,
    *,
    n: int,
    out: Path,
    checkpoints: Path,
    flag: Path,
    name: str = "checkpointed keyed sum",
    parallelism: int = 2,
    checkpoint_interval: str = "300 ms",
    restart_delay: str = "0 ms",
    pause_s: float = 0.0003,
) -> str:
    """Submits the keyed running sum over 0..n-1 with an exactly-once FileSink; returns the job id.
    While ``flag`` exists every record waits ``pause_s`` (per subtask: n/parallelism x pause_s)."""
    executor = RestClusterExecutor(rest_url)
    set_default_executor(executor)
    try:
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(parallelism)
        for k, v in {
            "execution.checkpointing.interval": checkpoint_interval,
            "execution.checkpointing.dir": f"file://{checkpoints}",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": "1000",
            "restart-strategy.fixed-delay.delay": restart_delay,
        }.items():
            env.get_config().set(k, v)
        (
            env.from_sequence(0, n - 1)
            .map(SlowWhile(str(flag), pause_s))
            .map(to_key)
            .key_by(key_of)
            .reduce(add)
            .sink_to(FileSink(str(out), format="jsonl"))
        )
        return str(env.execute_async(name).get_job_id())
    finally:
        set_default_executor(None)
        executor.rest.close()


def expected_running_sums(n: int) -> list[tuple[int, int]]:
    return running_sums(n, lambda x: x // KEY_WIDTH)


# ----------------------------------------------------------------------------- waiting and measuring
def wait_until(cond: Callable[[], Any], timeout: float, what: str, interval: float = POLL_S) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            v = cond()
        except RestClientError:
            v = None
        if v:
            return v
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def all_running(details: dict[str, Any]) -> bool:
    return details.get("state") == "RUNNING" and all(
        s["status"] == "RUNNING" for v in details.get("vertices", []) for s in v.get("subtasks", [])
    )


def completed_checkpoints(rest: RestClient, job_id: str) -> int:
    return int(rest.get_json(f"/jobs/{job_id}/checkpoints")["counts"]["completed"])


def running_with_checkpoint_after(rest: RestClient, job_id: str, after: int) -> int | None:
    """The number of completed checkpoints if the job runs everywhere and has more than ``after``."""
    if not all_running(rest.job(job_id)):
        return None
    done = completed_checkpoints(rest, job_id)
    return done if done > after else None


@dataclass
class Takeover:
    old_leader: int
    new_leader: int
    to_leader_s: float
    to_running_s: float

    def line(self, what: str = "SIGKILL") -> str:
        return (
            f"takeover: {what} of master {self.old_leader} -> master {self.new_leader} leads after "
            f"{self.to_leader_s:.2f}s -> job RUNNING after {self.to_running_s:.2f}s"
        )


def takeover(
    cluster: LocalHaCluster,
    job_ids: list[str],
    *,
    sig: int = signal.SIGKILL,
    timeout: float = 90.0,
    after_kill: Callable[[], None] | None = None,
) -> Takeover:
    """Sends ``sig`` to the leading master and measures until another master leads and every job
    in ``job_ids`` runs everywhere under it (a job that finished meanwhile counts as running)."""
    old_url = cluster.leader_url()
    old = cluster.leader_index(old_url)
    assert old is not None, f"no master serves the leader's URL {old_url}"
    t0 = time.monotonic()
    cluster.kill(old, sig)
    if after_kill is not None:
        after_kill()

    def new_leader() -> str | None:
        url = cluster.resolver.current()
        return url if url and url.rstrip("/") != old_url.rstrip("/") else None

    url = wait_until(new_leader, timeout, "a new leader")
    t1 = time.monotonic()
    new = cluster.leader_index(url)
    with RestClient(url, timeout=5) as rest:
        for job_id in job_ids:

            def running(job_id: str = job_id) -> bool:
                details = rest.job(job_id)
                return all_running(details) or details["state"] == "FINISHED"

            wait_until(running, timeout, f"job {job_id} RUNNING under the new leader")
    t2 = time.monotonic()
    return Takeover(old, new if new is not None else -1, t1 - t0, t2 - t0)


def with_standbys(cluster: LocalHaCluster) -> LocalHaCluster:
    """``cluster`` with every master serving again: one killed (or that killed itself) by an
    earlier drill is restarted as a standby and waited for."""
    dead = [index for index, pid in cluster.master_pids.items() if not pid_alive(pid)]
    for index in dead:
        cluster.restart(index, wait=False)
    for index in dead:
        cluster.wait_started(index)
    return cluster
