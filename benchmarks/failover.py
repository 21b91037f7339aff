"""Failover benchmark (issue 4): the time from SIGKILL of a TaskExecutor to every task of the job
RUNNING again, on the local cluster with default settings.

A streaming job at parallelism 2 (sequence -> throttled map -> key_by -> sum -> discarding sink;
slot sharing puts subtask i of every vertex into TaskExecutor i) runs on one-slot TaskExecutors
with a spare one. Each run kills the TaskExecutor of subtask 0, then polls ``GET /jobs/:id`` every
10 ms until every subtask is RUNNING in a new attempt. Heartbeats stay at Flink's defaults (10 s
interval, 50 s timeout): the JobMaster notices the loss through the broken data connection. The
restart strategy is fixed-delay (the job needs one) with the delay given; Flink's default delay
is 1 s, which the measured time then contains.

    scripts/bench --suite failover [--runs 5] [--delays 1s,0s] [--taskexecutors 3]
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
from pathlib import Path
from typing import Any

import pyarrow as pa

from yarnflink import DiscardingSink, StreamExecutionEnvironment
from yarnflink.api.environment import set_default_executor
from yarnflink.client.executor import RestClusterExecutor
from yarnflink.client.rest_client import RestClient
from yarnflink.common.config import Configuration
from yarnflink.deployment.local.cluster import start_local_cluster, stop_process

POLL_S = 0.01


def throttle(rb: pa.RecordBatch) -> pa.RecordBatch:
    time.sleep(0.02)  # keeps the endless job from using whole cores
    return rb


def submit(rest_url: str, delay: str, parallelism: int) -> Any:
    set_default_executor(RestClusterExecutor(rest_url))
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    env.get_config().set("restart-strategy.type", "fixed-delay")
    env.get_config().set("restart-strategy.fixed-delay.attempts", "1000")
    env.get_config().set("restart-strategy.fixed-delay.delay", delay)
    (
        env.from_sequence(0, 10**15)
        .map_batches(throttle)
        .map(lambda x: (x % 1000, 1))
        .key_by(lambda t: t[0])
        .sum(1)
        .sink_to(DiscardingSink())
    )
    return env.execute_async(f"failover benchmark (delay {delay})")


def all_running(details: dict[str, Any], min_attempt: dict[tuple[str, int], int]) -> bool:
    return all(
        s["status"] == "RUNNING" and s["attempt"] >= min_attempt.get((v["id"], s["subtask"]), 0)
        for v in details["vertices"]
        for s in v["subtasks"]
    )


def wait(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(POLL_S)


def one_kill(rest: RestClient, job_id: str, taskexecutors: int) -> float:
    wait(lambda: rest.overview()["taskmanagers"] >= taskexecutors, 120, "all TaskExecutors registered")
    details = wait(lambda: (d := rest.job(job_id)) and all_running(d, {}) and d, 120, "the job running")
    victim = details["vertices"][0]["subtasks"][0]["taskmanager-id"]
    pid = next(tm["hardware"]["pid"] for tm in rest.taskmanagers() if tm["id"] == victim)
    # every subtask that ran there must come back in a new attempt
    restarted = {
        (v["id"], s["subtask"]): s["attempt"] + 1
        for v in details["vertices"]
        for s in v["subtasks"]
        if s["taskmanager-id"] == victim
    }
    killed = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    wait(lambda: all_running(rest.job(job_id), restarted), 120, "every task running again")
    return time.monotonic() - killed


def run(delay: str, runs: int, taskexecutors: int, parallelism: int, workdir: Path) -> dict[str, Any]:
    config = Configuration()  # Flink's defaults: one slot per TaskExecutor, 10 s / 50 s heartbeats
    proc, info = start_local_cluster(config, taskexecutors=taskexecutors, workdir=workdir, detached=False)
    rest = RestClient(str(info["rest_url"]))
    try:
        client = submit(str(info["rest_url"]), delay, parallelism)
        seconds = [one_kill(rest, client.get_job_id(), taskexecutors) for _ in range(runs)]
        client.cancel()
        return {
            "delay": delay,
            "runs": [round(s, 3) for s in seconds],
            "median_s": round(statistics.median(seconds), 3),
            "max_s": round(max(seconds), 3),
        }
    finally:
        set_default_executor(None)
        rest.close()
        stop_process(proc.pid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="kills per restart delay")
    parser.add_argument("--delays", default="1s,0s", help="restart-strategy.fixed-delay.delay values to measure")
    parser.add_argument("--taskexecutors", type=int, default=3, help="one-slot TaskExecutors (parallelism + spares)")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    print(
        f"# {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"python {platform.python_version()}, pyarrow {pa.__version__}"
    )
    with tempfile.TemporaryDirectory(prefix="yarnflink-bench-failover-") as tmp:
        for i, delay in enumerate(d.strip() for d in args.delays.split(",")):
            r = run(delay, args.runs, args.taskexecutors, args.parallelism, Path(tmp) / str(i))
            if args.json:
                print(json.dumps(r))
            else:
                print(
                    f"restart delay {r['delay']:>5}: SIGKILL -> all tasks RUNNING median {r['median_s']:.3f} s, "
                    f"max {r['max_s']:.3f} s  (runs: {', '.join(f'{s:.3f}' for s in r['runs'])})"
                )


if __name__ == "__main__":
    main()
