"""A real TaskExecutor on its own thread (running real tasks), without its gRPC server, whose peers
are testing gateways; the ``start_task_executor`` fixture (conftest.py) makes one per call and
stops them all at the end."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import cloudpickle

from tests.fakes.conditions import wait_until
from tests.fakes.endpoints import NoGrpcServer
from tests.fakes.gateways import (
    TestingGatewayResolver,
    TestingJobMasterGateway,
    TestingResourceManagerGateway,
)
from yarnflink.executiongraph.executiongraph import ExecutionState
from yarnflink.operators.specs import CollectSinkSpec, SequenceSourceSpec
from yarnflink.resourcemanager.gateway import NotifySlotAvailable
from yarnflink.resourcemanager.resources import UNKNOWN
from yarnflink.taskexecutor.gateway import (
    ChainedOperator,
    RequestSlot,
    SlotRequestAck,
    SubmitTask,
    TaskDeploymentDescriptor,
    TaskExecutorGateway,
)
from yarnflink.taskexecutor.slottable import SlotState
from yarnflink.taskexecutor.taskexecutor import TaskExecutor

__all__ = [
    "ENDLESS",
    "JM_ADDRESS",
    "JM_TOKEN",
    "JOB",
    "RM_ADDRESS",
    "RM_TOKEN",
    "Harness",
    "StartTaskExecutor",
    "TaskExecutorUnderTest",
    "collecting_task",
    "source_task",
]

T = TypeVar("T")
RM_ADDRESS = "rm-1:6124"
RM_TOKEN = "rm-token-1"
JOB = "job-1"
JM_ADDRESS = "jm-1:6123"
JM_TOKEN = "jm-token-1"
ENDLESS = 10**12  # a source that runs until it is cancelled


class TaskExecutorUnderTest(NoGrpcServer, TaskExecutor):
    pass


def _static_check(te: TaskExecutorUnderTest) -> TaskExecutorGateway:
    return te  # mypy: the TaskExecutor is a TaskExecutorGateway


@dataclass
class Harness:
    te: TaskExecutorUnderTest
    resolver: TestingGatewayResolver
    rm: TestingResourceManagerGateway
    jm: TestingJobMasterGateway

    def call(self, fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Calls the TaskExecutor on its own loop, as its servicer does."""
        return self.te.call(fn, timeout=10)

    def request_slot(
        self, allocation_id: str = "alloc-1", slot_index: int = 0, token: str = RM_TOKEN, jobmaster_id: str = JM_TOKEN
    ) -> SlotRequestAck:
        request = RequestSlot(token, slot_index, JOB, allocation_id, UNKNOWN, JM_ADDRESS, jobmaster_id)
        return self.call(lambda: self.te.request_slot(request))

    def slot_state(self, allocation_id: str) -> SlotState | None:
        slot = self.te.slot_table.by_allocation(allocation_id)
        return None if slot is None else slot.state

    def active_slot(self, allocation_id: str = "alloc-1", token: str = RM_TOKEN) -> None:
        """A slot of job-1 (alloc-n: slot n-1), requested by the ResourceManager of ``token``,
        offered to and accepted by job-1's JobMaster."""
        self.request_slot(allocation_id, slot_index=int(allocation_id.rpartition("-")[2]) - 1, token=token)
        wait_until(lambda: self.slot_state(allocation_id) == SlotState.ACTIVE, what=f"{allocation_id} active")

    def submit(
        self,
        execution_id: str,
        end: int = ENDLESS,
        allocation_id: str = "alloc-1",
        config: dict[str, str] | None = None,
    ) -> None:
        """Deploys a source task (0 .. ``end``) into ``allocation_id``, with the job's ``config``."""
        tdd = source_task(execution_id, allocation_id, end, config or {})
        self.call(lambda: self.te.submit_task(SubmitTask(JM_TOKEN, tdd)))

    def states(self, execution_id: str) -> list[ExecutionState]:
        return [u.state for u in self.jm.requests("update_task_execution_state") if u.execution_id == execution_id]

    def wait_state(self, execution_id: str, state: ExecutionState) -> None:
        def reached() -> bool:
            updates = [u for u in self.jm.requests("update_task_execution_state") if u.execution_id == execution_id]
            if any(u.state == state for u in updates):
                return True
            ended = [u for u in updates if u.state.terminal]
            assert not ended, f"{execution_id} ended {ended[0].state.value}, not {state.value}: {ended[0].error}"
            return False

        wait_until(reached, timeout=30, what=f"{execution_id} {state.value}")

    def freed(self) -> list[NotifySlotAvailable]:
        return self.rm.requests("notify_slot_available")


def source_task(execution_id: str, allocation_id: str, end: int, config: dict[str, str]) -> TaskDeploymentDescriptor:
    """One task: a sequence source 0 .. ``end`` (its records go nowhere)."""
    return TaskDeploymentDescriptor(
        job_id=JOB,
        job_name="test",
        vertex_id="v" * 32,
        task_name="source",
        execution_id=execution_id,
        subtask_index=0,
        parallelism=1,
        max_parallelism=128,
        attempt_number=0,
        allocation_id=allocation_id,
        operators=(
            ChainedOperator(
                node_id=1,
                name="source",
                kind="source",
                uid="source",
                spec=cloudpickle.dumps(SequenceSourceSpec(0, end)),
            ),
        ),
        job_config=config,
    )


def collecting_task(execution_id: str, allocation_id: str) -> TaskDeploymentDescriptor:
    """One task: a sequence source 0 .. 99 chained to a collect sink (``execute_and_collect()``)."""
    source = ChainedOperator(
        node_id=1, name="source", kind="source", spec=cloudpickle.dumps(SequenceSourceSpec(0, 99)), chained_outputs=(2,)
    )
    sink = ChainedOperator(node_id=2, name="collect", kind="sink", spec=cloudpickle.dumps(CollectSinkSpec()))
    return dataclasses.replace(source_task(execution_id, allocation_id, 99, {}), operators=(source, sink))


#: ``start_task_executor(registered=True, start=True, **TaskExecutor options)``: see
#: ``started_task_executors``.
StartTaskExecutor = Callable[..., Harness]


def started_task_executors() -> Iterator[StartTaskExecutor]:
    """The ``start_task_executor`` fixture's body."""
    started: list[TaskExecutorUnderTest] = []

    def start(registered: bool = True, start: bool = True, **kwargs: Any) -> Harness:
        """``registered``: wait for its registration at the ResourceManager. ``start`` False: the
        test sets its fakes' behaviour first, then calls ``h.te.start()``. With an
        ``rm_leader_retriever`` it follows the leader that one publishes (HA), else rm-1."""
        resolver = TestingGatewayResolver()
        rm = resolver.add_resource_manager(RM_ADDRESS, fencing_token=RM_TOKEN)
        jm = resolver.add_job_master(JM_ADDRESS, jobmaster_id=JM_TOKEN)
        options: dict[str, Any] = {"num_slots": 2, "resource_id": "te-1", "heartbeat_interval_s": 0.05}
        fixed = None if "rm_leader_retriever" in kwargs else RM_ADDRESS
        te = TaskExecutorUnderTest(fixed, gateways=resolver, **(options | kwargs))
        started.append(te)
        h = Harness(te, resolver, rm, jm)
        if start:
            te.start()
            if registered:
                wait_until(lambda: bool(te.rm_token), what="registered at the ResourceManager")
        return h

    yield start
    for te in started:
        te.stop()
