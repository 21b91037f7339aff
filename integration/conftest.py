"""Fixtures of the HA failover drills: a real ZooKeeper (one standalone server and a three-node
ensemble, started once per test session by tests/zk.py) and local HA clusters on top of it (real
master and TaskExecutor processes, stopped after each test, or shared by the drills of a module
that leave the cluster usable: ``shared_ha_cluster``)."""

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


def _make_cluster(
    quorum: str, workdir: Path, n: int, name: str, masters: int, taskexecutors: int, extra: dict[str, str] | None
) -> Any:
    from yarnflink.deployment.local.ha_session import LocalHaCluster

    config = Configuration(
        {
            "high-availability.type": "zookeeper",
            "high-availability.zookeeper.quorum": quorum,
            "high-availability.zookeeper.path.root": unique_root("drill"),
            "high-availability.storageDir": f"file://{workdir / 'ha'}",
            **DRILL_CONFIG,
            **(extra or {}),
        }
    )
    return LocalHaCluster(config, workdir / f"cluster-{n}", masters=masters, taskexecutors=taskexecutors, name=name)


@pytest.fixture
def ha_cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """``ha_cluster(quorum, masters=2, taskexecutors=2, **conf)``: a started LocalHaCluster on
    ZooKeeper ``quorum`` with its own root path; ``conf`` keys use ``_`` for ``.``/``-`` as
    written in DRILL_CONFIG's dict form (pass a dict as ``extra`` instead)."""
    started: list[Any] = []

    def make(quorum: str, masters: int = 2, taskexecutors: int = 2, extra: dict[str, str] | None = None) -> Any:
        n = len(started)
        cluster = _make_cluster(quorum, tmp_path, n, f"drill{n}", masters, taskexecutors, extra)
        started.append(cluster)
        return cluster.start()

    yield make
    for c in started:
        c.stop()


@pytest.fixture(scope="module")
def shared_ha_cluster(zookeeper: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One LocalHaCluster (2 masters, 2 TaskExecutors, DRILL_CONFIG) for the drills of a module
    that leave it usable: the cluster's start (4 Python processes: ~10 s on the loaded 2-core VM)
    is paid once. A drill that kills a master starts the masters an earlier drill killed again
    first (``tests.ha_jobs.with_standbys``)."""
    cluster = _make_cluster(zookeeper.address, tmp_path_factory.mktemp("shared-drill"), 0, "shared", 2, 2, None)
    cluster.start()
    yield cluster
    cluster.stop()
