"""The HA cluster from the command line (issue 6, items 2 and 5): ``yarnflink session start --target
local --standby N`` with a real ZooKeeper, clients that follow the leader, TaskExecutors that
outlive the master that was leading, ``session stop`` stopping every process; ``master start
--ha zookeeper``; the errors for an incomplete HA configuration."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.zk import ZooKeeperServer, unique_root

from .conftest import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def _cli(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "yarnflink.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=str(Path(__file__).parents[2]),
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _until(cond: Callable[[], Any], timeout: float, what: str) -> Any:
    # conftest's wait_until: a poll that meets a passing REST/ZooKeeper error (the leader just
    # killed, a standby answering 503) counts as "not yet" instead of failing the test at once
    return wait_until(cond, timeout=timeout, interval=0.1, message=what)


def _ha_args(zookeeper: ZooKeeperServer, tmp_path: Path) -> list[str]:
    return [
        "-D",
        f"high-availability.zookeeper.quorum={zookeeper.address}",
        "-D",
        f"high-availability.zookeeper.path.root={unique_root('cli')}",
        "-D",
        f"high-availability.storageDir=file://{tmp_path / 'ha'}",
        "-D",
        "high-availability.zookeeper.client.session-timeout=2 s",
        "-D",
        "heartbeat.interval=1 s",
        "-D",
        "heartbeat.timeout=10 s",
        # clients wait this long for a new leader (default 30 s: tight on a loaded 2-core CI)
        "-D",
        "rest.await-leader-timeout=60 s",
    ]


def test_a_local_session_with_a_standby_survives_a_sigkill_of_its_leader(
    zookeeper: ZooKeeperServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("YARNFLINK_SESSIONS_DIR", str(tmp_path / "sessions"))
    env = dict(os.environ)
    started = _cli(
        env,
        "session",
        "start",
        "--target",
        "local",
        "--standby",
        "1",
        "-n",
        "2",
        "-s",
        "1",
        *_ha_args(zookeeper, tmp_path),
    )
    assert started.returncode == 0, started.stderr
    assert "1 leader, 1 standby" in started.stdout
    (session_file,) = (tmp_path / "sessions").glob("*/session.json")
    session = json.loads(session_file.read_text())
    masters, tes = session["master_pids"], session["taskexecutor_pids"]
    assert len(masters) == 2 and len(tes) == 2 and len(session["rest_urls"]) == 2
    assert session["ha_config"]["high-availability.cluster-id"] == session["id"]  # the default
    try:
        listed = _cli(env, "list")
        assert listed.returncode == 0 and "No jobs." in listed.stdout, listed.stderr
        leader = session["rest_urls"].index(session["rest_url"])
        os.kill(masters[leader], signal.SIGKILL)

        # the client finds the standby that takes over through ZooKeeper, with the session's token
        listed = _cli(env, "list")
        assert listed.returncode == 0 and "No jobs." in listed.stdout, listed.stderr
        assert all(_alive(p) for p in tes)  # TaskExecutors do not go with the master that led

        from yarnflink.client.rest_client import RestClient

        with RestClient(session["rest_url"]) as rest:  # registered by the session file: follows the leader
            _until(lambda: len(rest.taskmanagers()) == 2, 60, "both TaskExecutors at the new leader")
            assert rest.base_url != session["rest_url"].rstrip("/")
        sessions = _cli(env, "session", "list")
        assert "RUNNING" in sessions.stdout and "(HA)" in sessions.stdout

        # without the session file: the configuration's HA keys find the leader in ZooKeeper
        bare = {
            **env,
            "YARNFLINK_SESSIONS_DIR": str(tmp_path / "no-sessions"),
            "YARNFLINK_REST_TOKEN_FILE": session["token_file"],
        }
        ha = [a for k, v in session["ha_config"].items() for a in ("-D", f"{k}={v}")]
        listed = _cli(bare, "list", *ha)
        assert listed.returncode == 0 and "No jobs." in listed.stdout, listed.stderr
    finally:
        stopped = _cli(env, "session", "stop", session["id"])
    assert stopped.returncode == 0, stopped.stderr
    _until(lambda: not any(_alive(p) for p in masters + tes), 30, "every process of the session to end")


JOB = """
import sys
from yarnflink import FileSink, StreamExecutionEnvironment
from tests.ha_jobs import SlowWhile, add, key_of, to_key

out, checkpoints, flag = sys.argv[1:4]
env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
for k, v in {"execution.checkpointing.interval": "300 ms", "execution.checkpointing.dir": "file://" + checkpoints,
             "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "0 ms"}.items():
    env.get_config().set(k, v)
(env.from_sequence(0, 59_999).map(SlowWhile(flag, 0.0005)).map(to_key).key_by(key_of).reduce(add)
    .sink_to(FileSink(out, format="jsonl")))
env.execute("attached across a failover")
"""


def test_an_attached_run_rides_through_a_failover(
    zookeeper: ZooKeeperServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``yarnflink run`` (attached) keeps following its job while the leader is SIGKILLed: it
    ends with exit status 0 and the job's committed output is exact."""
    from tests.ha_jobs import committed, expected_running_sums, running_with_checkpoint_after
    from yarnflink.client.rest_client import RestClient

    monkeypatch.setenv("YARNFLINK_SESSIONS_DIR", str(tmp_path / "sessions"))
    env = dict(os.environ)
    started = _cli(
        env,
        "session",
        "start",
        "--target",
        "local",
        "--standby",
        "1",
        "-n",
        "2",
        "-s",
        "1",
        *_ha_args(zookeeper, tmp_path),
    )
    assert started.returncode == 0, started.stderr
    session = json.loads(next((tmp_path / "sessions").glob("*/session.json")).read_text())
    job, flag, out = tmp_path / "job.py", tmp_path / "slow", tmp_path / "out"
    job.write_text(JOB)
    flag.touch()
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "yarnflink.cli.main",
            "run",
            str(job),
            str(out),
            str(tmp_path / "checkpoints"),
            str(flag),
        ],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=str(Path(__file__).parents[2]),
    )
    try:
        with RestClient(session["rest_url"]) as rest:
            job_id = _until(lambda: [j["jid"] for j in rest.jobs_overview()], 60, "the job")[0]
            _until(lambda: running_with_checkpoint_after(rest, job_id, 0), 60, "a completed checkpoint")
            os.kill(session["master_pids"][session["rest_urls"].index(session["rest_url"])], signal.SIGKILL)
            _until(
                lambda: (
                    running_with_checkpoint_after(rest, job_id, 0) and rest.base_url != session["rest_url"].rstrip("/")
                ),
                90,
                "the job running under the new leader",
            )
        flag.unlink()
        stdout, stderr = run.communicate(timeout=120)
        assert run.returncode == 0, stderr
        assert committed(out) == expected_running_sums(60_000)
    finally:
        if run.poll() is None:
            run.kill()
        _cli(env, "session", "stop", session["id"])


def test_master_start_ha_zookeeper_joins_the_election_and_publishes_its_rest_endpoint(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    from yarnflink.client.leader import RestLeaderResolver
    from yarnflink.common.config import Configuration

    args = _ha_args(zookeeper, tmp_path)
    info_file = tmp_path / "master.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "yarnflink.cli.main",
            "master",
            "start",
            "--ha",
            "zookeeper",
            "--info-file",
            str(info_file),
            "--workdir",
            str(tmp_path),
            "-D",
            "rest.port=0",
            "-D",
            "jobmanager.rpc.port=0",
            *args,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _until(info_file.exists, 60, "the master to start")
        conf = dict(a.split("=", 1) for a in args[1::2])
        resolver = RestLeaderResolver(Configuration({"high-availability.type": "zookeeper", **conf}))
        try:
            assert resolver.wait(60).rstrip("/") == json.loads(info_file.read_text())["rest_url"].rstrip("/")
        finally:
            resolver.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def test_incomplete_ha_configurations_are_errors_that_name_the_missing_key(tmp_path: Path) -> None:
    env = {**os.environ, "YARNFLINK_SESSIONS_DIR": str(tmp_path / "sessions")}
    r = _cli(
        env,
        "session",
        "start",
        "--target",
        "local",
        "--standby",
        "1",
        "-D",
        f"high-availability.storageDir=file://{tmp_path}",
    )
    assert r.returncode == 1
    assert "high-availability.zookeeper.quorum" in r.stderr and "Traceback" not in r.stderr
    r = _cli(env, "session", "start", "--target", "local", "--standby", "1", "-D", "high-availability.type=NONE")
    assert r.returncode == 1 and "high-availability.type: zookeeper" in r.stderr
    r = _cli(env, "taskexecutor", "start")
    assert r.returncode == 2 and "--master" in r.stderr and "Traceback" not in r.stderr


def _start_like(pid: int, replace: dict[str, str], out: Path) -> subprocess.Popen[bytes]:
    """A process started by hand with the command line of process ``pid`` (as an operator copies
    it from ``ps``), some options replaced (``--info-file`` -> a new path, ...), in a process
    session of its own like the session's processes."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
    for i, arg in enumerate(argv[:-1]):
        if arg in replace:
            argv[i + 1] = replace[arg]
    with open(out, "ab") as f:
        return subprocess.Popen(
            argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )


def test_a_session_whose_masters_were_all_replaced_by_hand_is_still_found_and_stopped(
    zookeeper: ZooKeeperServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 22, failure 5: once every master the session file records is replaced, ``list
    --session`` finds the replacements' leader through ZooKeeper, and ``session stop`` stops
    every process of the cluster, the replacements too (each announces itself in ZooKeeper)."""
    monkeypatch.setenv("YARNFLINK_SESSIONS_DIR", str(tmp_path / "sessions"))
    env = dict(os.environ)
    # an HA session with one master (no standby) and one TaskExecutor
    ha = ["-D", "high-availability.type=zookeeper", *_ha_args(zookeeper, tmp_path)]
    started = _cli(env, "session", "start", "--target", "local", "-n", "1", "-s", "1", *ha)
    assert started.returncode == 0, started.stderr
    (session_file,) = (tmp_path / "sessions").glob("*/session.json")
    session = json.loads(session_file.read_text())
    (master,), (te,) = session["master_pids"], session["taskexecutor_pids"]
    workdir = Path(session["workdir"])
    by_hand: list[subprocess.Popen[bytes]] = []
    try:
        # a standby master and a TaskExecutor started by hand, with the command lines of the session's
        info = workdir / "by-hand.json"
        replace = {"--info-file": str(info), "--log-file": str(workdir / "by-hand.log")}
        by_hand.append(_start_like(master, replace, workdir / "by-hand.out"))
        replace = {"--resource-id": "te-by-hand", "--log-file": str(workdir / "te-by-hand.log")}
        by_hand.append(_start_like(te, replace, workdir / "te-by-hand.out"))
        _until(info.exists, 60, "the master started by hand")
        from yarnflink.deployment.local.ha_session import registered_processes

        _until(
            lambda: any(e.get("resource_id") == "te-by-hand" for e in registered_processes(session["ha_config"])),
            60,
            "the TaskExecutor started by hand to announce itself",
        )
        os.kill(master, signal.SIGKILL)  # every master the session file knows is gone
        _until(lambda: not _alive(master), 30, "the recorded master to end")

        listed = _cli(env, "list", "--session", session["id"])
        assert listed.returncode == 0 and "No jobs." in listed.stdout, listed.stderr
    finally:
        stopped = _cli(env, "session", "stop", session["id"])
        leftover = [p.pid for p in by_hand if p.poll() is None]
        for p in by_hand:
            if p.poll() is None:
                p.kill()
            p.wait(10)
    assert stopped.returncode == 0, stopped.stderr
    assert not leftover, f"session stop left the processes started by hand running: {leftover}"
    assert not _alive(te)
