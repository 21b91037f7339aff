"""The Dispatcher's views of the cluster (REST ``/overview``, ``/taskmanagers``, the master's
metrics, its Prometheus samples) get their figures from the ResourceManager through its
ResourceManagerControlGateway, here a TestingResourceManagerGateway: no ResourceManager runs."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.fakes.gateways import TestingGatewayResolver, TestingResourceManagerGateway
from yarnflink.common.config import Configuration
from yarnflink.dispatcher.dispatcher import Dispatcher
from yarnflink.dispatcher.monitoring import master_samples
from yarnflink.resourcemanager.gateway import ResourceOverview, SlotInfo, TaskManagerInfo, TaskManagerSlot
from yarnflink.resourcemanager.resources import ResourceProfile

SLOT = ResourceProfile(cpu_cores=1.0, task_heap_mb=256)
TE_1 = TaskManagerInfo(
    resource_id="te-1",
    rpc_address="te-1:6122",
    data_port=9000,
    time_since_last_heartbeat_ms=120,
    number_slots=2,
    number_available_slots=1,
    total_resource=ResourceProfile(cpu_cores=2.0, task_heap_mb=512),
    free_resource=SLOT,
    pid=4242,
    hostname="host-1",
    allocated_slots=(SlotInfo("job-1", SLOT),),
    slots=(TaskManagerSlot(0, "alloc-1", "job-1", "ALLOCATED", SLOT), TaskManagerSlot(1, None, None, "FREE", SLOT)),
)


@pytest.fixture
def rm() -> TestingResourceManagerGateway:
    gateway = TestingResourceManagerGateway()
    gateway.request_resource_overview_function = lambda r: ResourceOverview(7, 11, 5)
    gateway.request_task_manager_info_function = lambda r: (TE_1,)
    return gateway


@pytest.fixture
def dispatcher(rm: TestingResourceManagerGateway) -> Iterator[Dispatcher]:
    config = Configuration({"rest.port": "0", "security.rest.authentication": "none"})
    d = Dispatcher(config, rm, rest_host="127.0.0.1", rest_port=0, gateways=TestingGatewayResolver())
    d.start()
    yield d
    d.stop()


def _get(d: Dispatcher, path: str) -> httpx.Response:
    return httpx.get(d.rest_url + path, timeout=10)


def test_the_cluster_overview_counts_what_the_resource_manager_gateway_answers(
    dispatcher: Dispatcher, rm: TestingResourceManagerGateway
) -> None:
    overview = _get(dispatcher, "/overview").json()

    assert (overview["taskmanagers"], overview["slots-total"], overview["slots-available"]) == (7, 11, 5)
    assert rm.count("request_resource_overview") == 1


def test_the_task_managers_are_the_resource_manager_gateways_in_flinks_shape(
    dispatcher: Dispatcher, rm: TestingResourceManagerGateway
) -> None:
    (tm,) = _get(dispatcher, "/taskmanagers").json()["taskmanagers"]

    assert {k: tm[k] for k in ("id", "path", "dataPort", "timeSinceLastHeartbeat", "slotsNumber", "freeSlots")} == {
        "id": "te-1",
        "path": "te-1:6122",
        "dataPort": 9000,
        "timeSinceLastHeartbeat": 120,
        "slotsNumber": 2,
        "freeSlots": 1,
    }
    assert tm["hardware"] == {"pid": 4242, "host": "host-1", "cpuCores": 2.0}
    assert tm["totalResource"] == TE_1.total_resource.to_json()
    assert tm["freeResource"] == SLOT.to_json()
    assert tm["allocatedSlots"] == [{"jobId": "job-1", "resource": SLOT.to_json()}]
    assert [(s["index"], s["allocationId"], s["jobId"], s["status"]) for s in tm["slots"]] == [
        (0, "alloc-1", "job-1", "ALLOCATED"),
        (1, None, None, "FREE"),
    ]
    assert rm.count("request_task_manager_info") == 1


def test_the_masters_metrics_and_prometheus_samples_count_through_the_gateway(
    dispatcher: Dispatcher, rm: TestingResourceManagerGateway
) -> None:
    wanted = "/jobmanager/metrics?get=numRegisteredTaskManagers,taskSlotsTotal,taskSlotsAvailable"
    values = {v["id"]: v["value"] for v in _get(dispatcher, wanted).json()}
    samples = {s.name: s.value for s in master_samples(dispatcher)}  # from this thread, as the reporter's

    for figures in (values, {k.removeprefix("jobmanager_"): v for k, v in samples.items()}):
        assert (
            float(figures["numRegisteredTaskManagers"]),
            float(figures["taskSlotsTotal"]),
            float(figures["taskSlotsAvailable"]),
        ) == (7.0, 11.0, 5.0)
    assert rm.count("request_resource_overview") == 2
