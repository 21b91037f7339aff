"""A real JobMaster on its own thread, without its gRPC server, whose peers are testing gateways;
the ``start_jobmaster`` fixture (conftest.py) makes one per call and stops them all at the end."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tests.fakes.conditions import wait_until
from tests.fakes.endpoints import NoGrpcServer
from tests.fakes.gateways import TestingGatewayResolver, TestingResourceManagerGateway, TestingTaskExecutorGateway
from tests.unit.scheduler.helpers import graph
from yarnflink.common.config import Configuration
from yarnflink.executiongraph.executiongraph import ExecutionState, JobStatus
from yarnflink.jobgraph.jobgraph import JobGraph
from yarnflink.jobmaster.gateway import (
    JobMasterGateway,
    OfferSlots,
    RegisterTaskManager,
    SerializedThrowable,
    SlotOffer,
    TaskExecutionState,
)
from yarnflink.jobmaster.jobmaster import JobMaster
from yarnflink.taskexecutor.gateway import CancelTask, SubmitTask

__all__ = ["RM_ADDRESS", "RM_TOKEN", "Harness", "JobMasterUnderTest", "StartJobMaster", "running_with_one_slot"]

T = TypeVar("T")
RM_ADDRESS = "rm-1:6124"
RM_TOKEN = "rm-token-1"


class JobMasterUnderTest(NoGrpcServer, JobMaster):
    pass


def _static_check(jm: JobMasterUnderTest) -> JobMasterGateway:
    return jm  # mypy: the JobMaster is a JobMasterGateway


@dataclass
class Harness:
    jm: JobMasterUnderTest
    resolver: TestingGatewayResolver
    rm: TestingResourceManagerGateway
    terminated: threading.Event  # set by the JobMaster's on_terminated
    task_executors: dict[str, TestingTaskExecutorGateway] = field(default_factory=dict)

    def call(self, fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Calls the JobMaster on its own loop, as its servicer does."""
        return self.jm.call(fn, timeout=10)

    @property
    def token(self) -> str:
        return self.jm.jobmaster_id

    def add_task_executor(self, name: str) -> TestingTaskExecutorGateway:
        te = self.resolver.add_task_executor(f"{name}:6122", resource_id=name)
        self.task_executors[name] = te
        return te

    def register(self, te: TestingTaskExecutorGateway) -> None:
        self.call(
            lambda: self.jm.register_task_manager(
                RegisterTaskManager(self.token, self.jm.job_id, te.resource_id, te.address, f"{te.resource_id}:9000")
            )
        )

    def offer(self, te: TestingTaskExecutorGateway, *allocation_ids: str) -> tuple[str, ...]:
        offers = tuple(SlotOffer(a, i) for i, a in enumerate(allocation_ids))
        return self.call(lambda: self.jm.offer_slots(OfferSlots(self.token, te.resource_id, offers)))

    def update(self, execution_id: str, state: ExecutionState, error: SerializedThrowable | None = None) -> None:
        self.call(
            lambda: self.jm.update_task_execution_state(TaskExecutionState(self.token, execution_id, state, error))
        )

    def reports_cancellations(self, te: TestingTaskExecutorGateway) -> None:
        """``te`` answers a cancel, then reports the task CANCELED, as a TaskExecutor does."""

        def cancel(request: CancelTask) -> None:
            update = TaskExecutionState(request.jobmaster_id, request.execution_id, ExecutionState.CANCELED)
            asyncio.get_running_loop().call_soon(asyncio.ensure_future, self.jm.update_task_execution_state(update))

        te.cancel_task_function = cancel

    def deployed(self, te: TestingTaskExecutorGateway) -> list[SubmitTask]:
        return te.requests("submit_task")

    def execution_id(self, te: TestingTaskExecutorGateway, task_name: str) -> str:
        """The attempt of ``task_name`` deployed last to ``te``."""
        return [s.tdd.execution_id for s in self.deployed(te) if s.tdd.task_name == task_name][-1]

    def run_all(self, te: TestingTaskExecutorGateway) -> list[str]:
        """The tasks deployed to ``te`` so far go to RUNNING; their execution ids."""
        ids = [s.tdd.execution_id for s in self.deployed(te)]
        for eid in ids:
            self.update(eid, ExecutionState.INITIALIZING)
            self.update(eid, ExecutionState.RUNNING)
        return ids

    def failures(self) -> str:
        """The job's failures, one string."""
        return " | ".join(f"{f.exception_class}: {f.message}" for f in self.jm.eg.failures)


#: ``start_jobmaster(job_graph=None, config=None, start=True, **JobMaster options)``; ``start``
#: False: the test sets its fakes' behaviour first, then calls ``h.jm.start()``.
StartJobMaster = Callable[..., Harness]


def two_tasks() -> JobGraph:
    """src -> sink, forward, one subtask each: one shared slot."""
    return graph([("src", 1), ("sink", 1)], [("src", "sink", "forward", "P")])


def started_jobmasters() -> Iterator[StartJobMaster]:
    """The ``start_jobmaster`` fixture's body."""
    started: list[JobMasterUnderTest] = []

    def start(
        job_graph: JobGraph | None = None, config: dict[str, str] | None = None, start: bool = True, **kwargs: Any
    ) -> Harness:
        resolver = TestingGatewayResolver()
        rm = resolver.add_resource_manager(RM_ADDRESS, fencing_token=RM_TOKEN)
        terminated = threading.Event()
        jm = JobMasterUnderTest(
            job_graph or two_tasks(),
            "127.0.0.1",
            RM_ADDRESS,
            on_terminated=lambda jm: terminated.set(),
            config=Configuration(config or {}),
            gateways=resolver,
            **kwargs,
        )
        started.append(jm)
        if start:
            jm.start()
        return Harness(jm, resolver, rm, terminated)

    yield start
    for jm in started:
        jm.stop()


def running_with_one_slot(start: StartJobMaster, **kwargs: Any) -> tuple[Harness, TestingTaskExecutorGateway]:
    """A two_tasks job (or ``job_graph``) RUNNING in slot alloc-1 of TaskExecutor te-1."""
    h = start(**kwargs)
    wait_until(lambda: h.rm.count("declare_required_resources") >= 1, what="requirements declared")
    te = h.add_task_executor("te-1")
    h.register(te)
    assert h.offer(te, "alloc-1") == ("alloc-1",)
    wait_until(lambda: len(h.deployed(te)) == 2, what="both tasks deployed")
    h.run_all(te)
    wait_until(lambda: h.jm.eg.status == JobStatus.RUNNING, what="the job running")
    return h, te
