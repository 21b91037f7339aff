"""A real ResourceManager on its own thread, without its gRPC server, whose peers are testing
gateways; the ``start_resource_manager`` fixture (conftest.py) makes one per call and stops them
all at the end."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tests.fakes.endpoints import NoGrpcServer
from tests.fakes.gateways import (
    TestingGatewayResolver,
    TestingJobMasterGateway,
    TestingTaskExecutorGateway,
)
from yarnflink.common.config import Configuration
from yarnflink.resourcemanager.gateway import (
    DeclareRequiredResources,
    JobMasterHeartbeat,
    RegisterJobMaster,
    RegisterTaskExecutor,
    ReportedSlot,
    ResourceManagerGateway,
    ResourceRequirement,
    SlotReport,
    TaskExecutorRegistrationSuccess,
)
from yarnflink.resourcemanager.resourcemanager import ResourceManager
from yarnflink.resourcemanager.resources import UNKNOWN
from yarnflink.resourcemanager.slotmanager import AllocationState

__all__ = ["FAST", "JOB", "Harness", "ResourceManagerUnderTest", "StartResourceManager"]

T = TypeVar("T")
JOB = "job-1"
#: fast heartbeats: a peer failing two in a row is lost within a fraction of a second; the timeout
#: (a silent peer) is long enough for a busy machine (the tests of timeouts shorten it)
FAST = {"heartbeat.interval": "50 ms", "heartbeat.timeout": "5 s", "heartbeat.rpc-failure-threshold": "2"}


class ResourceManagerUnderTest(NoGrpcServer, ResourceManager):
    pass


def _static_check(rm: ResourceManagerUnderTest) -> ResourceManagerGateway:
    return rm  # mypy: the ResourceManager is a ResourceManagerGateway


@dataclass
class Harness:
    rm: ResourceManagerUnderTest
    resolver: TestingGatewayResolver
    #: what the test runs on the ResourceManager's loop in its peers' place (cancelled at the end)
    background: list[concurrent.futures.Future[None]] = field(default_factory=list)

    def call(self, fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Calls the ResourceManager on its own loop, as its servicer does."""
        return self.rm.call(fn, timeout=10)

    @property
    def token(self) -> str:
        return self.rm.fencing_token

    def register_task_executor(
        self, name: str, num_slots: int = 2, report: SlotReport | None = None
    ) -> tuple[TestingTaskExecutorGateway, TaskExecutorRegistrationSuccess]:
        te = self.resolver.add_task_executor(f"{name}:6122", resource_id=name)
        te.slot_report = report or SlotReport(tuple(ReportedSlot(i) for i in range(num_slots)), 0)
        request = RegisterTaskExecutor(name, te.address, f"{name}:9000", num_slots, slot_report=te.slot_report)
        return te, self.call(lambda: self.rm.register_task_executor(request))

    def register_job_master(self, job_id: str = JOB, slots: int = 0) -> TestingJobMasterGateway:
        jm = self.resolver.add_job_master(f"jm-{job_id}:6123", jobmaster_id=f"jm-token-{job_id}")
        self.call(lambda: self.rm.register_job_master(RegisterJobMaster(job_id, jm.address, jm.jobmaster_id)))
        if slots:
            self.declare(jm, job_id, slots)
        return jm

    def declare(self, jm: TestingJobMasterGateway, job_id: str, slots: int, token: str | None = None) -> None:
        request = DeclareRequiredResources(
            self.token if token is None else token,
            job_id,
            jm.address,
            (ResourceRequirement(UNKNOWN, slots, "default"),),
            jm.jobmaster_id,
        )
        self.call(lambda: self.rm.declare_required_resources(request))

    def keep_alive(self, jm: TestingJobMasterGateway, job_id: str = JOB) -> None:
        """``jm`` heartbeats the ResourceManager every heartbeat interval from now on, as a JobMaster does."""

        async def heartbeats() -> None:
            while True:
                await self.rm.heartbeat_from_job_master(JobMasterHeartbeat(self.token, job_id, jm.jobmaster_id))
                await asyncio.sleep(self.rm.heartbeat_interval_s)

        self.background.append(asyncio.run_coroutine_threadsafe(heartbeats(), self.rm.loop))

    def allocations(self, resource_id: str) -> dict[str, AllocationState]:
        te = self.rm.slot_manager.task_executors.get(resource_id)
        return {} if te is None else {a.allocation_id: a.state for a in list(te.allocations.values())}


#: ``start_resource_manager(config=None, **ResourceManager options)``
StartResourceManager = Callable[..., Harness]


def started_resource_managers() -> Iterator[StartResourceManager]:
    """The ``start_resource_manager`` fixture's body."""
    started: list[Harness] = []

    def start(config: dict[str, str] | None = None, **kwargs: Any) -> Harness:
        resolver = TestingGatewayResolver()
        rm = ResourceManagerUnderTest("127.0.0.1", config=Configuration(config or {}), gateways=resolver, **kwargs)
        h = Harness(rm, resolver)
        started.append(h)
        rm.start()
        return h

    yield start
    for h in started:
        for f in h.background:
            f.cancel()
        h.rm.stop()
