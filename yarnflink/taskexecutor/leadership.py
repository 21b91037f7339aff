"""Which ResourceManager a TaskExecutor works for, as leaders come and go (pure: events in, actions out).

With ZooKeeper HA the TaskExecutor learns the ResourceManager's leader from a
``LeaderRetrievalService`` (Flink's ``TaskExecutor.ResourceManagerLeaderListener``). The rules:

* ``None`` (no leader known: none published yet, or the ZooKeeper connection is suspended) changes
  nothing: the TaskExecutor keeps its connection and its tasks until another leader is *known*.
  A suspended connection that comes back with the same leader costs no restart.
* A leader other than the current one (another address or another leader session id) ends the
  connection to the old one: its slots are freed and its tasks cancelled at once (one election
  per master process, so the old leader's JobMasters are gone too; waiting for heartbeat timeouts
  would only delay the restart), then the TaskExecutor registers at the new one with its slot report.
* Calls carrying a ResourceManager token other than the one of the current registration are
  stale and rejected (``accepts``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from yarnflink.highavailability.leaderelection import LeaderInformation

__all__ = ["ConnectToResourceManager", "DisconnectResourceManager", "ResourceManagerLeaderTracker"]


@dataclass(frozen=True, slots=True)
class DisconnectResourceManager:
    """Forget the old leader: clear its token, free every slot, cancel every task."""

    leader: LeaderInformation
    cause: str


@dataclass(frozen=True, slots=True)
class ConnectToResourceManager:
    """Register (with the slot report) at ``leader.address``; its token must be ``leader.session_id``."""

    leader: LeaderInformation


Action = Union[DisconnectResourceManager, ConnectToResourceManager]


class ResourceManagerLeaderTracker:
    def __init__(self) -> None:
        self.leader: LeaderInformation | None = None
        #: The fencing token of the registration at ``leader`` ("" until registered).
        self.token = ""

    def leader_changed(self, info: LeaderInformation | None) -> list[Action]:
        if info is None or info == self.leader:
            return []
        actions: list[Action] = []
        if self.leader is not None:
            actions.append(
                DisconnectResourceManager(
                    self.leader,
                    f"the ResourceManager's leader changed from {self.leader.address} "
                    f"(session {self.leader.session_id[:8]}) to {info.address} "
                    f"(session {info.session_id[:8]})",
                )
            )
        self.leader = info
        self.token = ""
        actions.append(ConnectToResourceManager(info))
        return actions

    def registered(self, leader: LeaderInformation, token: str) -> bool:
        """A registration at ``leader`` answered with ``token``: True if it counts (that leader is
        still the current one and the token is its session id, when one is published)."""
        if leader != self.leader or not token or (leader.session_id and token != leader.session_id):
            return False
        self.token = token
        return True

    def accepts(self, token: str) -> bool:
        return bool(token) and token == self.token
