"""The Adaptive scheduler with checkpointing end to end: a checkpointed streaming keyed aggregation
starts at parallelism 2 on one TaskExecutor, scales up to 4 when a second joins and back to 2 when
that one is SIGKILLed; each rescale restores the latest completed checkpoint at the new
parallelism (source splits, keyed state by key group, the FileSink's pending files). The
committed output must equal a failure-free run's exactly. Real master and TaskExecutor processes
on loopback.

The test module is not importable in the TaskExecutor processes, so cloudpickle ships its
functions by value.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from tests.oracles import committed, running_sums
from yarnflink import FileSink, StreamExecutionEnvironment
from yarnflink.api.environment import set_default_executor
from yarnflink.client.rest_client import RestClient
from yarnflink.common.config import Configuration
from yarnflink.deployment.local.cluster import stop_process

from .conftest import Cluster, wait_until
from .kill_drill import slow_while

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]
cloudpickle.register_pickle_by_value(sys.modules[__name__])

#: 128 source splits (the max parallelism) of 1000 records: a key's 100 records are in one split,
#: so each key's records reach its reducer in order at any parallelism
N = 128_000
KEY_WIDTH = 100


def expected_running_sums() -> list[tuple[int, int]]:
    return running_sums(N, lambda x: x // KEY_WIDTH)


def test_an_adaptive_checkpointed_job_rescales_from_its_latest_checkpoint_exactly_once(tmp_path: Path) -> None:
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

    flag = tmp_path / "slow"
    flag.touch()
    out = tmp_path / "out"
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
            "execution.checkpointing.interval": "200 ms",
            "execution.checkpointing.dir": f"file://{tmp_path / 'checkpoints'}",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": "10",
            "restart-strategy.fixed-delay.delay": "200 ms",
        }.items():
            env.get_config().set(key, value)
        (
            env.from_sequence(0, N - 1)
            .map(slow_while(str(flag), 0.001))
            .map(lambda x: (x // KEY_WIDTH, x))
            .key_by(lambda t: t[0])
            .reduce(lambda a, b: (a[0], a[1] + b[1]))
            .sink_to(FileSink(str(out), format="jsonl"))
        )
        client = env.execute_async("adaptive checkpointed keyed sum")
        job_id = client.get_job_id()

        def checkpoints() -> dict[str, Any]:
            import httpx

            r = httpx.get(f"{info['rest_url']}/jobs/{job_id}/checkpoints", headers=rest.headers, timeout=10)
            r.raise_for_status()
            return dict(r.json())

        def checkpointed_at(p: int, after: int, more: int = 1) -> Any:
            """The id of the latest completed checkpoint once every subtask runs at ``p`` and
            ``more`` checkpoints after ``after`` completed with all of them (2 vertices: 2p tasks)."""
            d = rest.job(job_id)
            if d["state"] != "RUNNING" or any(v["parallelism"] != p or v["status"] != "RUNNING" for v in d["vertices"]):
                return None
            done = [
                h
                for h in checkpoints()["history"]
                if h["status"] == "COMPLETED" and h["id"] > after and h["num_subtasks"] == 2 * p
            ]
            return max(h["id"] for h in done) if len(done) >= more else None

        seen = wait_until(lambda: checkpointed_at(2, 0), timeout=60, message="running at 2, checkpointed")
        te2 = taskexecutor("te-2")
        seen = wait_until(
            lambda: checkpointed_at(4, seen, more=2), timeout=60, message="scaled up to 4 with te-2, checkpointed twice"
        )
        stats = checkpoints()
        assert stats["latest"]["restored"] is not None  # the scale-up restored a checkpoint taken at 2
        restored_up = stats["counts"]["restored"]
        assert {s["taskmanager-id"] for v in rest.job(job_id)["vertices"] for s in v["subtasks"]} == {"te-1", "te-2"}
        te2.kill()  # SIGKILL
        wait_until(lambda: checkpointed_at(2, seen), timeout=60, message="scaled down to 2 without te-2, checkpointed")
        # ... and the scale-down restored one taken at 4
        assert checkpoints()["counts"]["restored"] > restored_up
        details = rest.job(job_id)
        assert details["numRestarts"] == 1  # the loss was a failure; the scale-up was not
        flag.unlink()  # full speed to the end
        client.get_job_execution_result()
        assert rest.job(job_id)["state"] == "FINISHED"
        got = committed(out)
        expected = expected_running_sums()
        assert len(got) == len(expected), f"{len(got)} committed records, expected {len(expected)}"
        assert got == expected  # nothing lost, nothing duplicated
        rest.close()
    finally:
        set_default_executor(None)
        for p in reversed(procs):
            stop_process(p.pid)
