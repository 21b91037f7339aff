"""HA takeover benchmark (issue 6): the time from SIGKILL of the leading master to the job RUNNING
again under the new leader, on a local HA cluster (2 masters, 2 TaskExecutors, a real ZooKeeper).

A checkpointed streaming job (keyed running sum into an exactly-once FileSink, slowed down while a
flag file exists) runs; each run waits for a new completed checkpoint, SIGKILLs the leader and
measures

* kill -> new leader: until ZooKeeper names another master's REST endpoint (the ZooKeeper session
  of the killed master must expire first: ``high-availability.zookeeper.client.session-timeout``);
* kill -> job RUNNING: until the new leader reports the job RUNNING with every subtask RUNNING.

The killed master is started again as a standby before the next run. At the end the flag goes,
the job finishes and its committed output is checked against the expected running sums.

    scripts/bench --suite ha [--runs 5] [--session-timeout 2s] [--zookeeper HOST:PORT]

Without ``--zookeeper`` a standalone ZooKeeper is started (tests/zk.py: Debian's package).
The helpers here (the job, takeover measurement) are shared with the drills in ``integration/``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yarnflink import FileSink, MapFunction, StreamExecutionEnvironment
from yarnflink.api.environment import set_default_executor
from yarnflink.bench.exactly_once import committed, running_sums
from yarnflink.client.executor import RestClusterExecutor
from yarnflink.client.rest_client import RestClient, RestClientError
from yarnflink.common.config import Configuration
from yarnflink.deployment.local.ha_session import LocalHaCluster

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


# ----------------------------------------------------------------------------- the benchmark
def _zookeeper(address: str | None, workdir: Path) -> tuple[str, Any]:
    if address:
        return address, None
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: tests/zk.py
    from tests.zk import start_standalone

    server = start_standalone(workdir / "zookeeper")
    return server.address, server


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--session-timeout", default="2 s")
    p.add_argument("--zookeeper", metavar="HOST:PORT", help="an existing ZooKeeper (default: start one)")
    p.add_argument("--records", type=int, default=400_000)
    args = p.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="yarnflink-bench-ha-"))
    quorum, server = _zookeeper(args.zookeeper, workdir)
    config = Configuration(
        {
            "high-availability.type": "zookeeper",
            "high-availability.zookeeper.quorum": quorum,
            "high-availability.zookeeper.path.root": f"/bench-ha-{os.getpid()}",
            "high-availability.storageDir": f"file://{workdir / 'ha'}",
            "high-availability.zookeeper.client.session-timeout": args.session_timeout,
            "taskmanager.numberOfTaskSlots": "2",
            "heartbeat.interval": "1 s",
            "heartbeat.timeout": "10 s",
            "rest.await-leader-timeout": "60 s",
        }
    )
    cluster = LocalHaCluster(config, workdir / "cluster", masters=2, taskexecutors=2, name="bench").start()
    flag = workdir / "slow"
    flag.touch()
    results: list[Takeover] = []
    try:
        rest = RestClient(cluster.rest_url)
        job_id = submit_checkpointed_sum(
            cluster.rest_url, n=args.records, out=workdir / "out", checkpoints=workdir / "checkpoints", flag=flag
        )
        seen = 0
        for run in range(args.runs):
            seen = wait_until(
                lambda: running_with_checkpoint_after(rest, job_id, seen), 120, f"a new checkpoint before run {run + 1}"
            )
            t = takeover(cluster, [job_id])
            print(t.line(), flush=True)
            results.append(t)
            cluster.restart(t.old_leader)  # a standby again for the next run
            seen = 0
        flag.unlink()
        wait_until(lambda: rest.job(job_id)["state"] in ("FINISHED", "FAILED", "CANCELED"), 300, "the job's end")
        state = rest.job(job_id)["state"]
        exact = state == "FINISHED" and committed(workdir / "out") == expected_running_sums(args.records)
        rest.close()
    finally:
        cluster.stop()
        if server is not None:
            server.stop()
    to_leader = [r.to_leader_s for r in results]
    to_running = [r.to_running_s for r in results]
    summary = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "session_timeout": args.session_timeout,
        "runs": len(results),
        "kill_to_leader_s": {"median": round(statistics.median(to_leader), 2), "max": round(max(to_leader), 2)},
        "kill_to_running_s": {"median": round(statistics.median(to_running), 2), "max": round(max(to_running), 2)},
        "job": state,
        "output_exact": exact,
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
