"""Fixtures of the security unit tests: clusters' material generated into temporary dirs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from yarnflink.common.config import Configuration
from yarnflink.security import internal
from yarnflink.security.material import ensure_cluster_security


def material(directory: Path) -> Configuration:
    """A fresh cluster's configuration (CA, member certificate, token) in ``directory``."""
    return ensure_cluster_security(Configuration(), directory)


@pytest.fixture
def cluster_conf(tmp_path: Path) -> Configuration:
    return material(tmp_path / "cluster")


@pytest.fixture
def foreign_conf(tmp_path: Path) -> Configuration:
    return material(tmp_path / "foreign")


@pytest.fixture
def installed(cluster_conf: Configuration) -> Iterator[internal.InternalTls]:
    """The cluster's material installed process-wide; plaintext again afterwards."""
    tls = internal.install(cluster_conf)
    assert tls is not None
    yield tls
    internal.set_current(None)
