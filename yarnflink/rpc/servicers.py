"""The gateways over gRPC, callee side: each servicer turns a protobuf request into the gateway's
dataclass, calls the endpoint (which implements the gateway Protocol) on its loop, and turns the
answer back; a refusal the endpoint raises (``RpcRejected`` and its kinds) ends the call with its
status code (``status``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias, TypeVar

import grpc

from yarnflink.common.rpc_errors import RpcRejected
from yarnflink.jobmaster.gateway import JobMasterGateway
from yarnflink.resourcemanager.gateway import ResourceManagerGateway
from yarnflink.rpc import convert as c
from yarnflink.rpc import status
from yarnflink.rpc.pb import common_pb2, jobmaster_pb2, resourcemanager_pb2, taskexecutor_pb2
from yarnflink.rpc.pb import jobmaster_pb2_grpc as _jobmaster_grpc
from yarnflink.rpc.pb import resourcemanager_pb2_grpc as _resourcemanager_grpc
from yarnflink.rpc.pb import taskexecutor_pb2_grpc as _taskexecutor_grpc
from yarnflink.taskexecutor.gateway import TaskExecutorGateway

__all__ = ["JobMasterServicer", "ResourceManagerServicer", "Servicer", "TaskExecutorServicer"]

T = TypeVar("T")
Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"
#: the generated registrations (untyped: grpc_tools writes no stubs for them)
jobmaster_pb2_grpc: Any = _jobmaster_grpc
resourcemanager_pb2_grpc: Any = _resourcemanager_grpc
taskexecutor_pb2_grpc: Any = _taskexecutor_grpc
_ACK = common_pb2.Ack()


async def _serve(context: Context, handle: Callable[[], Awaitable[T]]) -> T:
    """Runs ``handle``; a refusal it raises (converting the request, or in the endpoint) aborts the call."""
    try:
        return await handle()
    except RpcRejected as e:
        await status.abort(context, e)


class Servicer:
    """A gateway served by an RpcEndpoint (``RpcEndpoint.serve``)."""

    def add_to(self, server: grpc.aio.Server) -> None:
        raise NotImplementedError


class JobMasterServicer(Servicer):
    def __init__(self, gateway: JobMasterGateway) -> None:
        self.gateway = gateway

    def add_to(self, server: grpc.aio.Server) -> None:
        jobmaster_pb2_grpc.add_JobMasterGatewayServicer_to_server(self, server)

    async def RegisterTaskManager(self, request: jobmaster_pb2.RegisterTaskManagerRequest, context: Context) -> Any:
        await _serve(context, lambda: self.gateway.register_task_manager(c.register_task_manager_from_pb(request)))
        return _ACK

    async def OfferSlots(self, request: jobmaster_pb2.OfferSlotsRequest, context: Context) -> Any:
        accepted = await _serve(context, lambda: self.gateway.offer_slots(c.offer_slots_from_pb(request)))
        return jobmaster_pb2.OfferSlotsResponse(accepted_allocation_ids=list(accepted))

    async def ReconnectTaskManager(self, request: jobmaster_pb2.ReconnectTaskManagerRequest, context: Context) -> Any:
        await _serve(context, lambda: self.gateway.reconnect_task_manager(c.reconnect_task_manager_from_pb(request)))
        return _ACK

    async def UpdateTaskExecutionState(self, request: jobmaster_pb2.TaskExecutionState, context: Context) -> Any:
        await _serve(context, lambda: self.gateway.update_task_execution_state(c.task_execution_state_from_pb(request)))
        return _ACK

    async def AcknowledgeCheckpoint(self, request: jobmaster_pb2.AcknowledgeCheckpointRequest, context: Context) -> Any:
        await _serve(context, lambda: self.gateway.acknowledge_checkpoint(c.acknowledge_checkpoint_from_pb(request)))
        return _ACK

    async def DeclineCheckpoint(self, request: jobmaster_pb2.DeclineCheckpointRequest, context: Context) -> Any:
        await _serve(context, lambda: self.gateway.decline_checkpoint(c.decline_checkpoint_from_pb(request)))
        return _ACK

    async def SendCoordinationData(self, request: jobmaster_pb2.CoordinationData, context: Context) -> Any:
        await _serve(context, lambda: self.gateway.send_coordination_data(c.coordination_data_from_pb(request)))
        return _ACK

    async def HeartbeatFromTaskManager(self, request: jobmaster_pb2.TaskManagerHeartbeat, context: Context) -> Any:
        await _serve(
            context, lambda: self.gateway.heartbeat_from_task_manager(c.task_manager_heartbeat_from_pb(request))
        )
        return _ACK

    async def DisconnectTaskManager(self, request: jobmaster_pb2.DisconnectTaskManagerRequest, context: Context) -> Any:
        await _serve(context, lambda: self.gateway.disconnect_task_manager(c.disconnect_task_manager_from_pb(request)))
        return _ACK


class ResourceManagerServicer(Servicer):
    def __init__(self, gateway: ResourceManagerGateway) -> None:
        self.gateway = gateway

    def add_to(self, server: grpc.aio.Server) -> None:
        resourcemanager_pb2_grpc.add_ResourceManagerGatewayServicer_to_server(self, server)

    async def RegisterTaskExecutor(
        self, request: resourcemanager_pb2.RegisterTaskExecutorRequest, context: Context
    ) -> Any:
        ok = await _serve(
            context, lambda: self.gateway.register_task_executor(c.register_task_executor_from_pb(request))
        )
        return c.task_executor_registration_to_pb(ok)

    async def NotifySlotAvailable(
        self, request: resourcemanager_pb2.NotifySlotAvailableRequest, context: Context
    ) -> Any:
        await _serve(context, lambda: self.gateway.notify_slot_available(c.notify_slot_available_from_pb(request)))
        return _ACK

    async def DisconnectTaskExecutor(
        self, request: resourcemanager_pb2.DisconnectTaskExecutorRequest, context: Context
    ) -> Any:
        await _serve(
            context, lambda: self.gateway.disconnect_task_executor(c.disconnect_task_executor_from_pb(request))
        )
        return _ACK

    async def RegisterJobMaster(self, request: resourcemanager_pb2.RegisterJobMasterRequest, context: Context) -> Any:
        ok = await _serve(context, lambda: self.gateway.register_job_master(c.register_job_master_from_pb(request)))
        return c.job_master_registration_to_pb(ok)

    async def DeclareRequiredResources(
        self, request: resourcemanager_pb2.DeclareRequiredResourcesRequest, context: Context
    ) -> Any:
        await _serve(
            context, lambda: self.gateway.declare_required_resources(c.declare_required_resources_from_pb(request))
        )
        return _ACK

    async def DisconnectJobMaster(
        self, request: resourcemanager_pb2.DisconnectJobMasterRequest, context: Context
    ) -> Any:
        await _serve(context, lambda: self.gateway.disconnect_job_master(c.disconnect_job_master_from_pb(request)))
        return _ACK

    async def HeartbeatFromJobMaster(self, request: resourcemanager_pb2.JobMasterHeartbeat, context: Context) -> Any:
        known = await _serve(
            context, lambda: self.gateway.heartbeat_from_job_master(c.job_master_heartbeat_from_pb(request))
        )
        return resourcemanager_pb2.JobMasterHeartbeatResponse(known=known)


class TaskExecutorServicer(Servicer):
    def __init__(self, gateway: TaskExecutorGateway) -> None:
        self.gateway = gateway

    def add_to(self, server: grpc.aio.Server) -> None:
        taskexecutor_pb2_grpc.add_TaskExecutorGatewayServicer_to_server(self, server)

    async def RequestSlot(self, request: taskexecutor_pb2.RequestSlotRequest, context: Context) -> Any:
        ack = await _serve(context, lambda: self.gateway.request_slot(c.request_slot_from_pb(request)))
        return c.slot_request_ack_to_pb(ack)

    async def SubmitTask(self, request: taskexecutor_pb2.SubmitTaskRequest, context: Context) -> Any:
        await _serve(context, lambda: self.gateway.submit_task(c.submit_task_from_pb(request)))
        return _ACK

    async def CancelTask(self, request: taskexecutor_pb2.CancelTaskRequest, context: Context) -> Any:
        await _serve(context, lambda: self.gateway.cancel_task(c.cancel_task_from_pb(request)))
        return _ACK

    async def TriggerCheckpoint(self, request: taskexecutor_pb2.CheckpointRequest, context: Context) -> Any:
        await _serve(context, lambda: self.gateway.trigger_checkpoint(c.trigger_checkpoint_from_pb(request)))
        return _ACK

    async def NotifyCheckpoint(self, request: taskexecutor_pb2.CheckpointNotification, context: Context) -> Any:
        notification = c.notify_checkpoint_from_pb(request)
        if request.completed:
            await _serve(context, lambda: self.gateway.notify_checkpoint_complete(notification))
        else:
            await _serve(context, lambda: self.gateway.notify_checkpoint_aborted(notification))
        return _ACK

    async def FreeSlot(self, request: taskexecutor_pb2.FreeSlotRequest, context: Context) -> Any:
        await _serve(context, lambda: self.gateway.free_slot(c.free_slot_from_pb(request)))
        return _ACK

    async def ReleasePartitions(self, request: taskexecutor_pb2.ReleasePartitionsRequest, context: Context) -> Any:
        await _serve(context, lambda: self.gateway.release_partitions(c.release_partitions_from_pb(request)))
        return _ACK

    async def DisconnectJobManager(
        self, request: taskexecutor_pb2.DisconnectJobManagerRequest, context: Context
    ) -> Any:
        await _serve(context, lambda: self.gateway.disconnect_job_manager(c.disconnect_job_manager_from_pb(request)))
        return _ACK

    async def RequestTaskExecutorInfo(self, request: taskexecutor_pb2.TaskExecutorInfoRequest, context: Context) -> Any:
        info = await _serve(
            context, lambda: self.gateway.request_task_executor_info(c.task_executor_info_request_from_pb(request))
        )
        return c.task_executor_info_to_pb(info)

    async def HeartbeatFromResourceManager(
        self, request: taskexecutor_pb2.ResourceManagerHeartbeat, context: Context
    ) -> Any:
        report = await _serve(
            context, lambda: self.gateway.heartbeat_from_resource_manager(request.resource_manager_token)
        )
        return taskexecutor_pb2.ResourceManagerHeartbeatResponse(slot_report=c.slot_report_to_pb(report))
