"""A master's ZooKeeper session, closed by someone else after the master died.

A master process that is SIGKILLed leaves its ZooKeeper session open until the session timeout
(60 s by Flink's default): its leader latch and published addresses stay, and the next leader
waits. Whoever watched it die (on YARN: the process that runs the master in the
ApplicationMaster's container) closes the session itself: it connects with the dead process's
session id and password and closes it, which ends it at once (its ephemeral nodes go with it).
The master writes its session to a file (0600) once connected."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from yarnflink.common.config import Configuration
from yarnflink.highavailability.zookeeper.client import ZooKeeperClientSettings

log = logging.getLogger(__name__)

__all__ = ["close_session_of_file", "write_session_file"]


def write_session_file(client: KazooClient, path: Path) -> None:
    """Records ``client``'s session (id and password) in ``path``, readable only by this user."""
    session_id, password = client.client_id
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"session_id": session_id, "password": password.hex()}, f)
    os.replace(tmp, path)


def close_session_of_file(config: Configuration, path: Path, timeout: float = 10.0) -> bool:
    """Closes the session recorded in ``path`` (the recording process is dead); True if it was
    closed, False if there was none to close (no file, expired already, ZooKeeper unreachable)."""
    try:
        record: dict[str, Any] = json.loads(path.read_text())
        client_id = (int(record["session_id"]), bytes.fromhex(record["password"]))
    except (OSError, ValueError, KeyError, TypeError):
        return False
    settings = ZooKeeperClientSettings.from_config(config)
    client = KazooClient(hosts=settings.quorum, client_id=client_id, timeout=settings.session_timeout_s)
    try:
        client.start(timeout)
        same = client.client_id is not None and client.client_id[0] == client_id[0]
        client.stop()  # closes the session: its ephemeral nodes are deleted at once
        if same:
            log.info("closed the dead master's ZooKeeper session 0x%x", client_id[0])
        return same  # else the server gave a new session: the old one had expired already
    except Exception as e:  # noqa: BLE001 - the session times out by itself anyway
        log.warning("cannot close the dead master's ZooKeeper session 0x%x: %s", client_id[0], e)
        try:
            client.stop()
        except Exception:  # noqa: BLE001
            pass
        return False
    finally:
        client.close()
        path.unlink(missing_ok=True)
