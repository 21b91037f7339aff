"""End-to-end fixtures: real master and TaskExecutor processes on loopback."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from yarnflink.api.environment import set_default_executor
from yarnflink.client.executor import RestClusterExecutor
from yarnflink.client.rest_client import RestClient, RestClientError
from yarnflink.common.config import Configuration
from yarnflink.deployment.local.cluster import start_local_cluster, stop_process


class Cluster:
    def __init__(self, proc, info: dict, workdir: Path) -> None:  # type: ignore[no-untyped-def]
        self.proc = proc
        self.rest_url = str(info["rest_url"])
        self.workdir = workdir
        self.rest = RestClient(self.rest_url)
        #: the Authorization header for raw httpx calls (the cluster's REST token)
        self.auth = dict(self.rest.headers)
        self.info = info

    def executor(self) -> RestClusterExecutor:
        ex = RestClusterExecutor(self.rest_url)
        set_default_executor(ex)
        return ex

    def taskexecutor_pids(self) -> list[int]:
        return [tm["hardware"]["pid"] for tm in self.rest.taskmanagers()]

    def stop(self) -> None:
        self.rest.close()
        stop_process(self.proc.pid)


def start_cluster(workdir: Path, taskexecutors: int = 2, slots: int = 2, **conf: str) -> Cluster:
    config = Configuration()
    config.set("taskmanager.numberOfTaskSlots", str(slots))
    config.set("rest.port", "0")
    config.set("jobmanager.rpc.port", "0")
    config.set("heartbeat.interval", "1 s")
    config.set("heartbeat.timeout", "10 s")
    # a fixed cluster: the ResourceManager starts no TaskExecutors beyond the initial ones
    config.set("slotmanager.number-of-slots.max", str(max(1, taskexecutors * slots)))
    for k, v in conf.items():  # cluster_evenly__spread__out__slots -> cluster.evenly-spread-out-slots
        config.set(k.replace("__", "-").replace("_", "."), v)
    proc, info = start_local_cluster(config, taskexecutors=taskexecutors, workdir=workdir, detached=False)
    return Cluster(proc, info, workdir)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One shared cluster: 2 TaskExecutors with 2 slots each; slots spread evenly (the default), so
    a job at parallelism 2 runs one subtask of each vertex on each TaskExecutor."""
    c = start_cluster(tmp_path_factory.mktemp("cluster"))
    yield c
    c.stop()


@pytest.fixture(scope="session")
def monitoring_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The dashboard, metrics and OpenAPI tests' cluster (2 TaskExecutors x 2 slots): metrics
    fetched every 200 ms, the dashboard refreshing every 500 ms, Prometheus on free ports."""
    c = start_cluster(
        tmp_path_factory.mktemp("monitoring"),
        metrics_fetcher_update__interval="200 ms",
        web_refresh__interval="500 ms",
        metrics_reporter_prom_port="0",
    )
    yield c
    c.stop()


@pytest.fixture
def executor(cluster: Cluster) -> Iterator[RestClusterExecutor]:
    ex = cluster.executor()
    yield ex
    set_default_executor(None)


def transient_error(e: BaseException) -> bool:
    """Whether ``e`` is a passing failure of a poll (a connection refused/reset or timed out, a
    master answering 503 while leadership changes, a ZooKeeper connection loss), which a wait
    treats as "not yet"; anything else (an AssertionError, a KeyError, a 404, ...) is a finding."""
    if isinstance(e, RestClientError):
        return e.status is None or e.status == 503  # unreachable / not the leader (yet)
    if isinstance(e, (httpx.TransportError, ConnectionError, TimeoutError)):
        return True
    if isinstance(e, httpx.HTTPStatusError):
        return e.response.status_code == 503
    try:
        from kazoo.exceptions import ConnectionLoss, OperationTimeoutError, SessionExpiredError
        from kazoo.handlers.threading import KazooTimeoutError
    except ImportError:  # pragma: no cover - kazoo is a test dependency
        return False
    if isinstance(e, (ConnectionLoss, OperationTimeoutError, SessionExpiredError, KazooTimeoutError)):
        return True
    try:
        import grpc
    except ImportError:  # pragma: no cover
        return False
    return isinstance(e, grpc.RpcError) and getattr(e, "code", lambda: None)() in (
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
    )


def wait_until(
    predicate: Callable[[], object],
    timeout: float = 60.0,
    interval: float = 0.05,
    message: str = "condition",
    transient: tuple[type[BaseException], ...] = (),
) -> object:
    """Polls ``predicate`` until it returns a truthy value (returned). A transient error
    (``transient_error``, or one of the ``transient`` types a caller names, e.g. KeyError while a
    field is not there yet) counts as "not yet"; at the deadline the wait fails, chained to the
    last such error. Any other exception, an AssertionError above all, propagates at once."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = predicate()
        except AssertionError:
            raise
        except Exception as e:  # noqa: BLE001 - filtered just below; the rest re-raised
            if not (isinstance(e, transient) or transient_error(e)):
                raise
            last, value = e, None
        else:
            last = None
        if value:
            return value
        if time.monotonic() > deadline:
            detail = f" (last error: {type(last).__name__}: {last})" if last is not None else ""
            raise AssertionError(f"timed out after {timeout}s waiting for {message}{detail}") from last
        time.sleep(interval)
