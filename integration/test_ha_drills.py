"""Failover drills of ZooKeeper HA (issue 6, item 6), against a real ZooKeeper (one node and a
three-node ensemble) with real master and TaskExecutor processes.

(a) SIGKILL of the leading master during a checkpointed streaming job: a standby leads and adopts
    the running tasks (issue 18: nothing restored), the committed output is exactly the expected.
(b) The leader's ZooKeeper session expires while its process lives (SIGSTOP): a standby leads; the
    old leader, woken up, steps down, and calls carrying its old leader session id are refused.
(c) One node of the three-node ensemble restarts: no leadership change, no job restart.
(d) Ten failovers in a row with two jobs running: both finish with exact output.
(e) A job that finished before the failover is not run again.

Each drill prints its takeover time (kill -> new leader -> job RUNNING); run with ``-s`` to see it.
The job (``tests/ha_jobs.py``, shared with the takeover benchmark) is a keyed running sum slowed down
while a flag file exists, checkpointed every 300 ms, with restart-strategy fixed-delay 0 ms.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.ha_jobs import (
    committed,
    completed_checkpoints,
    expected_running_sums,
    running_with_checkpoint_after,
    submit_checkpointed_sum,
    takeover,
    wait_until,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

N = 100_000


def _leader_information(cluster: Any, component: str) -> tuple[str, str]:
    """(session id, address) that ZooKeeper holds for ``component``'s leader."""
    from kazoo.client import KazooClient

    from yarnflink.highavailability.leaderelection import LeaderInformation
    from yarnflink.highavailability.zookeeper.client import ZooKeeperPaths

    config = cluster.config
    client = KazooClient(hosts=str(config.get("high-availability.zookeeper.quorum")), timeout=10)
    client.start(15)
    try:
        data = client.get(ZooKeeperPaths.from_config(config).connection_info(component))[0]
    finally:
        client.stop()
        client.close()
    info = LeaderInformation.from_bytes(data)
    return info.session_id, info.address


def _finish_and_check(cluster: Any, job_id: str, out: Path, flag: Path, n: int = N) -> dict[str, Any]:
    flag.unlink(missing_ok=True)
    with cluster.rest() as rest:
        wait_until(lambda: rest.job(job_id)["state"] in ("FINISHED", "FAILED", "CANCELED"), 180, f"job {job_id} to end")
        details = rest.job(job_id)
    assert details["state"] == "FINISHED"
    got = committed(out)
    expected = expected_running_sums(n)
    assert len(got) == len(expected), f"{len(got)} committed records, expected {len(expected)}"
    assert got == expected  # nothing lost, nothing duplicated across the failover
    assert not [f for f in os.listdir(out) if f.endswith(".inprogress")]
    return details


def _start_job(
    cluster: Any, tmp_path: Path, name: str = "job", n: int = N, pause_s: float = 0.0005
) -> tuple[str, Path, Path]:
    """A job that runs at least n/2 x pause_s seconds until its flag file goes."""
    flag = tmp_path / f"{name}.slow"
    flag.touch()
    out = tmp_path / f"{name}.out"
    job_id = submit_checkpointed_sum(
        cluster.leader_url(), n=n, out=out, checkpoints=tmp_path / f"{name}.ckpt", flag=flag, name=name, pause_s=pause_s
    )
    return job_id, out, flag


def _wait_checkpointed(cluster: Any, job_id: str, after: int = 0) -> int:
    with cluster.rest() as rest:
        return int(
            wait_until(
                lambda: running_with_checkpoint_after(rest, job_id, after),
                120,
                f"job {job_id} running with a completed checkpoint",
            )
        )


@pytest.fixture(params=["standalone", "ensemble"])
def quorum(request: pytest.FixtureRequest) -> str:
    if request.param == "standalone":
        return str(request.getfixturevalue("zookeeper").address)
    return str(request.getfixturevalue("ensemble").hosts)


# ---------------------------------------------------------------------------- (a)
def test_a_sigkill_of_the_leader_is_taken_over_without_restoring_the_job(
    ha_cluster: Callable[..., Any], quorum: str, tmp_path: Path
) -> None:
    cluster = ha_cluster(quorum)
    job_id, out, flag = _start_job(cluster, tmp_path)
    _wait_checkpointed(cluster, job_id)
    t = takeover(cluster, [job_id])
    print(f"\n(a) {t.line()}")
    assert t.new_leader != t.old_leader
    with cluster.rest() as rest:
        stats = rest.get_json(f"/jobs/{job_id}/checkpoints")
        restored = (stats.get("latest") or {}).get("restored")
        # issue 18: the new leader adopts the running tasks; nothing is restored
        assert restored is None, f"the job was restored from a checkpoint: {stats.get('latest')}"
    _finish_and_check(cluster, job_id, out, flag)


# ---------------------------------------------------------------------------- (b)
def test_b_a_leader_whose_session_expired_steps_down_and_is_fenced(
    ha_cluster: Callable[..., Any], zookeeper: Any, tmp_path: Path
) -> None:
    from yarnflink.highavailability.services import RESOURCE_MANAGER

    cluster = ha_cluster(zookeeper.address)
    job_id, out, flag = _start_job(cluster, tmp_path)
    _wait_checkpointed(cluster, job_id)
    old_session, old_rm = _leader_information(cluster, RESOURCE_MANAGER)
    t = takeover(cluster, [job_id], sig=signal.SIGSTOP)  # alive, but silent: its session expires
    print(f"\n(b) {t.line('SIGSTOP')}")
    old_log = cluster.workdir / f"master-{t.old_leader}.log"
    os.kill(cluster.master_pids[t.old_leader], signal.SIGCONT)
    wait_until(
        lambda: "lost leadership" in old_log.read_text(errors="replace"), 60, "the woken-up old leader to step down"
    )
    new_session, new_rm = _leader_information(cluster, RESOURCE_MANAGER)
    assert new_session != old_session and new_rm != old_rm

    # what the old leader would send with its old session id: refused by the new leader's
    # ResourceManager and by every TaskExecutor
    with cluster.rest() as rest:
        # the takeover waited for the job, which 2 slots of one TaskExecutor can run: the other
        # TaskExecutor may still be on its way to the new leader
        def both_registered() -> list[str]:
            paths = [tm["path"] for tm in rest.taskmanagers()]
            return paths if len(paths) >= 2 else []

        tes = wait_until(both_registered, 60, "both TaskExecutors registered at the new leader")
    assert len(tes) == 2
    config = {k: str(v) for k, v in cluster.config.to_dict().items()}
    forged = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("forge_rpc.py")), json.dumps(config), old_session, new_rm, *tes],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(Path(__file__).parents[1]),
    )
    assert forged.returncode == 0, forged.stderr
    codes = json.loads(forged.stdout)
    assert len(codes) == 1 + 2 * len(tes)
    assert set(codes.values()) == {"FAILED_PRECONDITION"}, codes
    te_logs = "".join(p.read_text(errors="replace") for p in cluster.workdir.glob("taskexecutor-*.log"))
    assert "rejected RequestSlot from stale ResourceManager" in te_logs
    stale = "Status.HighAvailability.StaleRpcsRejected"
    with cluster.rest() as rest:
        for tm in rest.taskmanagers():
            wait_until(
                lambda: any(
                    m["id"] == stale and float(m["value"]) >= 2
                    for m in rest.get_json(f"/taskmanagers/{tm['id']}/metrics", get=stale)
                ),
                60,
                f"{stale} of {tm['id']}",
            )
    _finish_and_check(cluster, job_id, out, flag)


# ---------------------------------------------------------------------------- (c)
def _zookeeper_server_of(pid: int, ensemble: Any) -> Any:
    """The ensemble's server that process ``pid`` is connected to."""
    import psutil

    ports = {c.raddr.port for c in psutil.Process(pid).net_connections(kind="tcp") if c.raddr}
    return next((s for s in ensemble.servers if s.client_port in ports), None)


def test_c_a_restarting_ensemble_node_changes_no_leadership_and_restarts_no_job(
    ha_cluster: Callable[..., Any], ensemble: Any, tmp_path: Path
) -> None:
    # a connection moving to another server is SUSPENDED for a moment: leaders keep leading
    cluster = ha_cluster(
        ensemble.hosts,
        extra={
            "high-availability.zookeeper.client.tolerate-suspended-connections": "true",
            "high-availability.zookeeper.client.session-timeout": "4 s",
        },
    )
    job_id, out, flag = _start_job(cluster, tmp_path)
    seen = _wait_checkpointed(cluster, job_id)
    from yarnflink.highavailability.services import RESOURCE_MANAGER

    before = _leader_information(cluster, RESOURCE_MANAGER)
    leader = cluster.leader_index()
    with cluster.rest() as rest:
        restarts = rest.job(job_id)["numRestarts"]
    # the follower the leading master (else a TaskExecutor) is connected to; restarting the
    # ensemble's leader would stop the quorum for an election, longer than the session lease
    server = _zookeeper_server_of(cluster.master_pids[leader], ensemble)
    leaders_own = server is not None and server.mode() == "follower"
    if not leaders_own:
        server = next(
            (
                s
                for s in (_zookeeper_server_of(p, ensemble) for p in cluster.te_pids)
                if s is not None and s.mode() == "follower"
            ),
            None,
        )
    if server is None:
        server = next(s for s in ensemble.servers if s.mode() == "follower")
    t0 = time.monotonic()
    mode = server.restart()
    whose = "the leading master's" if leaders_own else "a follower"
    print(
        f"\n(c) ZooKeeper server {server.client_port} ({whose}, {mode} again) restarted in "
        f"{time.monotonic() - t0:.2f}s; no takeover"
    )
    _wait_checkpointed(cluster, job_id, seen)  # still checkpointing after the restart
    assert _leader_information(cluster, RESOURCE_MANAGER) == before
    assert cluster.leader_index() == leader
    with cluster.rest() as rest:
        assert rest.job(job_id)["numRestarts"] == restarts
    details = _finish_and_check(cluster, job_id, out, flag)
    assert details["numRestarts"] == restarts
    assert "lost leadership" not in (cluster.workdir / f"master-{leader}.log").read_text(errors="replace")


# ---------------------------------------------------------------------------- (d)
def test_d_ten_failovers_in_a_row_under_load(ha_cluster: Callable[..., Any], zookeeper: Any, tmp_path: Path) -> None:
    # three masters: a killed one restarts while the next failover is prepared
    cluster = ha_cluster(zookeeper.address, masters=3)
    # two jobs on both slots of both TaskExecutors, slowed down to outlast the ten failovers
    jobs = [_start_job(cluster, tmp_path, name=f"job{i}", pause_s=0.004) for i in range(2)]
    seen = {job_id: _wait_checkpointed(cluster, job_id) for job_id, _, _ in jobs}
    times = []
    restarting: list[int] = []
    for i in range(10):
        while len(restarting) > 1:  # at least one standby up
            cluster.wait_started(restarting.pop(0))
        t = takeover(cluster, [job_id for job_id, _, _ in jobs])
        print(f"\n(d) failover {i + 1}: {t.line()}")
        times.append(t.to_running_s)
        cluster.restart(t.old_leader, wait=False)  # a standby again for a later failover
        restarting.append(t.old_leader)
        with cluster.rest() as rest:
            for job_id, _, _ in jobs:  # a fresh checkpoint under the new leader before the next kill
                seen[job_id] = int(
                    wait_until(
                        lambda: running_with_checkpoint_after(rest, job_id, 0) and completed_checkpoints(rest, job_id),
                        120,
                        f"a checkpoint of {job_id} after failover {i + 1}",
                    )
                )
    print(f"\n(d) takeover times: {', '.join(f'{x:.2f}' for x in times)} s")
    for job_id, out, flag in jobs:
        _finish_and_check(cluster, job_id, out, flag)


# ---------------------------------------------------------------------------- (e)
def _snapshot(path: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in path.iterdir()}


def test_e_a_job_finished_before_the_failover_is_not_run_again(
    ha_cluster: Callable[..., Any], ensemble: Any, tmp_path: Path
) -> None:
    cluster = ha_cluster(ensemble.hosts)
    done_id, done_out, done_flag = _start_job(cluster, tmp_path, name="done", n=2_000)
    done_flag.unlink()
    with cluster.rest() as rest:
        wait_until(lambda: rest.job(done_id)["state"] == "FINISHED", 120, "the short job to finish")
    assert committed(done_out) == expected_running_sums(2_000)
    files = _snapshot(done_out)
    job_id, out, flag = _start_job(cluster, tmp_path, name="running")
    _wait_checkpointed(cluster, job_id)
    t = takeover(cluster, [job_id])
    print(f"\n(e) {t.line()}")
    _wait_checkpointed(cluster, job_id)  # the new leader has recovered what there was to recover
    with cluster.rest() as rest:
        overview = {j["jid"]: j["state"] for j in rest.jobs_overview()}
    assert overview.get(done_id) in (None, "FINISHED"), overview
    assert _snapshot(done_out) == files  # not a byte written again
    _finish_and_check(cluster, job_id, out, flag)
    assert _snapshot(done_out) == files
