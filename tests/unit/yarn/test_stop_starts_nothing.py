"""``session stop`` (local and YARN) starts no replacement TaskExecutor while the cluster stops
(issue 17): from the stop signal on, a TaskExecutor that ends is not replaced by one that would
outlive the cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.conditions import wait_until
from tests.fakes.driver import TestingResourceManagerDriver
from yarnflink.common.config import Configuration
from yarnflink.entrypoint.master import MasterProcess

CONFIG = {
    "rest.port": "0",
    "jobmanager.rpc.port": "0",
    "security.rest.authentication": "none",
    "security.ssl.internal.enabled": "false",
    "resourcemanager.start-worker.retry-interval": "0 ms",
}


@pytest.fixture
def master() -> Iterator[tuple[MasterProcess, TestingResourceManagerDriver]]:
    driver = TestingResourceManagerDriver()
    m = MasterProcess(Configuration(CONFIG), local_taskexecutors=2, driver=driver)
    m.start()
    wait_until(lambda: len(driver.started) == 2, timeout=10)
    yield m, driver
    m.stop()


def _terminate(m: MasterProcess, driver: TestingResourceManagerDriver, worker_id: str) -> None:
    assert driver.handler is not None
    driver.handler.on_worker_terminated(worker_id, "process exited: SIGTERM")

    async def turn() -> None:  # the event has been handled on the ResourceManager's loop
        return None

    m.rm.call(turn)


def test_a_taskexecutor_lost_while_running_is_replaced(
    master: tuple[MasterProcess, TestingResourceManagerDriver],
) -> None:
    m, driver = master
    _terminate(m, driver, "worker-1")
    wait_until(lambda: len(driver.started) == 3, timeout=10)


def test_taskexecutors_ending_after_the_stop_signal_are_not_replaced(
    master: tuple[MasterProcess, TestingResourceManagerDriver],
) -> None:
    m, driver = master
    m.request_stop()  # SIGTERM: session stop
    _terminate(m, driver, "worker-1")
    _terminate(m, driver, "worker-2")
    m.stop()
    assert [w for w, _ in driver.started] == ["worker-1", "worker-2"] and driver.terminated
