"""Fixtures shared by tests/ and integration/: one real ZooKeeper server per test session
(tests/zk.py; Debian's ``zookeeper`` package, which scripts/setup installs). Tests give every
case its own root path (``tests.zk.unique_root``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.zk import ZooKeeperServer, start_standalone, zookeeper_or_skip


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    server = zookeeper_or_skip(lambda: start_standalone(tmp_path_factory.mktemp("zookeeper")))
    yield server
    server.stop()
