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

from yarnflink.common.config import Configuration
from yarnflink.common.rpc_errors import (
    RPC_TIMEOUT_S,
    FencingTokenMismatch,
    InvalidRequest,
    RpcException,
    RpcUnreachable,
    check_fencing,
)
from yarnflink.jobmaster.gateway import DisconnectTaskManager
from yarnflink.resourcemanager.driver import ResourceManagerDriver
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
    SlotInfo,
    TaskExecutorRegistrationSuccess,
    TaskManagerInfo,
    TaskManagerSlot,
)
from yarnflink.resourcemanager.heartbeat import HeartbeatMonitor
from yarnflink.resourcemanager.options import ClusterOptions, HeartbeatManagerOptions, ResourceManagerOptions
from yarnflink.resourcemanager.resources import ResourceProfile, worker_spec_from_config
from yarnflink.resourcemanager.slotmanager import (
    Action,
    AllocateSlot,
    NotifyTaskManagerLost,
    SlotManager,
    StartWorker,
    StopWorker,
    TaskExecutorRecord,
)
from yarnflink.rpc.clients import GrpcGatewayResolver
from yarnflink.rpc.endpoint import RpcEndpoint
from yarnflink.rpc.resolver import GatewayResolver
from yarnflink.rpc.servicers import ResourceManagerServicer
from yarnflink.taskexecutor.gateway import RequestSlot

log = logging.getLogger(__name__)


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
        gateways: GatewayResolver | None = None,
    ) -> None:
        """``driver`` None: standalone. ``min_slots`` overrides ``slotmanager.number-of-slots.min``.
        ``high_availability``: the ResourceManager acts only between ``grant_leadership`` and
        ``revoke_leadership`` (its fencing token is empty otherwise, so it refuses everything).
        ``gateways``: how it reaches TaskExecutors and JobMasters (default: over gRPC)."""
        super().__init__("ResourceManager")
        config = config or Configuration()
        self.host = host
        self._port = port
        self.resource_id = uuid.uuid4().hex
        #: Leader session id; fixed for a non-HA cluster, fresh per leadership grant with HA
        #: ("" while not leading). Replaced, never mutated: read from any thread.
        self.fencing_token = "" if high_availability else uuid.uuid4().hex
        self.heartbeat_interval_s = config.get_seconds(HeartbeatManagerOptions.HEARTBEAT_INTERVAL) or 10.0
        self.heartbeat_timeout_s = config.get_seconds(HeartbeatManagerOptions.HEARTBEAT_TIMEOUT) or 50.0
        self.rpc_failure_threshold = int(config.get(HeartbeatManagerOptions.HEARTBEAT_RPC_FAILURE_THRESHOLD))
        self.driver = driver
        self.slot_manager = SlotManager(
            fine_grained=bool(config.get(ClusterOptions.ENABLE_FINE_GRAINED_RESOURCE_MANAGEMENT)),
            evenly_spread_out_slots=bool(config.get(ClusterOptions.EVENLY_SPREAD_OUT_SLOTS)),
            worker_spec=worker_spec_from_config(config) if driver is not None else None,
            max_slots=int(config.get(ResourceManagerOptions.MAX_SLOT_NUM)),
            min_slots=int(config.get(ResourceManagerOptions.MIN_SLOT_NUM)) if min_slots is None else min_slots,
            task_manager_timeout=config.get_seconds(ResourceManagerOptions.TASK_MANAGER_TIMEOUT) or 0.0,
            registration_timeout=config.get_seconds(ResourceManagerOptions.TASK_MANAGER_REGISTRATION_TIMEOUT) or 300.0,
            max_start_failure_rate=float(config.get(ResourceManagerOptions.START_WORKER_MAX_FAILURE_RATE)),
            start_retry_interval=config.get_seconds(ResourceManagerOptions.START_WORKER_RETRY_INTERVAL) or 0.0,
        )
        self.te_heartbeats = HeartbeatMonitor(self.heartbeat_timeout_s, self.rpc_failure_threshold)
        self.jm_heartbeats = HeartbeatMonitor(self.heartbeat_timeout_s, self.rpc_failure_threshold)
        if gateways is None:
            gateways = GrpcGatewayResolver()
        self.gateways: GatewayResolver = gateways
        self._loop_task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._heartbeats_in_flight: set[str] = set()
        self._warned_unfulfillable: set[tuple[str, ResourceProfile]] = set()
        #: set by ``begin_stop``: the cluster is going, its TaskExecutors with it; none is replaced
        self.stopping = False

    def begin_stop(self) -> None:
        """From any thread, at once: start no TaskExecutor from now on (the cluster is stopping:
        TaskExecutors that end meanwhile must not be replaced by ones that outlive it)."""
        self.stopping = True

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
        await self.serve(ResourceManagerServicer(self), self.host, self._port)
        if self.driver is not None:
            self.driver.initialize(_DriverEvents(self), self.address)
        self._loop_task = asyncio.ensure_future(self._periodic())

    async def on_stop(self) -> None:
        self.stopping = True
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
            resp = await self.gateways.task_executor(a.rpc_address).request_slot(
                RequestSlot(
                    resource_manager_token=self.fencing_token,
                    slot_index=a.slot_index,
                    job_id=a.job_id,
                    allocation_id=a.allocation_id,
                    profile=a.profile,
                    jobmaster_address=a.jobmaster_address,
                    jobmaster_id=a.jobmaster_id,
                )
            )
        except RpcException as e:
            log.warning("slot request to %s failed: %s", a.resource_id, e)
            self._execute(self.slot_manager.allocation_failed(a.resource_id, a.allocation_id, time.monotonic()))
            return
        self._execute(
            self.slot_manager.allocation_acked(
                a.resource_id, a.allocation_id, resp.slot_index, resp.slot_report_version, time.monotonic()
            )
        )

    def _start_worker(self, action: StartWorker) -> None:
        assert self.driver is not None
        if self.stopping:
            log.info("not starting a TaskExecutor: the cluster is stopping")
            return
        try:
            worker_id = self.driver.start_worker(action.spec)
        except Exception as e:  # noqa: BLE001 - a failed start is an event like any other
            log.warning("starting a TaskExecutor failed: %s", e)
            # handled in a later turn of the loop, never within this start: the next start it may
            # ask for (at once with a retry interval of 0) would otherwise recurse
            self.loop.call_soon(self._worker_start_failed, action.request_id, str(e))
            return
        log.info(
            "requested TaskExecutor %s (%d registered, %d being started)",
            worker_id,
            len(self.slot_manager.task_executors),
            len(self.slot_manager.pending_workers),
        )
        self.slot_manager.worker_requested(action.request_id, worker_id)

    def _worker_start_failed(self, request_id: str, cause: str) -> None:
        self._execute(self.slot_manager.worker_terminated(request_id, cause, time.monotonic()))

    def _stop_worker(self, action: StopWorker) -> None:
        log.info("stopping TaskExecutor %s: %s", action.resource_id, action.cause)
        self.te_heartbeats.unmonitor(action.resource_id)
        if action.rpc_address:
            self._spawn(self.gateways.forget(action.rpc_address))
        if self.driver is not None:
            try:
                self.driver.stop_worker(action.resource_id)
            except Exception:  # noqa: BLE001
                log.exception("stopping TaskExecutor %s failed", action.resource_id)

    async def _notify_task_manager_lost(self, a: NotifyTaskManagerLost) -> None:
        try:
            await self.gateways.job_master(a.jobmaster_address).disconnect_task_manager(
                DisconnectTaskManager(a.jobmaster_id, a.resource_id, a.cause)
            )
        except RpcException as e:
            log.info(
                "telling the JobMaster of job %s about lost TaskExecutor %s failed: %s", a.job_id, a.resource_id, e
            )

    def task_executor_lost(self, resource_id: str, cause: str) -> None:
        te = self.slot_manager.task_executors.get(resource_id)
        if te is None:
            return
        log.warning("TaskExecutor %s lost: %s", resource_id, cause)
        self.te_heartbeats.unmonitor(resource_id)
        self._spawn(self.gateways.forget(te.rpc_address))
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
            self._spawn(self.gateways.forget(te.rpc_address))
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
            report = await self.gateways.task_executor(address).heartbeat_from_resource_manager(
                self.fencing_token, timeout=self.heartbeat_timeout_s
            )
        except RpcException as e:
            te = self.slot_manager.task_executors.get(resource_id)
            if te is None or te.rpc_address != address:
                return
            # refused (fencing): registered elsewhere, or our registration's answer is still on its
            # way to it; several in a row decide, like unreachable
            counted = isinstance(e, (RpcUnreachable, FencingTokenMismatch))
            if counted and self.te_heartbeats.rpc_failed(resource_id):
                self.task_executor_lost(
                    resource_id,
                    f"TaskExecutor {resource_id} is unreachable ({self.rpc_failure_threshold} heartbeats failed: {e})",
                )
            return
        finally:
            self._heartbeats_in_flight.discard(resource_id)
        te = self.slot_manager.task_executors.get(resource_id)
        if te is None or te.rpc_address != address:
            return
        now = time.monotonic()
        self.te_heartbeats.received(resource_id, now)
        self._execute(self.slot_manager.slot_report(resource_id, report, now))

    # ------------------------------------------------------------------ views (for the Dispatcher)
    def _task_manager_info(self, te: TaskExecutorRecord, now: float) -> TaskManagerInfo:
        sm = self.slot_manager
        _, _, port = te.data_address.rpartition(":")
        taken = {a.slot_index for a in te.allocations.values()}
        allocated = sorted(te.allocations.values(), key=lambda a: (a.slot_index < 0, a.slot_index))
        return TaskManagerInfo(
            resource_id=te.resource_id,
            rpc_address=te.rpc_address,
            data_port=int(port or 0),
            time_since_last_heartbeat_ms=int(
                min(self.te_heartbeats.since_last_heard(te.resource_id, now), now - te.registered_at) * 1000
            ),
            number_slots=te.num_slots,
            number_available_slots=te.free_slots(sm.fine_grained),
            total_resource=te.total,
            free_resource=te.total - te.used,
            pid=te.pid,
            hostname=te.hostname,
            allocated_slots=tuple(SlotInfo(a.job_id, a.profile) for a in te.allocations.values()),
            slots=tuple(
                TaskManagerSlot(a.slot_index, a.allocation_id, a.job_id, a.state.value, a.profile) for a in allocated
            )
            + tuple(
                TaskManagerSlot(i, None, None, "FREE", te.default_slot)
                for i in range(te.num_slots)
                if i not in taken and (te.slot_counted or not sm.fine_grained)
            ),
        )

    # ------------------------------------------------------------------ ResourceManagerControlGateway (on its loop)
    async def request_task_manager_info(self) -> tuple[TaskManagerInfo, ...]:
        now = time.monotonic()
        return tuple(self._task_manager_info(te, now) for te in self.slot_manager.task_executors.values())

    async def request_resource_overview(self) -> ResourceOverview:
        total, free = self.slot_manager.totals()
        return ResourceOverview(len(self.slot_manager.task_executors), total, free)

    # ------------------------------------------------------------------ ResourceManagerGateway (served by rpc.servicers)
    def _require_leader(self) -> None:
        if not self.leading:
            raise FencingTokenMismatch(f"ResourceManager {self.address} is not the leader")

    async def register_task_executor(
        self, request: RegisterTaskExecutor, *, timeout: float = RPC_TIMEOUT_S
    ) -> TaskExecutorRegistrationSuccess:
        self._require_leader()
        if request.num_slots < 1 or request.num_slots > 1024:
            raise InvalidRequest(f"num_slots must be in [1, 1024], got {request.num_slots}")
        if not request.resource_id or not request.rpc_address or not request.data_address:
            raise InvalidRequest("resource_id, rpc_address and data_address are required")
        total = request.total_profile
        default_slot = request.default_slot_profile
        log.info(
            "TaskExecutor %s registered from %s with %d slots (%s)",
            request.resource_id,
            request.rpc_address,
            request.num_slots,
            total,
        )
        old = self.slot_manager.task_executors.get(request.resource_id)
        if old is not None and old.rpc_address != request.rpc_address:
            self._spawn(self.gateways.forget(old.rpc_address))
        now = time.monotonic()
        self.te_heartbeats.monitor(request.resource_id, now)
        self._execute(
            self.slot_manager.register_task_executor(
                request.resource_id,
                request.rpc_address,
                request.data_address,
                request.num_slots,
                request.slot_report,
                now,
                total=total,
                default_slot=None if default_slot.is_unknown else default_slot,
                hostname=request.hostname,
                pid=request.pid,
            )
        )
        return TaskExecutorRegistrationSuccess(
            registration_id=uuid.uuid4().hex,
            fencing_token=self.fencing_token,
            resource_manager_resource_id=self.resource_id,
            heartbeat_interval_ms=int(self.heartbeat_interval_s * 1000),
            heartbeat_timeout_ms=int(self.heartbeat_timeout_s * 1000),
        )

    async def notify_slot_available(self, request: NotifySlotAvailable, *, timeout: float = RPC_TIMEOUT_S) -> None:
        check_fencing(self.fencing_token, request.fencing_token, "ResourceManager")
        self._execute(
            self.slot_manager.slot_freed(
                request.resource_id, request.allocation_id, request.slot_report_version, time.monotonic()
            )
        )

    async def disconnect_task_executor(
        self, request: DisconnectTaskExecutor, *, timeout: float = RPC_TIMEOUT_S
    ) -> None:
        check_fencing(self.fencing_token, request.fencing_token, "ResourceManager")
        self.task_executor_lost(request.resource_id, f"TaskExecutor disconnected: {request.cause}")

    async def register_job_master(
        self, request: RegisterJobMaster, *, timeout: float = RPC_TIMEOUT_S
    ) -> JobMasterRegistrationSuccess:
        if not request.job_id or not request.jobmaster_address or not request.jobmaster_id:
            raise InvalidRequest("job_id, jobmaster_address and jobmaster_id are required")
        self._require_leader()
        self.jm_heartbeats.monitor(request.job_id, time.monotonic())
        return JobMasterRegistrationSuccess(
            fencing_token=self.fencing_token,
            heartbeat_interval_ms=int(self.heartbeat_interval_s * 1000),
            heartbeat_timeout_ms=int(self.heartbeat_timeout_s * 1000),
            heartbeat_rpc_failure_threshold=self.rpc_failure_threshold,
        )

    async def declare_required_resources(
        self, request: DeclareRequiredResources, *, timeout: float = RPC_TIMEOUT_S
    ) -> None:
        check_fencing(self.fencing_token, request.fencing_token, "ResourceManager")
        requirements: dict[ResourceProfile, int] = {}
        for r in request.requirements:
            if r.number_of_slots < 0:
                raise InvalidRequest(f"invalid slot count {r.number_of_slots}")
            requirements[r.profile] = requirements.get(r.profile, 0) + r.number_of_slots
        if sum(requirements.values()) > 100_000:
            raise InvalidRequest(f"invalid slot count {sum(requirements.values())}")
        now = time.monotonic()
        if request.job_id not in self.jm_heartbeats:
            self.jm_heartbeats.monitor(request.job_id, now)
        self._execute(
            self.slot_manager.declare_requirements(
                request.job_id, request.jobmaster_address, request.jobmaster_id, requirements, now
            )
        )

    async def disconnect_job_master(self, request: DisconnectJobMaster, *, timeout: float = RPC_TIMEOUT_S) -> None:
        check_fencing(self.fencing_token, request.fencing_token, "ResourceManager")
        self.jm_heartbeats.unmonitor(request.job_id)
        self._execute(self.slot_manager.unregister_job(request.job_id, time.monotonic()))

    async def heartbeat_from_job_master(self, request: JobMasterHeartbeat, *, timeout: float = RPC_TIMEOUT_S) -> bool:
        check_fencing(self.fencing_token, request.fencing_token, "ResourceManager")
        known = request.job_id in self.jm_heartbeats
        if known:
            self.jm_heartbeats.received(request.job_id, time.monotonic())
        return known


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
