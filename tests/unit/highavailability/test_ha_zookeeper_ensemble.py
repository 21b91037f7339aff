"""A 3-node ZooKeeper ensemble: a server restart (the one the leader is connected to, then the
ensemble's own leader) keeps the master's leadership, its session and its address: no revocation.
This is what high-availability.zookeeper.client.tolerate-suspended-connections is for: the client
reconnects to another server long before its lease (2/3 of the session timeout) runs out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooState

from tests.zk import ZooKeeperEnsemble, ZooKeeperServer, unique_root, wait_for
from yarnflink.common.config import Configuration
from yarnflink.highavailability import RESOURCE_MANAGER, LeaderInformation
from yarnflink.highavailability.zookeeper.services import ZooKeeperHaServices

from .helpers import RecordingContender, Timeline, join

WAIT = 30.0


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer) -> Iterator[ZooKeeperEnsemble]:
    # (depends on the standalone fixture only so that a missing installation is reported once)
    e = ZooKeeperEnsemble(tmp_path_factory.mktemp("ensemble")).start()
    yield e
    e.stop()


def connected_server(ha: ZooKeeperHaServices, ensemble: ZooKeeperEnsemble) -> ZooKeeperServer:
    port = ha.client._connection._socket.getpeername()[1]
    return next(s for s in ensemble.servers if s.client_port == port)


def test_restarting_servers_of_the_ensemble_keeps_the_leader(
    ensemble: ZooKeeperEnsemble, tmp_path: Path, timeline: Timeline
) -> None:
    conf = Configuration(
        {
            "high-availability.type": "zookeeper",
            "high-availability.zookeeper.quorum": ensemble.hosts,
            "high-availability.zookeeper.path.root": unique_root("ensemble"),
            "high-availability.storageDir": str(tmp_path / "ha"),
            "high-availability.zookeeper.client.session-timeout": "30 s",
            "high-availability.zookeeper.client.retry-wait": "100 ms",
            "high-availability.zookeeper.client.tolerate-suspended-connections": "true",
        }
    )
    made: list[ZooKeeperHaServices] = []
    try:
        a = ZooKeeperHaServices.from_config(conf)
        made.append(a)
        join(a.leader_election_service(), RESOURCE_MANAGER, RecordingContender("A", timeline))
        granted = timeline.wait("A", "grant", WAIT)
        b = ZooKeeperHaServices.from_config(conf)
        made.append(b)
        join(b.leader_election_service(), RESOURCE_MANAGER, RecordingContender("B", timeline))
        info = LeaderInformation(granted.session_id or "", "A:1234")
        wait_for(lambda: _published(b) == info, WAIT, "A's address")
        session = a.client.client_id
        states: list[str] = []
        a.client.add_listener(states.append)
        fence = a.leader_election_service().fence(granted.session_id or "")

        for victim in (lambda: connected_server(a, ensemble), ensemble.leader):
            server = victim()
            before = len(states)
            server.restart()
            wait_for(
                lambda before=before: (
                    KazooState.SUSPENDED in states[before:]  # type: ignore[misc]
                    and a.client.state == KazooState.CONNECTED
                ),
                WAIT,
                "A's client reconnected",
            )
            a.leader_election_service().drain()
            b.leader_election_service().drain()
            assert timeline.entries == [granted], f"restarting {server.address} changed leadership"
            assert a.client.client_id == session
            assert a.leader_election_service().verify_leadership(granted.session_id or "")
            assert _published(b) == info
            a.checkpoint_id_counter("0" * 32, fence).start()  # fenced writes still land
    finally:
        for ha in reversed(made):
            ha.close()


def _published(ha: ZooKeeperHaServices) -> Any:
    try:
        return LeaderInformation.from_bytes(ha.client.get(ha.paths.connection_info(RESOURCE_MANAGER))[0])
    except Exception:
        return None
