"""The local sessions of this machine as clients see them: one ``session.json`` per session under
``$YARNFLINK_SESSIONS_DIR`` (default ``~/.yarnflink/sessions``), written by the local deployment
(``yarnflink.deployment.local.cluster``) and read by the CLI and the REST client to find a
session's REST URL, token, CA and HA configuration by any of its masters' URLs."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from yarnflink.common.config import Configuration
from yarnflink.security.client import RestCredentials, url_key


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
        return any(pid_alive(p) for p in (self.master_pids or [self.pid]))

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


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie child counts as gone)."""
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
