"""The embedded local cluster: a master process with N TaskExecutor processes on this machine,
as a background session (``yarnflink session start --target local``) or for one job.

Each cluster gets its own security material at start (``yarnflink.security``): a CA with the
certificate its processes use for mutual TLS, and the REST token, as 0600 files in
``<workdir>/security/`` (0700; the workdir itself is 0700). Processes find them through
configuration entries holding the paths; clients of this machine find the token through the
session's ``session.json`` (``yarnflink.client.sessions``) or, for a cluster this process started,
through ``yarnflink.security.client.register``.

A session with ZooKeeper HA (``--standby N``, or ``high-availability.type: zookeeper``) runs 1+N
standalone master processes that elect a leader, and its TaskExecutors as processes of their own
that find the leading ResourceManager in ZooKeeper (they outlive any one master). Its
``session.json`` keeps every process id, every master's REST URL and the HA keys clients need to
find the leader (``ha_config``); ``stop_session`` stops them all and removes the cluster's HA data.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from yarnflink.client.rest_client import RestClient, RestClientError
from yarnflink.client.sessions import LocalSession, sessions_dir
from yarnflink.common.config import Configuration
from yarnflink.common.process_identity import is_same_process
from yarnflink.deployment.local.ha_session import (
    client_ha_config,
    prepare_ha_config,
    registered_processes,
    start_ha_cluster,
)
from yarnflink.deployment.local.processes import ClusterStartError, stop_process
from yarnflink.dispatcher.options import RestOptions
from yarnflink.highavailability import create_ha_services, ha_enabled
from yarnflink.jobmaster.options import JobManagerOptions
from yarnflink.security.client import RestCredentials, register
from yarnflink.security.material import ensure_cluster_security, private_directory
from yarnflink.taskexecutor.options import TaskManagerOptions

log = logging.getLogger(__name__)


def start_local_cluster(
    config: Configuration,
    *,
    taskexecutors: int,
    workdir: Path,
    detached: bool,
    inherit_stdout: bool = False,
    timeout: float = 90.0,
    master_args: Sequence[str] = (),
    wait_for_taskexecutors: bool = True,
) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    """Starts the master (which starts the TaskExecutors) and waits until all have registered.
    The returned info has ``rest_url``, ``rpc_address``, ``token_file`` and ``rest_ca`` ("" when
    off), and this process's RestClients find the credentials by the URL."""
    private_directory(workdir)
    config = ensure_cluster_security(config, workdir / "security")
    for port in (RestOptions.PORT, JobManagerOptions.PORT):
        if not config.contains(port):
            config.set(port, "0")  # a local cluster takes free ports unless told otherwise
    info_file = workdir / "master.json"
    info_file.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        "-m",
        # = yarnflink master start, without the command line's imports; its TaskExecutors start first
        "yarnflink.entrypoint.local_master",
        "--local-taskexecutors",
        str(taskexecutors),
        "--info-file",
        str(info_file),
        "--workdir",
        str(workdir),
        "--log-file",
        str(workdir / "master.log"),
    ]
    if inherit_stdout:
        cmd.append("--inherit-stdout")
    cmd += list(master_args)  # --per-job, --application (yarnflink.entrypoint.master)
    for k, v in config.to_dict().items():
        cmd += ["-D", f"{k}={v}"]
    out = open(workdir / "master.out", "ab")
    proc = subprocess.Popen(
        cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=detached
    )
    out.close()
    deadline = time.monotonic() + timeout
    while not info_file.exists():
        if proc.poll() is not None:
            raise ClusterStartError(f"the master process exited with {proc.returncode}:\n{_tail(workdir)}")
        if time.monotonic() > deadline:
            proc.kill()
            raise ClusterStartError(f"the master did not start within {timeout:.0f}s:\n{_tail(workdir)}")
        time.sleep(0.05)
    info = json.loads(info_file.read_text())
    credentials = RestCredentials.from_config(config)
    info["token_file"] = credentials.token_file or ""
    info["rest_ca"] = credentials.ca_file or ""
    register(str(info["rest_url"]), credentials)
    with RestClient(str(info["rest_url"]), credentials=credentials) as rest:
        while True:
            try:
                if not wait_for_taskexecutors or rest.overview()["taskmanagers"] >= taskexecutors:
                    break
            except RestClientError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                stop_process(proc.pid)
                raise ClusterStartError(
                    f"{taskexecutors} TaskExecutors did not register within {timeout:.0f}s:\n{_tail(workdir)}"
                )
            time.sleep(0.05)
    return proc, info


def _tail(workdir: Path, lines: int = 30) -> str:
    parts = []
    for name in ("master.out", "master.log"):
        p = workdir / name
        if p.exists():
            parts.append("\n".join(p.read_text(errors="replace").splitlines()[-lines:]))
    return "\n".join(parts)


# ---------------------------------------------------------------------- sessions
def start_session(config: Configuration, taskexecutors: int, slots: int, standby: int = 0) -> LocalSession:
    """A background session; with ``standby`` masters, or with ZooKeeper HA configured, an HA
    session (``ha_session.py``; ClusterStartError if the HA configuration is incomplete)."""
    session_id = f"local-{uuid.uuid4().hex[:8]}"
    workdir = sessions_dir() / session_id
    config = config.copy()
    config.set(TaskManagerOptions.NUM_TASK_SLOTS, str(slots))
    if standby > 0 or ha_enabled(config):
        try:
            config = prepare_ha_config(config, session_id, 1 + standby)
        except ValueError as e:
            raise ClusterStartError(str(e)) from None
        info = start_ha_cluster(
            config, masters=1 + standby, taskexecutors=taskexecutors, workdir=workdir, name=session_id
        )
        session = LocalSession(
            session_id,
            "local",
            info["master_pids"][0],
            info["rest_url"],
            "",
            str(workdir),
            taskexecutors,
            slots,
            time.time(),
            token_file=info["token_file"],
            rest_ca=info["rest_ca"],
            ha_config=client_ha_config(info["config"]),
            master_pids=info["master_pids"],
            rest_urls=info["rest_urls"],
            taskexecutor_pids=info["taskexecutor_pids"],
            standby=standby,
        )
    else:
        proc, info = start_local_cluster(config, taskexecutors=taskexecutors, workdir=workdir, detached=True)
        session = LocalSession(
            session_id,
            "local",
            proc.pid,
            str(info["rest_url"]),
            str(info["rpc_address"]),
            str(workdir),
            taskexecutors,
            slots,
            time.time(),
            token_file=str(info["token_file"]),
            rest_ca=str(info["rest_ca"]),
        )
    path = workdir / "session.json"
    path.write_text(json.dumps(asdict(session), indent=2))
    os.chmod(path, 0o600)
    return session


def stop_session(session: LocalSession) -> bool:
    if session.master_pids:
        return _stop_ha_session(session)
    stopped = True
    if session.alive:
        try:
            credentials = RestCredentials(session.token_file or None, session.rest_ca or None)
            with RestClient(session.rest_url, timeout=5, credentials=credentials) as rest:
                rest.shutdown()
            deadline = time.monotonic() + 20
            while session.alive and time.monotonic() < deadline:
                time.sleep(0.05)
        except RestClientError:
            pass
        if session.alive:
            stopped = stop_process(session.pid)
    (Path(session.workdir) / "session.json").unlink(missing_ok=True)
    return stopped


def announced_processes(session: LocalSession) -> list[dict[str, Any]]:
    """The live processes of an HA session announced in its HA store, on this machine (a pid
    with its start time: no other process of the same pid); [] if ZooKeeper cannot be reached."""
    if not session.ha_config:
        return []
    try:
        entries = registered_processes(session.ha_config)
    except Exception as e:  # noqa: BLE001 - stopping goes on with the recorded processes
        log.warning("session %s: could not read its processes from ZooKeeper: %s", session.id, e)
        return []
    return [e for e in entries if e.get("kind") in ("master", "taskexecutor") and is_same_process(e)]


def _stop_ha_session(session: LocalSession) -> bool:
    """Every master at once (no standby may take over a cluster that is going), then the
    TaskExecutors; then the cluster's HA data goes (best effort: ZooKeeper may be gone too).
    The processes are the ones the session file records and every one announced in the cluster's
    HA store (masters and TaskExecutors started by hand to replace them), read before any master
    goes."""
    announced = announced_processes(session)
    pids = list(dict.fromkeys([*session.master_pids, *(e["pid"] for e in announced if e["kind"] == "master")]))
    te_pids = [e["pid"] for e in announced if e["kind"] == "taskexecutor"]
    te_pids = list(dict.fromkeys([*session.taskexecutor_pids, *te_pids]))
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    stopped = all([stop_process(pid) for pid in pids])
    stopped = all([stop_process(pid) for pid in te_pids]) and stopped
    if session.ha_config:
        try:
            create_ha_services(Configuration(session.ha_config)).close_and_cleanup_all_data()
        except Exception:  # noqa: BLE001 - the processes are gone; leftover HA data is harmless
            pass
    (Path(session.workdir) / "session.json").unlink(missing_ok=True)
    return stopped
