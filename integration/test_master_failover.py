"""Master failover that running jobs do not notice (issue 18, item 6): drills with a real ZooKeeper
and real master and TaskExecutor processes, killed with SIGKILL, SIGSTOP and SIGCONT.

Every job logs each ``open()`` of its functions (``tests/ha_takeover_jobs.py``), so a drill counts
how often each subtask was deployed over the whole drill.

(f) SIGSTOP of the leader until a standby leads, then SIGCONT: the old leader steps down; calls
    with its old session id (ResourceManager side and JobMaster side) are refused by the new
    ResourceManager and by every TaskExecutor (zero stale calls accepted, counted by
    ``Status.HighAvailability.StaleRpcsRejected``); no task is deployed again; output exact.
(g) A TaskExecutor SIGKILLed while no master leads: once a leader is back, region failover
    restarts the lost subtask only (one pipelined region per subtask); output exact.
(h) The leader SIGKILLed while a checkpoint is being finalized (its pointer is in ZooKeeper,
    no task has heard of its completion yet): the new leader has it committed exactly once.
    Deterministic: a test-only key arms the master to SIGKILL itself right there
    (``execution.checkpointing.testing.kill-master-after-pointer``; ``-after-metadata`` in the
    long form: the checkpoint is aborted instead and its directory goes).
(i) A BATCH job with a blocking exchange, the leader SIGKILLed once its first stage finished: the
    first stage does not run again (its executions counted).

Short forms run in the suite (each well under 20 s of drill on a quiet machine). (f), (h) and (i)
share one cluster (``shared_ha_cluster``: its start, ~10 s of Python imports on the loaded 2-core
VM, is paid once; a master killed by a drill is started again as a standby before the next);
(g) kills a TaskExecutor and has a cluster of its own; ``YARNFLINK_HA_DRILL_FULL=1`` (``scripts/ha-drills``) runs the long forms: more
records, three SIGSTOP rounds, both finalize windows.
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

from tests.ha_jobs import running_with_checkpoint_after, takeover, wait_until, with_standbys
from tests.ha_takeover_jobs import (
    committed_values,
    expected_batch_sums,
    opens,
    submit_batch_job,
    submit_forward_job,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

FULL = os.environ.get("YARNFLINK_HA_DRILL_FULL") == "1"
N = 300_000 if FULL else 100_000
STALE = "Status.HighAvailability.StaleRpcsRejected"
#: per record while the flag exists (batches of 1024 records: ~1 s each): the job outlasts the drill
PAUSE_S = 0.001


# ----------------------------------------------------------------------------- helpers
class Job:
    def __init__(self, cluster: Any, tmp_path: Path, name: str = "job", config: dict[str, str] | None = None) -> None:
        self.cluster = cluster
        self.flag = tmp_path / f"{name}.slow"
        self.flag.touch()
        self.out = tmp_path / f"{name}.out"
        self.log = tmp_path / f"{name}.opens"
        self.id = submit_forward_job(
            cluster.leader_url(),
            n=N,
            out=self.out,
            checkpoints=tmp_path / f"{name}.ckpt",
            flag=self.flag,
            log=self.log,
            name=name,
            config=config,
            pause_s=PAUSE_S,
        )

    def details(self) -> dict[str, Any]:
        with self.cluster.rest() as rest:
            return dict(rest.job(self.id))

    def checkpoints(self) -> dict[str, Any]:
        with self.cluster.rest() as rest:
            return dict(rest.get_json(f"/jobs/{self.id}/checkpoints"))

    def wait_checkpointed(self, after: int = 0) -> int:
        with self.cluster.rest() as rest:
            return int(
                wait_until(
                    lambda: running_with_checkpoint_after(rest, self.id, after), 120, f"job {self.id} checkpointed"
                )
            )

    def finish(self) -> dict[str, Any]:
        """Lets the job run to its end; checks the committed output is exactly 0..N-1."""
        self.flag.unlink(missing_ok=True)
        with self.cluster.rest() as rest:
            wait_until(lambda: rest.job(self.id)["state"] in ("FINISHED", "FAILED", "CANCELED"), 180, "the job's end")
            details = dict(rest.job(self.id))
        assert details["state"] == "FINISHED", details
        got = committed_values(self.out)
        assert len(got) == N and got == list(range(N)), f"{len(got)} committed records, expected {N} (exact)"
        assert not [f for f in os.listdir(self.out) if f.endswith(".inprogress")]
        return details

    def opens_per_subtask(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for e in opens(self.log, "map"):
            counts[e["subtask"]] = counts.get(e["subtask"], 0) + 1
        return counts


def _tasks(cluster: Any, job_id: str) -> dict[str, tuple[str, str]]:
    """execution id -> (TaskExecutor address, allocation id) of the job's tasks, as TaskExecutors tell."""
    out = {}
    with cluster.rest() as rest:
        for tm in rest.taskmanagers():
            for slot in rest.get_json(f"/taskmanagers/{tm['id']}")["slots"]:
                for t in slot["tasks"]:
                    if t["job-id"] == job_id and t["status"] in ("RUNNING", "DEPLOYING", "INITIALIZING"):
                        out[t["execution-id"]] = (tm["path"], slot["allocationId"])
    return out


def _stale_rejected(cluster: Any) -> float:
    total = 0.0
    with cluster.rest() as rest:
        for tm in rest.taskmanagers():
            for m in rest.get_json(f"/taskmanagers/{tm['id']}/metrics", get=STALE):
                if m["id"] == STALE:
                    total += float(m["value"])
    return total


def _forge(script: str, cluster: Any, *args: str) -> dict[str, str]:
    config = {k: str(v) for k, v in cluster.config.to_dict().items()}
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name(script)), json.dumps(config), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(Path(__file__).parents[1]),
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def _leader_session(cluster: Any) -> tuple[str, str]:
    """(session id, gRPC address) of the ResourceManager's leader, as ZooKeeper holds them."""
    from kazoo.client import KazooClient

    from yarnflink.highavailability.leaderelection import LeaderInformation
    from yarnflink.highavailability.services import RESOURCE_MANAGER
    from yarnflink.highavailability.zookeeper.client import ZooKeeperPaths

    client = KazooClient(hosts=str(cluster.config.get("high-availability.zookeeper.quorum")), timeout=10)
    client.start(15)
    try:
        data = client.get(ZooKeeperPaths.from_config(cluster.config).connection_info(RESOURCE_MANAGER))[0]
    finally:
        client.stop()
        client.close()
    info = LeaderInformation.from_bytes(data)
    return info.session_id, info.address


def _latest_completed(job: Job) -> int:
    latest = job.checkpoints().get("latest") or {}
    return int((latest.get("completed") or {}).get("id") or 0)


def _assert_not_redeployed(job: Job, parallelism: int = 2) -> None:
    assert job.opens_per_subtask() == dict.fromkeys(range(parallelism), 1), (
        f"open() per subtask over the drill: {job.opens_per_subtask()} (a task was deployed again)"
    )
    details = job.details()
    assert details["numRestarts"] == 0, details["numRestarts"]
    restored = (job.checkpoints().get("latest") or {}).get("restored")
    assert restored is None, f"a checkpoint was restored: {restored}"


# ----------------------------------------------------------------------------- (g)
# (first: it kills a TaskExecutor, so it has a cluster of its own, stopped before the shared one starts)
def test_g_a_taskexecutor_killed_while_no_master_leads_is_recovered_by_region_failover(
    ha_cluster: Callable[..., Any], zookeeper: Any, tmp_path: Path
) -> None:
    # the new leader waits the default reconciliation timeout (10 s, the drills' heartbeat.timeout)
    # for the dead TaskExecutor's report; the survivor's heartbeats are taken meanwhile
    cluster = ha_cluster(zookeeper.address)
    job = Job(cluster, tmp_path)
    job.wait_checkpointed()
    pid_of = {e["subtask"]: e["pid"] for e in opens(job.log, "map")}
    assert len(pid_of) == 2 and pid_of[0] != pid_of[1], f"subtasks not spread over both TaskExecutors: {pid_of}"
    victim = pid_of[1]
    t = takeover(cluster, [job.id], after_kill=lambda: os.kill(victim, signal.SIGKILL))
    print(f"\n(g) {t.line()} (TaskExecutor {victim} SIGKILLed while no master led)")
    details = job.finish()
    counts = job.opens_per_subtask()
    assert counts[0] == 1, f"subtask 0 (its TaskExecutor lived) was deployed again: {counts}"
    assert counts[1] >= 2, f"subtask 1 (its TaskExecutor was killed) was not restarted: {counts}"
    assert details["numRestarts"] >= 1
    with cluster.rest() as rest:
        history = rest.get_json(f"/jobs/{job.id}/exceptions")
    print(
        f"(g) open() per subtask {counts}, numRestarts {details['numRestarts']}, {len(history.get('exceptionHistory', {}).get('entries', []))} failure(s) recorded"
    )


# ----------------------------------------------------------------------------- (f)
def test_f_sigstop_of_the_leader_then_sigcont_no_stale_call_accepted_no_task_redeployed(
    shared_ha_cluster: Any, tmp_path: Path
) -> None:
    cluster = with_standbys(shared_ha_cluster)
    job = Job(cluster, tmp_path)
    seen = job.wait_checkpointed()
    executions = _tasks(cluster, job.id)
    rounds = 3 if FULL else 1
    for i in range(rounds):
        old_session, old_rm = _leader_session(cluster)
        rejected_before = _stale_rejected(cluster)
        t = takeover(cluster, [job.id], sig=signal.SIGSTOP)
        print(f"\n(f) round {i + 1}: {t.line('SIGSTOP')}")
        old_log = cluster.workdir / f"master-{t.old_leader}.log"
        lost_before = old_log.read_text(errors="replace").count("lost leadership")
        os.kill(cluster.master_pids[t.old_leader], signal.SIGCONT)
        wait_until(
            lambda: old_log.read_text(errors="replace").count("lost leadership") > lost_before,
            60,
            "the woken-up old leader to step down",
        )
        new_session, new_rm = _leader_session(cluster)
        assert new_session != old_session and new_rm != old_rm
        seen = job.wait_checkpointed(seen)  # checkpoints go on under the new leader
        # the calls the deposed leader would make, with its old session id: every one refused
        with cluster.rest() as rest:
            tes = wait_until(
                lambda: [tm["path"] for tm in rest.taskmanagers()] if len(rest.taskmanagers()) >= 2 else [],
                60,
                "both TaskExecutors registered at the new leader",
            )
        now = _tasks(cluster, job.id)
        rm_side = _forge("forge_rpc.py", cluster, old_session, new_rm, *tes)
        jm_side = _forge("forge_jobmaster_rpc.py", cluster, old_session, *(f"{a}={x}" for x, (a, _) in now.items()))
        codes = {**rm_side, **jm_side}
        accepted = sorted(name for name, code in codes.items() if code != "FAILED_PRECONDITION")
        assert accepted == [], f"stale calls accepted: {accepted}"
        forged_at_tes = len(codes) - 1  # all but the ResourceManager's
        wait_until(
            lambda: _stale_rejected(cluster) >= rejected_before + forged_at_tes, 60, f"{STALE} counting the forgeries"
        )
        print(f"(f) round {i + 1}: {len(codes)} stale calls sent, 0 accepted; {STALE} = {_stale_rejected(cluster):.0f}")
        # (the old leader re-executed itself as a standby: the next round may take it over again)
    assert set(_tasks(cluster, job.id)) == set(executions), "the execution attempt ids changed"
    _assert_not_redeployed(job)
    job.finish()
    _assert_not_redeployed(job)


# ----------------------------------------------------------------------------- (h)
@pytest.mark.parametrize("window", ["pointer", "metadata"] if FULL else ["pointer"])
def test_h_a_leader_killed_while_finalizing_a_checkpoint_has_it_committed_exactly_once(
    shared_ha_cluster: Any, tmp_path: Path, window: str
) -> None:
    cluster = with_standbys(shared_ha_cluster)
    trigger = tmp_path / "kill-during-finalize"
    job = Job(cluster, tmp_path, config={f"execution.checkpointing.testing.kill-master-after-{window}": str(trigger)})
    seen = job.wait_checkpointed()
    old = cluster.leader_index()
    old_url = cluster.leader_url()
    t0 = time.monotonic()
    trigger.touch()  # armed: the leader SIGKILLs itself in the middle of the next checkpoint's finalization
    fired = Path(f"{trigger}.fired")
    checkpoint_id = int(wait_until(lambda: fired.exists() and fired.read_text(), 60, "the armed SIGKILL"))
    wait_until(lambda: cluster.resolver.current() not in (None, "", old_url), 60, "a new leader")
    with cluster.rest() as rest:
        wait_until(lambda: running_with_checkpoint_after(rest, job.id, 0), 60, "the job RUNNING under the new leader")
    took = time.monotonic() - t0
    print(f"\n(h) master {old} SIGKILLed after the {window} of checkpoint {checkpoint_id} (after {seen} completed)")
    print(f"(h) job RUNNING under the new leader {took:.2f}s after arming")
    # the new leader checkpoints after it: never an id an earlier leader used
    wait_until(lambda: _latest_completed(job) > checkpoint_id, 60, f"a checkpoint after {checkpoint_id} completed")
    if window == "pointer":
        # checkpoint N completed (its pointer is in ZooKeeper) but no task heard of it: the new
        # leader's notice commits its files, before the new leader's own first checkpoint completes
        # (a rename sets a file's ctime; the sink would otherwise commit them with that checkpoint)
        history = job.checkpoints()["history"]
        first = min((h for h in history if h["status"] == "COMPLETED"), key=lambda h: h["id"])
        killed_at, first_done_at = fired.stat().st_mtime, first["latest_ack_timestamp"] / 1000
        early = [f.name for f in job.out.glob("part-*") if killed_at < f.stat().st_ctime < first_done_at]
        assert early, f"checkpoint {checkpoint_id}'s files were not committed before checkpoint {first['id']}"
        print(f"(h) committed on the new leader's notice of checkpoint {checkpoint_id}: {sorted(early)}")
    job.finish()  # exact: the checkpoint's files were committed once, neither lost nor twice
    _assert_not_redeployed(job)  # committed by the new leader's notice, not by a restore
    if window == "metadata":  # never completed: aborted, its directory gone
        chk = tmp_path / "job.ckpt" / job.id / f"chk-{checkpoint_id}"
        wait_until(lambda: not chk.exists(), 30, f"{chk} deleted")


# ----------------------------------------------------------------------------- (i)
def test_i_a_batch_job_keeps_its_finished_first_stage_across_a_leader_sigkill(
    shared_ha_cluster: Any, tmp_path: Path
) -> None:
    cluster = with_standbys(shared_ha_cluster)
    n = 200_000 if FULL else 20_000
    flag, out, log = tmp_path / "hold", tmp_path / "batch.out", tmp_path / "batch.opens"
    flag.touch()  # the second stage waits for it to go
    job_id = submit_batch_job(cluster.leader_url(), n=n, out=out, flag=flag, log=log)

    def first_stage_done() -> bool:
        with cluster.rest() as rest:
            vertices = rest.job(job_id).get("vertices", [])
        return bool(vertices) and vertices[0]["status"] == "FINISHED" and len(opens(log, "second")) == 2

    wait_until(first_stage_done, 120, "the first stage FINISHED and the second running")
    assert len(opens(log, "first")) == 2
    old_url = cluster.leader_url()
    old = cluster.leader_index(old_url)
    t0 = time.monotonic()
    cluster.kill(old, signal.SIGKILL)
    new_url = wait_until(lambda: (u := cluster.resolver.current()) and u != old_url and u, 60, "a new leader")
    with cluster.rest(new_url) as rest:
        wait_until(lambda: rest.job(job_id)["state"] == "RUNNING", 60, "the job RUNNING under the new leader")
    print(
        f"\n(i) SIGKILL of master {old} after the first stage finished: job RUNNING under the new leader after {time.monotonic() - t0:.2f}s"
    )
    flag.unlink()
    with cluster.rest() as rest:
        wait_until(lambda: rest.job(job_id)["state"] in ("FINISHED", "FAILED", "CANCELED"), 180, "the job's end")
        assert rest.job(job_id)["state"] == "FINISHED"
    got = sorted(json.loads(line) for f in sorted(out.glob("part-*")) for line in f.read_text().splitlines() if line)
    assert got == expected_batch_sums(n)
    first = opens(log, "first")
    print(f"(i) first stage opened {len(first)} time(s), second stage {len(opens(log, 'second'))} time(s)")
    assert len(first) == 2, f"the first stage ran again: {len(first)} executions for 2 subtasks"
