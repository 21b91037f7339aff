"""HA takeover benchmark (issues 6 and 18): what a running job sees of a SIGKILL of the leading
master, on a local HA cluster (2 masters, 2 TaskExecutors, a real ZooKeeper).

A checkpointed streaming job runs (``tests/ha_takeover_jobs.py``: ``from_sequence -> map ->
FileSink``, exactly-once, parallelism 2, paced at ``--pause`` per record so its steady throughput is
known; every ``open()`` and every 256 records per subtask are logged by the TaskExecutors, which
needs no master). Each run waits for a new completed checkpoint, SIGKILLs the leader and measures
from the kill:

* (a) ``to_leader``: until ZooKeeper names another master's REST endpoint (the killed master's
  ZooKeeper session must expire first: ``high-availability.zookeeper.client.session-timeout``);
* (b) ``to_running``: until the new leader reports the job RUNNING with every subtask RUNNING;
  ``restarted`` says whether that took a restart (``numRestarts`` grew, or a subtask's ``open()``
  ran again): issue 18's aim is (b) within 0.5 s of (a) with no restart;
* (c) ``to_checkpoint``: until the new leader reports its first completed checkpoint (its
  statistics count only its own); aim: within one checkpoint interval of (b);
* ``window_throughput``: records per second through the sink from the kill to (c) (at least
  ``--window`` s), against ``steady_throughput`` over the ``--window`` s before the kill; aim: at
  least 90 %.

The killed master is started again as a standby before the next run. At the end the pacing stops,
the job finishes and its committed output is checked (exactly 0..records-1).

    scripts/bench --suite ha [--runs 5] [--session-timeout 2s] [--zookeeper HOST:PORT]

Without ``--zookeeper`` a standalone ZooKeeper is started (tests/zk.py: Debian's package).
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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tests.ha_jobs import all_running, wait_until
from tests.ha_takeover_jobs import committed_values, opens, submit_forward_job
from tests.zk import start_standalone
from yarnflink.client.rest_client import RestClient
from yarnflink.common.config import Configuration
from yarnflink.deployment.local.ha_session import LocalHaCluster

PROGRESS_EVERY = 256


@dataclass
class Run:
    to_leader_s: float
    to_running_s: float
    to_checkpoint_s: float
    restarted: bool
    steady_throughput: float
    window_throughput: float

    def line(self, i: int) -> str:
        ratio = self.window_throughput / self.steady_throughput if self.steady_throughput else 0.0
        return (
            f"run {i}: (a) leader {self.to_leader_s:.2f}s, (b) RUNNING {self.to_running_s:.2f}s"
            f" ({'RESTARTED' if self.restarted else 'no restart'}), (c) checkpoint {self.to_checkpoint_s:.2f}s;"
            f" throughput {self.window_throughput:.0f}/s in the window vs {self.steady_throughput:.0f}/s"
            f" steady ({ratio:.0%})"
        )


def _zookeeper(address: str | None, workdir: Path) -> tuple[str, Any]:
    if address:
        return address, None
    server = start_standalone(workdir / "zookeeper")
    return server.address, server


def throughput(log: Path, start: float, end: float) -> float:
    """Records per second through the sink (all subtasks) between two wall-clock times."""
    marks = [e for e in opens(log, "progress") if start <= e["time"] < end]
    return len(marks) * PROGRESS_EVERY / max(end - start, 1e-9)


def _deployments(log: Path) -> int:
    return len(opens(log, "map"))


def measure(cluster: LocalHaCluster, job_id: str, log: Path, window_s: float) -> tuple[Run, int]:
    """One takeover: the measurements and the killed master's number."""
    old_url = cluster.leader_url()
    old = cluster.leader_index(old_url)
    assert old is not None, f"no master serves the leader's URL {old_url}"
    with RestClient(old_url, timeout=5) as rest:
        restarts_before = int(rest.job(job_id)["numRestarts"])
    deployed_before = _deployments(log)
    time.sleep(window_s)  # the steady window, just before the kill
    kill = time.time()
    t0 = time.monotonic()
    cluster.kill(old, signal.SIGKILL)
    url = wait_until(
        lambda: (u := cluster.resolver.current()) and u.rstrip("/") != old_url.rstrip("/") and u, 90, "a new leader"
    )
    to_leader = time.monotonic() - t0
    with RestClient(url, timeout=5) as rest:
        wait_until(lambda: all_running(rest.job(job_id)), 90, "the job RUNNING under the new leader")
        to_running = time.monotonic() - t0
        restarted = int(rest.job(job_id)["numRestarts"]) > restarts_before or _deployments(log) > deployed_before
        wait_until(
            lambda: int(rest.get_json(f"/jobs/{job_id}/checkpoints")["counts"]["completed"]) > 0,
            90,
            "a checkpoint completed under the new leader",
        )
        to_checkpoint = time.monotonic() - t0
    window_end = max(kill + to_checkpoint, kill + window_s)
    wait_until(lambda: time.time() >= window_end + 1.0, window_s + 5, "the window's progress logged")
    run = Run(
        to_leader,
        to_running,
        to_checkpoint,
        restarted,
        throughput(log, kill - window_s, kill),
        throughput(log, kill, window_end),
    )
    return run, old


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--session-timeout", default="2 s")
    p.add_argument("--zookeeper", metavar="HOST:PORT", help="an existing ZooKeeper (default: start one)")
    p.add_argument("--records", type=int, default=2_000_000)
    p.add_argument("--pause", type=float, default=0.0005, help="seconds per record per subtask while paced")
    p.add_argument("--interval", default="500 ms", help="execution.checkpointing.interval")
    p.add_argument("--window", type=float, default=3.0, help="seconds of the steady and takeover windows (at least)")
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
    flag, log, out = workdir / "paced", workdir / "opens.log", workdir / "out"
    flag.touch()
    runs: list[Run] = []
    load = os.getloadavg()
    try:
        job_id = submit_forward_job(
            cluster.rest_url,
            n=args.records,
            out=out,
            checkpoints=workdir / "checkpoints",
            flag=flag,
            log=log,
            checkpoint_interval=args.interval,
            pause_s=args.pause,
            progress_every=PROGRESS_EVERY,
        )
        for i in range(args.runs):
            with cluster.rest() as rest:
                wait_until(
                    lambda: (
                        all_running(rest.job(job_id))
                        and int(rest.get_json(f"/jobs/{job_id}/checkpoints")["counts"]["completed"]) > 0
                    ),
                    120,
                    f"a checkpoint before run {i + 1}",
                )
            run, killed = measure(cluster, job_id, log, args.window)
            print(run.line(i + 1), flush=True)
            runs.append(run)
            cluster.restart(killed)  # a standby again for the next run
        flag.unlink()
        with cluster.rest() as rest:
            wait_until(lambda: rest.job(job_id)["state"] in ("FINISHED", "FAILED", "CANCELED"), 600, "the job's end")
            state = rest.job(job_id)["state"]
        exact = state == "FINISHED" and committed_values(out) == list(range(args.records))
    finally:
        cluster.stop()
        if server is not None:
            server.stop()

    def stat(xs: list[float]) -> dict[str, float]:
        return {"median": round(statistics.median(xs), 2), "max": round(max(xs), 2)}

    ratios = [r.window_throughput / r.steady_throughput for r in runs if r.steady_throughput]
    summary = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load_average_at_start": [round(x, 1) for x in load],
        "load_average_at_end": [round(x, 1) for x in os.getloadavg()],
        "session_timeout": args.session_timeout,
        "checkpoint_interval": args.interval,
        "runs": len(runs),
        "a_kill_to_leader_s": stat([r.to_leader_s for r in runs]),
        "b_kill_to_running_s": stat([r.to_running_s for r in runs]),
        "b_minus_a_s": stat([r.to_running_s - r.to_leader_s for r in runs]),
        "c_kill_to_first_checkpoint_s": stat([r.to_checkpoint_s for r in runs]),
        "c_minus_b_s": stat([r.to_checkpoint_s - r.to_running_s for r in runs]),
        "runs_with_a_restart": sum(r.restarted for r in runs),
        "window_vs_steady_throughput": {
            "median": round(statistics.median(ratios), 3) if ratios else None,
            "min": round(min(ratios), 3) if ratios else None,
        },
        "job": state,
        "output_exact": exact,
        "each_run": [asdict(r) for r in runs],
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
