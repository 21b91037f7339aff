"""ResourceManager: registers TaskExecutors and JobMasters, keeps heartbeats with both, and carries
out what the SlotManager decides (slot requests, starting and stopping workers through the
ResourceManagerDriver, telling JobMasters about lost TaskExecutors). Serves the
ResourceManagerGateway (proto/). Without a driver it is Flink's standalone ResourceManager.

Heartbeats: the ResourceManager sends one to every TaskExecutor each ``heartbeat.interval``; the
answer is the TaskExecutor's slot report. A TaskExecutor is lost after ``heartbeat.timeout`` without
an answer, or after ``heartbeat.rpc-failure-threshold`` heartbeats in a row found it unreachable
(a SIGKILLed process is noticed within a few intervals). JobMasters heartbeat the ResourceManager;
a JobMaster silent for ``heartbeat.timeout`` loses its registered requirements.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import grpc

from yarnflink.common.config import Configuration
from yarnflink.resourcemanager.driver import ResourceManagerDriver
from yarnflink.resourcemanager.heartbeat import HeartbeatMonitor
from yarnflink.resourcemanager.resources import ResourceProfile, worker_spec_from_config
from yarnflink.resourcemanager.slotmanager import (
    Action,
    AllocateSlot,
    NotifyTaskManagerLost,
    ReportedSlot,
    SlotManager,
    SlotReport,
    StartWorker,
    StopWorker,
    TaskExecutorRecord,
)
from yarnflink.rpc.endpoint import RpcEndpoint
from yarnflink.rpc.gateways import RPC_TIMEOUT_S, GatewayPool, check_fencing
from yarnflink.rpc.pb import (
    common_pb2,
    jobmaster_pb2,
    resourcemanager_pb2,
    resourcemanager_pb2_grpc,
    taskexecutor_pb2,
)

log = logging.getLogger(__name__)

UNREACHABLE = (grpc.StatusCode.UNAVAILABLE,)


def profile_from_pb(p: common_pb2.ResourceProfile) -> ResourceProfile:
    return ResourceProfile(round(p.cpu_cores, 6), p.task_heap_mb, p.task_off_heap_mb, p.managed_memory_mb)


def profile_to_pb(p: ResourceProfile) -> common_pb2.ResourceProfile:
    return common_pb2.ResourceProfile(
        cpu_cores=p.cpu_cores,
        task_heap_mb=p.task_heap_mb,
        task_off_heap_mb=p.task_off_heap_mb,
        managed_memory_mb=p.managed_memory_mb,
    )


def slot_report_from_pb(report: common_pb2.SlotReport) -> SlotReport:
    return SlotReport(
        tuple(ReportedSlot(s.slot_index, s.allocation_id, s.job_id, profile_from_pb(s.profile)) for s in report.slots),
        report.version,
    )


class ResourceManager(RpcEndpoint):
    def __init__(
        self,
        host: str,
        port: int = 0,
        *,
        config: Configuration | None = None,
        driver: ResourceManagerDriver | None = None,
        min_slots: int | None = None,
        high_availability: bool = False,
    ) -> None:
        """``driver`` None: standalone. ``min_slots`` overrides ``slotmanager.number-of-slots.min``.
        ``high_availability``: the ResourceManager acts only between ``grant_leadership`` and
        ``revoke_leadership`` (its fencing token is empty otherwise, so it refuses everything)."""
        super().__init__("ResourceManager")
        config = config or Configuration()
        self.host = host
        self._port = port
        self.resource_id = uuid.uuid4().hex
        #: Leader session id; fixed for a non-HA cluster, fresh per leadership grant with HA
        #: ("" while not leading). Replaced, never mutated: read from any thread.
        self.fencing_token = "" if high_availability else uuid.uuid4().hex
        self.heartbeat_interval_s = config.get_seconds("heartbeat.interval") or 10.0
        self.heartbeat_timeout_s = config.get_seconds("heartbeat.timeout") or 50.0
        self.rpc_failure_threshold = int(config.get("heartbeat.rpc-failure-threshold"))
        self.driver = driver
        self.slot_manager = SlotManager(
            fine_grained=bool(config.get("cluster.fine-grained-resource-management.enabled")),
            evenly_spread_out_slots=bool(config.get("cluster.evenly-spread-out-slots")),
            worker_spec=worker_spec_from_config(config) if driver is not None else None,
            max_slots=int(config.get("slotmanager.number-of-slots.max")),
            min_slots=int(config.get("slotmanager.number-of-slots.min")) if min_slots is None else min_slots,
            task_manager_timeout=config.get_seconds("resourcemanager.taskmanager-timeout") or 0.0,
            registration_timeout=config.get_seconds("resourcemanager.taskmanager-registration.timeout") or 300.0,
            max_start_failure_rate=float(config.get("resourcemanager.start-worker.max-failure-rate")),
            start_retry_interval=config.get_seconds("resourcemanager.start-worker.retry-interval") or 0.0,
        )
        self.te_heartbeats = HeartbeatMonitor(self.heartbeat_timeout_s, self.rpc_failure_threshold)
        self.jm_heartbeats = HeartbeatMonitor(self.heartbeat_timeout_s, self.rpc_failure_threshold)
        self.gateways = GatewayPool()
        self._loop_task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._heartbeats_in_flight: set[str] = set()
        self._warned_unfulfillable: set[tuple[str, ResourceProfile]] = set()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.rpc_port}"

    # ------------------------------------------------------------------ leadership (HA)
    @property
    def leading(self) -> bool:
        return bool(self.fencing_token)

    def grant_leadership(self, session_id: str) -> None:
        """From any thread: act as leader with fencing token ``session_id``."""
        if not session_id:
            raise ValueError("a leader session id must not be empty")
        self.fencing_token = session_id
        log.info("ResourceManager %s leads with session %s", self.address, session_id)

    def revoke_leadership(self) -> None:
        """From any thread, at once: every fenced RPC and every registration is refused from now on."""
        self.fencing_token = ""

    async def on_start(self) -> None:
        await self.serve(
            resourcemanager_pb2_grpc.add_ResourceManagerGatewayServicer_to_server,
            _Servicer(self),
            self.host,
            self._port,
        )
        if self.driver is not None:
            self.driver.initialize(_DriverEvents(self), self.address)
        self._loop_task = asyncio.ensure_future(self._periodic())

    async def on_stop(self) -> None:
        if self._loop_task:
            self._loop_task.cancel()
        for t in list(self._background):
            t.cancel()
        if self.driver is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.driver.terminate)
        await self.gateways.close()

    def _spawn(self, coro: Any) -> None:
        t = asyncio.ensure_future(coro)
        self._background.add(t)
        t.add_done_callback(self._background.discard)

    # ------------------------------------------------------------------ actions
    def _execute(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, AllocateSlot):
                self._spawn(self._allocate(action))
            elif isinstance(action, StartWorker):
                self._start_worker(action)
            elif isinstance(action, StopWorker):
                self._stop_worker(action)
            elif isinstance(action, NotifyTaskManagerLost):
                self._spawn(self._notify_task_manager_lost(action))
        for job_id, profile in self.slot_manager.unfulfillable - self._warned_unfulfillable:
            log.warning(
                "job %s needs a slot of %s that no TaskExecutor offers or may be started "
                "(slotmanager.number-of-slots.max %d)",
                job_id,
                profile,
                self.slot_manager.max_slots,
            )
        self._warned_unfulfillable = set(self.slot_manager.unfulfillable)

    async def _allocate(self, a: AllocateSlot) -> None:
        try:
            resp = await self.gateways.task_executor(a.rpc_address).RequestSlot(
                taskexecutor_pb2.RequestSlotRequest(
                    resource_manager_token=self.fencing_token,
                    slot_index=a.slot_index,
                    job_id=a.job_id,
                    allocation_id=a.allocation_id,
                    profile=profile_to_pb(a.profile),
                    jobmaster_address=a.jobmaster_address,
                    jobmaster_id=a.jobmaster_id,
                ),
                timeout=RPC_TIMEOUT_S,
            )
        except grpc.aio.AioRpcError as e:
            log.warning("slot request to %s failed: %s", a.resource_id, e.details())
            self._execute(self.slot_manager.allocation_failed(a.resource_id, a.allocation_id, time.monotonic()))
            return
        self._execute(
            self.slot_manager.allocation_acked(
                a.resource_id, a.allocation_id, resp.slot_index, resp.slot_report_version, time.monotonic()
            )
        )

    def _start_worker(self, action: StartWorker) -> None:
        assert self.driver is not None
        try:
            worker_id = self.driver.start_worker(action.spec)
        except Exception as e:  # noqa: BLE001 - a failed start is an event like any other
            log.warning("starting a TaskExecutor failed: %s", e)
            self._execute(self.slot_manager.worker_terminated(action.request_id, str(e), time.monotonic()))
            return
        log.info(
            "requested TaskExecutor %s (%d registered, %d being started)",
            worker_id,
            len(self.slot_manager.task_executors),
            len(self.slot_manager.pending_workers),
        )
        self.slot_manager.worker_requested(action.request_id, worker_id)

    def _stop_worker(self, action: StopWorker) -> None:
        log.info("stopping TaskExecutor %s: %s", action.resource_id, action.cause)
        self.te_heartbeats.unmonitor(action.resource_id)
        if action.rpc_address:
            self._spawn(self.gateways.task_executors.drop(action.rpc_address))
        if self.driver is not None:
            try:
                self.driver.stop_worker(action.resource_id)
            except Exception:  # noqa: BLE001
                log.exception("stopping TaskExecutor %s failed", action.resource_id)

    async def _notify_task_manager_lost(self, a: NotifyTaskManagerLost) -> None:
        try:
            await self.gateways.job_master(a.jobmaster_address).DisconnectTaskManager(
                jobmaster_pb2.DisconnectTaskManagerRequest(
                    jobmaster_id=a.jobmaster_id, resource_id=a.resource_id, cause=a.cause
                ),
                timeout=RPC_TIMEOUT_S,
            )
        except grpc.aio.AioRpcError as e:
            log.info(
                "telling the JobMaster of job %s about lost TaskExecutor %s failed: %s",
                a.job_id,
                a.resource_id,
                e.details(),
            )

    def task_executor_lost(self, resource_id: str, cause: str) -> None:
        te = self.slot_manager.task_executors.get(resource_id)
        if te is None:
            return
        log.warning("TaskExecutor %s lost: %s", resource_id, cause)
        self.te_heartbeats.unmonitor(resource_id)
        self._spawn(self.gateways.task_executors.drop(te.rpc_address))
        self._execute(self.slot_manager.task_executor_lost(resource_id, cause, time.monotonic()))

    def worker_terminated(self, worker_id: str, diagnostics: str) -> None:
        pending = worker_id in self.slot_manager.pending_workers
        log.log(
            logging.WARNING if pending else logging.INFO,
            "TaskExecutor process %s ended%s: %s",
            worker_id,
            " before it registered" if pending else "",
            diagnostics,
        )
        te = self.slot_manager.task_executors.get(worker_id)
        if te is not None:
            self.te_heartbeats.unmonitor(worker_id)
            self._spawn(self.gateways.task_executors.drop(te.rpc_address))
        self._execute(self.slot_manager.worker_terminated(worker_id, diagnostics, time.monotonic()))

    # ------------------------------------------------------------------ heartbeats and time
    async def _periodic(self) -> None:
        last_sent = -float("inf")
        while True:
            if not self.leading:  # a standby (HA) acts in no way: no heartbeats, no workers
                await asyncio.sleep(min(0.2, self.heartbeat_interval_s))
                continue
            now = time.monotonic()
            if now - last_sent >= self.heartbeat_interval_s:
                last_sent = now
                for te in list(self.slot_manager.task_executors.values()):
                    if te.resource_id not in self._heartbeats_in_flight:
                        self._heartbeats_in_flight.add(te.resource_id)
                        self._spawn(self._heartbeat(te.resource_id, te.rpc_address))
            for rid in self.te_heartbeats.timed_out(now):
                self.task_executor_lost(
                    rid, f"heartbeat of TaskExecutor {rid} timed out (heartbeat.timeout {self.heartbeat_timeout_s:g} s)"
                )
            for job_id in self.jm_heartbeats.timed_out(now):
                log.warning("JobMaster of job %s timed out; dropping its resource requirements", job_id)
                self.jm_heartbeats.unmonitor(job_id)
                self._execute(self.slot_manager.unregister_job(job_id, now))
            self._execute(self.slot_manager.tick(now))
            await asyncio.sleep(min(0.2, self.heartbeat_interval_s))

    async def _heartbeat(self, resource_id: str, address: str) -> None:
        try:
            resp = await self.gateways.task_executor(address).HeartbeatFromResourceManager(
                taskexecutor_pb2.ResourceManagerHeartbeat(resource_manager_token=self.fencing_token),
                timeout=self.heartbeat_timeout_s,
            )
        except grpc.aio.AioRpcError as e:
            te = self.slot_manager.task_executors.get(resource_id)
            if te is None or te.rpc_address != address:
                return
            # refused (FAILED_PRECONDITION): registered elsewhere, or our registration's answer is still
            # on its way to it; several in a row decide, like unreachable
            counted = e.code() in UNREACHABLE or e.code() == grpc.StatusCode.FAILED_PRECONDITION
            if counted and self.te_heartbeats.rpc_failed(resource_id):
                self.task_executor_lost(
                    resource_id,
                    f"TaskExecutor {resource_id} is unreachable "
                    f"({self.rpc_failure_threshold} heartbeats failed: {e.details()})",
                )
            return
        finally:
            self._heartbeats_in_flight.discard(resource_id)
        te = self.slot_manager.task_executors.get(resource_id)
        if te is None or te.rpc_address != address:
            return
        now = time.monotonic()
        self.te_heartbeats.received(resource_id, now)
        self._execute(self.slot_manager.slot_report(resource_id, slot_report_from_pb(resp.slot_report), now))

    # ------------------------------------------------------------------ views (for the Dispatcher)
    def _task_manager_json(self, te: TaskExecutorRecord, now: float) -> dict[str, Any]:
        sm = self.slot_manager
        _, _, port = te.data_address.rpartition(":")
        taken = {a.slot_index for a in te.allocations.values()}
        return {
            "id": te.resource_id,
            "path": te.rpc_address,
            "dataPort": int(port or 0),
            "timeSinceLastHeartbeat": int(
                min(self.te_heartbeats.since_last_heard(te.resource_id, now), now - te.registered_at) * 1000
            ),
            "slotsNumber": te.num_slots,
            "freeSlots": te.free_slots(sm.fine_grained),
            "totalResource": te.total.to_json(),
            "freeResource": (te.total - te.used).to_json(),
            "hardware": {"pid": te.pid, "host": te.hostname, "cpuCores": te.total.cpu_cores},
            "allocatedSlots": [{"jobId": a.job_id, "resource": a.profile.to_json()} for a in te.allocations.values()],
            "slots": [
                {
                    "index": a.slot_index,
                    "allocationId": a.allocation_id,
                    "jobId": a.job_id,
                    "status": a.state.value,
                    "resource": a.profile.to_json(),
                }
                for a in sorted(te.allocations.values(), key=lambda a: (a.slot_index < 0, a.slot_index))
            ]
            + [
                {
                    "index": i,
                    "allocationId": None,
                    "jobId": None,
                    "status": "FREE",
                    "resource": te.default_slot.to_json(),
                }
                for i in range(te.num_slots)
                if i not in taken and (te.slot_counted or not sm.fine_grained)
            ],
        }

    async def task_managers_info(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        return [self._task_manager_json(te, now) for te in self.slot_manager.task_executors.values()]

    async def task_manager_info(self, resource_id: str) -> dict[str, Any] | None:
        te = self.slot_manager.task_executors.get(resource_id)
        return None if te is None else self._task_manager_json(te, time.monotonic())

    async def slot_totals(self) -> tuple[int, int, int]:
        total, free = self.slot_manager.totals()
        return len(self.slot_manager.task_executors), total, free


class _DriverEvents:
    """The driver's ResourceEventHandler: events are handed to the ResourceManager's loop."""

    def __init__(self, rm: ResourceManager) -> None:
        self.rm = rm

    def on_worker_started(self, worker_id: str) -> None:
        log.info("TaskExecutor process %s started", worker_id)

    def on_worker_terminated(self, worker_id: str, diagnostics: str) -> None:
        self.rm.call_soon(self.rm.worker_terminated, worker_id, diagnostics)

    def on_error(self, error: BaseException) -> None:
        log.error("the resource manager driver failed: %s", error)


class _Servicer(resourcemanager_pb2_grpc.ResourceManagerGatewayServicer):
    def __init__(self, rm: ResourceManager) -> None:
        self.rm = rm

    def _heartbeat_settings(self) -> dict[str, int]:
        rm = self.rm
        return {
            "heartbeat_interval_ms": int(rm.heartbeat_interval_s * 1000),
            "heartbeat_timeout_ms": int(rm.heartbeat_timeout_s * 1000),
        }

    async def _require_leader(self, context: Any) -> None:
        if not self.rm.leading:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION, f"ResourceManager {self.rm.address} is not the leader"
            )

    async def RegisterTaskExecutor(self, request: Any, context: Any) -> Any:
        rm = self.rm
        await self._require_leader(context)
        if request.num_slots < 1 or request.num_slots > 1024:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"num_slots must be in [1, 1024], got {request.num_slots}"
            )
        if not request.resource_id or not request.rpc_address or not request.data_address:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "resource_id, rpc_address and data_address are required"
            )
        total = profile_from_pb(request.total_profile)
        default_slot = profile_from_pb(request.default_slot_profile)
        log.info(
            "TaskExecutor %s registered from %s with %d slots (%s)",
            request.resource_id,
            request.rpc_address,
            request.num_slots,
            total,
        )
        old = rm.slot_manager.task_executors.get(request.resource_id)
        if old is not None and old.rpc_address != request.rpc_address:
            rm._spawn(rm.gateways.task_executors.drop(old.rpc_address))
        now = time.monotonic()
        rm.te_heartbeats.monitor(request.resource_id, now)
        rm._execute(
            rm.slot_manager.register_task_executor(
                request.resource_id,
                request.rpc_address,
                request.data_address,
                request.num_slots,
                slot_report_from_pb(request.slot_report),
                now,
                total=total,
                default_slot=None if default_slot.is_unknown else default_slot,
                hostname=request.hostname,
                pid=request.pid,
            )
        )
        return resourcemanager_pb2.RegisterTaskExecutorResponse(
            registration_id=uuid.uuid4().hex,
            fencing_token=rm.fencing_token,
            resource_manager_resource_id=rm.resource_id,
            **self._heartbeat_settings(),
        )

    async def NotifySlotAvailable(self, request: Any, context: Any) -> Any:
        await check_fencing(context, self.rm.fencing_token, request.fencing_token, "ResourceManager")
        self.rm._execute(
            self.rm.slot_manager.slot_freed(
                request.resource_id, request.allocation_id, request.slot_report_version, time.monotonic()
            )
        )
        return common_pb2.Ack()

    async def DisconnectTaskExecutor(self, request: Any, context: Any) -> Any:
        await check_fencing(context, self.rm.fencing_token, request.fencing_token, "ResourceManager")
        self.rm.task_executor_lost(request.resource_id, f"TaskExecutor disconnected: {request.cause}")
        return common_pb2.Ack()

    async def RegisterJobMaster(self, request: Any, context: Any) -> Any:
        if not request.job_id or not request.jobmaster_address or not request.jobmaster_id:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "job_id, jobmaster_address and jobmaster_id are required"
            )
        await self._require_leader(context)
        self.rm.jm_heartbeats.monitor(request.job_id, time.monotonic())
        return resourcemanager_pb2.RegisterJobMasterResponse(
            fencing_token=self.rm.fencing_token,
            heartbeat_rpc_failure_threshold=self.rm.rpc_failure_threshold,
            **self._heartbeat_settings(),
        )

    async def DeclareRequiredResources(self, request: Any, context: Any) -> Any:
        await check_fencing(context, self.rm.fencing_token, request.fencing_token, "ResourceManager")
        requirements: dict[ResourceProfile, int] = {}
        for r in request.requirements:
            if r.number_of_slots < 0:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"invalid slot count {r.number_of_slots}")
            p = profile_from_pb(r.profile)
            requirements[p] = requirements.get(p, 0) + r.number_of_slots
        if sum(requirements.values()) > 100_000:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"invalid slot count {sum(requirements.values())}")
        now = time.monotonic()
        if request.job_id not in self.rm.jm_heartbeats:
            self.rm.jm_heartbeats.monitor(request.job_id, now)
        self.rm._execute(
            self.rm.slot_manager.declare_requirements(
                request.job_id, request.jobmaster_address, request.jobmaster_id, requirements, now
            )
        )
        return common_pb2.Ack()

    async def DisconnectJobMaster(self, request: Any, context: Any) -> Any:
        await check_fencing(context, self.rm.fencing_token, request.fencing_token, "ResourceManager")
        self.rm.jm_heartbeats.unmonitor(request.job_id)
        self.rm._execute(self.rm.slot_manager.unregister_job(request.job_id, time.monotonic()))
        return common_pb2.Ack()

    async def HeartbeatFromJobMaster(self, request: Any, context: Any) -> Any:
        await check_fencing(context, self.rm.fencing_token, request.fencing_token, "ResourceManager")
        known = request.job_id in self.rm.jm_heartbeats
        if known:
            self.rm.jm_heartbeats.received(request.job_id, time.monotonic())
        return resourcemanager_pb2.JobMasterHeartbeatResponse(known=known)
