"""The real ResourceManager in active mode (it starts its TaskExecutors), with a
TestingResourceManagerDriver as its driver and testing gateways as its peers: workers started for
demand, started workers that register and get slot requests, failed starts, workers that end
before they register, and idle workers stopped."""

from __future__ import annotations

import asyncio

from tests.fakes.conditions import wait_until
from tests.fakes.driver import TestingResourceManagerDriver
from tests.fakes.gateways import TestingTaskExecutorGateway
from tests.unit.resourcemanager.harness import FAST, JOB, Harness, StartResourceManager
from yarnflink.resourcemanager.gateway import DisconnectJobMaster, DisconnectTaskExecutor, ReportedSlot, SlotReport
from yarnflink.resourcemanager.resources import WorkerSpec
from yarnflink.resourcemanager.slotmanager import AllocationState

#: workers of two slots each
ACTIVE = FAST | {"taskmanager.numberOfTaskSlots": "2"}


def _start(start: StartResourceManager, **config: str) -> tuple[Harness, TestingResourceManagerDriver]:
    driver = TestingResourceManagerDriver()
    return start(ACTIVE | config, driver=driver), driver


def _register_worker(h: Harness, worker_id: str, spec: WorkerSpec) -> TestingTaskExecutorGateway:
    """The started worker's process registers (as a TaskExecutor does, with its resource id)."""
    te, _ = h.register_task_executor(
        worker_id, num_slots=spec.num_slots, report=SlotReport(tuple(ReportedSlot(i) for i in range(spec.num_slots)))
    )
    return te


def test_demand_no_task_executor_can_meet_starts_workers_that_then_get_the_slot_requests(
    start_resource_manager: StartResourceManager,
) -> None:
    h, driver = _start(start_resource_manager)
    assert driver.resource_manager_address == h.rm.address
    h.keep_alive(h.register_job_master(JOB, slots=3))

    wait_until(lambda: len(driver.started) == 2, what="two workers of two slots started")
    assert {spec.num_slots for _, spec in driver.started} == {2}
    first = _register_worker(h, *driver.started[0])
    second = _register_worker(h, *driver.started[1])

    wait_until(lambda: first.count("request_slot") + second.count("request_slot") == 3, what="three slot requests")
    wait_until(lambda: h.rm.slot_manager.allocated_to(JOB) == 3, what="three slots allocated")
    assert len(driver.started) == 2 and not h.rm.slot_manager.pending_workers


def _no_container(spec: WorkerSpec) -> str:
    raise OSError("no container")


def test_failed_starts_are_tried_again_after_the_retry_interval(start_resource_manager: StartResourceManager) -> None:
    h, driver = _start(
        start_resource_manager,
        **{
            "resourcemanager.start-worker.max-failure-rate": "1",
            "resourcemanager.start-worker.retry-interval": "50 ms",
        },
    )
    driver.start_worker_function = _no_container

    h.keep_alive(h.register_job_master(JOB, slots=1))
    wait_until(lambda: driver.start_failures >= 3, what="the start tried again and again")
    driver.start_worker_function = lambda spec: "worker-ok"

    wait_until(lambda: [w for w, _ in driver.started] == ["worker-ok"], what="a worker started")
    te = _register_worker(h, *driver.started[0])
    wait_until(lambda: te.count("request_slot") == 1, what="its slot requested")


def test_failed_starts_without_a_retry_interval_are_tried_again_without_recursing(
    start_resource_manager: StartResourceManager,
) -> None:
    h, driver = _start(
        start_resource_manager,
        **{
            "resourcemanager.start-worker.max-failure-rate": "1",
            "resourcemanager.start-worker.retry-interval": "0 ms",
        },
    )
    driver.start_worker_function = _no_container

    h.keep_alive(h.register_job_master(JOB, slots=1))
    # more failed starts than a recursion of them could take (Python's recursion limit is 1000)
    wait_until(lambda: driver.start_failures >= 2000, timeout=30, what="the start tried again and again")
    driver.start_worker_function = lambda spec: "worker-ok"

    wait_until(lambda: [w for w, _ in driver.started] == ["worker-ok"], what="a worker started")


def test_a_worker_that_ends_before_it_registered_is_replaced(start_resource_manager: StartResourceManager) -> None:
    h, driver = _start(start_resource_manager)
    h.keep_alive(h.register_job_master(JOB, slots=1))
    wait_until(lambda: len(driver.started) == 1, what="a worker started")
    assert driver.handler is not None

    driver.handler.on_worker_terminated("worker-1", "exit code 1")  # (the driver's thread: any)

    wait_until(lambda: len(driver.started) == 2, what="another worker started")
    assert "worker-1" not in h.rm.slot_manager.pending_workers


def test_a_registered_worker_whose_process_ended_is_lost_and_its_job_told(
    start_resource_manager: StartResourceManager,
) -> None:
    h, driver = _start(start_resource_manager, **{"heartbeat.timeout": "1 h"})
    jm = h.register_job_master(JOB, slots=1)
    h.keep_alive(jm)
    wait_until(lambda: len(driver.started) == 1, what="a worker started")
    te = _register_worker(h, *driver.started[0])
    wait_until(lambda: te.count("request_slot") == 1, what="its slot requested")
    assert driver.handler is not None

    driver.handler.on_worker_terminated("worker-1", "killed by the node manager")

    wait_until(lambda: "worker-1" not in h.rm.slot_manager.task_executors, what="the worker lost")
    wait_until(lambda: jm.count("disconnect_task_manager") == 1, what="the JobMaster told")
    assert te.address in h.resolver.forgotten
    wait_until(lambda: len(driver.started) == 2, what="a replacement started")


def test_an_idle_worker_is_stopped_and_forgotten(start_resource_manager: StartResourceManager) -> None:
    h, driver = _start(start_resource_manager, **{"resourcemanager.taskmanager-timeout": "100 ms"})
    h.keep_alive(h.register_job_master(JOB, slots=1))
    wait_until(lambda: len(driver.started) == 1, what="a worker started")
    te = _register_worker(h, *driver.started[0])
    wait_until(
        lambda: set(h.allocations("worker-1").values()) == {AllocationState.ALLOCATED}, what="its slot allocated"
    )

    h.call(lambda: h.rm.disconnect_job_master(_disconnect(h)))  # the job ended
    te.slot_report = SlotReport((ReportedSlot(0), ReportedSlot(1)), version=2)  # its slot freed (after the ack's 1)

    wait_until(lambda: driver.stopped == ["worker-1"], what="the idle worker stopped")
    assert "worker-1" not in h.rm.slot_manager.task_executors
    wait_until(lambda: te.address in h.resolver.forgotten, what="its address forgotten")


def _disconnect(h: Harness) -> DisconnectJobMaster:
    return DisconnectJobMaster(h.token, JOB, "FINISHED")


def test_task_executors_that_go_while_the_resource_manager_stops_are_not_replaced(
    start_resource_manager: StartResourceManager,
) -> None:
    """The driver's ``terminate`` stops every TaskExecutor; each one's disconnect reaches the
    ResourceManager meanwhile, and must not start a new process (that outlives the stop)."""
    h, driver = _start(start_resource_manager, **{"slotmanager.number-of-slots.min": "2"})
    wait_until(lambda: len(driver.started) == 1, what="the minimum's worker started")
    _register_worker(h, *driver.started[0])
    disconnected: list[None] = []

    def terminate() -> None:  # on the executor thread, as the local driver's, while the loop runs
        disconnect = DisconnectTaskExecutor(h.token, driver.started[0][0], "TaskExecutor stopped")
        disconnected.append(
            asyncio.run_coroutine_threadsafe(h.rm.disconnect_task_executor(disconnect), h.rm.loop).result()
        )
        driver.terminated = True

    driver.terminate = terminate  # type: ignore[method-assign]
    h.rm.stop()

    assert disconnected and driver.terminated
    assert len(driver.started) == 1
