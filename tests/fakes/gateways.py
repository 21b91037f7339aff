"""Testing gateways: fakes of the JobMaster, ResourceManager and TaskExecutor gateways, and the
``TestingGatewayResolver`` an endpoint under test gets its peers from (the idea of Flink's
TestingTaskExecutorGateway: a small class whose answers are plain functions set per test).

Every method of a testing gateway records the call (``calls``, in order) and answers with its
``<method>_function``: a function of the request that returns the answer, or an awaitable of it,
or raises. The defaults succeed (an ``Acknowledge``-like ``None``, or a plausible answer). A test
sets what it needs::

    te = resolver.add_task_executor("te-1:6122")
    te.submit_task_function = raises(RpcUnreachable("connection refused"))
    te.request_slot_function = lambda r: SlotRequestAck(r.slot_index, slot_report_version=7)

``gateway.down = RpcUnreachable(...)`` makes every call raise (the peer's process is gone); an
address the resolver does not know answers every call with ``RpcUnreachable``, as a channel to
nothing does. The gateways hold no lock: they run on the endpoint's loop, and tests read
``calls`` after waiting for them (``tests.fakes.conditions``).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NoReturn, TypeAlias, TypeVar

from yarnflink.common.rpc_errors import RPC_TIMEOUT_S, RpcUnreachable
from yarnflink.jobmaster.gateway import (
    AcknowledgeCheckpoint,
    CoordinationData,
    DeclineCheckpoint,
    DisconnectTaskManager,
    OfferSlots,
    ReconnectTaskManager,
    RegisterTaskManager,
    TaskExecutionState,
    TaskManagerHeartbeat,
)
from yarnflink.resourcemanager.gateway import (
    DeclareRequiredResources,
    DisconnectJobMaster,
    DisconnectTaskExecutor,
    JobMasterHeartbeat,
    JobMasterRegistrationSuccess,
    NotifySlotAvailable,
    RegisterJobMaster,
    RegisterTaskExecutor,
    ResourceOverview,
    SlotReport,
    TaskExecutorRegistrationSuccess,
    TaskManagerInfo,
)
from yarnflink.taskexecutor.gateway import (
    CancelTask,
    DisconnectJobManager,
    FreeSlot,
    NotifyCheckpoint,
    ReleasePartitions,
    RequestSlot,
    RequestTaskExecutorInfo,
    SlotRequestAck,
    SubmitTask,
    TaskExecutorInfo,
    TriggerCheckpoint,
)

__all__ = [
    "Call",
    "TestingGatewayResolver",
    "TestingJobMasterGateway",
    "TestingResourceManagerGateway",
    "TestingTaskExecutorGateway",
    "raises",
]

R = TypeVar("R")
T = TypeVar("T")
#: What a ``<method>_function`` returns: the answer, or an awaitable of it (an ``async def``).
Answer: TypeAlias = T | Awaitable[T]


def raises(error: BaseException) -> Callable[[object], NoReturn]:
    """A behaviour that fails every call with (a copy of) ``error``, e.g. ``RpcTimeout("...")``."""

    def fail(request: object) -> NoReturn:
        raise copy.copy(error)

    return fail


def _ack(request: object) -> None:
    return None


@dataclass(frozen=True, slots=True)
class Call:
    method: str  # the gateway method's name, e.g. "submit_task"
    request: Any  # its request message (a str for a heartbeat's token)
    timeout: float  # the deadline the caller gave


class _TestingGateway:
    def __init__(self, address: str) -> None:
        self.address = address
        self.calls: list[Call] = []
        #: set: every call fails with (a copy of) it before its function runs
        self.down: BaseException | None = None

    def requests(self, method: str) -> list[Any]:
        """The requests of every call of ``method`` so far, in order."""
        return [c.request for c in self.calls if c.method == method]

    def count(self, method: str) -> int:
        return sum(1 for c in self.calls if c.method == method)

    async def _answer(self, method: str, request: R, function: Callable[[R], Answer[T]], timeout: float) -> T:
        self.calls.append(Call(method, request, timeout))
        if self.down is not None:
            raise copy.copy(self.down)
        result = function(request)
        if inspect.isawaitable(result):
            return await result
        return result

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.address!r}, {len(self.calls)} calls)"


class TestingTaskExecutorGateway(_TestingGateway):
    """A TaskExecutor as its callers see it. Default answers: a slot request is acknowledged with
    the slot asked for; the heartbeat answers ``slot_report``."""

    __test__ = False  # not a pytest test class

    def __init__(self, address: str = "te-1:6122", resource_id: str = "te-1") -> None:
        super().__init__(address)
        self.resource_id = resource_id
        #: answered to heartbeats (and inside the default TaskExecutorInfo)
        self.slot_report = SlotReport()
        self.request_slot_function: Callable[[RequestSlot], Answer[SlotRequestAck]] = lambda r: SlotRequestAck(
            max(r.slot_index, 0), slot_report_version=1
        )
        self.submit_task_function: Callable[[SubmitTask], Answer[None]] = _ack
        self.cancel_task_function: Callable[[CancelTask], Answer[None]] = _ack
        self.free_slot_function: Callable[[FreeSlot], Answer[None]] = _ack
        self.release_partitions_function: Callable[[ReleasePartitions], Answer[None]] = _ack
        self.disconnect_job_manager_function: Callable[[DisconnectJobManager], Answer[None]] = _ack
        self.request_task_executor_info_function: Callable[[RequestTaskExecutorInfo], Answer[TaskExecutorInfo]] = (
            lambda r: TaskExecutorInfo(self.resource_id, self.slot_report)
        )
        self.heartbeat_from_resource_manager_function: Callable[[str], Answer[SlotReport]] = lambda token: (
            self.slot_report
        )
        self.trigger_checkpoint_function: Callable[[TriggerCheckpoint], Answer[None]] = _ack
        self.notify_checkpoint_complete_function: Callable[[NotifyCheckpoint], Answer[None]] = _ack
        self.notify_checkpoint_aborted_function: Callable[[NotifyCheckpoint], Answer[None]] = _ack

    async def request_slot(self, request: RequestSlot, *, timeout: float = RPC_TIMEOUT_S) -> SlotRequestAck:
        return await self._answer("request_slot", request, self.request_slot_function, timeout)

    async def submit_task(self, request: SubmitTask, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._answer("submit_task", request, self.submit_task_function, timeout)

    async def cancel_task(self, request: CancelTask, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._answer("cancel_task", request, self.cancel_task_function, timeout)

    async def free_slot(self, request: FreeSlot, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._answer("free_slot", request, self.free_slot_function, timeout)

    async def release_partitions(self, request: ReleasePartitions, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._answer("release_partitions", request, self.release_partitions_function, timeout)

    async def disconnect_job_manager(self, request: DisconnectJobManager, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._answer("disconnect_job_manager", request, self.disconnect_job_manager_function, timeout)

    async def request_task_executor_info(
        self, request: RequestTaskExecutorInfo, *, timeout: float = RPC_TIMEOUT_S
    ) -> TaskExecutorInfo:
        return await self._answer(
            "request_task_executor_info", request, self.request_task_executor_info_function, timeout
        )

    async def heartbeat_from_resource_manager(
        self, resource_manager_token: str, *, timeout: float = RPC_TIMEOUT_S
    ) -> SlotReport:
        return await self._answer(
            "heartbeat_from_resource_manager",
            resource_manager_token,
            self.heartbeat_from_resource_manager_function,
            timeout,
        )

    async def trigger_checkpoint(self, request: TriggerCheckpoint, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._answer("trigger_checkpoint", request, self.trigger_checkpoint_function, timeout)

    async def notify_checkpoint_complete(self, request: NotifyCheckpoint, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._answer("notify_checkpoint_complete", request, self.notify_checkpoint_complete_function, timeout)

    async def notify_checkpoint_aborted(self, request: NotifyCheckpoint, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._answer("notify_checkpoint_aborted", request, self.notify_checkpoint_aborted_function, timeout)


class TestingJobMasterGateway(_TestingGateway):
    """A JobMaster as TaskExecutors and the ResourceManager see it. Default answers: every
    offered slot is accepted."""

    __test__ = False

    def __init__(self, address: str = "jm-1:6123", jobmaster_id: str = "jm-token-1") -> None:
        super().__init__(address)
        self.jobmaster_id = jobmaster_id
        self.register_task_manager_function: Callable[[RegisterTaskManager], Answer[None]] = _ack
        self.offer_slots_function: Callable[[OfferSlots], Answer[tuple[str, ...]]] = lambda r: tuple(
            o.allocation_id for o in r.offers
        )
        self.update_task_execution_state_function: Callable[[TaskExecutionState], Answer[None]] = _ack
        self.acknowledge_checkpoint_function: Callable[[AcknowledgeCheckpoint], Answer[None]] = _ack
        self.decline_checkpoint_function: Callable[[DeclineCheckpoint], Answer[None]] = _ack
        self.send_coordination_data_function: Callable[[CoordinationData], Answer[None]] = _ack
        self.heartbeat_from_task_manager_function: Callable[[TaskManagerHeartbeat], Answer[None]] = _ack
        self.disconnect_task_manager_function: Callable[[DisconnectTaskManager], Answer[None]] = _ack
        self.reconnect_task_manager_function: Callable[[ReconnectTaskManager], Answer[None]] = _ack

    async def register_task_manager(self, request: RegisterTaskManager, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._answer("register_task_manager", request, self.register_task_manager_function, timeout)

    async def offer_slots(self, request: OfferSlots, *, timeout: float = RPC_TIMEOUT_S) -> tuple[str, ...]:
        return await self._answer("offer_slots", request, self.offer_slots_function, timeout)

    async def update_task_execution_state(self, request: TaskExecutionState, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._answer("update_task_execution_state", request, self.update_task_execution_state_function, timeout)

    async def acknowledge_checkpoint(self, request: AcknowledgeCheckpoint, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._answer("acknowledge_checkpoint", request, self.acknowledge_checkpoint_function, timeout)

    async def decline_checkpoint(self, request: DeclineCheckpoint, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._answer("decline_checkpoint", request, self.decline_checkpoint_function, timeout)

    async def send_coordination_data(self, request: CoordinationData, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._answer("send_coordination_data", request, self.send_coordination_data_function, timeout)

    async def heartbeat_from_task_manager(
        self, request: TaskManagerHeartbeat, *, timeout: float = RPC_TIMEOUT_S
    ) -> None:
        await self._answer("heartbeat_from_task_manager", request, self.heartbeat_from_task_manager_function, timeout)

    async def disconnect_task_manager(self, request: DisconnectTaskManager, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._answer("disconnect_task_manager", request, self.disconnect_task_manager_function, timeout)

    async def reconnect_task_manager(self, request: ReconnectTaskManager, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._answer("reconnect_task_manager", request, self.reconnect_task_manager_function, timeout)


class TestingResourceManagerGateway(_TestingGateway):
    """A ResourceManager as TaskExecutors and JobMasters see it (ResourceManagerGateway), and as the
    Dispatcher does (ResourceManagerControlGateway). Default answers: registrations succeed with
    ``fencing_token`` and fast heartbeats; a JobMaster's heartbeat finds its job known; no
    TaskExecutor is registered. The control calls' request is ``None``."""

    __test__ = False

    def __init__(self, address: str = "rm-1:6124", fencing_token: str = "rm-token-1") -> None:
        super().__init__(address)
        self.fencing_token = fencing_token
        self.resource_id = "rm-1"
        self.heartbeat_interval_ms = 100
        self.heartbeat_timeout_ms = 1000
        self.register_task_executor_function: Callable[
            [RegisterTaskExecutor], Answer[TaskExecutorRegistrationSuccess]
        ] = lambda r: TaskExecutorRegistrationSuccess(
            registration_id=f"registration-{self.count('register_task_executor')}",
            fencing_token=self.fencing_token,
            resource_manager_resource_id=self.resource_id,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            heartbeat_timeout_ms=self.heartbeat_timeout_ms,
        )
        self.notify_slot_available_function: Callable[[NotifySlotAvailable], Answer[None]] = _ack
        self.disconnect_task_executor_function: Callable[[DisconnectTaskExecutor], Answer[None]] = _ack
        self.register_job_master_function: Callable[[RegisterJobMaster], Answer[JobMasterRegistrationSuccess]] = (
            lambda r: JobMasterRegistrationSuccess(
                fencing_token=self.fencing_token,
                heartbeat_interval_ms=self.heartbeat_interval_ms,
                heartbeat_timeout_ms=self.heartbeat_timeout_ms,
                heartbeat_rpc_failure_threshold=2,
            )
        )
        self.declare_required_resources_function: Callable[[DeclareRequiredResources], Answer[None]] = _ack
        self.disconnect_job_master_function: Callable[[DisconnectJobMaster], Answer[None]] = _ack
        self.heartbeat_from_job_master_function: Callable[[JobMasterHeartbeat], Answer[bool]] = lambda r: True
        self.request_task_manager_info_function: Callable[[None], Answer[tuple[TaskManagerInfo, ...]]] = lambda r: ()
        self.request_resource_overview_function: Callable[[None], Answer[ResourceOverview]] = lambda r: (
            ResourceOverview(0, 0, 0)
        )

    async def register_task_executor(
        self, request: RegisterTaskExecutor, *, timeout: float = RPC_TIMEOUT_S
    ) -> TaskExecutorRegistrationSuccess:
        return await self._answer("register_task_executor", request, self.register_task_executor_function, timeout)

    async def notify_slot_available(self, request: NotifySlotAvailable, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._answer("notify_slot_available", request, self.notify_slot_available_function, timeout)

    async def disconnect_task_executor(
        self, request: DisconnectTaskExecutor, *, timeout: float = RPC_TIMEOUT_S
    ) -> None:
        await self._answer("disconnect_task_executor", request, self.disconnect_task_executor_function, timeout)

    async def register_job_master(
        self, request: RegisterJobMaster, *, timeout: float = RPC_TIMEOUT_S
    ) -> JobMasterRegistrationSuccess:
        return await self._answer("register_job_master", request, self.register_job_master_function, timeout)

    async def declare_required_resources(
        self, request: DeclareRequiredResources, *, timeout: float = RPC_TIMEOUT_S
    ) -> None:
        await self._answer("declare_required_resources", request, self.declare_required_resources_function, timeout)

    async def disconnect_job_master(self, request: DisconnectJobMaster, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._answer("disconnect_job_master", request, self.disconnect_job_master_function, timeout)

    async def heartbeat_from_job_master(self, request: JobMasterHeartbeat, *, timeout: float = RPC_TIMEOUT_S) -> bool:
        return await self._answer(
            "heartbeat_from_job_master", request, self.heartbeat_from_job_master_function, timeout
        )

    # ------------------------------------------------------------------ ResourceManagerControlGateway
    async def request_task_manager_info(self) -> tuple[TaskManagerInfo, ...]:
        return await self._answer(
            "request_task_manager_info", None, self.request_task_manager_info_function, RPC_TIMEOUT_S
        )

    async def request_resource_overview(self) -> ResourceOverview:
        return await self._answer(
            "request_resource_overview", None, self.request_resource_overview_function, RPC_TIMEOUT_S
        )


class TestingGatewayResolver:
    """Hands out the testing gateways added to it, by address. An address nobody added resolves to
    a gateway that is down (``RpcUnreachable``), kept with the others so a test can see its calls."""

    __test__ = False

    def __init__(self) -> None:
        self.task_executors: dict[str, TestingTaskExecutorGateway] = {}
        self.job_masters: dict[str, TestingJobMasterGateway] = {}
        self.resource_managers: dict[str, TestingResourceManagerGateway] = {}
        #: addresses the endpoint was told to forget, in order
        self.forgotten: list[str] = []
        self.closed = False

    def add_task_executor(self, address: str = "te-1:6122", resource_id: str = "") -> TestingTaskExecutorGateway:
        gateway = TestingTaskExecutorGateway(address, resource_id or address.partition(":")[0])
        self.task_executors[address] = gateway
        return gateway

    def add_job_master(self, address: str = "jm-1:6123", jobmaster_id: str = "jm-token-1") -> TestingJobMasterGateway:
        gateway = TestingJobMasterGateway(address, jobmaster_id)
        self.job_masters[address] = gateway
        return gateway

    def add_resource_manager(
        self, address: str = "rm-1:6124", fencing_token: str = "rm-token-1"
    ) -> TestingResourceManagerGateway:
        gateway = TestingResourceManagerGateway(address, fencing_token)
        self.resource_managers[address] = gateway
        return gateway

    @staticmethod
    def _unreachable(gateway: _TestingGateway) -> None:
        gateway.down = RpcUnreachable(f"{gateway.address}: connection refused (no such peer in this test)")

    def task_executor(self, address: str) -> TestingTaskExecutorGateway:
        gateway = self.task_executors.get(address)
        if gateway is None:
            gateway = self.task_executors[address] = TestingTaskExecutorGateway(address, "")
            self._unreachable(gateway)
        return gateway

    def job_master(self, address: str) -> TestingJobMasterGateway:
        gateway = self.job_masters.get(address)
        if gateway is None:
            gateway = self.job_masters[address] = TestingJobMasterGateway(address, "")
            self._unreachable(gateway)
        return gateway

    def resource_manager(self, address: str) -> TestingResourceManagerGateway:
        gateway = self.resource_managers.get(address)
        if gateway is None:
            gateway = self.resource_managers[address] = TestingResourceManagerGateway(address, "")
            self._unreachable(gateway)
        return gateway

    async def forget(self, address: str) -> None:
        self.forgotten.append(address)

    async def close(self) -> None:
        self.closed = True
