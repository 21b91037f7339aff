"""Adaptive scheduling end to end (issue 3, item 8): the AdaptiveBatch scheduler sizes a vertex
whose parallelism was left unset by its input, speculative execution overtakes a slow subtask, and
the Adaptive scheduler rescales a streaming job as TaskExecutors come and go. Real master and
TaskExecutor processes on loopback."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from yarnflink import FileSink, MapFunction, RuntimeExecutionMode, StreamExecutionEnvironment
from yarnflink.client.rest_client import RestClient
from yarnflink.common.config import Configuration
from yarnflink.deployment.local.cluster import stop_process

from .conftest import Cluster, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def read_jsonl(directory: Path) -> list:  # type: ignore[type-arg]
    out = []
    for f in sorted(glob.glob(os.path.join(directory, "part-*"))):
        with open(f) as fh:
            out.extend(json.loads(line) for line in fh)
    return out


def batch_sum_job(tmp_path: Path, name: str, n: int) -> tuple[str, Path]:
    """Sums per key (x % 10) over 0..n-1; the source's parallelism is set, the rest is not."""
    out = tmp_path / name
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.set_max_parallelism(8)  # the keyed exchange writes one subpartition per key group
    env.get_config().set("execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task", "64 kb")
    env.get_config().set("execution.batch.adaptive.auto-parallelism.max-parallelism", "4")
    (
        env.from_sequence(0, n - 1)
        .set_parallelism(2)
        .map(lambda x: (x % 10, x))
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .name("Sum")
        .map(lambda t: [t[0], t[1]])
        .sink_to(FileSink(str(out), format="jsonl"))
    )
    return env.execute(name).get_job_id(), out


def test_a_batch_vertex_left_unset_gets_a_parallelism_that_follows_its_input_size(
    cluster: Cluster, executor, tmp_path: Path
) -> None:
    sizes = {}
    for name, n in (("small", 100), ("big", 300_000)):
        job_id, out = batch_sum_job(tmp_path, name, n)
        details = cluster.rest.job(job_id)
        assert details["state"] == "FINISHED"
        by_name = {v["name"].split(" ->")[0]: v for v in details["vertices"]}
        sizes[name] = next(v["parallelism"] for k, v in by_name.items() if "Sum" in v["name"])
        assert next(v["parallelism"] for v in details["vertices"] if "Source" in v["name"]) == 2
        expected: dict[int, int] = {}
        for x in range(n):
            expected[x % 10] = expected.get(x % 10, 0) + x
        assert sorted(map(tuple, read_jsonl(out))) == sorted(expected.items())
    # 100 numbers are well under 64 kb: one subtask; 300 000 (several MB as Arrow) hit the maximum
    assert sizes == {"small": 1, "big": 4}


def slow_first_attempt() -> MapFunction:
    """Subtask 0's first attempt stalls (at most 60 s) until it is cancelled; every other attempt
    is fast. (Defined in a function so that cloudpickle ships the class by value.)"""

    class SlowFirstAttempt(MapFunction):
        def open(self, runtime_context: Any) -> None:
            self.is_running = runtime_context._ctx.is_running
            self.slow = runtime_context.get_index_of_this_subtask() == 0 and runtime_context.get_attempt_number() == 0

        def map(self, value: Any) -> Any:
            if self.slow:
                self.slow = False
                deadline = time.monotonic() + 60
                while self.is_running() and time.monotonic() < deadline:
                    time.sleep(0.05)
            return value * 10

    return SlowFirstAttempt()


def test_a_slow_subtask_is_overtaken_by_its_speculative_attempt_on_the_other_taskexecutor(
    cluster: Cluster, executor, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.set_parallelism(2)
    for key, value in {
        "execution.batch.speculative.enabled": "true",
        "slow-task-detector.check-interval": "200 ms",
        "slow-task-detector.execution-time.baseline-ratio": "0.5",
        "slow-task-detector.execution-time.baseline-lower-bound": "500 ms",
    }.items():
        env.get_config().set(key, value)
    (
        env.from_sequence(0, 199)
        .rebalance()
        .map(slow_first_attempt())
        .name("Slow")
        .rebalance()
        .map(lambda x: x + 1)
        .set_parallelism(1)
        .sink_to(FileSink(str(out), format="jsonl"))
    )
    started = time.monotonic()
    job_id = env.execute("speculative").get_job_id()
    # not the slow attempt's 60 s (counted from its first record, so such a run takes 60 s plus
    # submission and deployment); the margin below is for a loaded CI machine
    assert time.monotonic() - started < 58
    details = cluster.rest.job(job_id)
    assert details["state"] == "FINISHED" and details["numRestarts"] == 0
    slow = next(v for v in details["vertices"] if v["name"].startswith("Slow"))
    sub0 = slow["subtasks"][0]
    assert sub0["status"] == "FINISHED" and sub0["attempt"] == 1  # the speculative attempt won
    others = sub0["other-concurrent-attempts"]
    assert [(o["attempt"], o["status"]) for o in others] == [(0, "CANCELED")]
    assert others[0]["taskmanager-id"] != sub0["taskmanager-id"]  # it ran on the other TaskExecutor
    assert slow["subtasks"][1]["attempt"] == 0 and "other-concurrent-attempts" not in slow["subtasks"][1]
    # every record once: the loser's output was never read
    assert sorted(read_jsonl(out)) == [x * 10 + 1 for x in range(200)]


def held_while(hold: str) -> MapFunction:
    """Doubles its input, but holds the first record while the file ``hold`` exists and the task
    is not cancelled (so a rescale can cancel it at once)."""

    class Hold(MapFunction):
        def open(self, runtime_context: Any) -> None:
            self.is_running = runtime_context._ctx.is_running
            self.held = False

        def map(self, value: Any) -> Any:
            if not self.held:
                self.held = True
                while os.path.exists(hold) and self.is_running():
                    time.sleep(0.05)
            return value * 2

    return Hold()


def test_an_adaptive_streaming_job_follows_taskexecutors_joining_and_leaving(tmp_path: Path) -> None:
    from yarnflink.security.client import RestCredentials, register
    from yarnflink.security.material import ensure_cluster_security, private_directory

    private_directory(tmp_path)
    config = ensure_cluster_security(
        Configuration(
            {
                "rest.port": "0",
                "jobmanager.rpc.port": "0",
                "taskmanager.numberOfTaskSlots": "2",
                "heartbeat.interval": "500 ms",
                "heartbeat.timeout": "60 s",
                "heartbeat.rpc-failure-threshold": "2",
            }
        ),
        tmp_path / "security",
    )
    dyn = [a for k, v in config.to_dict().items() for a in ("-D", f"{k}={v}")]
    cli = [sys.executable, "-m", "yarnflink.cli.main"]
    info_file = tmp_path / "master.json"
    procs = [
        subprocess.Popen(
            cli
            + [
                "master",
                "start",
                "--info-file",
                str(info_file),
                "--workdir",
                str(tmp_path),
                "--log-file",
                str(tmp_path / "master.log"),
                *dyn,
            ],
            stdin=subprocess.DEVNULL,
        )
    ]

    def taskexecutor(resource_id: str) -> subprocess.Popen:  # type: ignore[type-arg]
        procs.append(
            subprocess.Popen(
                cli + ["taskexecutor", "start", "--master", info["rpc_address"], "--resource-id", resource_id, *dyn],
                stdin=subprocess.DEVNULL,
            )
        )
        return procs[-1]

    hold = tmp_path / "hold"
    hold.write_text("")
    results: list[Any] = []
    try:
        wait_until(info_file.exists, timeout=60, message="master up")
        info = json.loads(info_file.read_text())
        register(info["rest_url"], RestCredentials.from_config(config))
        rest = RestClient(info["rest_url"])
        taskexecutor("te-1")
        wait_until(lambda: len(rest.taskmanagers()) == 1, message="te-1 registered")
        Cluster(procs[0], info, tmp_path).executor()

        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(4)
        for key, value in {
            "jobmanager.scheduler": "Adaptive",
            "jobmanager.adaptive-scheduler.resource-stabilization-timeout": "1 s",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": "10",
            "restart-strategy.fixed-delay.delay": "200 ms",
        }.items():
            env.get_config().set(key, value)
        stream = env.from_sequence(0, 999).map(held_while(str(hold))).name("Double")
        runner = threading.Thread(target=lambda: results.extend(stream.execute_and_collect("adaptive")), daemon=True)
        runner.start()
        job_id = wait_until(lambda: next((j["jid"] for j in rest.jobs_overview()), None), message="the job submitted")

        def running_at(p: int) -> bool:
            d = rest.job(str(job_id))
            return d["state"] == "RUNNING" and all(
                v["parallelism"] == p and v["status"] == "RUNNING" for v in d["vertices"]
            )

        # 2 slots of the 4 it wants: it starts with 2 once the slots were stable for 1 s
        wait_until(lambda: running_at(2), timeout=60, message="running at parallelism 2")
        te2 = taskexecutor("te-2")
        wait_until(lambda: running_at(4), timeout=60, message="scaled up to 4 with te-2")
        hosts = {s["taskmanager-id"] for v in rest.job(str(job_id))["vertices"] for s in v["subtasks"]}
        assert hosts == {"te-1", "te-2"}
        te2.kill()  # SIGKILL
        wait_until(lambda: running_at(2), timeout=60, message="scaled down to 2 without te-2")
        details = rest.job(str(job_id))
        assert {s["taskmanager-id"] for v in details["vertices"] for s in v["subtasks"]} == {"te-1"}
        assert details["numRestarts"] == 1  # the loss was a failure; the scale-up was not
        hold.unlink()
        runner.join(timeout=60)
        assert not runner.is_alive()
        assert rest.job(str(job_id))["state"] == "FINISHED"
        assert sorted(results) == [2 * x for x in range(1000)]  # every record once, from the last run
        rest.close()
    finally:
        for p in reversed(procs):
            stop_process(p.pid)
