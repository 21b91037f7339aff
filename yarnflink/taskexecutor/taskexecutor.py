"""TaskExecutor: offers its slots, runs tasks in threads, and keeps heartbeats with the
ResourceManager and the JobMasters it works for. Serves the TaskExecutorGateway (proto/).

Heartbeats: the ResourceManager asks (HeartbeatFromResourceManager) and gets the slot report; a
ResourceManager silent for ``heartbeat.timeout`` is registered at again. This TaskExecutor sends
heartbeats to the JobMasters of its slots; a JobMaster that does not answer for ``heartbeat.timeout``,
or is unreachable ``heartbeat.rpc-failure-threshold`` times in a row, is lost: its job's tasks are
cancelled and its slots freed.

High availability: given a ``LeaderRetrievalService`` of the ResourceManager (ZooKeeper) instead of a
fixed address, the TaskExecutor follows its leader (``leadership.py``): a new leader gets a
registration with the slot report (allocation ids and job ids of the slots it keeps); the slots
and tasks stay. Given ``job_leader_retrievers`` (the per-job ``leader/<job id>`` retrieval, Flink's
JobLeaderService) it also follows each job's JobMaster leader: a job whose JobMaster is lost
(heartbeat timeout, refused, unreachable) or replaced keeps its slots and tasks; its task state
updates and checkpoint answers wait, in order; the next leader published for the job gets a
``ReconnectTaskManager`` report (slots, tasks with attempt ids and states, tasks that ended
meanwhile) and adopts them. If no leader claims them within
``high-availability.jobmaster.reconnect-timeout`` the job's tasks are cancelled and its slots freed.
Calls with a stale ResourceManager token or a JobMaster id other than the job's current leader's
are rejected and logged (``rejected <Rpc> from stale <component>``), as are leader session ids of
an older epoch than the newest seen (``yarnflink.highavailability.epoch``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import importlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psutil

from yarnflink.common.config import ConfigError
from yarnflink.common.rpc_errors import (
    RPC_TIMEOUT_S,
    FencingTokenMismatch,
    RpcException,
    RpcRejected,
    RpcUnreachable,
    UnknownTarget,
)
from yarnflink.executiongraph.executiongraph import ExecutionState
from yarnflink.highavailability.epoch import is_older
from yarnflink.highavailability.leaderelection import LeaderInformation
from yarnflink.jobmaster.gateway import (
    CoordinationData,
    OfferSlots,
    ReconnectTaskManager,
    RegisterTaskManager,
    ReportedTask,
    SerializedThrowable,
    SlotOffer,
    TaskExecutionState,
    TaskManagerHeartbeat,
)
from yarnflink.metrics.taskexecutor import fill_info, final_io_metrics
from yarnflink.network import ShuffleEnvironment
from yarnflink.resourcemanager.gateway import (
    DisconnectTaskExecutor,
    NotifySlotAvailable,
    RegisterTaskExecutor,
    ReportedSlot,
    SlotReport,
)
from yarnflink.resourcemanager.heartbeat import HeartbeatMonitor
from yarnflink.resourcemanager.resources import UNKNOWN, ResourceProfile
from yarnflink.rpc.clients import GrpcGatewayResolver
from yarnflink.rpc.endpoint import RpcEndpoint
from yarnflink.rpc.resolver import GatewayResolver
from yarnflink.rpc.servicers import TaskExecutorServicer
from yarnflink.spark.session import holder as spark_sessions
from yarnflink.taskexecutor import gateway as g
from yarnflink.taskexecutor.cancellation import CancellationSettings
from yarnflink.taskexecutor.checkpoint_responder import RpcCheckpointResponder
from yarnflink.taskexecutor.leadership import (
    ConnectToResourceManager,
    DisconnectResourceManager,
    ResourceManagerLeaderTracker,
)
from yarnflink.taskexecutor.slottable import SlotAllocationError, SlotState, TaskSlotTable

if TYPE_CHECKING:  # loaded at the first task (see _submit): a TaskExecutor registers without it
    from yarnflink.taskexecutor.task import Task

log = logging.getLogger(__name__)

#: The module of the task runtime, loaded after the registration (``_preload_task_runtime``).
TASK_RUNTIME = "yarnflink.taskexecutor.task"


@dataclass
class JobManagerConnection:
    """This TaskExecutor's link to the JobMaster of one job. State updates of the job's tasks go
    through one queue so they arrive in the order they happened."""

    job_id: str
    address: str
    jobmaster_id: str
    updates: asyncio.Queue[TaskExecutionState | None] = field(default_factory=asyncio.Queue)
    sender: asyncio.Task[None] | None = None
    #: The job's last slot here was freed: the connection closes once the final states of the
    #: job's cancelled tasks are queued, or when this timer fires.
    closing: asyncio.TimerHandle | None = None
    #: HA: set while the job has a JobMaster leader that knows this TaskExecutor (updates and
    #: checkpoint answers wait for it); cleared while the job has no leader
    connected: asyncio.Event = field(default_factory=asyncio.Event)
    #: HA: fires high-availability.jobmaster.reconnect-timeout after the job lost its leader
    reconnect_timer: asyncio.TimerHandle | None = None
    #: HA: the leader being reported to (its report in flight)
    reconnecting: LeaderInformation | None = None
    #: tasks that ended and whose final state has not reached a JobMaster yet, and every task
    #: that finished (reported to the job's next leader, which adopts them as finished)
    ended: dict[str, ReportedTask] = field(default_factory=dict)
    #: HA: watches leader/<job id> (a LeaderRetrievalService)
    leader_retriever: Any = None


class TaskExecutor(RpcEndpoint):
    #: How long cancelled tasks get to report their final state, when a job's last slot is freed
    #: and when the TaskExecutor stops.
    task_end_timeout_s = 5.0

    def __init__(
        self,
        resource_manager_address: str | None,
        *,
        host: str = "127.0.0.1",
        rpc_port: int = 0,
        data_port: int = 0,
        num_slots: int = 1,
        resource_id: str | None = None,
        buffer_timeout_s: float = 0.1,
        max_buffers_per_channel: int = 8,
        max_bytes_per_channel: int = 8 * 1024 * 1024,
        total_resources: ResourceProfile = UNKNOWN,
        heartbeat_interval_s: float = 10.0,
        heartbeat_timeout_s: float = 50.0,
        rpc_failure_threshold: int = 2,
        rm_leader_retriever: Any = None,
        gateways: GatewayResolver | None = None,
        cancellation: CancellationSettings | None = None,
        fatal_error: Callable[[str], None] | None = None,
        job_leader_retrievers: Callable[[str], Any] | None = None,
        jobmaster_reconnect_timeout_s: float = 60.0,
    ) -> None:
        """``gateways``: how it reaches the ResourceManager and JobMasters (default: over gRPC).
        ``cancellation``: when cancelled tasks that do not end are interrupted and given up on (a
        job's configuration may set its own); ``fatal_error``: called (from any thread) when a
        cancelled task did not end within its timeout; the process must exit (the entrypoint's
        handler does; without one the error is only logged). ``job_leader_retrievers``: HA, a
        ``LeaderRetrievalService`` of a job's JobMaster by job id (the TaskExecutor then keeps a
        job's tasks while it has no leader, for up to ``jobmaster_reconnect_timeout_s``)."""
        super().__init__("TaskExecutor")
        if (resource_manager_address is None) == (rm_leader_retriever is None):
            raise ValueError("a TaskExecutor needs either the ResourceManager's address or its leader retriever")
        self._fixed_rm_address = resource_manager_address
        #: HA: a LeaderRetrievalService of the ResourceManager (started and stopped here)
        self.rm_leader_retriever = rm_leader_retriever
        self.rm_leader = ResourceManagerLeaderTracker()
        #: Calls refused for a stale fencing token (old ResourceManager or JobMaster leaders).
        self.stale_rpcs_rejected = 0
        self.job_leader_retrievers = job_leader_retrievers
        self.jobmaster_reconnect_timeout_s = jobmaster_reconnect_timeout_s
        #: HA: the newest JobMaster leader session id seen per job (older epochs are refused)
        self.newest_jobmaster_id: dict[str, str] = {}
        #: HA: reports a new JobMaster leader adopted / jobs given up after the reconnect timeout
        self.jobs_reconnected = 0
        self.jobs_given_up = 0
        self._registration: asyncio.Task[None] | None = None
        self.host = host
        self._rpc_port_config = rpc_port
        self.resource_id = resource_id or f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
        self.slot_table = TaskSlotTable(num_slots, total_resources)
        self.shuffle = ShuffleEnvironment(
            host,
            data_port,
            max_buffers_per_channel=max_buffers_per_channel,
            max_bytes_per_channel=max_bytes_per_channel,
        )
        self.buffer_timeout_s = buffer_timeout_s
        if gateways is None:
            gateways = GrpcGatewayResolver()
        self.gateways: GatewayResolver = gateways
        self.heartbeat_interval_s = heartbeat_interval_s
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self._last_rm_heartbeat = 0.0
        self.jm_heartbeats = HeartbeatMonitor(heartbeat_timeout_s, rpc_failure_threshold)
        self.tasks: dict[str, Task] = {}
        #: Per task here: done once its final state was handled (on the loop).
        self._task_ended: dict[str, asyncio.Future[None]] = {}
        self.job_managers: dict[str, JobManagerConnection] = {}
        self.partitions_by_job: dict[str, set[str]] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self.registered = asyncio.Event()
        self._preloading = False
        self.cancellation = cancellation or CancellationSettings()
        self._fatal_error = fatal_error
        #: the reasons of the fatal errors reported (a test without a handler reads them)
        self.fatal_errors: list[str] = []

    @property
    def address(self) -> str:
        return f"{self.host}:{self.rpc_port}"

    @property
    def rm_address(self) -> str:
        leader = self.rm_leader.leader
        return leader.address if leader is not None else ""

    @property
    def rm_token(self) -> str:
        return self.rm_leader.token

    def reject_stale(self, rpc: str, component: str, detail: str = "") -> str:
        """Counts and logs a call refused by fencing; returns the message for the caller."""
        self.stale_rpcs_rejected += 1
        log.warning("rejected %s from stale %s%s", rpc, component, f" ({detail})" if detail else "")
        return f"rejected {rpc} from stale {component}: {detail or 'fencing token not current'}"

    # ------------------------------------------------------------------ lifecycle
    async def on_start(self) -> None:
        self.registered = asyncio.Event()
        spark_sessions.configure(num_slots=len(self.slot_table.slots))  # Spark steps: a thread per slot
        self.shuffle.start()
        await self.serve(TaskExecutorServicer(self), self.host, self._rpc_port_config)
        self._spawn(self._heartbeats())
        if self.rm_leader_retriever is None:
            self._on_rm_leader(LeaderInformation("", str(self._fixed_rm_address)))
        else:
            loop = asyncio.get_running_loop()

            def notify(info: LeaderInformation | None) -> None:  # on a ZooKeeper thread
                try:
                    loop.call_soon_threadsafe(self._on_rm_leader, info)
                except RuntimeError:  # the loop is closed: stopping
                    pass

            self.rm_leader_retriever.start(notify)

    def _on_rm_leader(self, info: LeaderInformation | None) -> None:
        for action in self.rm_leader.leader_changed(info):
            if isinstance(action, DisconnectResourceManager):
                if self.job_leader_retrievers is not None:
                    # the slots and tasks stay: each job's next JobMaster leader adopts them
                    log.warning(
                        "%s: registering at the new leader with %d slot(s) kept",
                        action.cause,
                        sum(1 for slot in self.slot_table.slots if slot.allocation_id),
                    )
                else:
                    log.warning("%s: dropping the old connection", action.cause)
                    self._release_everything(action.cause)
            elif isinstance(action, ConnectToResourceManager):
                if self._registration is not None:
                    self._registration.cancel()
                self.registered.clear()
                self._registration = self._spawn(self._register(action.leader))

    def _release_everything(self, cause: str) -> None:
        """The old leader is gone: every task is cancelled and every slot freed here, without
        telling anyone (the new leader learns the free slots from the registration's slot report)."""
        for slot in list(self.slot_table.slots):
            if slot.allocation_id:
                for eid in list(slot.tasks):
                    task = self.tasks.get(eid)
                    if task is not None:
                        task.cancel()
                self.slot_table.free(slot.allocation_id)
        for task in list(self.tasks.values()):
            task.cancel()
        for job_id in list(self.job_managers):
            self._close_job_connection(job_id)

    async def on_stop(self) -> None:
        if self.rm_leader_retriever is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.rm_leader_retriever.stop)
        for conn in list(self.job_managers.values()):  # the per-job leader retrievals (HA)
            retriever, conn.leader_retriever = conn.leader_retriever, None
            if retriever is not None:
                await asyncio.get_running_loop().run_in_executor(None, retriever.stop)
        for task in list(self.tasks.values()):
            task.cancel()
        # their final states are queued before the loop closes (a task thread that ends later
        # finds the loop closed: RpcEndpoint.call_soon drops its report)
        ending = list(self._task_ended.values())
        if ending:
            await asyncio.wait(ending, timeout=self.task_end_timeout_s)
        if self.rm_token:
            try:
                await self.gateways.resource_manager(self.rm_address).disconnect_task_executor(
                    DisconnectTaskExecutor(self.rm_token, self.resource_id, "TaskExecutor stopped"), timeout=2
                )
            except RpcException:
                pass
        for t in list(self._background):
            t.cancel()
        await self.gateways.close()
        await asyncio.get_running_loop().run_in_executor(None, self.shuffle.close)
        await asyncio.get_running_loop().run_in_executor(None, spark_sessions.stop)  # and its JVM

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        t = asyncio.ensure_future(coro)
        self._background.add(t)
        t.add_done_callback(self._background.discard)
        return t

    # ------------------------------------------------------------------ ResourceManager
    def _slot_report(self) -> SlotReport:
        return SlotReport(
            tuple(ReportedSlot(s.index, s.allocation_id, s.job_id, s.profile) for s in self.slot_table.slots),
            self.slot_table.version,
        )

    async def _register(self, leader: LeaderInformation) -> None:
        delay = 0.05
        rm = self.gateways.resource_manager(leader.address)
        while self.rm_leader.leader == leader:
            try:
                resp = await rm.register_task_executor(
                    RegisterTaskExecutor(
                        resource_id=self.resource_id,
                        rpc_address=self.address,
                        data_address=self.shuffle.address,
                        num_slots=self.slot_table.num_slots,
                        total_profile=self.slot_table.total,
                        default_slot_profile=self.slot_table.default_slot,
                        slot_report=self._slot_report(),
                        pid=os.getpid(),
                        hostname=socket.gethostname(),
                    )
                )
                if self.rm_leader.registered(leader, resp.fencing_token):
                    self._last_rm_heartbeat = time.monotonic()
                    log.info("registered at ResourceManager %s as %s", leader.address, self.resource_id)
                    self.registered.set()
                    if not self._preloading:
                        self._preloading = True
                        self._spawn(self._preload_task_runtime())
                    return
                log.info(
                    "ResourceManager %s answered with another token than its leader session %s; retrying in %.2fs",
                    leader.address,
                    leader.session_id[:8],
                    delay,
                )
            except RpcException as e:
                log.info(
                    "registration at %s failed (%s); retrying in %.2fs",
                    leader.address,
                    e.status or type(e).__name__,
                    delay,
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0 if self.rm_leader_retriever is not None else 5.0)

    async def _preload_task_runtime(self) -> None:
        """Loads the task runtime on a thread once registered: the first task's deployment does
        not wait for it, and the registration (the cluster's start) did not either."""
        await asyncio.get_running_loop().run_in_executor(None, importlib.import_module, TASK_RUNTIME)

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval_s)
            now = time.monotonic()
            leader = self.rm_leader.leader
            registering = self._registration is not None and not self._registration.done()
            if leader is not None and not registering and now - self._last_rm_heartbeat > self.heartbeat_timeout_s:
                log.warning(
                    "no heartbeat from the ResourceManager for %.0f s; registering again", now - self._last_rm_heartbeat
                )
                self.registered.clear()
                self._registration = self._spawn(self._register(leader))
            for job_id in self.jm_heartbeats.timed_out(now):
                self._spawn(self._job_manager_lost(job_id, f"heartbeat of the JobMaster of job {job_id} timed out"))
            for conn in list(self.job_managers.values()):
                if conn.connected.is_set():
                    self._spawn(self._heartbeat_job_manager(conn))

    async def _heartbeat_job_manager(self, conn: JobManagerConnection) -> None:
        address, jobmaster_id = conn.address, conn.jobmaster_id

        def current() -> bool:
            """The answer is about the job's current JobMaster: an answer or refusal of one it
            no longer works for (a deposed leader that was frozen while the heartbeat was in
            flight, then woke up) changes nothing."""
            return self.job_managers.get(conn.job_id) is conn and (conn.address, conn.jobmaster_id) == (
                address,
                jobmaster_id,
            )

        try:
            await self.gateways.job_master(address).heartbeat_from_task_manager(
                TaskManagerHeartbeat(
                    jobmaster_id,
                    self.resource_id,
                    tuple(t.execution_id for t in self.tasks.values() if t.job_id == conn.job_id),
                ),
                timeout=self.heartbeat_timeout_s,
            )
        except RpcException as e:
            if not current():
                log.debug(
                    "job %s: late heartbeat answer of its former JobMaster at %s ignored: %s", conn.job_id, address, e
                )
                return
            if isinstance(e, FencingTokenMismatch):  # that JobMaster no longer leads the job
                await self._job_manager_lost(conn.job_id, f"the JobMaster of job {conn.job_id} refused: {e}")
            elif isinstance(e, RpcUnreachable) and self.jm_heartbeats.rpc_failed(conn.job_id):
                await self._job_manager_lost(conn.job_id, f"the JobMaster of job {conn.job_id} is unreachable")
            else:
                log.info("heartbeat to JobMaster of job %s failed: %s", conn.job_id, e)
            return
        if current() and conn.connected.is_set():
            self.jm_heartbeats.received(conn.job_id, time.monotonic())

    async def _job_manager_lost(self, job_id: str, cause: str) -> None:
        """Flink's TaskExecutor on a JobMaster heartbeat timeout: the job's tasks go, its slots are
        freed. With HA they stay until the job's next leader claims them (``_job_leaderless``)."""
        conn = self.job_managers.get(job_id)
        if self.job_leader_retrievers is not None and conn is not None and self.slot_table.slots_of_job(job_id):
            self._job_leaderless(conn, cause)
            return
        self.jm_heartbeats.unmonitor(job_id)
        slots = self.slot_table.slots_of_job(job_id)
        if not slots:
            self._close_job_connection(job_id)
            return
        log.warning("%s; freeing its %d slots", cause, len(slots))
        for slot in slots:
            await self._free_slot(slot.allocation_id, cause)

    # ------------------------------------------------------------------ HA: a job's JobMaster leader
    def _saw_jobmaster(self, job_id: str, jobmaster_id: str) -> bool:
        """Records a JobMaster leader session id of the job; False if it is of an older epoch
        than one seen before (a deposed leader: refused)."""
        newest = self.newest_jobmaster_id.get(job_id)
        if newest is not None and is_older(jobmaster_id, newest):
            return False
        self.newest_jobmaster_id[job_id] = jobmaster_id
        return True

    def _watch_job_leader(self, conn: JobManagerConnection) -> None:
        if self.job_leader_retrievers is None or conn.leader_retriever is not None:
            return
        loop = self.loop
        job_id = conn.job_id

        def notify(info: LeaderInformation | None) -> None:  # on a ZooKeeper thread
            try:
                loop.call_soon_threadsafe(self._on_job_leader, job_id, info)
            except RuntimeError:  # the loop is closed: stopping
                pass

        try:
            conn.leader_retriever = self.job_leader_retrievers(job_id)
            conn.leader_retriever.start(notify)
        except Exception as e:  # noqa: BLE001 - without it the job works as without HA
            log.warning("cannot watch the JobMaster leader of job %s: %s", job_id, e)

    def _on_job_leader(self, job_id: str, info: LeaderInformation | None) -> None:
        conn = self.job_managers.get(job_id)
        if conn is None or info is None or not info.session_id:
            return
        if info.session_id == conn.jobmaster_id:
            return  # the leader this TaskExecutor works for
        if not self._saw_jobmaster(job_id, info.session_id):
            self.reject_stale("JobMasterLeader", "JobMaster", f"job {job_id}: published leader of an older epoch")
            return
        if conn.reconnecting == info:
            return
        self._job_leaderless(conn, f"job {job_id} has a new JobMaster leader at {info.address}")
        conn.reconnecting = info
        self._spawn(self._reconnect(conn, info))

    def _job_leaderless(self, conn: JobManagerConnection, cause: str) -> None:
        """The job has no JobMaster leader this TaskExecutor reports to: its tasks keep running,
        their updates wait; the reconnect timeout starts (once)."""
        self.jm_heartbeats.unmonitor(conn.job_id)
        if conn.connected.is_set() or conn.reconnect_timer is None:
            log.warning(
                "%s; keeping the job's %d task(s) and %d slot(s) for its next leader (up to %.0f s)",
                cause,
                sum(1 for t in self.tasks.values() if t.job_id == conn.job_id),
                len(self.slot_table.slots_of_job(conn.job_id)),
                self.jobmaster_reconnect_timeout_s,
            )
        conn.connected.clear()
        if conn.reconnect_timer is None:
            conn.reconnect_timer = self.loop.call_later(
                self.jobmaster_reconnect_timeout_s, lambda: self._spawn(self._reconnect_timed_out(conn))
            )

    async def _reconnect_timed_out(self, conn: JobManagerConnection) -> None:
        if self.job_managers.get(conn.job_id) is not conn or conn.connected.is_set():
            return
        conn.reconnect_timer = None
        self.jobs_given_up += 1
        cause = (
            f"no JobMaster leader of job {conn.job_id} claimed its tasks within "
            f"high-availability.jobmaster.reconnect-timeout ({self.jobmaster_reconnect_timeout_s:g} s)"
        )
        log.warning("%s; failing them and freeing the job's slots", cause)
        await self._free_job(conn.job_id, cause)

    async def _free_job(self, job_id: str, cause: str) -> None:
        self.jm_heartbeats.unmonitor(job_id)
        slots = self.slot_table.slots_of_job(job_id)
        if not slots:
            self._close_job_connection(job_id)
        for slot in slots:
            await self._free_slot(slot.allocation_id, cause)

    def _report_of(self, conn: JobManagerConnection, leader: LeaderInformation) -> ReconnectTaskManager:
        slots = self.slot_table.slots_of_job(conn.job_id)
        tasks = [
            ReportedTask(
                t.execution_id,
                t.tdd.vertex_id,
                t.tdd.subtask_index,
                t.tdd.attempt_number,
                t.state,
                t.tdd.allocation_id,
            )
            for t in self.tasks.values()
            if t.job_id == conn.job_id and t.execution_id not in conn.ended
        ]
        return ReconnectTaskManager(
            leader.session_id,
            conn.job_id,
            self.resource_id,
            self.address,
            self.shuffle.address,
            tuple(SlotOffer(s.allocation_id, s.index, s.profile) for s in slots),
            tuple(tasks) + tuple(conn.ended.values()),
        )

    async def _reconnect(self, conn: JobManagerConnection, leader: LeaderInformation) -> None:
        """Reports the job's slots and tasks to its new leader until it answers (or another
        leader, the reconnect timeout or the job's end takes over)."""
        delay = 0.05
        jm = self.gateways.job_master(leader.address)
        while self.job_managers.get(conn.job_id) is conn and conn.reconnecting == leader:
            try:
                await jm.reconnect_task_manager(self._report_of(conn, leader))
            except FencingTokenMismatch as e:  # not (or no longer) that job's leader
                log.info("the JobMaster of job %s at %s refused the report: %s", conn.job_id, leader.address, e)
                conn.reconnecting = None
                return
            except RpcRejected as e:  # a leader that started the job afresh: these tasks are not its
                conn.reconnecting = None
                await self._free_job(conn.job_id, f"the new JobMaster of job {conn.job_id} refused its tasks: {e}")
                return
            except RpcException as e:
                log.info(
                    "reporting job %s to %s failed (%s); retrying in %.2f s", conn.job_id, leader.address, e, delay
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            if self.job_managers.get(conn.job_id) is not conn or conn.reconnecting != leader:
                return
            conn.address, conn.jobmaster_id, conn.reconnecting = leader.address, leader.session_id, None
            if conn.reconnect_timer is not None:
                conn.reconnect_timer.cancel()
                conn.reconnect_timer = None
            self.jobs_reconnected += 1
            self.jm_heartbeats.monitor(conn.job_id, time.monotonic())
            conn.connected.set()
            log.info(
                "job %s: reported %d slot(s) to its new JobMaster leader at %s (session %s)",
                conn.job_id,
                len(self.slot_table.slots_of_job(conn.job_id)),
                leader.address,
                leader.session_id[:16],
            )
            return

    # ------------------------------------------------------------------ slots
    async def _allocate_slot(self, r: g.RequestSlot) -> g.SlotRequestAck:
        if self.job_leader_retrievers is not None and not self._saw_jobmaster(r.job_id, r.jobmaster_id):
            raise SlotAllocationError(f"slot request for a JobMaster of job {r.job_id} of an older leader epoch")
        conn = self.job_managers.get(r.job_id)
        if (
            self.job_leader_retrievers is not None
            and conn is not None
            and conn.jobmaster_id != r.jobmaster_id
            and self.slot_table.slots_of_job(r.job_id)
        ):
            # a new leader of a job whose slots and tasks are kept here: they are reported to it
            # first (the ResourceManager asks again once the allocation failed)
            self._on_job_leader(r.job_id, LeaderInformation(r.jobmaster_id, r.jobmaster_address))
            raise SlotAllocationError(f"job {r.job_id}: reporting the slots kept here to its new JobMaster first")
        slot = self.slot_table.allocate(r.slot_index, r.job_id, r.allocation_id, r.profile)
        if conn is None or conn.jobmaster_id != r.jobmaster_id:
            if conn is not None:
                self._close_job_connection(r.job_id)
            conn = JobManagerConnection(r.job_id, r.jobmaster_address, r.jobmaster_id)
            conn.connected.set()
            conn.sender = self._spawn(self._send_updates(conn))
            self.job_managers[r.job_id] = conn
            self.jm_heartbeats.monitor(r.job_id, time.monotonic())
            self._watch_job_leader(conn)
        elif conn.closing is not None:  # a new slot of the job: the connection stays
            conn.closing.cancel()
            conn.closing = None
        self._spawn(self._offer_slot(conn, r.allocation_id, slot.index, slot.profile))
        return g.SlotRequestAck(slot.index, self.slot_table.version)

    async def _offer_slot(
        self, conn: JobManagerConnection, allocation_id: str, slot_index: int, profile: ResourceProfile = UNKNOWN
    ) -> None:
        jm = self.gateways.job_master(conn.address)
        try:
            await jm.register_task_manager(
                RegisterTaskManager(
                    conn.jobmaster_id, conn.job_id, self.resource_id, self.address, self.shuffle.address
                )
            )
            accepted_ids = await jm.offer_slots(
                OfferSlots(conn.jobmaster_id, self.resource_id, (SlotOffer(allocation_id, slot_index, profile),))
            )
            accepted = allocation_id in accepted_ids
        except RpcException as e:
            log.info("offering slot %s to %s failed: %s", allocation_id, conn.address, e)
            accepted = False
        if accepted:
            self.slot_table.activate(allocation_id)
        else:
            await self._free_slot(allocation_id, "offer rejected by the JobMaster")

    async def _free_slot(self, allocation_id: str, cause: str) -> None:
        slot = self.slot_table.by_allocation(allocation_id)
        if slot is None:
            return
        for eid in list(slot.tasks):
            task = self.tasks.get(eid)
            if task is not None:
                task.cancel()
        freed = self.slot_table.free(allocation_id)
        assert freed is not None
        if not self.slot_table.slots_of_job(freed.job_id):
            self._close_job_connection_once_tasks_ended(freed.job_id)
        try:
            await self.gateways.resource_manager(self.rm_address).notify_slot_available(
                NotifySlotAvailable(
                    self.rm_token, self.resource_id, freed.index, allocation_id, self.slot_table.version
                )
            )
        except RpcException as e:
            log.info("NotifySlotAvailable failed (%s); the next heartbeat reports the slot", e)

    def _close_job_connection_once_tasks_ended(self, job_id: str) -> None:
        """The job's last slot here was freed: as in Flink, the final states of its cancelled tasks
        still go to the JobMaster; the connection closes once they are queued (_on_task_state), at
        most ``task_end_timeout_s`` later."""
        conn = self.job_managers.get(job_id)
        if conn is None or not self._has_tasks_of(job_id):
            self._close_job_connection(job_id)
        elif conn.closing is None:
            conn.closing = self.loop.call_later(self.task_end_timeout_s, self._close_if_still_closing, conn)

    def _close_if_still_closing(self, conn: JobManagerConnection) -> None:
        if self.job_managers.get(conn.job_id) is conn and conn.closing is not None:
            log.warning(
                "tasks of job %s did not end in %.1f s; closing its connection", conn.job_id, self.task_end_timeout_s
            )
            self._close_job_connection(conn.job_id)

    def _has_tasks_of(self, job_id: str) -> bool:
        return any(t.job_id == job_id for t in self.tasks.values())

    def _close_job_connection(self, job_id: str) -> None:
        self.jm_heartbeats.unmonitor(job_id)
        conn = self.job_managers.pop(job_id, None)
        if conn is not None:
            if conn.reconnect_timer is not None:
                conn.reconnect_timer.cancel()
                conn.reconnect_timer = None
            conn.reconnecting = None
            conn.connected.set()  # what waits for a leader goes on (and finds the connection closed)
            if conn.leader_retriever is not None:
                retriever, conn.leader_retriever = conn.leader_retriever, None
                self.loop.run_in_executor(None, retriever.stop)
        if conn is not None and conn.closing is not None:
            conn.closing.cancel()
            conn.closing = None
        if conn is not None and conn.sender is not None:
            # let queued state updates drain before the sender stops
            conn.updates.put_nowait(None)

    # ------------------------------------------------------------------ tasks
    def on_fatal_error(self, reason: str) -> None:
        """From any thread (Flink's TaskManagerRunner.onFatalError): this process can no longer be
        trusted (a cancelled task's thread did not end); the handler ends it, and the driver that
        started it (the ResourceManager's, or the operator's) starts a new one."""
        self.fatal_errors.append(reason)
        log.critical("fatal error of TaskExecutor %s: %s", self.resource_id, reason)
        if self._fatal_error is not None:
            self._fatal_error(reason)

    def _submit(self, request: g.SubmitTask) -> None:
        tdd = request.tdd
        conn = self.job_managers.get(tdd.job_id)
        if conn is None or conn.jobmaster_id != request.jobmaster_id:
            raise SlotAllocationError(f"no connection to the JobMaster of job {tdd.job_id} with that id")
        if tdd.execution_id in self.tasks:
            raise SlotAllocationError(f"task {tdd.execution_id} is already running here")
        try:
            cancellation = self.cancellation.overridden_by(dict(tdd.job_config))
        except ConfigError as e:
            raise SlotAllocationError(f"task {tdd.task_name}: {e}") from None
        self.slot_table.add_task(tdd.allocation_id, tdd.job_id, tdd.execution_id)
        loop = self.loop

        def report(task: Task, state: ExecutionState, error: SerializedThrowable | None) -> None:
            self.call_soon(self._on_task_state, task, state, error)

        # the task's sends to its JobMaster go one at a time, in the order they were scheduled
        # (coroutines scheduled from one thread start in order; the lock queues them FIFO)
        send_lock = asyncio.Lock()

        async def send_in_turn(kind: str, payloads: Callable[[], list[bytes]]) -> None:
            async with send_lock:
                for payload in payloads():
                    await self._send_coordination(conn, tdd.execution_id, kind, payload)

        def send_to_coordinator(kind: str, payload: bytes) -> None:
            fut = asyncio.run_coroutine_threadsafe(send_in_turn(kind, lambda: [payload]), loop)
            fut.result(RPC_TIMEOUT_S * 3)

        def send_to_coordinator_later(kind: str, payloads: Callable[[], list[bytes]]) -> concurrent.futures.Future:
            return asyncio.run_coroutine_threadsafe(send_in_turn(kind, payloads), loop)

        # deferred: the task runtime (operators, state backends, Arrow) is ~60% of a TaskExecutor's
        # imports; the process registers first and loads it in the background (preload_task_runtime)
        from yarnflink.taskexecutor.task import Task

        responder = RpcCheckpointResponder(
            loop,
            lambda: self.gateways.job_master(conn.address),
            lambda: conn.jobmaster_id,
            tdd.execution_id,
            conn.connected.wait,
        )
        task = Task(
            tdd,
            self.shuffle,
            report,
            send_to_coordinator,
            buffer_timeout_s=self.buffer_timeout_s,
            checkpoint_responder=responder,
            cancellation=cancellation,
            fatal_error=self.on_fatal_error,
            send_to_coordinator_later=send_to_coordinator_later,
        )
        self.tasks[tdd.execution_id] = task
        self._task_ended[tdd.execution_id] = loop.create_future()
        self.partitions_by_job.setdefault(tdd.job_id, set()).update(p.partition_id for p in tdd.produced_partitions)
        log.info("received task %s (%s)", task.name, tdd.execution_id)
        task.start()

    async def _send_coordination(
        self, conn: JobManagerConnection, execution_id: str, kind: str, payload: bytes
    ) -> None:
        await self.gateways.job_master(conn.address).send_coordination_data(
            CoordinationData(conn.jobmaster_id, execution_id, kind, payload), timeout=RPC_TIMEOUT_S * 3
        )

    def _on_task_state(self, task: Task, state: ExecutionState, error: SerializedThrowable | None) -> None:
        if state.terminal:
            self.tasks.pop(task.execution_id, None)
            self.slot_table.remove_task(task.execution_id)
            ended = self._task_ended.pop(task.execution_id, None)
            if ended is not None and not ended.done():
                ended.set_result(None)
        conn = self.job_managers.get(task.job_id)
        if conn is None:
            return
        if state.terminal:  # reported to a new leader until the update below reaches a JobMaster
            conn.ended[task.execution_id] = ReportedTask(
                task.execution_id,
                task.tdd.vertex_id,
                task.tdd.subtask_index,
                task.tdd.attempt_number,
                state,
                task.tdd.allocation_id,
                error,
                task.failed_partition_id if state == ExecutionState.FAILED else "",
            )
        conn.updates.put_nowait(
            TaskExecutionState(
                jobmaster_id=conn.jobmaster_id,
                execution_id=task.execution_id,
                state=state,
                error=error,
                io_metrics=final_io_metrics(task) if state.terminal else {},
                failed_partition_id=task.failed_partition_id if state == ExecutionState.FAILED else "",
            )
        )
        if conn.closing is not None and not self._has_tasks_of(task.job_id):
            self._close_job_connection(task.job_id)  # after the last final state, which the sender drains

    async def _send_updates(self, conn: JobManagerConnection) -> None:
        """Sends the job's task state updates in order. With HA an update that finds no leader
        waits (with the ones after it) for the job's next leader."""
        ha = self.job_leader_retrievers is not None
        while True:
            update = await conn.updates.get()
            if update is None:
                return
            attempt = 0
            while True:
                if ha:
                    await conn.connected.wait()
                jobmaster_id = conn.jobmaster_id
                try:
                    await self.gateways.job_master(conn.address).update_task_execution_state(
                        dataclasses.replace(update, jobmaster_id=jobmaster_id)
                    )
                    if update.state in (ExecutionState.CANCELED, ExecutionState.FAILED):
                        conn.ended.pop(update.execution_id, None)  # (what finished stays: a next leader must know)
                    break
                except FencingTokenMismatch as e:
                    if not ha or self.job_managers.get(conn.job_id) is not conn:
                        break  # that JobMaster is no longer the job's leader
                    if conn.jobmaster_id == jobmaster_id:
                        self._job_leaderless(conn, f"the JobMaster of job {conn.job_id} refused a task update: {e}")
                except RpcException as e:
                    attempt += 1
                    log.info("task state update failed (%s), attempt %d", e, attempt)
                    if not ha and attempt >= 3:
                        break
                    if ha and self.job_managers.get(conn.job_id) is not conn:
                        break
                    await asyncio.sleep(min(0.2 * attempt, 1.0))

    def knows_jobmaster(self, jobmaster_id: str) -> bool:
        return bool(jobmaster_id) and any(c.jobmaster_id == jobmaster_id for c in self.job_managers.values())

    def is_task_jobmaster(self, task: Task | None, jobmaster_id: str) -> bool:
        """A checkpoint call for ``task`` (None: not here, nothing to fence) from ``jobmaster_id``."""
        if task is None:
            return True
        conn = self.job_managers.get(task.job_id)
        return conn is not None and conn.jobmaster_id == jobmaster_id

    def _release_partitions(self, job_id: str, partition_ids: tuple[str, ...]) -> None:
        known = self.partitions_by_job.get(job_id, set())
        targets = set(partition_ids) & known if partition_ids else set(known)
        for pid in targets:
            self.shuffle.release_partition(pid)
        known -= targets
        if not known:
            self.partitions_by_job.pop(job_id, None)

    def info(self) -> g.TaskExecutorInfo:
        slot_of = {eid: s.index for s in self.slot_table.slots for eid in s.tasks}
        return g.TaskExecutorInfo(
            resource_id=self.resource_id,
            slot_report=self._slot_report(),
            tasks=tuple(
                g.TaskInfo(
                    execution_id=t.execution_id,
                    job_id=t.job_id,
                    task_name=t.name,
                    subtask_index=t.tdd.subtask_index,
                    state=t.state.value,
                    slot_index=slot_of.get(t.execution_id, -1),
                    allocation_id=t.tdd.allocation_id,
                    vertex_id=t.tdd.vertex_id,
                    attempt_number=t.tdd.attempt_number,
                )
                for t in self.tasks.values()
            ),
            rss_bytes=psutil.Process().memory_info().rss,
            network_memory_in_use=self.shuffle.memory_in_use(),
        )

    # ------------------------------------------------------------------ TaskExecutorGateway (served by rpc.servicers)
    async def request_slot(self, request: g.RequestSlot, *, timeout: float = RPC_TIMEOUT_S) -> g.SlotRequestAck:
        if not self.rm_leader.accepts(request.resource_manager_token):
            raise FencingTokenMismatch(
                self.reject_stale(
                    "RequestSlot",
                    "ResourceManager",
                    "slot request from a ResourceManager that is not the one this TaskExecutor registered at",
                )
            )
        try:
            return await self._allocate_slot(request)
        except SlotAllocationError as e:
            raise RpcRejected(str(e)) from None

    async def submit_task(self, request: g.SubmitTask, *, timeout: float = RPC_TIMEOUT_S) -> None:
        if not self.knows_jobmaster(request.jobmaster_id):
            raise FencingTokenMismatch(self.reject_stale("SubmitTask", "JobMaster", f"job {request.tdd.job_id}"))
        try:
            self._submit(request)
        except SlotAllocationError as e:
            raise RpcRejected(str(e)) from None

    async def cancel_task(self, request: g.CancelTask, *, timeout: float = RPC_TIMEOUT_S) -> None:
        if not self.knows_jobmaster(request.jobmaster_id):
            raise FencingTokenMismatch(self.reject_stale("CancelTask", "JobMaster", "cancel from an unknown JobMaster"))
        task = self.tasks.get(request.execution_id)
        if task is None:
            raise UnknownTarget(f"no task {request.execution_id} here")
        task.cancel()

    def _checkpoint_task(self, rpc: str, execution_id: str, jobmaster_id: str) -> Task | None:
        """The task a checkpoint call is for (None: not here), if the call comes from its JobMaster."""
        task = self.tasks.get(execution_id)  # checkpoints: see yarnflink/taskexecutor/task.py
        if not self.is_task_jobmaster(task, jobmaster_id):
            raise FencingTokenMismatch(self.reject_stale(rpc, "JobMaster"))
        return task

    async def trigger_checkpoint(self, request: g.TriggerCheckpoint, *, timeout: float = RPC_TIMEOUT_S) -> None:
        task = self._checkpoint_task("TriggerCheckpoint", request.execution_id, request.jobmaster_id)
        if task is not None:
            task.trigger_checkpoint(
                request.checkpoint_id, request.timestamp, request.is_savepoint, request.synchronous, request.drain
            )

    async def notify_checkpoint_complete(self, request: g.NotifyCheckpoint, *, timeout: float = RPC_TIMEOUT_S) -> None:
        task = self._checkpoint_task("NotifyCheckpoint", request.execution_id, request.jobmaster_id)
        if task is not None:
            task.notify_checkpoint(request.checkpoint_id, True)

    async def notify_checkpoint_aborted(self, request: g.NotifyCheckpoint, *, timeout: float = RPC_TIMEOUT_S) -> None:
        task = self._checkpoint_task("NotifyCheckpoint", request.execution_id, request.jobmaster_id)
        if task is not None:
            task.notify_checkpoint(request.checkpoint_id, False)

    def _check_job_fencing(self, rpc: str, job_id: str, jobmaster_id: str) -> None:
        """A call naming ``jobmaster_id`` for ``job_id`` must come from the job's current leader
        here (an empty id is not fenced)."""
        if not jobmaster_id:
            return
        conn = self.job_managers.get(job_id)
        newest = self.newest_jobmaster_id.get(job_id)
        stale = (conn is not None and conn.jobmaster_id != jobmaster_id) or (
            newest is not None and is_older(jobmaster_id, newest)
        )
        if stale:
            raise FencingTokenMismatch(self.reject_stale(rpc, "JobMaster", f"job {job_id}"))

    async def free_slot(self, request: g.FreeSlot, *, timeout: float = RPC_TIMEOUT_S) -> None:
        slot = self.slot_table.by_allocation(request.allocation_id)
        if slot is not None:
            self._check_job_fencing("FreeSlot", slot.job_id, request.jobmaster_id)
        await self._free_slot(request.allocation_id, request.cause)

    async def release_partitions(self, request: g.ReleasePartitions, *, timeout: float = RPC_TIMEOUT_S) -> None:
        self._check_job_fencing("ReleasePartitions", request.job_id, request.jobmaster_id)
        self._release_partitions(request.job_id, request.partition_ids)

    async def disconnect_job_manager(self, request: g.DisconnectJobManager, *, timeout: float = RPC_TIMEOUT_S) -> None:
        self._check_job_fencing("DisconnectJobManager", request.job_id, request.jobmaster_id)
        for slot in self.slot_table.slots_of_job(request.job_id):
            await self._free_slot(slot.allocation_id, request.cause)

    async def request_task_executor_info(
        self, request: g.RequestTaskExecutorInfo, *, timeout: float = RPC_TIMEOUT_S
    ) -> g.TaskExecutorInfo:
        return fill_info(self.info(), self, request)  # metrics and logs: yarnflink.metrics

    async def heartbeat_from_resource_manager(
        self, resource_manager_token: str, *, timeout: float = RPC_TIMEOUT_S
    ) -> SlotReport:
        if not self.rm_leader.accepts(resource_manager_token):
            raise FencingTokenMismatch(
                self.reject_stale(
                    "HeartbeatFromResourceManager",
                    "ResourceManager",
                    "heartbeat from a ResourceManager this TaskExecutor is not registered at",
                )
            )
        self._last_rm_heartbeat = time.monotonic()
        return self._slot_report()


__all__ = ["TaskExecutor", "SlotState"]
