"""The processes of an HA cluster, each announced by an ephemeral ZooKeeper node.

Every master and TaskExecutor of a cluster with ZooKeeper HA writes one ephemeral node under
``<root>/processes/<kind>/<host>-<pid>`` holding what a client needs to find and stop it (kind,
host, pid, the process's start time, its addresses). The node goes with the process's ZooKeeper
session, so the children list the live processes, however they were started: a session's own
processes and masters or TaskExecutors an operator started by hand with the cluster's settings.
``yarnflink session stop`` reads it to stop replacements the session file does not know
(``docs/HA.md``, "Sessions and masters"). A session that expired (the process was frozen, or
cut off) announces itself again once it is connected again.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError, NoNodeError

log = logging.getLogger(__name__)

__all__ = ["ZooKeeperProcessRegistry"]

KINDS = ("master", "taskexecutor")


class ZooKeeperProcessRegistry:
    def __init__(self, client: KazooClient, path: str) -> None:
        self.client = client
        self.path = path
        self._mine: dict[str, bytes] = {}  # this process's nodes, written again after a LOST session
        self._lock = threading.Lock()
        self._lost = False
        self._listening = False

    def register(self, kind: str, info: dict[str, Any]) -> str:
        """Announces this process; returns its node's path."""
        if kind not in KINDS:
            raise ValueError(f"unknown process kind {kind!r} (one of {', '.join(KINDS)})")
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{info.get('host', 'host')}-{info['pid']}")
        node = f"{self.path}/{kind}/{name}"
        data = json.dumps({**info, "kind": kind}).encode()
        with self._lock:
            self._mine[node] = data
            if not self._listening:
                self._listening = True
                self.client.add_listener(self._on_state)
        self._write(node, data)
        return node

    def _write(self, node: str, data: bytes) -> None:
        try:
            self.client.create(node, data, ephemeral=True, makepath=True)
        except NodeExistsError:  # a node of an earlier session not expired yet, or a pid reused
            self.client.delete(node)
            self.client.create(node, data, ephemeral=True, makepath=True)

    def _on_state(self, state: str) -> None:
        """On kazoo's thread: no blocking calls here; a LOST session's nodes are written again
        from a thread of their own once connected."""
        if state == KazooState.LOST:
            self._lost = True
        elif state == KazooState.CONNECTED and self._lost:
            self._lost = False
            threading.Thread(target=self._write_again, name="process-registry", daemon=True).start()

    def _write_again(self) -> None:
        with self._lock:
            mine = dict(self._mine)
        for node, data in mine.items():
            try:
                self._write(node, data)
            except Exception as e:  # noqa: BLE001 - the next reconnection tries again
                log.warning("could not announce this process in ZooKeeper again (%s): %s", node, e)

    def processes(self) -> list[dict[str, Any]]:
        """Every process announced now (masters first)."""
        out: list[dict[str, Any]] = []
        for kind in KINDS:
            try:
                children = self.client.get_children(f"{self.path}/{kind}")
            except NoNodeError:
                continue
            for child in sorted(children):
                try:
                    data, _stat = self.client.get(f"{self.path}/{kind}/{child}")
                    entry = json.loads(data.decode())
                except (NoNodeError, ValueError):
                    continue  # gone meanwhile, or not ours
                if isinstance(entry, dict) and isinstance(entry.get("pid"), int):
                    out.append(entry)
        return out
