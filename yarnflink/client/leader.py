"""Finding the leading master's REST endpoint of an HA cluster (Flink's client-side
``LeaderRetrievalService`` for the ``rest_server`` component).

A client of a cluster with ``high-availability.type: zookeeper`` (from its configuration, or from
the file of a local HA session) asks ZooKeeper which master leads and talks to that one's REST
URL; when the master it talks to is gone (connection refused) or is a standby (503) it asks again
and retries until ``rest.await-leader-timeout``. Standby masters answer every job endpoint with 503.

The clients of this process find the HA configuration of a cluster by any of its masters' URLs,
as they find its credentials (``register_ha`` for clusters this process started, local session
files for the others); the ZooKeeper connection is made only when a request first fails.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from yarnflink.client.sessions import session_ha_config
from yarnflink.common.config import Configuration
from yarnflink.dispatcher.options import RestOptions
from yarnflink.highavailability import create_ha_services
from yarnflink.security.client import url_key

log = logging.getLogger(__name__)

__all__ = ["RestLeaderResolver", "ha_config_for", "register_ha", "register_resolver", "resolver_for"]

#: url key -> the HA configuration of the cluster serving it (clusters this process started)
_REGISTERED: dict[str, Configuration] = {}
#: url key -> how to make the resolver of the cluster serving it, when it is found another way
#: than through ZooKeeper (a YARN application's key-value store: ``yarnflink.deployment.yarn``)
_FACTORIES: dict[str, Callable[[], Any]] = {}
_LOCK = threading.Lock()


def register_resolver(urls: list[str], factory: Callable[[], Any]) -> None:
    """Clients of ``urls`` follow the cluster with ``factory()``: an object with ``current()``
    (the leader's REST URL or None), ``await_leader_timeout_s``, ``remember(url)`` and ``close()``."""
    with _LOCK:
        for url in urls:
            _FACTORIES[url_key(url)] = factory


def register_ha(urls: list[str], config: Configuration) -> None:
    with _LOCK:
        for url in urls:
            _REGISTERED[url_key(url)] = config


def ha_config_for(url: str) -> Configuration | None:
    """The HA configuration of the cluster one of whose masters serves ``url``, if known."""
    key = url_key(url)
    with _LOCK:
        if key in _REGISTERED:
            return _REGISTERED[key]

    return session_ha_config(url)


def resolver_for(url: str) -> Any:
    with _LOCK:
        factory = _FACTORIES.get(url_key(url))
    if factory is not None:
        return factory()
    config = ha_config_for(url)
    return RestLeaderResolver(config) if config is not None else None


class RestLeaderResolver:
    """The REST URL of the leading master, watched in ZooKeeper once first asked for."""

    def __init__(self, config: Configuration) -> None:
        self.config = config
        self.await_leader_timeout_s = config.get_seconds(RestOptions.AWAIT_LEADER_TIMEOUT) or 30.0
        self._lock = threading.Lock()
        self._ha: Any = None
        self._retriever: Any = None

    def _started(self) -> Any:
        with self._lock:
            if self._retriever is None:
                self._ha = create_ha_services(self.config)
                self._retriever = self._ha.rest_endpoint_leader_retriever().start()
                try:  # the first read of the leader node, unless none is published
                    self._retriever.wait_for_leader(min(2.0, self.await_leader_timeout_s))
                except TimeoutError:
                    pass
            return self._retriever

    def current(self) -> str | None:
        """The leader's REST URL as ZooKeeper says now (None: no leader known)."""
        info = self._started().current()
        return info.address if info is not None and info.address else None

    def wait(self, timeout: float | None = None) -> str:
        """The leader's REST URL once one is known; TimeoutError after ``timeout``."""
        info = self._started().wait_for_leader(self.await_leader_timeout_s if timeout is None else timeout)
        return info.address

    def remember(self, url: str) -> None:
        """Later clients of this process find the cluster's HA configuration by ``url`` too."""
        register_ha([url], self.config)

    def close(self) -> None:
        with self._lock:
            retriever, ha = self._retriever, self._ha
            self._retriever = self._ha = None
        if retriever is not None:
            retriever.stop()
        if ha is not None:
            ha.close()
