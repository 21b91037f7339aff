"""JobMaster: runs one job. Expands the JobGraph into an ExecutionGraph, declares the slots it
needs at the ResourceManager, takes the slots TaskExecutors offer, deploys every task (eager
scheduling: all slots first, then all tasks in topological order), tracks their states and ends the
job. Without a restart strategy (the failover issue adds them) any task failure fails the job.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
import uuid
from typing import Any, Callable, Optional

import grpc

from yarnflink.executiongraph.executiongraph import (
    Execution,
    ExecutionGraph,
    ExecutionState,
    Failure,
    JobStatus,
    now_ms,
)
from yarnflink.jobgraph.jobgraph import JobGraph
from yarnflink.jobmaster.deployment import build_tdd
from yarnflink.jobmaster.slotpool import SlotPool
from yarnflink.rpc.endpoint import RpcEndpoint
from yarnflink.rpc.gateways import RPC_TIMEOUT_S, GatewayPool, check_fencing
from yarnflink.rpc.pb import (
    common_pb2,
    jobmaster_pb2,
    jobmaster_pb2_grpc,
    resourcemanager_pb2,
    taskexecutor_pb2,
)
from yarnflink.scheduler.slotsharing import compute_slot_sharing

log = logging.getLogger(__name__)

#: Collected results kept for the client (execute_and_collect) are bounded.
MAX_COLLECTED_BYTES = 512 * 1024 * 1024


class JobMaster(RpcEndpoint):
    def __init__(self, job_graph: JobGraph, host: str, resource_manager_address: str, *,
                 on_terminated: Callable[["JobMaster"], None],
                 slot_request_timeout_s: float = 300.0,
                 heartbeat_interval_s: float = 10.0,
                 heartbeat_timeout_s: float = 50.0) -> None:
        super().__init__(f"JobMaster-{job_graph.job_id[:8]}")
        self.job_graph = job_graph
        self.host = host
        self.rm_address = resource_manager_address
        self.on_terminated = on_terminated
        self.slot_request_timeout_s = slot_request_timeout_s
        self.heartbeat_interval_s = heartbeat_interval_s
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.jobmaster_id = uuid.uuid4().hex  # fencing token of this JobMaster
        self.rm_token = ""
        self.eg = ExecutionGraph(job_graph)
        self.slot_pool = SlotPool()
        self.shared_slots = compute_slot_sharing(self.eg)
        self.slot_pool.required = len(self.shared_slots)
        self.gateways = GatewayPool()
        self.collected: dict[int, list[bytes]] = {}
        self._collected_bytes = 0
        self._deployed = False
        self._timers: list[asyncio.Task[Any]] = []
        self._terminated_notified = False

    @property
    def job_id(self) -> str:
        return self.job_graph.job_id

    @property
    def address(self) -> str:
        return f"{self.host}:{self.rpc_port}"

    # ------------------------------------------------------------------ lifecycle
    async def on_start(self) -> None:
        await self.serve(jobmaster_pb2_grpc.add_JobMasterGatewayServicer_to_server,
                         _Servicer(self), self.host, 0)
        self.eg.transition_to(JobStatus.RUNNING)
        for ejv in self.eg.job_vertices:
            for ev in ejv.task_vertices:
                ev.current.transition(ExecutionState.SCHEDULED)
        self._timers.append(asyncio.ensure_future(self._request_slots()))
        self._timers.append(asyncio.ensure_future(self._slot_request_timeout()))
        self._timers.append(asyncio.ensure_future(self._monitor_task_managers()))

    async def on_stop(self) -> None:
        for t in self._timers:
            t.cancel()
        await self.gateways.close()

    async def _request_slots(self) -> None:
        rm = self.gateways.resource_manager(self.rm_address)
        try:
            resp = await rm.RegisterJobMaster(resourcemanager_pb2.RegisterJobMasterRequest(
                job_id=self.job_id, jobmaster_address=self.address, jobmaster_id=self.jobmaster_id),
                timeout=RPC_TIMEOUT_S)
            self.rm_token = resp.fencing_token
            await rm.DeclareRequiredResources(resourcemanager_pb2.DeclareRequiredResourcesRequest(
                fencing_token=self.rm_token, job_id=self.job_id, jobmaster_address=self.address,
                jobmaster_id=self.jobmaster_id,
                requirements=[resourcemanager_pb2.ResourceRequirement(number_of_slots=self.slot_pool.required)],
            ), timeout=RPC_TIMEOUT_S)
        except grpc.aio.AioRpcError as e:
            self.fail_job(Failure("ResourceManagerConnectionException",
                                  f"could not reach the ResourceManager at {self.rm_address}: {e.details()}",
                                  "", now_ms()))

    async def _slot_request_timeout(self) -> None:
        await asyncio.sleep(self.slot_request_timeout_s)
        if not self._deployed and not self.eg.status.globally_terminal:
            self.fail_job(Failure(
                "NoResourceAvailableException",
                f"Could not acquire the minimum required resources: the job needs "
                f"{self.slot_pool.required} slots and got {len(self.slot_pool.slots)} within "
                f"slot.request.timeout ({self.slot_request_timeout_s:.0f} s)",
                "", now_ms()))

    async def _monitor_task_managers(self) -> None:
        while True:
            await asyncio.sleep(min(1.0, self.heartbeat_interval_s))
            now = time.monotonic()
            for tm in list(self.slot_pool.task_managers.values()):
                if now - tm.last_heartbeat > self.heartbeat_timeout_s:
                    self.task_manager_lost(tm.resource_id, f"heartbeat of TaskManager {tm.resource_id} timed out")

    # ------------------------------------------------------------------ slots
    def slots_offered(self, resource_id: str, offers: list[tuple[str, int]]) -> list[str]:
        if self.eg.status != JobStatus.RUNNING or self._deployed:
            return []
        accepted = self.slot_pool.offer_slots(resource_id, offers)
        if self.slot_pool.has_all_slots():
            # deploy after this RPC returns, so the TaskExecutor knows the slots are accepted
            asyncio.get_running_loop().call_soon(self._deploy_all)
        return accepted

    def _deploy_all(self) -> None:
        if self._deployed or self.eg.status != JobStatus.RUNNING:
            return
        self._deployed = True
        slots = list(self.slot_pool.slots.values())
        for shared, slot in zip(self.shared_slots, slots):
            for ev in shared.vertices:
                ev.current.slot = slot
        for ejv in self.eg.job_vertices:  # topological order
            for ev in ejv.task_vertices:
                asyncio.ensure_future(self._deploy(ev.current))

    async def _deploy(self, execution: Execution) -> None:
        if not execution.transition(ExecutionState.DEPLOYING):
            return
        slot = execution.slot
        assert slot is not None
        try:
            await self.gateways.task_executor(slot.rpc_address).SubmitTask(
                taskexecutor_pb2.SubmitTaskRequest(jobmaster_id=self.jobmaster_id,
                                                   tdd=build_tdd(self.eg, execution.vertex)),
                timeout=RPC_TIMEOUT_S)
        except grpc.aio.AioRpcError as e:
            self.execution_failed(execution, Failure(
                "TaskDeploymentException", f"could not deploy to {slot.rpc_address}: {e.details()}",
                "", now_ms(), execution.vertex.task_name_with_subtask, slot.rpc_address, slot.resource_id))

    # ------------------------------------------------------------------ task states
    def update_task_state(self, attempt_id: str, state: ExecutionState,
                          error: Optional[common_pb2.SerializedThrowable]) -> bool:
        execution = self.eg.find_execution(attempt_id)
        if execution is None or execution is not execution.vertex.current:
            return False
        if state == ExecutionState.FAILED:
            slot = execution.slot
            self.execution_failed(execution, Failure(
                error.exception_class if error else "Exception",
                error.message if error else "task failed",
                error.traceback if error else "",
                now_ms(), execution.vertex.task_name_with_subtask,
                slot.data_address if slot else "", slot.resource_id if slot else ""))
            return True
        if not execution.transition(state):
            return False
        self._check_job_end()
        return True

    def execution_failed(self, execution: Execution, failure: Failure) -> None:
        if not execution.transition(ExecutionState.FAILED):
            if execution.state.terminal:
                return
            execution.state = ExecutionState.FAILED
        execution.failure = failure
        self.eg.failures.append(failure)
        if self.eg.status in (JobStatus.RUNNING, JobStatus.CREATED):
            log.info("job %s failing: %s in %s", self.job_id, failure.exception_class, failure.task_name)
            self.eg.transition_to(JobStatus.FAILING)
            self._cancel_all()
        self._check_job_end()

    def fail_job(self, failure: Failure) -> None:
        """A failure of the job as a whole (not of one task)."""
        if self.eg.status.globally_terminal:
            return
        self.eg.failures.append(failure)
        self.eg.transition_to(JobStatus.FAILING)
        self._cancel_all()
        self._check_job_end()

    def cancel(self) -> bool:
        if self.eg.status.globally_terminal or self.eg.status == JobStatus.CANCELLING:
            return False
        self.eg.transition_to(JobStatus.CANCELLING)
        self._cancel_all()
        self._check_job_end()
        return True

    def _cancel_all(self) -> None:
        for execution in self.eg.executions():
            if execution.state.terminal:
                continue
            if execution.state in (ExecutionState.CREATED, ExecutionState.SCHEDULED) or execution.slot is None:
                execution.transition(ExecutionState.CANCELED)
                continue
            execution.transition(ExecutionState.CANCELING)
            asyncio.ensure_future(self._cancel_remote(execution))

    async def _cancel_remote(self, execution: Execution) -> None:
        slot = execution.slot
        assert slot is not None
        try:
            await self.gateways.task_executor(slot.rpc_address).CancelTask(
                taskexecutor_pb2.CancelTaskRequest(jobmaster_id=self.jobmaster_id,
                                                   execution_id=execution.attempt_id),
                timeout=RPC_TIMEOUT_S)
        except grpc.aio.AioRpcError as e:
            # the TaskExecutor is gone: its task is gone with it
            log.info("cancel of %s failed (%s); marking it canceled", execution.attempt_id, e.details())
            if execution.transition(ExecutionState.CANCELED):
                self._check_job_end()

    def task_manager_lost(self, resource_id: str, cause: str) -> None:
        lost = self.slot_pool.release_task_manager(resource_id)
        allocations = {s.allocation_id for s in lost}
        for execution in list(self.eg.executions()):
            if execution.slot and execution.slot.allocation_id in allocations and not execution.state.terminal:
                if execution.state == ExecutionState.CANCELING:
                    execution.transition(ExecutionState.CANCELED)
                    continue
                self.execution_failed(execution, Failure(
                    "TaskManagerLostException", cause, "", now_ms(),
                    execution.vertex.task_name_with_subtask, execution.slot.data_address, resource_id))
        self._check_job_end()

    def _check_job_end(self) -> None:
        status = self.eg.status
        if status.globally_terminal:
            return
        if status == JobStatus.RUNNING and self.eg.all_finished():
            self._terminate(JobStatus.FINISHED)
        elif status == JobStatus.FAILING and self.eg.all_terminal():
            self._terminate(JobStatus.FAILED)
        elif status == JobStatus.CANCELLING and self.eg.all_terminal():
            self._terminate(JobStatus.CANCELED)

    def _terminate(self, status: JobStatus) -> None:
        self.eg.transition_to(status)
        log.info("job %s (%s) %s", self.job_graph.job_name, self.job_id, status.value)
        asyncio.ensure_future(self._release_resources())
        if not self._terminated_notified:
            self._terminated_notified = True
            self.on_terminated(self)

    async def _release_resources(self) -> None:
        for slot in self.slot_pool.release_all():
            te = self.gateways.task_executor(slot.rpc_address)
            try:
                await te.ReleasePartitions(taskexecutor_pb2.ReleasePartitionsRequest(job_id=self.job_id),
                                           timeout=RPC_TIMEOUT_S)
                await te.FreeSlot(taskexecutor_pb2.FreeSlotRequest(
                    allocation_id=slot.allocation_id, cause=f"job {self.eg.status.value}"), timeout=RPC_TIMEOUT_S)
            except grpc.aio.AioRpcError:
                pass
        try:
            await self.gateways.resource_manager(self.rm_address).DisconnectJobMaster(
                resourcemanager_pb2.DisconnectJobMasterRequest(
                    fencing_token=self.rm_token, job_id=self.job_id, cause=self.eg.status.value),
                timeout=RPC_TIMEOUT_S)
        except grpc.aio.AioRpcError:
            pass

    # ------------------------------------------------------------------ collect sink
    def add_collected(self, attempt_id: str, payload: bytes) -> None:
        execution = self.eg.find_execution(attempt_id)
        if execution is None:
            return
        self._collected_bytes += len(payload)
        if self._collected_bytes > MAX_COLLECTED_BYTES:
            self.fail_job(Failure("CollectSinkException",
                                  f"execute_and_collect() results exceed {MAX_COLLECTED_BYTES} bytes; "
                                  f"write large results with a FileSink instead", "", now_ms()))
            return
        self.collected.setdefault(execution.vertex.subtask_index, []).append(payload)

    def collected_payloads(self) -> list[bytes]:
        return [p for i in sorted(self.collected) for p in self.collected[i]]

    # ------------------------------------------------------------------ views (REST)
    def details(self) -> dict[str, Any]:
        from yarnflink.jobmaster.views import job_details

        return job_details(self.eg)


class _Servicer(jobmaster_pb2_grpc.JobMasterGatewayServicer):
    def __init__(self, jm: JobMaster) -> None:
        self.jm = jm

    async def RegisterTaskManager(self, request: Any, context: Any) -> Any:
        await check_fencing(context, self.jm.jobmaster_id, request.jobmaster_id, "JobMaster")
        self.jm.slot_pool.register_task_manager(
            request.resource_id, request.rpc_address, request.data_address, time.monotonic())
        return common_pb2.Ack()

    async def OfferSlots(self, request: Any, context: Any) -> Any:
        await check_fencing(context, self.jm.jobmaster_id, request.jobmaster_id, "JobMaster")
        accepted = self.jm.slots_offered(
            request.resource_id, [(o.allocation_id, o.slot_index) for o in request.offers])
        return jobmaster_pb2.OfferSlotsResponse(accepted_allocation_ids=accepted)

    async def UpdateTaskExecutionState(self, request: Any, context: Any) -> Any:
        await check_fencing(context, self.jm.jobmaster_id, request.jobmaster_id, "JobMaster")
        try:
            state = ExecutionState(request.state)
        except ValueError:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown execution state {request.state!r}")
        self.jm.update_task_state(request.execution_id, state,
                                  request.error if request.HasField("error") else None)
        return common_pb2.Ack()

    async def SendCoordinationData(self, request: Any, context: Any) -> Any:
        await check_fencing(context, self.jm.jobmaster_id, request.jobmaster_id, "JobMaster")
        if request.kind != "collect":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown coordination data kind {request.kind!r}")
        self.jm.add_collected(request.execution_id, request.payload)
        return common_pb2.Ack()

    async def HeartbeatFromTaskManager(self, request: Any, context: Any) -> Any:
        await check_fencing(context, self.jm.jobmaster_id, request.jobmaster_id, "JobMaster")
        tm = self.jm.slot_pool.task_managers.get(request.resource_id)
        if tm is not None:
            tm.last_heartbeat = time.monotonic()
        return common_pb2.Ack()

    async def DisconnectTaskManager(self, request: Any, context: Any) -> Any:
        await check_fencing(context, self.jm.jobmaster_id, request.jobmaster_id, "JobMaster")
        self.jm.task_manager_lost(request.resource_id, request.cause or "TaskManager disconnected")
        return common_pb2.Ack()


def format_exception(e: BaseException) -> common_pb2.SerializedThrowable:
    return common_pb2.SerializedThrowable(
        exception_class=type(e).__name__, message=str(e),
        traceback="".join(traceback.format_exception(e)))
