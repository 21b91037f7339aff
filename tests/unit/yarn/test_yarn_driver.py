from __future__ import annotations

import threading

from tests.unit.yarn.fake_skein import FakeApplicationClient
from yarnflink.deployment.yarn.driver import YarnResourceManagerDriver, wait_idle
from yarnflink.resourcemanager.resources import ResourceProfile, WorkerSpec


class RecordingHandler:
    def __init__(self) -> None:
        self.events: list[tuple[str, ...]] = []

    def on_worker_started(self, worker_id: str) -> None:
        self.events.append(("started", worker_id))

    def on_worker_terminated(self, worker_id: str, diagnostics: str) -> None:
        self.events.append(("terminated", worker_id, diagnostics))

    def on_error(self, error: BaseException) -> None:
        self.events.append(("error", repr(error)))


SPEC = WorkerSpec(ResourceProfile(cpu_cores=2.0, task_heap_mb=384, managed_memory_mb=512), 2)


def _driver(app: FakeApplicationClient) -> tuple[YarnResourceManagerDriver, RecordingHandler]:
    driver = YarnResourceManagerDriver(app, poll_interval=3600)  # the test polls by hand
    handler = RecordingHandler()
    driver.initialize(handler, "am-host:6123")
    return driver, handler


def _start(driver: YarnResourceManagerDriver) -> str:
    wid = driver.start_worker(SPEC)
    wait_idle(driver)
    return wid


def test_start_worker_adds_a_container_and_reports_it_running() -> None:
    app = FakeApplicationClient()
    driver, handler = _driver(app)
    wid = _start(driver)
    (container,) = app.containers.values()
    assert app.requests == [("add_container", "taskexecutor")]
    assert container.env == {"YARNFLINK_RESOURCE_ID": wid, "YARNFLINK_RM_ADDRESS": "am-host:6123"}
    driver.poll_once()
    assert handler.events == []  # still REQUESTED
    app.set_state(container.id, "RUNNING")
    driver.poll_once()
    driver.poll_once()
    assert handler.events == [("started", wid)]
    driver.terminate()


def test_exited_preempted_or_lost_container_is_a_terminated_worker() -> None:
    app = FakeApplicationClient()
    driver, handler = _driver(app)
    a, b, c = _start(driver), _start(driver), _start(driver)
    for cid in app.containers:
        app.set_state(cid, "RUNNING")
    driver.poll_once()
    app.set_state("taskexecutor_0", "FAILED", "Exit code 1")
    app.set_state("taskexecutor_1", "KILLED", "Container preempted by scheduler")
    app.set_state("taskexecutor_2", "FAILED", "Container released on a *lost* node")
    driver.poll_once()
    driver.poll_once()  # reported once
    ended = [e for e in handler.events if e[0] == "terminated"]
    assert [e[1] for e in ended] == [a, b, c]
    assert "FAILED: Exit code 1" in ended[0][2] and "preempted" in ended[1][2] and "lost" in ended[2][2]
    assert ended[0][2].startswith("YARN container container_1_0001_01_000002")
    driver.terminate()


def test_stop_worker_kills_its_container_and_the_poll_reports_it() -> None:
    app = FakeApplicationClient()
    driver, handler = _driver(app)
    wid = _start(driver)
    driver.stop_worker(wid)
    wait_idle(driver)
    assert app.requests[-1] == ("kill_container", "taskexecutor_0")
    driver.poll_once()
    assert handler.events[-1][:2] == ("terminated", wid)
    driver.terminate()


def test_stop_before_skein_answered_kills_once_the_container_exists() -> None:
    app = FakeApplicationClient()
    driver, handler = _driver(app)
    gate = threading.Event()
    driver._calls.submit(gate.wait)  # skein is slow: add_container waits behind this
    wid = driver.start_worker(SPEC)
    driver.stop_worker(wid)
    gate.set()
    wait_idle(driver)
    assert app.requests == [("add_container", "taskexecutor"), ("kill_container", "taskexecutor_0")]
    driver.terminate()


def test_refused_request_is_a_failed_start() -> None:
    app = FakeApplicationClient()
    app.refuse = RuntimeError("queue etl is full")
    driver, handler = _driver(app)
    wid = _start(driver)
    assert handler.events == [("terminated", wid, "container request failed: queue etl is full")]
    driver.terminate()


def test_other_services_are_ignored_and_terminate_kills_every_container() -> None:
    app = FakeApplicationClient()
    driver, handler = _driver(app)
    _start(driver)
    _start(driver)
    app.add_container("standby-master")
    for cid in app.containers:
        app.set_state(cid, "RUNNING")
    driver.poll_once()
    assert len(handler.events) == 2
    driver.terminate()
    kills = sorted(r[1] for r in app.requests if r[0] == "kill_container")
    assert kills == ["taskexecutor_0", "taskexecutor_1"]
    driver.poll_once()
    assert len(handler.events) == 2  # nothing reported after terminate


def test_a_container_no_request_asked_for_is_killed_not_tracked() -> None:
    """skein restarting a dead container (or an earlier attempt's) must not leave an untracked
    TaskExecutor registered under a dead worker's id."""
    app = FakeApplicationClient()
    driver, handler = _driver(app)
    wid = _start(driver)
    app.set_state("taskexecutor_0", "RUNNING")
    driver.poll_once()
    app.set_state("taskexecutor_0", "FAILED", "Exit code 137")
    restarted = app.add_container("taskexecutor", env={"YARNFLINK_RESOURCE_ID": wid})  # what max_restarts did
    app.set_state(restarted.id, "RUNNING")
    driver.poll_once()
    wait_idle(driver)
    assert ("kill_container", restarted.id) in app.requests
    assert handler.events == [("started", wid), ("terminated", wid, handler.events[1][2])]
    driver.poll_once()
    wait_idle(driver)
    assert sum(1 for r in app.requests if r == ("kill_container", restarted.id)) == 1  # told once
    driver.terminate()


def test_a_container_starting_while_a_request_is_unanswered_is_spared() -> None:
    app = FakeApplicationClient()
    driver, handler = _driver(app)
    gate = threading.Event()
    driver._calls.submit(gate.wait)  # add_container not answered yet
    driver.start_worker(SPEC)
    early = app.add_container("taskexecutor")  # skein's container exists before the answer
    driver.poll_once()
    assert driver.tracker.killed_unknown == set()
    gate.set()
    wait_idle(driver)
    assert not any(r == ("kill_container", early.id) for r in app.requests)
    driver.terminate()


def test_stopping_a_worker_whose_container_ended_parks_nothing() -> None:
    app = FakeApplicationClient()
    driver, handler = _driver(app)
    wid = _start(driver)
    app.set_state("taskexecutor_0", "FAILED", "Exit code 1")
    driver.poll_once()
    driver.stop_worker(wid)  # the ResourceManager stops a worker whose container is gone
    wait_idle(driver)
    assert driver._pending_stop == set()
    driver.stop_worker("taskexecutor-never-requested")
    assert driver._pending_stop == set()
    driver.terminate()
