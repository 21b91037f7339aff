"""Fixtures of the HA failover drills: a real ZooKeeper (one standalone server and a three-node
ensemble, started once per test session by tests/zk.py) and local HA clusters on top of it (real
master and TaskExecutor processes, stopped after each test)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.zk import ZooKeeperEnsemble, unique_root, zookeeper_or_skip
from yarnflink.common.config import Configuration

#: The drills' configuration: a 2 s ZooKeeper session timeout (the takeover benchmark's), fast
#: heartbeats, clients that wait up to a minute for a new leader.
DRILL_CONFIG = {
    "high-availability.zookeeper.client.session-timeout": "2 s",
    "high-availability.zookeeper.client.connection-timeout": "15 s",
    "high-availability.zookeeper.client.retry-wait": "100 ms",
    "taskmanager.numberOfTaskSlots": "2",
    "heartbeat.interval": "1 s",
    "heartbeat.timeout": "10 s",
    "rest.await-leader-timeout": "60 s",
}


@pytest.fixture(scope="session")
def ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperEnsemble]:
    e = zookeeper_or_skip(lambda: ZooKeeperEnsemble(tmp_path_factory.mktemp("drill-ensemble")).start())
    yield e
    e.stop()


@pytest.fixture
def ha_cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """``ha_cluster(quorum, masters=2, taskexecutors=2, **conf)``: a started LocalHaCluster on
    ZooKeeper ``quorum`` with its own root path; ``conf`` keys use ``_`` for ``.``/``-`` as
    written in DRILL_CONFIG's dict form (pass a dict as ``extra`` instead)."""
    from yarnflink.deployment.local.ha_session import LocalHaCluster

    started: list[LocalHaCluster] = []

    def make(
        quorum: str, masters: int = 2, taskexecutors: int = 2, extra: dict[str, str] | None = None
    ) -> LocalHaCluster:
        config = Configuration(
            {
                "high-availability.type": "zookeeper",
                "high-availability.zookeeper.quorum": quorum,
                "high-availability.zookeeper.path.root": unique_root("drill"),
                "high-availability.storageDir": f"file://{tmp_path / 'ha'}",
                **DRILL_CONFIG,
                **(extra or {}),
            }
        )
        cluster = LocalHaCluster(
            config,
            tmp_path / f"cluster-{len(started)}",
            masters=masters,
            taskexecutors=taskexecutors,
            name=f"drill{len(started)}",
        )
        started.append(cluster)
        return cluster.start()

    yield make
    for c in started:
        c.stop()
