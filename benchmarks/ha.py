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
The job and the takeover measurement live in ``tests/ha_jobs.py``, shared with the drills in ``integration/``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
from pathlib import Path
from typing import Any

from tests.ha_jobs import (
    Takeover,
    committed,
    expected_running_sums,
    running_with_checkpoint_after,
    submit_checkpointed_sum,
    takeover,
    wait_until,
)
from tests.zk import start_standalone
from yarnflink.client.rest_client import RestClient
from yarnflink.common.config import Configuration
from yarnflink.deployment.local.ha_session import LocalHaCluster


# ----------------------------------------------------------------------------- the benchmark
def _zookeeper(address: str | None, workdir: Path) -> tuple[str, Any]:
    if address:
        return address, None
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
