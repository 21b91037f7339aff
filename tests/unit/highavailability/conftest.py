"""Fixtures of the HA tests: one real ZooKeeper per test session (tests/zk.py), a fresh root path
per test, and factories of HA services that are closed at the end of the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.zk import ZkProxy, ZooKeeperServer, unique_root
from yarnflink.common.config import Configuration

from .helpers import Timeline


@pytest.fixture
def zk_root(zookeeper: ZooKeeperServer) -> Iterator[str]:
    """This test's own ZooKeeper root (``high-availability.zookeeper.path.root``), removed after."""
    root = unique_root()
    yield root
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zookeeper.address, timeout=10)
    client.start(10)
    try:
        client.delete(root, recursive=True)
    except Exception:
        pass
    finally:
        client.stop()
        client.close()


@pytest.fixture
def ha_config(zookeeper: ZooKeeperServer, zk_root: str, tmp_path: Path) -> Configuration:
    return Configuration(
        {
            "high-availability.type": "zookeeper",
            "high-availability.zookeeper.quorum": zookeeper.address,
            "high-availability.zookeeper.path.root": zk_root,
            "high-availability.cluster-id": "/test-cluster",
            "high-availability.storageDir": str(tmp_path / "ha"),
            "high-availability.zookeeper.client.session-timeout": "10 s",
            "high-availability.zookeeper.client.connection-timeout": "10 s",
            "high-availability.zookeeper.client.retry-wait": "100 ms",
            "high-availability.zookeeper.client.max-retry-attempts": "3",
        }
    )


@pytest.fixture
def make_ha(ha_config: Configuration) -> Iterator[Callable[..., Any]]:
    """``make_ha(conf=None)``: a connected ZooKeeperHaServices, one per simulated master process
    (its own kazoo client and session), from ``ha_config`` with the ``conf`` dict on top."""
    from yarnflink.highavailability.zookeeper.services import ZooKeeperHaServices

    made: list[ZooKeeperHaServices] = []

    def factory(conf: dict[str, str] | None = None) -> ZooKeeperHaServices:
        ha = ZooKeeperHaServices.from_config(ha_config.merged(conf or {}))
        made.append(ha)
        return ha

    yield factory
    for ha in reversed(made):
        ha.close()


@pytest.fixture
def proxy(zookeeper: ZooKeeperServer) -> Iterator[ZkProxy]:
    p = ZkProxy(zookeeper.client_port)
    yield p
    p.close()


@pytest.fixture
def timeline() -> Timeline:
    return Timeline()
