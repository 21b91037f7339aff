"""The embedded local cluster: a master process with N TaskExecutor processes on this machine,
as a background session (``yarnflink session start --target local``) or for one job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from yarnflink.client.rest_client import RestClient, RestClientError
from yarnflink.common.config import Configuration


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

    @property
    def alive(self) -> bool:
        return _pid_alive(self.pid)


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


def start_local_cluster(config: Configuration, *, taskexecutors: int, workdir: Path,
                        detached: bool, inherit_stdout: bool = False,
                        timeout: float = 90.0) -> tuple[subprocess.Popen[bytes], dict[str, object]]:
    """Starts the master (which starts the TaskExecutors) and waits until all have registered."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = config.copy()
    for key in ("rest.port", "jobmanager.rpc.port"):
        if not config.contains(key):
            config.set(key, "0")  # a local cluster takes free ports unless told otherwise
    info_file = workdir / "master.json"
    info_file.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "yarnflink.cli.main", "master", "start",
           "--local-taskexecutors", str(taskexecutors), "--info-file", str(info_file),
           "--workdir", str(workdir), "--log-file", str(workdir / "master.log")]
    if inherit_stdout:
        cmd.append("--inherit-stdout")
    for k, v in config.to_dict().items():
        cmd += ["-D", f"{k}={v}"]
    out = open(workdir / "master.out", "ab")
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=detached)
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
    with RestClient(str(info["rest_url"])) as rest:
        while True:
            try:
                if rest.overview()["taskmanagers"] >= taskexecutors:
                    break
            except RestClientError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                stop_process(proc.pid)
                raise ClusterStartError(
                    f"{taskexecutors} TaskExecutors did not register within {timeout:.0f}s:\n{_tail(workdir)}")
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
def start_session(config: Configuration, taskexecutors: int, slots: int) -> LocalSession:
    session_id = f"local-{uuid.uuid4().hex[:8]}"
    workdir = sessions_dir() / session_id
    config = config.copy()
    config.set("taskmanager.numberOfTaskSlots", str(slots))
    proc, info = start_local_cluster(config, taskexecutors=taskexecutors, workdir=workdir, detached=True)
    session = LocalSession(session_id, "local", proc.pid, str(info["rest_url"]), str(info["rpc_address"]),
                           str(workdir), taskexecutors, slots, time.time())
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


def find_session(session_id: Optional[str] = None) -> Optional[LocalSession]:
    """The named session, or the most recently started one that is still alive."""
    sessions = list_sessions()
    if session_id is not None:
        return next((s for s in sessions if s.id == session_id), None)
    alive = [s for s in sessions if s.alive]
    return alive[-1] if alive else None


def stop_session(session: LocalSession) -> bool:
    stopped = True
    if session.alive:
        try:
            with RestClient(session.rest_url, timeout=5) as rest:
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
