"""Cancelling a job whose user function is slow inside a large batch (issue 22, failure 4): the
task stops between two records, a function stuck in one call is interrupted, and a function that
swallows the interrupt makes its TaskExecutor exit after ``task.cancellation.timeout``, whereupon
the session starts a new one. A failover that cancels such a task restarts within seconds too.
Real master and TaskExecutor processes; ``yarnflink cancel``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .cli_runner import JobCli
from .conftest import Cluster, start_cluster, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

# 65 536-record batches (the sequence source's), 20 ms per record: one batch takes ~22 minutes
SLOW_JOB = """
import os, sys, time
from yarnflink import DiscardingSink, StreamExecutionEnvironment

out, _checkpoints, flag = sys.argv[1:4]

def slow(x):
    if not os.path.exists(out):
        open(out, "w").close()  # the test cancels once the batch is under way
    time.sleep(0.02)
    return x

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
env.from_sequence(1, 10**9).map(slow).sink_to(DiscardingSink())
env.execute("slow map")
"""

# one call that never returns and swallows every interrupt (it notes each one in ``flag``)
STUBBORN_JOB = """
import os, sys, time
from yarnflink import DiscardingSink, StreamExecutionEnvironment

out, _checkpoints, flag = sys.argv[1:4]

def stubborn(x):
    open(out, "w").close()
    while True:
        try:
            time.sleep(0.05)
        except BaseException as e:
            with open(flag + ".interrupts", "a") as f:
                f.write(type(e).__name__ + "\\n")

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
env.from_sequence(1, 10**9).map(stubborn).sink_to(DiscardingSink())
env.execute("stubborn map")
"""


# two independent pipelines; with full failover the failure of the second (once the first is inside
# its slow batch) cancels the first, which must not hold the restart up for the batch
FAILOVER_JOB = """
import os, sys, time
from yarnflink import DiscardingSink, StreamExecutionEnvironment

out, _checkpoints, flag = sys.argv[1:4]

def slow(x):
    if not os.path.exists(out):
        open(out, "w").close()
    time.sleep(0.02)
    return x

def fail_once(x):
    if not os.path.exists(flag + ".failed"):
        while not os.path.exists(out):  # the slow map is inside its batch
            time.sleep(0.01)
        open(flag + ".failed", "w").close()
        raise RuntimeError("failing once")
    return x

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
for k, v in {
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.delay": "0 ms",
    "jobmanager.execution.failover-strategy": "full",
}.items():
    env.get_config().set(k, v)
env.from_sequence(1, 10**9).name("Slow source").map(slow).sink_to(DiscardingSink())
env.from_sequence(1, 10**9).name("Failing source").map(fail_once).sink_to(DiscardingSink())
env.execute("failover of a slow map")
"""


@pytest.fixture(scope="module")
def cancel_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One TaskExecutor with one slot; a TaskExecutor that exits is replaced (the local driver)."""
    c = start_cluster(tmp_path_factory.mktemp("cancel"), taskexecutors=1, slots=1)
    yield c
    c.stop()


def job_state(cluster: Cluster, job_id: str) -> str:
    return str(cluster.rest.job(job_id)["state"])


def test_a_slow_map_inside_a_large_batch_is_cancelled_within_seconds(cancel_cluster: Cluster, tmp_path: Path) -> None:
    cli = JobCli(cancel_cluster, tmp_path, SLOW_JOB)
    job_id = cli.submit((), ())
    wait_until(lambda: cli.out.exists(), timeout=60, message="the slow map's first record")
    pids = cancel_cluster.taskexecutor_pids()
    r = cli("cancel", "-m", cancel_cluster.rest_url, job_id)
    assert r.returncode == 0, r.stderr
    # the map stops between two records (no timeout of the cancellation is involved)
    wait_until(lambda: job_state(cancel_cluster, job_id) == "CANCELED", timeout=10, message="CANCELED")
    assert cancel_cluster.taskexecutor_pids() == pids  # the TaskExecutor lives on


def test_a_function_that_swallows_interrupts_makes_its_taskexecutor_exit(
    cancel_cluster: Cluster, tmp_path: Path
) -> None:
    cli = JobCli(cancel_cluster, tmp_path, STUBBORN_JOB)
    wait_until(lambda: len(cancel_cluster.taskexecutor_pids()) == 1, timeout=60, message="one TaskExecutor")
    (old_pid,) = cancel_cluster.taskexecutor_pids()
    flags = ("-D", "task.cancellation.interval=200 ms", "-D", "task.cancellation.timeout=2 s")
    job_id = cli.submit(flags, ())
    wait_until(lambda: cli.out.exists(), timeout=60, message="the stubborn map's first record")
    r = cli("cancel", "-m", cancel_cluster.rest_url, job_id)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: job_state(cancel_cluster, job_id) == "CANCELED", timeout=30, message="CANCELED")
    # interrupted (within the first second, then every 200 ms), swallowed, then the process exited
    interrupts = Path(str(cli.flag) + ".interrupts").read_text().split()
    assert interrupts and set(interrupts) == {"TaskInterrupted"}, interrupts
    wait_until(lambda: not pid_alive(old_pid), timeout=30, message=f"TaskExecutor {old_pid} to exit")
    # the session starts a new TaskExecutor, and it runs jobs
    wait_until(
        lambda: [p for p in cancel_cluster.taskexecutor_pids() if p != old_pid],
        timeout=60,
        message="a new TaskExecutor",
    )


def test_a_failover_does_not_wait_for_a_slow_map_it_cancels(cancel_cluster: Cluster, tmp_path: Path) -> None:
    cli = JobCli(cancel_cluster, tmp_path, FAILOVER_JOB)
    wait_until(lambda: len(cancel_cluster.taskexecutor_pids()) == 1, timeout=60, message="one TaskExecutor")
    job_id = cli.submit((), ())
    failed = Path(str(cli.flag) + ".failed")
    wait_until(failed.exists, timeout=60, message="the failure")

    def restarted() -> bool:
        d = cancel_cluster.rest.job(job_id)
        subtasks = [s for v in d["vertices"] for s in v["subtasks"]]
        return d["numRestarts"] >= 1 and all(s["attempt"] >= 1 and s["status"] == "RUNNING" for s in subtasks)

    # the slow map's task is cancelled between two records: the restart follows within seconds
    wait_until(restarted, timeout=15, message="every task RUNNING again after the restart")
    r = cli("cancel", "-m", cancel_cluster.rest_url, job_id)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: job_state(cancel_cluster, job_id) == "CANCELED", timeout=10, message="CANCELED")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its parent) counts as gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
