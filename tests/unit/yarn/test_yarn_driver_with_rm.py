"""The YARN driver under the real ResourceManager (its SlotManager decides; skein is the fake):
the minimum of workers is requested as containers, a container that fails before registering is a
failed start and is replaced, and replacements pause past resourcemanager.start-worker.max-failure-rate."""

from __future__ import annotations

import time
from collections.abc import Callable

from tests.unit.yarn.fake_skein import FakeApplicationClient
from yarnflink.common.config import Configuration
from yarnflink.deployment.yarn.driver import YarnResourceManagerDriver
from yarnflink.resourcemanager.resourcemanager import ResourceManager


def _until(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _adds(app: FakeApplicationClient) -> int:
    return sum(1 for r in app.requests if r[0] == "add_container")


def test_failed_containers_are_replaced_until_the_failure_rate_is_exceeded() -> None:
    app = FakeApplicationClient()
    config = Configuration(
        {"resourcemanager.start-worker.max-failure-rate": "1", "resourcemanager.start-worker.retry-interval": "1 h"}
    )
    rm = ResourceManager(
        "127.0.0.1", 0, config=config, driver=YarnResourceManagerDriver(app, poll_interval=0.02), min_slots=2
    )
    rm.start()
    try:
        _until(lambda: _adds(app) == 2)  # two 1-slot TaskExecutors for the minimum
        app.set_state("taskexecutor_0", "FAILED", "Exit code 1")
        _until(lambda: _adds(app) == 3)  # replaced
        app.set_state("taskexecutor_2", "FAILED", "Exit code 1")
        time.sleep(1.0)
        assert _adds(app) == 3  # a second failure within a minute exceeds 1/min: starting pauses
    finally:
        rm.stop()
    assert sorted(r[1] for r in app.requests if r[0] == "kill_container") == ["taskexecutor_1"]
