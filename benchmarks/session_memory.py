"""The master's memory across many short jobs on one session (issue 16, point 9): a session
cluster (a master and one TaskExecutor process) runs N jobs one after the other, each with a
savepoint: even jobs are stopped with a savepoint (which ends them), odd jobs take a savepoint and
are cancelled. After every job the master's resident set size, threads and open file descriptors
are sampled; once the last job's JobMaster is stopped, the final sample shows what the session
keeps of its ended jobs (their archives, and nothing of their JobMasters).

    scripts/bench --suite session_memory [--jobs 200] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from yarnflink import DiscardingSink, StreamExecutionEnvironment
from yarnflink.client.rest_client import RestClient
from yarnflink.common.config import Configuration
from yarnflink.deployment.local.cluster import start_local_cluster, stop_process

POLL_S = 0.01
#: How long an ended job's JobMaster runs on before the Dispatcher stops it (a little more than
#: yarnflink.dispatcher.dispatcher.JOB_MASTER_LINGER_S).
SETTLE_S = 4.0


def job_graph_json(n: int) -> dict[str, Any]:
    """A source that runs until stopped, into a discarding sink; checkpoints only on request."""
    env = StreamExecutionEnvironment()
    env.get_config().set("execution.checkpointing.interval", "1 h")
    env.from_sequence(0, 10**15).set_parallelism(1).uid("source").sink_to(DiscardingSink()).set_parallelism(1)
    return env.get_job_graph(f"short job {n}").to_json()


def until(cond: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(POLL_S)


def run_job(rest: RestClient, n: int, savepoints: Path) -> None:
    job_id = rest.submit_job(job_graph_json(n))

    def running() -> bool:
        job = rest.job(job_id)
        return job["state"] == "RUNNING" and all(v["status"] == "RUNNING" for v in job["vertices"])

    until(running, 60, f"job {n} running")
    stop = n % 2 == 0
    trigger_id = rest.trigger_savepoint(job_id, str(savepoints), stop=stop)
    rest.wait_for_savepoint(job_id, trigger_id, timeout=60)
    if not stop:
        rest.cancel(job_id)
    until(lambda: rest.job(job_id)["state"] in ("FINISHED", "CANCELED"), 60, f"job {n} ended")


def sample(master: psutil.Process, jobs: int, started: float) -> dict[str, Any]:
    return {
        "jobs": jobs,
        "seconds": round(time.monotonic() - started, 1),
        "rss_mb": round(master.memory_info().rss / 2**20, 1),
        "threads": master.num_threads(),
        "fds": master.num_fds(),
    }


def run(jobs: int, workdir: Path) -> dict[str, Any]:
    config = Configuration()
    config.set("taskmanager.numberOfTaskSlots", "2")
    proc, info = start_local_cluster(config, taskexecutors=1, workdir=workdir / "cluster", detached=False)
    try:
        master = psutil.Process(int(info["pid"]))
        savepoints = workdir / "savepoints"
        with RestClient(str(info["rest_url"])) as rest:
            run_job(rest, -1, savepoints)  # warm-up: imports, executors and connections of a first job
            time.sleep(SETTLE_S)
            started = time.monotonic()
            samples = [sample(master, 0, started)]
            step = max(1, jobs // 10)
            for n in range(jobs):
                run_job(rest, n, savepoints)
                if (n + 1) % step == 0 or n + 1 == jobs:
                    samples.append(sample(master, n + 1, started))
            time.sleep(SETTLE_S)  # the last JobMasters stopped
            final = sample(master, jobs, started)
        return {"jobs": jobs, "samples": samples, "final": final}
    finally:
        stop_process(proc.pid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    print(f"# {platform.node()}: {os.cpu_count()} cores, python {platform.python_version()}")
    with tempfile.TemporaryDirectory(prefix="yarnflink-bench-") as tmp:
        result = run(args.jobs, Path(tmp))
    if args.json:
        print(json.dumps(result))
        return
    print(f"{'jobs':>5} {'seconds':>8} {'RSS MB':>8} {'threads':>8} {'fds':>5}")
    for s in [*result["samples"], result["final"]]:
        print(f"{s['jobs']:>5} {s['seconds']:>8} {s['rss_mb']:>8} {s['threads']:>8} {s['fds']:>5}")
    first, final = result["samples"][0], result["final"]
    print(
        f"after {args.jobs} jobs: RSS {final['rss_mb'] - first['rss_mb']:+.1f} MB, "
        f"threads {final['threads'] - first['threads']:+d}, fds {final['fds'] - first['fds']:+d}"
    )


if __name__ == "__main__":
    main()
