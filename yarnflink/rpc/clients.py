"""The gateways over gRPC, caller side: one client class per gateway Protocol, and
``GrpcGatewayResolver``, the production GatewayResolver that hands them out by address.

A resolver belongs to one endpoint (gRPC aio channels are bound to the loop that made them) and
keeps one channel per address. Every call is converted in ``convert`` and its failure mapped in
``status``: callers see only dataclasses and ``yarnflink.common.rpc_errors``.
"""

from __future__ import annotations

from typing import Any

import grpc

from yarnflink.common.rpc_errors import RPC_TIMEOUT_S
from yarnflink.jobmaster import gateway as jm
from yarnflink.resourcemanager import gateway as rm
from yarnflink.rpc import convert as c
from yarnflink.rpc.endpoint import GRPC_OPTIONS
from yarnflink.rpc.pb import jobmaster_pb2_grpc as _jobmaster_grpc
from yarnflink.rpc.pb import resourcemanager_pb2_grpc as _resourcemanager_grpc
from yarnflink.rpc.pb import taskexecutor_pb2
from yarnflink.rpc.pb import taskexecutor_pb2_grpc as _taskexecutor_grpc
from yarnflink.rpc.status import call
from yarnflink.rpc.tls import channel_credentials
from yarnflink.taskexecutor import gateway as te

#: the generated stubs (untyped: grpc_tools writes no type stubs for them)
jobmaster_pb2_grpc: Any = _jobmaster_grpc
resourcemanager_pb2_grpc: Any = _resourcemanager_grpc
taskexecutor_pb2_grpc: Any = _taskexecutor_grpc

__all__ = [
    "GrpcGatewayResolver",
    "GrpcJobMasterGateway",
    "GrpcResourceManagerGateway",
    "GrpcTaskExecutorGateway",
    "open_channel",
]


def open_channel(address: str) -> grpc.aio.Channel:
    """A channel to ``address`` on the running loop, with the cluster's TLS if installed."""
    creds = channel_credentials()
    if creds is not None:
        return grpc.aio.secure_channel(address, creds, options=GRPC_OPTIONS)
    return grpc.aio.insecure_channel(address, options=GRPC_OPTIONS)


class GrpcJobMasterGateway:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._stub: Any = jobmaster_pb2_grpc.JobMasterGatewayStub(channel)

    async def register_task_manager(self, request: jm.RegisterTaskManager, *, timeout: float = RPC_TIMEOUT_S) -> None:
        pb = c.register_task_manager_to_pb(request)
        await call(lambda: self._stub.RegisterTaskManager(pb, timeout=timeout))

    async def offer_slots(self, request: jm.OfferSlots, *, timeout: float = RPC_TIMEOUT_S) -> tuple[str, ...]:
        pb = c.offer_slots_to_pb(request)
        resp = await call(lambda: self._stub.OfferSlots(pb, timeout=timeout))
        return tuple(str(a) for a in resp.accepted_allocation_ids)

    async def reconnect_task_manager(self, request: jm.ReconnectTaskManager, *, timeout: float = RPC_TIMEOUT_S) -> None:
        pb = c.reconnect_task_manager_to_pb(request)
        await call(lambda: self._stub.ReconnectTaskManager(pb, timeout=timeout))

    async def update_task_execution_state(
        self, request: jm.TaskExecutionState, *, timeout: float = RPC_TIMEOUT_S
    ) -> None:
        pb = c.task_execution_state_to_pb(request)
        await call(lambda: self._stub.UpdateTaskExecutionState(pb, timeout=timeout))

    async def acknowledge_checkpoint(
        self, request: jm.AcknowledgeCheckpoint, *, timeout: float = RPC_TIMEOUT_S
    ) -> None:
        pb = c.acknowledge_checkpoint_to_pb(request)
        await call(lambda: self._stub.AcknowledgeCheckpoint(pb, timeout=timeout))

    async def decline_checkpoint(self, request: jm.DeclineCheckpoint, *, timeout: float = RPC_TIMEOUT_S) -> None:
        pb = c.decline_checkpoint_to_pb(request)
        await call(lambda: self._stub.DeclineCheckpoint(pb, timeout=timeout))

    async def send_coordination_data(self, request: jm.CoordinationData, *, timeout: float = RPC_TIMEOUT_S) -> None:
        pb = c.coordination_data_to_pb(request)
        await call(lambda: self._stub.SendCoordinationData(pb, timeout=timeout))

    async def heartbeat_from_task_manager(
        self, request: jm.TaskManagerHeartbeat, *, timeout: float = RPC_TIMEOUT_S
    ) -> None:
        pb = c.task_manager_heartbeat_to_pb(request)
        await call(lambda: self._stub.HeartbeatFromTaskManager(pb, timeout=timeout))

    async def disconnect_task_manager(
        self, request: jm.DisconnectTaskManager, *, timeout: float = RPC_TIMEOUT_S
    ) -> None:
        pb = c.disconnect_task_manager_to_pb(request)
        await call(lambda: self._stub.DisconnectTaskManager(pb, timeout=timeout))


class GrpcResourceManagerGateway:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._stub: Any = resourcemanager_pb2_grpc.ResourceManagerGatewayStub(channel)

    async def register_task_executor(
        self, request: rm.RegisterTaskExecutor, *, timeout: float = RPC_TIMEOUT_S
    ) -> rm.TaskExecutorRegistrationSuccess:
        pb = c.register_task_executor_to_pb(request)
        return c.task_executor_registration_from_pb(
            await call(lambda: self._stub.RegisterTaskExecutor(pb, timeout=timeout))
        )

    async def notify_slot_available(self, request: rm.NotifySlotAvailable, *, timeout: float = RPC_TIMEOUT_S) -> None:
        pb = c.notify_slot_available_to_pb(request)
        await call(lambda: self._stub.NotifySlotAvailable(pb, timeout=timeout))

    async def disconnect_task_executor(
        self, request: rm.DisconnectTaskExecutor, *, timeout: float = RPC_TIMEOUT_S
    ) -> None:
        pb = c.disconnect_task_executor_to_pb(request)
        await call(lambda: self._stub.DisconnectTaskExecutor(pb, timeout=timeout))

    async def register_job_master(
        self, request: rm.RegisterJobMaster, *, timeout: float = RPC_TIMEOUT_S
    ) -> rm.JobMasterRegistrationSuccess:
        pb = c.register_job_master_to_pb(request)
        return c.job_master_registration_from_pb(await call(lambda: self._stub.RegisterJobMaster(pb, timeout=timeout)))

    async def declare_required_resources(
        self, request: rm.DeclareRequiredResources, *, timeout: float = RPC_TIMEOUT_S
    ) -> None:
        pb = c.declare_required_resources_to_pb(request)
        await call(lambda: self._stub.DeclareRequiredResources(pb, timeout=timeout))

    async def disconnect_job_master(self, request: rm.DisconnectJobMaster, *, timeout: float = RPC_TIMEOUT_S) -> None:
        pb = c.disconnect_job_master_to_pb(request)
        await call(lambda: self._stub.DisconnectJobMaster(pb, timeout=timeout))

    async def heartbeat_from_job_master(
        self, request: rm.JobMasterHeartbeat, *, timeout: float = RPC_TIMEOUT_S
    ) -> bool:
        pb = c.job_master_heartbeat_to_pb(request)
        resp = await call(lambda: self._stub.HeartbeatFromJobMaster(pb, timeout=timeout))
        return bool(resp.known)


class GrpcTaskExecutorGateway:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._stub: Any = taskexecutor_pb2_grpc.TaskExecutorGatewayStub(channel)

    async def request_slot(self, request: te.RequestSlot, *, timeout: float = RPC_TIMEOUT_S) -> te.SlotRequestAck:
        pb = c.request_slot_to_pb(request)
        return c.slot_request_ack_from_pb(await call(lambda: self._stub.RequestSlot(pb, timeout=timeout)))

    async def submit_task(self, request: te.SubmitTask, *, timeout: float = RPC_TIMEOUT_S) -> None:
        pb = c.submit_task_to_pb(request)
        await call(lambda: self._stub.SubmitTask(pb, timeout=timeout))

    async def cancel_task(self, request: te.CancelTask, *, timeout: float = RPC_TIMEOUT_S) -> None:
        pb = c.cancel_task_to_pb(request)
        await call(lambda: self._stub.CancelTask(pb, timeout=timeout))

    async def free_slot(self, request: te.FreeSlot, *, timeout: float = RPC_TIMEOUT_S) -> None:
        pb = c.free_slot_to_pb(request)
        await call(lambda: self._stub.FreeSlot(pb, timeout=timeout))

    async def release_partitions(self, request: te.ReleasePartitions, *, timeout: float = RPC_TIMEOUT_S) -> None:
        pb = c.release_partitions_to_pb(request)
        await call(lambda: self._stub.ReleasePartitions(pb, timeout=timeout))

    async def disconnect_job_manager(self, request: te.DisconnectJobManager, *, timeout: float = RPC_TIMEOUT_S) -> None:
        pb = c.disconnect_job_manager_to_pb(request)
        await call(lambda: self._stub.DisconnectJobManager(pb, timeout=timeout))

    async def request_task_executor_info(
        self, request: te.RequestTaskExecutorInfo, *, timeout: float = RPC_TIMEOUT_S
    ) -> te.TaskExecutorInfo:
        pb = c.task_executor_info_request_to_pb(request)
        return c.task_executor_info_from_pb(await call(lambda: self._stub.RequestTaskExecutorInfo(pb, timeout=timeout)))

    async def heartbeat_from_resource_manager(
        self, resource_manager_token: str, *, timeout: float = RPC_TIMEOUT_S
    ) -> rm.SlotReport:
        pb = taskexecutor_pb2.ResourceManagerHeartbeat(resource_manager_token=resource_manager_token)
        resp = await call(lambda: self._stub.HeartbeatFromResourceManager(pb, timeout=timeout))
        return c.slot_report_from_pb(resp.slot_report)

    async def trigger_checkpoint(self, request: te.TriggerCheckpoint, *, timeout: float = RPC_TIMEOUT_S) -> None:
        pb = c.trigger_checkpoint_to_pb(request)
        await call(lambda: self._stub.TriggerCheckpoint(pb, timeout=timeout))

    async def notify_checkpoint_complete(self, request: te.NotifyCheckpoint, *, timeout: float = RPC_TIMEOUT_S) -> None:
        pb = c.notify_checkpoint_to_pb(request, completed=True)
        await call(lambda: self._stub.NotifyCheckpoint(pb, timeout=timeout))

    async def notify_checkpoint_aborted(self, request: te.NotifyCheckpoint, *, timeout: float = RPC_TIMEOUT_S) -> None:
        pb = c.notify_checkpoint_to_pb(request, completed=False)
        await call(lambda: self._stub.NotifyCheckpoint(pb, timeout=timeout))


class GrpcGatewayResolver:
    """The production GatewayResolver: one channel per address, one client per gateway kind."""

    def __init__(self) -> None:
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._job_masters: dict[str, GrpcJobMasterGateway] = {}
        self._resource_managers: dict[str, GrpcResourceManagerGateway] = {}
        self._task_executors: dict[str, GrpcTaskExecutorGateway] = {}

    def _channel(self, address: str) -> grpc.aio.Channel:
        ch = self._channels.get(address)
        if ch is None:
            ch = self._channels[address] = open_channel(address)
        return ch

    def job_master(self, address: str) -> GrpcJobMasterGateway:
        gw = self._job_masters.get(address)
        if gw is None:
            gw = self._job_masters[address] = GrpcJobMasterGateway(self._channel(address))
        return gw

    def resource_manager(self, address: str) -> GrpcResourceManagerGateway:
        gw = self._resource_managers.get(address)
        if gw is None:
            gw = self._resource_managers[address] = GrpcResourceManagerGateway(self._channel(address))
        return gw

    def task_executor(self, address: str) -> GrpcTaskExecutorGateway:
        gw = self._task_executors.get(address)
        if gw is None:
            gw = self._task_executors[address] = GrpcTaskExecutorGateway(self._channel(address))
        return gw

    async def forget(self, address: str) -> None:
        self._job_masters.pop(address, None)
        self._resource_managers.pop(address, None)
        self._task_executors.pop(address, None)
        ch = self._channels.pop(address, None)
        if ch is not None:
            await ch.close()

    async def close(self) -> None:
        for address in list(self._channels):
            await self.forget(address)
