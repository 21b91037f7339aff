"""Checkpoint failures fail the job over, they do not end it (issue 22 item 1): a job whose records
are slow while a flag file exists, with ``execution.checkpointing.timeout: 1 s``, so its
checkpoints expire. Past ``execution.checkpointing.tolerable-failed-checkpoints`` (0) the JobMaster
fails the job over globally: with restarts left it restarts (from the latest completed
checkpoint, here none) and, the flag gone, finishes with exactly the output of a failure-free run
(exactly-once FileSink); with ``restart-strategy.type: none`` it ends FAILED, the checkpoint
failure in its exception history.

The shared ``cluster`` (2 TaskExecutors x 2 slots) runs both jobs; each takes one slot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.oracles import committed, running_sums

from .cli_runner import JobCli
from .conftest import Cluster, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

N = 3000
KEYS = 5
THRESHOLD = "Exceeded checkpoint tolerable failure threshold (0)"

JOB = """
    import os, sys, time
    from yarnflink import FileSink, MapFunction, StreamExecutionEnvironment

    out, checkpoints, flag = sys.argv[1:4]
    extra = dict(a.split("=", 1) for a in sys.argv[4:])

    class Slow(MapFunction):
        def map(self, value):
            if os.path.exists(flag):  # a batch of 1024 records takes ~2 s: a checkpoint's barrier waits
                time.sleep(0.002)
            return value

    env = StreamExecutionEnvironment.get_execution_environment()
    conf = {"execution.checkpointing.interval": "300 ms", "execution.checkpointing.timeout": "1 s",
            "execution.checkpointing.dir": checkpoints, **extra}
    for k, v in conf.items():
        env.get_config().set(k, v)
    (env.from_sequence(0, %(n)d - 1).set_parallelism(1)
        .map(Slow()).set_parallelism(1)
        .map(lambda x: (x %% %(keys)d, x)).set_parallelism(1)
        .key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).set_parallelism(1)
        .sink_to(FileSink(out, format="jsonl")).set_parallelism(1))
    env.execute("expiring checkpoints")
""" % {"n": N, "keys": KEYS}


def _job(cluster: Cluster, job_id: str) -> dict[str, Any]:
    return dict(cluster.rest.job(job_id))


def _history(cluster: Cluster, job_id: str) -> list[dict[str, Any]]:
    return list(cluster.rest.exceptions(job_id)["exceptionHistory"]["entries"])


def test_expiring_checkpoints_fail_the_job_over_and_it_finishes_exactly_once(cluster: Cluster, tmp_path: Path) -> None:
    cli = JobCli(cluster, tmp_path, JOB)
    job = cli.submit(
        (),
        (
            "restart-strategy.type=fixed-delay",
            "restart-strategy.fixed-delay.attempts=1000",
            "restart-strategy.fixed-delay.delay=100 ms",
        ),
    )
    wait_until(lambda: _job(cluster, job)["numRestarts"] >= 1, timeout=90, message="a failover")
    cli.flag.unlink()  # full speed: the next checkpoints complete
    wait_until(
        lambda: _job(cluster, job)["state"] in ("FINISHED", "FAILED", "CANCELED"), timeout=120, message="the job ends"
    )
    d = _job(cluster, job)
    history = _history(cluster, job)
    assert d["state"] == "FINISHED", history[:1]
    assert d["numRestarts"] >= 1
    assert THRESHOLD in history[-1]["message"] and "CHECKPOINT_EXPIRED" in history[-1]["message"], history[-1]
    assert history[-1]["restartedTasks"]  # it restarted the job's tasks, it did not end the job
    assert committed(cli.out) == running_sums(N, lambda x: x % KEYS)


def test_expiring_checkpoints_fail_the_job_without_restarts(cluster: Cluster, tmp_path: Path) -> None:
    cli = JobCli(cluster, tmp_path, JOB)
    job = cli.submit((), ("restart-strategy.type=none",))
    wait_until(
        lambda: _job(cluster, job)["state"] in ("FINISHED", "FAILED", "CANCELED"), timeout=90, message="the job ends"
    )
    d = _job(cluster, job)
    assert d["state"] == "FAILED" and d["numRestarts"] == 0
    cause = _history(cluster, job)[0]
    assert cause["exceptionName"] == "CheckpointException", cause
    assert THRESHOLD in cause["message"] and "CHECKPOINT_EXPIRED" in cause["message"], cause
    assert not cause["restartedTasks"]
