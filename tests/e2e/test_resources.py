"""Resource management end to end: real master and TaskExecutor processes on loopback.

Sessions sharing TaskExecutors between jobs, TaskExecutors started on demand and released when
idle, a SIGKILLed TaskExecutor noticed through failed heartbeats, rate-limited worker starts,
slot sharing groups isolated in their own slots, fine-grained slots carved to fit, and a
standalone master that only uses TaskExecutors that register by themselves.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from yarnflink import SlotSharingGroup, StreamExecutionEnvironment
from yarnflink.client.rest_client import RestClient
from yarnflink.common.config import Configuration
from yarnflink.deployment.local.cluster import start_local_cluster, stop_process

from .conftest import Cluster, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

BASE = {
    "rest.port": "0",
    "jobmanager.rpc.port": "0",
    "heartbeat.interval": "500 ms",
    "heartbeat.timeout": "60 s",  # long: losses below are noticed through failed heartbeats
    "heartbeat.rpc-failure-threshold": "2",
}


def start(workdir: Path, taskexecutors: int, slots: int, **conf: str) -> Cluster:
    config = Configuration({**BASE, "taskmanager.numberOfTaskSlots": str(slots), **conf})
    proc, info = start_local_cluster(config, taskexecutors=taskexecutors, workdir=workdir, detached=False)
    return Cluster(proc, info, workdir)


def _slow() -> Any:
    def slow(rb: Any) -> Any:
        """A source's batch, slowly and dropped: jobs that run until cancelled, using little CPU."""
        time.sleep(0.05)
        return rb.slice(0, 0)

    return slow  # a nested function travels by value (TaskExecutors cannot import this module)


slow = _slow()


def running(cluster: Cluster, job_id: str) -> bool:
    d = cluster.rest.job(job_id)
    return d["state"] == "RUNNING" and all(v["status"] == "RUNNING" for v in d["vertices"])


def tm_ids(cluster: Cluster) -> set[str]:
    return {tm["id"] for tm in cluster.rest.taskmanagers()}


# ---------------------------------------------------------------------- sessions
def test_three_jobs_run_at_once_in_one_session_and_their_slots_return(tmp_path: Path) -> None:
    cluster = start(
        tmp_path,
        taskexecutors=2,
        slots=3,
        **{"slotmanager.number-of-slots.max": "6", "cluster.evenly-spread-out-slots": "true"},
    )
    try:
        cluster.executor()
        clients = []
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(2)
        env.from_sequence(1, 10**12).map_batches(slow).print()
        clients.append(env.execute_async("two-subtasks"))
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(1)
        # two slot sharing groups: isolated, so this job takes two slots; "work" holds two tasks
        (
            env.from_sequence(1, 10**12)
            .slot_sharing_group("src")
            .map_batches(slow)
            .slot_sharing_group("work")
            .disable_chaining()
            .map_batches(slow)
            .print()
        )
        clients.append(env.execute_async("two-groups"))
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(2)
        env.from_sequence(1, 10**12).map_batches(slow).print()
        clients.append(env.execute_async("two-more"))
        jobs = [c.get_job_id() for c in clients]
        wait_until(lambda: all(running(cluster, j) for j in jobs), message="three jobs running at once")
        assert {j["jid"]: j["state"] for j in cluster.rest.jobs_overview()} == {j: "RUNNING" for j in jobs}

        tms = cluster.rest.taskmanagers()
        assert len(tms) == 2 and sum(tm["freeSlots"] for tm in tms) == 0
        holders = [s["jobId"] for tm in tms for s in tm["slots"]]
        assert sorted(holders) == sorted(jobs * 2)  # each job holds two slots, on shared TaskExecutors
        for tm in tms:  # slots spread evenly: every TaskExecutor works for several jobs
            assert len({s["jobId"] for s in tm["slots"]}) >= 2
        # the isolated groups of the second job sit in different slots
        two_groups = cluster.rest.job(jobs[1])
        slot_of = {
            (v["slotSharingGroup"], v["subtasks"][0]["taskmanager-id"], v["subtasks"][0]["allocation-id"])
            for v in two_groups["vertices"]
        }
        assert len(two_groups["vertices"]) == 3 and len(slot_of) == 2  # src alone, both "work" tasks together
        assert len({(tm, alloc) for _, tm, alloc in slot_of}) == 2

        # GET /taskmanagers/:id shows the tasks in each slot: which subtasks share which slot
        in_slots = []
        for tm in tms:
            r = httpx.get(f"{cluster.rest_url}/taskmanagers/{tm['id']}", headers=cluster.auth, timeout=30)
            assert r.status_code == 200, r.text
            assert r.json()["id"] == tm["id"] and r.json()["totalResource"]["cpuCores"] == 3
            for s in r.json()["slots"]:
                if s["jobId"]:
                    assert s["tasks"] and {t["job-id"] for t in s["tasks"]} == {s["jobId"]}
                    in_slots.append((tm["id"], s["allocationId"], s["jobId"], [t["task-name"] for t in s["tasks"]]))
        assert len(in_slots) == 6
        mine = sorted(len(tasks) for _, _, job, tasks in in_slots if job == jobs[1])
        assert mine == [1, 2]
        r = httpx.get(f"{cluster.rest_url}/taskmanagers/{'f' * 12}", headers=cluster.auth, timeout=30)
        assert r.status_code == 404 and r.json()["errors"]

        for c in clients:
            c.cancel()
        wait_until(lambda: all(cluster.rest.job(j)["state"] == "CANCELED" for j in jobs), message="jobs canceled")
        wait_until(lambda: cluster.rest.overview()["slots-available"] == 6, message="slots back")
        assert tm_ids(cluster) == {tm["id"] for tm in tms}  # the same TaskExecutors, kept
    finally:
        cluster.stop()


def test_fine_grained_slots_are_carved_to_fit_each_slot_sharing_group(tmp_path: Path) -> None:
    cluster = start(
        tmp_path,
        taskexecutors=1,
        slots=4,
        **{
            "cluster.fine-grained-resource-management.enabled": "true",
            "slotmanager.number-of-slots.max": "4",
            "taskmanager.cpu.cores": "4",
            "taskmanager.memory.task.heap.size": "400 mb",
        },
    )
    try:
        cluster.executor()
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(1)
        heavy = SlotSharingGroup("heavy", cpu_cores=3.0, task_heap_memory_mb=250)
        env.from_sequence(1, 10**12).map_batches(slow).slot_sharing_group(heavy).print()
        client = env.execute_async("fine")
        wait_until(lambda: running(cluster, client.get_job_id()), message="job running")
        (tm,) = cluster.rest.taskmanagers()
        carved = sorted((s["resource"]["cpuCores"], s["resource"]["taskHeapMemory"] >> 20) for s in tm["slots"])
        # the source's default group takes the default slot (4 cpu / 4 slots), the map its 3 cpu
        assert carved == [(1.0, 100), (3.0, 250)]
        assert tm["freeResource"]["cpuCores"] == 0 and tm["freeSlots"] == 0
        client.cancel()
    finally:
        cluster.stop()


# ---------------------------------------------------------------------- TaskExecutors come and go
def test_taskexecutors_are_started_on_demand_and_released_when_idle(tmp_path: Path) -> None:
    cluster = start(
        tmp_path,
        taskexecutors=1,
        slots=1,
        **{"slotmanager.number-of-slots.max": "3", "resourcemanager.taskmanager-timeout": "1 s"},
    )
    try:
        (initial,) = tm_ids(cluster)
        cluster.executor()
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(3)
        env.from_sequence(1, 10**12).map_batches(slow).print()
        client = env.execute_async("needs-three")
        wait_until(lambda: running(cluster, client.get_job_id()), message="job running on started TaskExecutors")
        tms = cluster.rest.taskmanagers()
        assert len(tms) == 3 and initial in {tm["id"] for tm in tms}  # two started for the job, no more
        hosts = {s["taskmanager-id"] for v in cluster.rest.job(client.get_job_id())["vertices"] for s in v["subtasks"]}
        assert hosts == {tm["id"] for tm in tms}
        started = [psutil.Process(tm["hardware"]["pid"]) for tm in tms if tm["id"] != initial]

        client.cancel()
        wait_until(lambda: tm_ids(cluster) == {initial}, message="the idle started TaskExecutors released")
        for p in started:
            p.wait(timeout=30)  # their processes ended
        # the initial TaskExecutor is the minimum: idle as long as the released ones, it stays
        assert tm_ids(cluster) == {initial} and cluster.rest.overview()["slots-total"] == 1
    finally:
        cluster.stop()


def test_a_sigkilled_worker_is_noticed_its_tasks_fail_and_it_is_replaced(tmp_path: Path) -> None:
    """The local driver sees its child process end (as YARN reports a completed container)."""
    cluster = start(tmp_path, taskexecutors=2, slots=1, **{"slotmanager.number-of-slots.max": "2"})
    try:
        cluster.executor()
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(2)
        env.from_sequence(1, 10**12).map_batches(slow).print()
        client = env.execute_async("victim")
        job_id = client.get_job_id()
        wait_until(lambda: running(cluster, job_id), message="job running")
        victim = cluster.rest.taskmanagers()[0]
        os.kill(victim["hardware"]["pid"], signal.SIGKILL)
        wait_until(lambda: victim["id"] not in tm_ids(cluster), timeout=30, message="the killed TaskExecutor removed")
        wait_until(
            lambda: any(
                e["taskManagerId"] == victim["id"]
                for e in cluster.rest.exceptions(job_id)["exceptionHistory"]["entries"]
            ),
            timeout=30,
            message="its tasks failed",
        )
        # an active ResourceManager keeps the minimum: a new TaskExecutor takes the lost one's place
        wait_until(lambda: len(tm_ids(cluster)) == 2, timeout=60, message="a replacement TaskExecutor")
        assert victim["id"] not in tm_ids(cluster)
    finally:
        cluster.stop()


def test_failed_worker_starts_are_rate_limited(tmp_path: Path) -> None:
    blocker = socket.create_server(("127.0.0.1", 0))  # every TaskExecutor fails to bind its data port
    try:
        cluster = start(
            tmp_path,
            taskexecutors=0,
            slots=1,
            **{
                "taskmanager.data.port": str(blocker.getsockname()[1]),
                "resourcemanager.start-worker.max-failure-rate": "1",
                "resourcemanager.start-worker.retry-interval": "6 s",
            },
        )
        try:
            cluster.executor()
            env = StreamExecutionEnvironment.get_execution_environment()
            env.from_sequence(1, 10).print()
            env.execute_async("never-runs")

            def attempts() -> list[float]:
                log = (tmp_path / "master.log").read_text(errors="replace")
                return [
                    datetime.strptime(m, "%Y-%m-%d %H:%M:%S,%f").timestamp()
                    for m in re.findall(r"^(\S+ \S+) INFO \S+: requested TaskExecutor", log, re.M)
                ]

            wait_until(lambda: len(attempts()) >= 3, timeout=90, message="three start attempts")
            t = attempts()
            assert len(list(tmp_path.glob("taskexecutor-*.out"))) >= 3  # real processes, each failed
            # one failure a minute is allowed (the second attempt follows at once); the second
            # failure pauses starts for the retry interval
            assert t[2] - t[1] >= 5.5, t
            assert "ended before it registered" in (tmp_path / "master.log").read_text()
        finally:
            cluster.stop()
    finally:
        blocker.close()


# ---------------------------------------------------------------------- standalone
def test_a_standalone_master_uses_only_taskexecutors_that_register_by_themselves(tmp_path: Path) -> None:
    from yarnflink.security.client import RestCredentials, register
    from yarnflink.security.material import ensure_cluster_security, private_directory

    private_directory(tmp_path)
    config = ensure_cluster_security(
        Configuration({**BASE, "taskmanager.numberOfTaskSlots": "1"}), tmp_path / "security"
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
    try:
        wait_until(info_file.exists, timeout=60, message="master up")
        import json

        info = json.loads(info_file.read_text())
        register(info["rest_url"], RestCredentials.from_config(config))
        rest = RestClient(info["rest_url"])

        def taskexecutor(resource_id: str) -> None:
            procs.append(
                subprocess.Popen(
                    cli
                    + ["taskexecutor", "start", "--master", info["rpc_address"], "--resource-id", resource_id, *dyn],
                    stdin=subprocess.DEVNULL,
                )
            )

        taskexecutor("te-by-hand-1")
        wait_until(lambda: [tm["id"] for tm in rest.taskmanagers()] == ["te-by-hand-1"], message="registered")
        cluster = Cluster(procs[0], info, tmp_path)
        cluster.executor()
        first, second = [], []
        for out in (first, second):
            env = StreamExecutionEnvironment.get_execution_environment()
            env.from_sequence(1, 10**12).map_batches(slow).print()
            out.append(env.execute_async("one-slot").get_job_id())
        wait_until(lambda: running(cluster, first[0]), message="first job running")
        assert not running(cluster, second[0])  # it waits for a slot
        taskexecutor("te-by-hand-2")  # only this one can serve the second job
        wait_until(lambda: running(cluster, second[0]), message="second job running")
        assert {tm["id"] for tm in rest.taskmanagers()} == {"te-by-hand-1", "te-by-hand-2"}
        hosts = {s["taskmanager-id"] for v in rest.job(second[0])["vertices"] for s in v["subtasks"]}
        assert hosts == {"te-by-hand-2"}
        assert not list(tmp_path.glob("taskexecutor-*.log"))  # the master started none

        # SIGKILL: no driver watches these processes and heartbeat.timeout is 60 s, so only the
        # failed heartbeat RPCs (heartbeat.rpc-failure-threshold) can notice it this soon
        procs[-1].kill()
        # 45 s: room for a loaded CI machine, still below the 60 s heartbeat.timeout that would
        # notice the loss without the failed heartbeat RPCs
        wait_until(
            lambda: {tm["id"] for tm in rest.taskmanagers()} == {"te-by-hand-1"},
            timeout=45,
            message="the killed TaskExecutor removed",
        )
        assert rest.overview()["slots-total"] == 1
        wait_until(
            lambda: any(
                e["taskManagerId"] == "te-by-hand-2" for e in rest.exceptions(second[0])["exceptionHistory"]["entries"]
            ),
            timeout=45,
            message="its tasks failed",
        )
        rest.close()
    finally:
        for p in reversed(procs):
            stop_process(p.pid)
