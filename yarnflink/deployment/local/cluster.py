"""The embedded local cluster: a master process with N TaskExecutor processes on this machine,
as a background session (``yarnflink session start --target local``) or for one job.

Each cluster gets its own security material at start (``yarnflink.security``): a CA with the
certificate its processes use for mutual TLS, and the REST token, as 0600 files in
``<workdir>/security/`` (0700; the workdir itself is 0700). Processes find them through
configuration entries holding the paths; clients of this machine find the token through the
session's ``session.json`` (``session_credentials``) or, for a cluster this process started,
through ``yarnflink.security.client.register``.

A session with ZooKeeper HA (``--standby N``, or ``high-availability.type: zookeeper``) runs 1+N
standalone master processes that elect a leader, and its TaskExecutors as processes of their own
that find the leading ResourceManager in ZooKeeper (they outlive any one master). Its
``session.json`` keeps every process id, every master's REST URL and the HA keys clients need to
find the leader (``ha_config``); ``stop_session`` stops them all and removes the cluster's HA data.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from yarnflink.client.rest_client import RestClient, RestClientError
from yarnflink.common.config import Configuration
from yarnflink.dispatcher.options import RestOptions
from yarnflink.jobmaster.options import JobManagerOptions
from yarnflink.security.client import RestCredentials, register, url_key
from yarnflink.security.material import ensure_cluster_security, private_directory
from yarnflink.taskexecutor.options import TaskManagerOptions


class ClusterStartError(Exception):
    pass


@dataclass
class LocalSession:
    id: str
    target: str
    pid: int
    rest_url: str
    rpc_address: str
    workdir: str
    taskexecutors: int
    slots: int
    created: float
    #: The REST token's file (0600) and the CA of the REST certificate ("" if none).
    token_file: str = ""
    rest_ca: str = ""
    #: HA sessions: the high-availability.* (and rest.await-leader-timeout) keys, every master's
    #: process id and REST URL, and the TaskExecutor processes' ids
    ha_config: dict[str, str] = field(default_factory=dict)
    master_pids: list[int] = field(default_factory=list)
    rest_urls: list[str] = field(default_factory=list)
    taskexecutor_pids: list[int] = field(default_factory=list)
    standby: int = 0

    @property
    def alive(self) -> bool:
        return any(_pid_alive(p) for p in (self.master_pids or [self.pid]))

    def serves(self, url: str) -> bool:
        key = url_key(url)
        return any(url_key(u) == key for u in (self.rest_urls or [self.rest_url]))


def session_credentials(url: str) -> RestCredentials | None:
    """The token and CA of the local session serving ``url``, if any."""
    for s in reversed(list_sessions()):
        if s.serves(url):
            return RestCredentials(s.token_file or None, s.rest_ca or None)
    return None


def session_ha_config(url: str) -> Configuration | None:
    """The HA configuration of the local HA session one of whose masters serves ``url``, if any."""
    for s in reversed(list_sessions()):
        if s.ha_config and s.serves(url):
            return Configuration(s.ha_config)
    return None


def sessions_dir() -> Path:
    d = Path(os.environ.get("YARNFLINK_SESSIONS_DIR") or Path.home() / ".yarnflink" / "sessions")
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    return d


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child counts as gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


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
        "yarnflink.cli.main",
        "master",
        "start",
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


def stop_process(pid: int, timeout: float = 15.0) -> bool:
    """SIGTERM, wait, then SIGKILL. Returns True if the process is gone."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _pid_alive(pid):
            return True
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return not _pid_alive(pid)


# ---------------------------------------------------------------------- sessions
def start_session(config: Configuration, taskexecutors: int, slots: int, standby: int = 0) -> LocalSession:
    """A background session; with ``standby`` masters, or with ZooKeeper HA configured, an HA
    session (``ha_session.py``; ClusterStartError if the HA configuration is incomplete)."""
    from yarnflink.highavailability import ha_enabled

    session_id = f"local-{uuid.uuid4().hex[:8]}"
    workdir = sessions_dir() / session_id
    config = config.copy()
    config.set(TaskManagerOptions.NUM_TASK_SLOTS, str(slots))
    if standby > 0 or ha_enabled(config):
        from yarnflink.deployment.local.ha_session import client_ha_config, prepare_ha_config, start_ha_cluster

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


def list_sessions() -> list[LocalSession]:
    out = []
    for f in sorted(sessions_dir().glob("*/session.json")):
        try:
            out.append(LocalSession(**json.loads(f.read_text())))
        except (ValueError, TypeError):
            continue
    return sorted(out, key=lambda s: s.created)


def find_session(session_id: str | None = None) -> LocalSession | None:
    """The named session, or the most recently started one that is still alive."""
    sessions = list_sessions()
    if session_id is not None:
        return next((s for s in sessions if s.id == session_id), None)
    alive = [s for s in sessions if s.alive]
    return alive[-1] if alive else None


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


def _stop_ha_session(session: LocalSession) -> bool:
    """Every master at once (no standby may take over a cluster that is going), then the
    TaskExecutors; then the cluster's HA data goes (best effort: ZooKeeper may be gone too)."""
    pids = list(session.master_pids)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    stopped = all([stop_process(pid) for pid in pids])
    stopped = all([stop_process(pid) for pid in session.taskexecutor_pids]) and stopped
    if session.ha_config:
        try:
            from yarnflink.highavailability import create_ha_services

            create_ha_services(Configuration(session.ha_config)).close_and_cleanup_all_data()
        except Exception:  # noqa: BLE001 - the processes are gone; leftover HA data is harmless
            pass
    (Path(session.workdir) / "session.json").unlink(missing_ok=True)
    return stopped
