"""ResourceManager: registers TaskExecutors, keeps their heartbeats, and hands their slots to
JobMasters through the SlotManager. Serves the ResourceManagerGateway (proto/).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import grpc

from yarnflink.resourcemanager.slotmanager import AllocateSlot, SlotManager
from yarnflink.rpc.endpoint import RpcEndpoint
from yarnflink.rpc.gateways import RPC_TIMEOUT_S, GatewayPool, check_fencing
from yarnflink.rpc.pb import (
    common_pb2,
    resourcemanager_pb2,
    resourcemanager_pb2_grpc,
    taskexecutor_pb2,
)

log = logging.getLogger(__name__)


def slot_report_to_dict(report: common_pb2.SlotReport) -> dict[int, tuple[str, str]]:
    return {s.slot_index: (s.allocation_id, s.job_id) for s in report.slots if s.allocation_id}


class ResourceManager(RpcEndpoint):
    def __init__(self, host: str, port: int = 0, *, heartbeat_interval_s: float = 10.0,
                 heartbeat_timeout_s: float = 50.0, evenly_spread_out_slots: bool = False) -> None:
        super().__init__("ResourceManager")
        self.host = host
        self._port = port
        self.resource_id = uuid.uuid4().hex
        #: Leader session id; fixed for a non-HA cluster, fresh per leadership grant with HA.
        self.fencing_token = uuid.uuid4().hex
        self.heartbeat_interval_s = heartbeat_interval_s
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.slot_manager = SlotManager(evenly_spread_out_slots=evenly_spread_out_slots)
        self.gateways = GatewayPool()
        self._monitor: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.rpc_port}"

    async def on_start(self) -> None:
        await self.serve(resourcemanager_pb2_grpc.add_ResourceManagerGatewayServicer_to_server,
                         _Servicer(self), self.host, self._port)
        self._monitor = asyncio.ensure_future(self._monitor_heartbeats())

    async def on_stop(self) -> None:
        if self._monitor:
            self._monitor.cancel()
        await self.gateways.close()

    # ------------------------------------------------------------------ actions
    def _execute(self, actions: list[AllocateSlot]) -> None:
        for action in actions:
            t = asyncio.ensure_future(self._allocate(action))
            self._background.add(t)
            t.add_done_callback(self._background.discard)

    async def _allocate(self, a: AllocateSlot) -> None:
        try:
            await self.gateways.task_executor(a.rpc_address).RequestSlot(
                taskexecutor_pb2.RequestSlotRequest(
                    resource_manager_token=self.fencing_token,
                    slot_index=a.slot_index,
                    job_id=a.job_id,
                    allocation_id=a.allocation_id,
                    jobmaster_address=a.jobmaster_address,
                    jobmaster_id=a.jobmaster_id,
                ),
                timeout=RPC_TIMEOUT_S,
            )
        except grpc.aio.AioRpcError as e:
            log.warning("slot request to %s failed: %s", a.resource_id, e.details())
            self._execute(self.slot_manager.allocation_failed(a.resource_id, a.allocation_id))

    async def _monitor_heartbeats(self) -> None:
        while True:
            await asyncio.sleep(min(1.0, self.heartbeat_interval_s))
            for rid in self.slot_manager.timed_out(time.monotonic(), self.heartbeat_timeout_s):
                log.warning("TaskExecutor %s timed out (no heartbeat for %.0fs)", rid, self.heartbeat_timeout_s)
                self._execute(self.slot_manager.unregister_task_executor(rid))

    # ------------------------------------------------------------------ views (for the Dispatcher)
    async def task_managers_info(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        out = []
        for te in self.slot_manager.task_executors.values():
            host, _, port = te.data_address.rpartition(":")
            out.append({
                "id": te.resource_id,
                "path": te.rpc_address,
                "dataPort": int(port or 0),
                "timeSinceLastHeartbeat": int((now - te.last_heartbeat) * 1000),
                "slotsNumber": len(te.slots),
                "freeSlots": len(te.free_slots()),
                "hardware": {"pid": te.pid, "host": te.hostname},
                "slots": [
                    {"index": s.index, "allocationId": s.allocation_id or None,
                     "jobId": s.job_id or None, "pending": s.pending}
                    for s in te.slots.values()
                ],
            })
        return out

    async def slot_totals(self) -> tuple[int, int, int]:
        total, free = self.slot_manager.totals()
        return len(self.slot_manager.task_executors), total, free


class _Servicer(resourcemanager_pb2_grpc.ResourceManagerGatewayServicer):
    def __init__(self, rm: ResourceManager) -> None:
        self.rm = rm

    async def RegisterTaskExecutor(self, request: Any, context: Any) -> Any:
        rm = self.rm
        if request.num_slots < 1 or request.num_slots > 1024:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"num_slots must be in [1, 1024], got {request.num_slots}")
        if not request.resource_id or not request.rpc_address or not request.data_address:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                "resource_id, rpc_address and data_address are required")
        log.info("TaskExecutor %s registered from %s with %d slots",
                 request.resource_id, request.rpc_address, request.num_slots)
        rm._execute(rm.slot_manager.register_task_executor(
            request.resource_id, request.rpc_address, request.data_address, request.num_slots,
            slot_report_to_dict(request.slot_report), time.monotonic(),
            hostname=request.hostname, pid=request.pid,
        ))
        return resourcemanager_pb2.RegisterTaskExecutorResponse(
            registration_id=uuid.uuid4().hex,
            fencing_token=rm.fencing_token,
            resource_manager_resource_id=rm.resource_id,
            heartbeat_interval_ms=int(rm.heartbeat_interval_s * 1000),
            heartbeat_timeout_ms=int(rm.heartbeat_timeout_s * 1000),
        )

    async def HeartbeatFromTaskExecutor(self, request: Any, context: Any) -> Any:
        await check_fencing(context, self.rm.fencing_token, request.fencing_token, "ResourceManager")
        known = self.rm.slot_manager.heartbeat(
            request.resource_id, slot_report_to_dict(request.slot_report), time.monotonic()
        )
        if known:
            self.rm._execute(self.rm.slot_manager.check_requirements())
        return resourcemanager_pb2.HeartbeatResponse(known=known)

    async def NotifySlotAvailable(self, request: Any, context: Any) -> Any:
        await check_fencing(context, self.rm.fencing_token, request.fencing_token, "ResourceManager")
        self.rm._execute(self.rm.slot_manager.slot_freed(
            request.resource_id, request.slot_index, request.allocation_id))
        return common_pb2.Ack()

    async def DisconnectTaskExecutor(self, request: Any, context: Any) -> Any:
        await check_fencing(context, self.rm.fencing_token, request.fencing_token, "ResourceManager")
        log.info("TaskExecutor %s disconnected: %s", request.resource_id, request.cause)
        self.rm._execute(self.rm.slot_manager.unregister_task_executor(request.resource_id))
        return common_pb2.Ack()

    async def RegisterJobMaster(self, request: Any, context: Any) -> Any:
        if not request.job_id or not request.jobmaster_address or not request.jobmaster_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                "job_id, jobmaster_address and jobmaster_id are required")
        return resourcemanager_pb2.RegisterJobMasterResponse(fencing_token=self.rm.fencing_token)

    async def DeclareRequiredResources(self, request: Any, context: Any) -> Any:
        await check_fencing(context, self.rm.fencing_token, request.fencing_token, "ResourceManager")
        total = sum(r.number_of_slots for r in request.requirements)
        if total < 0 or total > 100_000:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"invalid slot count {total}")
        self.rm._execute(self.rm.slot_manager.declare_requirements(
            request.job_id, request.jobmaster_address, request.jobmaster_id, total))
        return common_pb2.Ack()

    async def DisconnectJobMaster(self, request: Any, context: Any) -> Any:
        await check_fencing(context, self.rm.fencing_token, request.fencing_token, "ResourceManager")
        self.rm._execute(self.rm.slot_manager.unregister_job(request.job_id))
        return common_pb2.Ack()

