"""The kazoo client of a process, made from Flink's configuration keys, and the ZooKeeper layout.

Layout under ``<high-availability.zookeeper.path.root>/<high-availability.cluster-id>``
(Flink's, with yarnflink's root ``/yarnflink``)::

    leader/latch/<guid>-latch-<seq>        ephemeral sequential: one per master process; lowest leads
    leader/<component>/connection_info     ephemeral, the leader's session id and address (JSON);
                                           component: resource_manager, dispatcher, rest_server, <job id>
    jobgraphs/<job id>                     pointer to the JobGraph's JSON in the storageDir
    jobs/<job id>/checkpoint_id_counter    the next checkpoint id
    jobs/<job id>/checkpoints/<id, 19 digits>   pointer to a completed checkpoint's metadata
"""

from __future__ import annotations

import logging
import posixpath
import re
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from yarnflink.common.config import ConfigError, Configuration
from yarnflink.highavailability.errors import HighAvailabilityError
from yarnflink.highavailability.options import HighAvailabilityOptions

log = logging.getLogger(__name__)

_SEGMENT = re.compile(r"^[A-Za-z0-9_.\-]+$")


def path_segment(name: str, what: str) -> str:
    if not _SEGMENT.match(name) or name in (".", ".."):
        raise ValueError(f"invalid {what} {name!r}: letters, digits, '_', '-' and '.' only")
    return name


def _normalize(path: str) -> str:
    parts = [p for p in path.split("/") if p]
    for p in parts:
        path_segment(p, "ZooKeeper path element")
    return "/" + "/".join(parts)


@dataclass(frozen=True)
class ZooKeeperPaths:
    root: str  # e.g. /yarnflink/default

    @staticmethod
    def from_config(config: Configuration) -> ZooKeeperPaths:
        root = str(config.get(HighAvailabilityOptions.HA_ZOOKEEPER_ROOT))
        cluster_id = str(config.get(HighAvailabilityOptions.HA_CLUSTER_ID))
        try:
            return ZooKeeperPaths(_normalize(posixpath.join(root or "/", cluster_id.lstrip("/"))))
        except ValueError as e:
            raise ConfigError(f"invalid high-availability.zookeeper.path.root / cluster-id: {e}") from None

    @property
    def latch(self) -> str:
        return f"{self.root}/leader/latch"

    def leader(self, component_id: str) -> str:
        return f"{self.root}/leader/{path_segment(component_id, 'component id')}"

    def connection_info(self, component_id: str) -> str:
        return f"{self.leader(component_id)}/connection_info"

    @property
    def job_graphs(self) -> str:
        return f"{self.root}/jobgraphs"

    def job_graph(self, job_id: str) -> str:
        return f"{self.job_graphs}/{path_segment(job_id, 'job id')}"

    def job(self, job_id: str) -> str:
        return f"{self.root}/jobs/{path_segment(job_id, 'job id')}"

    def checkpoint_id_counter(self, job_id: str) -> str:
        return f"{self.job(job_id)}/checkpoint_id_counter"

    def checkpoints(self, job_id: str) -> str:
        return f"{self.job(job_id)}/checkpoints"


@dataclass(frozen=True)
class ZooKeeperClientSettings:
    quorum: str
    session_timeout_s: float
    connection_timeout_s: float
    retry_wait_s: float
    max_retry_attempts: int
    tolerate_suspended: bool

    @staticmethod
    def from_config(config: Configuration) -> ZooKeeperClientSettings:
        quorum = config.get(HighAvailabilityOptions.HA_ZOOKEEPER_QUORUM)
        if not quorum:
            raise ConfigError(
                "high-availability.type is ZOOKEEPER but high-availability.zookeeper.quorum "
                "is not set (e.g. 'zk1:2181,zk2:2181,zk3:2181')"
            )
        return ZooKeeperClientSettings(
            quorum=str(quorum).replace(";", ","),
            session_timeout_s=config.get_seconds(HighAvailabilityOptions.ZOOKEEPER_SESSION_TIMEOUT) or 60.0,
            connection_timeout_s=config.get_seconds(HighAvailabilityOptions.ZOOKEEPER_CONNECTION_TIMEOUT) or 15.0,
            retry_wait_s=config.get_seconds(HighAvailabilityOptions.ZOOKEEPER_RETRY_WAIT) or 5.0,
            max_retry_attempts=int(config.get(HighAvailabilityOptions.ZOOKEEPER_MAX_RETRY_ATTEMPTS)),
            tolerate_suspended=bool(config.get(HighAvailabilityOptions.ZOOKEEPER_TOLERATE_SUSPENDED_CONNECTIONS)),
        )

    def make_client(self, **overrides: Any) -> KazooClient:
        """A kazoo client (not started). Operations retry ``max-retry-attempts`` times with
        exponential backoff from ``retry-wait`` (Curator's ExponentialBackoffRetry, as Flink);
        reconnection is retried for ever, quickly, so a restarted server costs little."""
        kwargs: dict[str, Any] = dict(
            hosts=self.quorum,
            timeout=self.session_timeout_s,
            connection_retry=KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0, max_jitter=0.2),
            command_retry=KazooRetry(
                max_tries=self.max_retry_attempts, delay=self.retry_wait_s, backoff=2, max_delay=self.retry_wait_s * 8
            ),
        )
        kwargs.update(overrides)
        return HaKazooClient(**kwargs)


class HaKazooClient(KazooClient):
    """A KazooClient that knows the session timeout the server granted. A server shortens a
    session timeout above its ``maxSessionTimeout`` (20 ticks by default: 40 s, less than Flink's
    default 60 s), and the leader's lease must be computed from the real one. kazoo computes it
    inside its connection handshake and keeps only derived timeouts, so the handshake is wrapped
    to read them back (kazoo 2.x returns the read timeout, 2/3 of the negotiated one, in ms)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negotiated_ms: float | None = None
        handshake = getattr(self._connection, "_connect", None)
        if handshake is not None:

            def connect(*a: Any, **kw: Any) -> Any:
                result = handshake(*a, **kw)
                try:
                    self._negotiated_ms = float(result[0]) * 1.5
                except (TypeError, ValueError, IndexError):
                    pass
                return result

            self._connection._connect = connect

    @property
    def session_timeout_s(self) -> float:
        """The negotiated session timeout (the requested one until the first connection)."""
        requested = self._session_timeout / 1000.0
        if self._negotiated_ms is None:
            return requested
        return min(requested, self._negotiated_ms / 1000.0)


def session_timeout_of(client: KazooClient) -> float:
    t = getattr(client, "session_timeout_s", None)
    return float(t) if t is not None else client._session_timeout / 1000.0


def start_client(client: KazooClient, connection_timeout_s: float) -> KazooClient:
    try:
        client.start(timeout=connection_timeout_s)
    except KazooTimeoutError:
        client.stop()
        client.close()
        raise HighAvailabilityError(
            f"could not connect to ZooKeeper at {','.join(f'{h}:{p}' for h, p in client.hosts)} within "
            f"{connection_timeout_s:g}s (high-availability.zookeeper.client.connection-timeout)"
        ) from None
    return client
