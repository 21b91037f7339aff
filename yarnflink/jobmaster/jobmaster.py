"""JobMaster: runs one job. Expands the JobGraph into an ExecutionGraph and drives the job's
``DefaultScheduler`` (yarnflink.scheduler): it feeds it events -- slots offered, task states,
TaskExecutors lost, timers -- and carries out the actions it decides: deploy and cancel tasks,
release result partitions, free slots, declare the slots needed at the ResourceManager, probe a
TaskExecutor that may be dead. Scheduling is eager for streaming jobs and region by region for
batch jobs; failures are recovered per ``jobmanager.execution.failover-strategy`` and
``restart-strategy.*``.

Dead TaskExecutors are noticed without waiting for the heartbeat timeout: an RPC that finds one
unreachable (deploy, cancel, a probe) and a consumer that loses its data connection to one (its
``PartitionException`` names the partition, whose producer's TaskExecutor is then probed) make it
lost at once; heartbeats and the ResourceManager's notice remain the backstop. A TaskExecutor made
lost is told to drop the job's slots and tasks (it may be alive: late heartbeats), and its heartbeats
go unanswered from then on; one that holds nothing of the job is just forgotten.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from yarnflink.checkpoint.config import checkpointing_enabled
from yarnflink.checkpoint.options import CheckpointingOptions, SavepointConfigOptions
from yarnflink.common.config import Configuration
from yarnflink.common.rpc_errors import (
    RPC_TIMEOUT_S,
    FencingTokenMismatch,
    InvalidRequest,
    RpcException,
    RpcRejected,
    RpcUnreachable,
    UnknownTarget,
    check_fencing,
)
from yarnflink.executiongraph.executiongraph import (
    Execution,
    ExecutionGraph,
    ExecutionState,
    Failure,
    JobStatus,
    now_ms,
)
from yarnflink.jobgraph.jobgraph import JobGraph
from yarnflink.jobmaster import reconciliation as rc
from yarnflink.jobmaster.checkpointing import CheckpointDriver
from yarnflink.jobmaster.collect import CollectLog
from yarnflink.jobmaster.deployment import build_tdd
from yarnflink.jobmaster.gateway import (
    AcknowledgeCheckpoint,
    CoordinationData,
    DeclineCheckpoint,
    DisconnectTaskManager,
    OfferSlots,
    ReconnectTaskManager,
    RegisterTaskManager,
    SerializedThrowable,
    TaskExecutionState,
    TaskManagerHeartbeat,
)
from yarnflink.jobmaster.options import JobManagerOptions
from yarnflink.jobmaster.rm_connection import ResourceManagerConnection, requirements_of
from yarnflink.jobmaster.slotpool import SlotPool, SlotRequest
from yarnflink.jobmaster.submission import JobSubmissionException, job_configuration
from yarnflink.jobmaster.views import job_details
from yarnflink.resourcemanager.gateway import DisconnectJobMaster, DisconnectTaskExecutor
from yarnflink.resourcemanager.options import ClusterOptions
from yarnflink.rpc.clients import GrpcGatewayResolver
from yarnflink.rpc.endpoint import RpcEndpoint
from yarnflink.rpc.resolver import GatewayResolver
from yarnflink.rpc.servicers import JobMasterServicer
from yarnflink.scheduler import restart
from yarnflink.scheduler.adaptive import AdaptiveOptions, AdaptiveScheduler
from yarnflink.scheduler.adaptive_batch import AdaptiveBatchOptions
from yarnflink.scheduler.options import BatchExecutionOptions, SchedulerOptions
from yarnflink.scheduler.scheduler import (
    Action,
    CancelTask,
    CheckTaskManager,
    DeclareResources,
    DefaultScheduler,
    DeployTask,
    FreeSlot,
    JobTerminated,
    ReleasePartitions,
    TaskManagerLost,
)
from yarnflink.scheduler.slotsharing import ExecutionSlotSharingGroup
from yarnflink.scheduler.speculative import SpeculativeOptions, SpeculativeScheduler
from yarnflink.taskexecutor import gateway as te

if TYPE_CHECKING:
    from yarnflink.highavailability.checkpoints import JobCheckpointRecovery

log = logging.getLogger(__name__)

#: Collected results kept for the client (execute_and_collect) are bounded.
MAX_COLLECTED_BYTES = 512 * 1024 * 1024
#: How long a probe of a possibly dead TaskExecutor may take before it counts as alive.
PROBE_TIMEOUT_S = 3.0
#: the states of a deployed task (one whose failure the scheduler would fail over)
_DEPLOYED = frozenset({ExecutionState.DEPLOYING, ExecutionState.INITIALIZING, ExecutionState.RUNNING})


def scheduler_type_of(config: Configuration, job_graph: JobGraph) -> str:
    """``jobmanager.scheduler``, unset: Default for STREAMING, AdaptiveBatch for BATCH (Flink)."""
    batch = job_graph.runtime_mode == "BATCH"
    chosen = config.get(SchedulerOptions.SCHEDULER)
    if chosen is None:
        return "AdaptiveBatch" if batch else "Default"
    if chosen == "AdaptiveBatch" and not batch:
        raise JobSubmissionException(
            "jobmanager.scheduler: AdaptiveBatch schedules BATCH jobs only; this job "
            "runs in STREAMING mode (use Default or Adaptive)"
        )
    if chosen == "Adaptive" and batch:
        raise JobSubmissionException(
            "jobmanager.scheduler: Adaptive schedules STREAMING jobs only; this job "
            "runs in BATCH mode (use AdaptiveBatch or Default)"
        )
    if (
        chosen == "Adaptive"
        and config.get(CheckpointingOptions.INTERVAL)
        and str(config.get(CheckpointingOptions.ENABLE_UNALIGNED) or "").strip().lower() == "true"
    ):
        raise JobSubmissionException(
            "jobmanager.scheduler: Adaptive rescales from the latest checkpoint, and the in-flight data of "
            "unaligned checkpoints (execution.checkpointing.unaligned.enabled: true) restores only at the "
            "parallelism it was taken at; use aligned checkpoints with the Adaptive scheduler"
        )
    return str(chosen)


class JobMaster(RpcEndpoint):
    #: How long a stopping JobMaster waits for its cancelled calls in flight to end.
    stop_timeout_s = 2.0

    def __init__(
        self,
        job_graph: JobGraph,
        host: str,
        resource_manager_address: str,
        *,
        on_terminated: Callable[[JobMaster], None],
        slot_request_timeout_s: float = 300.0,
        heartbeat_interval_s: float = 10.0,
        heartbeat_timeout_s: float = 50.0,
        config: Configuration | None = None,
        jobmaster_id: str | None = None,
        checkpoint_ha: JobCheckpointRecovery | None = None,
        gateways: GatewayResolver | None = None,
        reconcile: bool = False,
    ) -> None:
        """With HA, ``jobmaster_id`` is the leader session id and ``checkpoint_ha`` the job's
        ``yarnflink.highavailability.checkpoints.JobCheckpointRecovery``. ``gateways``: how it
        reaches the ResourceManager and TaskExecutors (default: over gRPC). ``reconcile``: the job
        was recovered from a former leader; it adopts the tasks TaskExecutors kept running
        (``yarnflink.jobmaster.reconciliation``) instead of deploying anew."""
        super().__init__(f"JobMaster-{job_graph.job_id[:8]}")
        self.job_graph = job_graph
        self.host = host
        self.rm_address = resource_manager_address
        self.on_terminated = on_terminated
        self.slot_request_timeout_s = slot_request_timeout_s
        self.heartbeat_interval_s = heartbeat_interval_s
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.jobmaster_id = jobmaster_id or uuid.uuid4().hex  # fencing token of this JobMaster
        #: HA: the shared checkpoint id counter and completed-checkpoint pointers (None without HA)
        self.checkpoint_ha = checkpoint_ha
        self.rm_token = ""
        self.config = job_configuration(config, job_graph)
        self.eg = ExecutionGraph(job_graph)
        try:
            self.scheduler_type = scheduler_type_of(self.config, job_graph)
            speculative = job_graph.runtime_mode == "BATCH" and bool(
                self.config.get(BatchExecutionOptions.SPECULATIVE_ENABLED)
            )
            scheduler_class = DefaultScheduler
            extra: dict[str, Any] = {}
            if speculative:
                scheduler_class = SpeculativeScheduler
                extra["speculative"] = SpeculativeOptions.from_configuration(self.config)
            elif self.scheduler_type == "Adaptive":
                scheduler_class = AdaptiveScheduler
                extra["adaptive"] = AdaptiveOptions.from_configuration(self.config)
            self.scheduler = scheduler_class(
                self.eg,
                failover_strategy=str(self.config.get(SchedulerOptions.EXECUTION_FAILOVER_STRATEGY)),
                restart_strategy=restart.from_configuration(self.config),
                slot_pool=SlotPool(
                    idle_timeout_s=self.config.get_seconds(JobManagerOptions.SLOT_IDLE_TIMEOUT) or 0.0,
                    match_profiles=bool(self.config.get(ClusterOptions.ENABLE_FINE_GRAINED_RESOURCE_MANAGEMENT)),
                ),
                slot_request_timeout_s=slot_request_timeout_s,
                adaptive_batch=(
                    AdaptiveBatchOptions.from_configuration(self.config)
                    if self.scheduler_type == "AdaptiveBatch"
                    else None
                ),
                **extra,
            )
        except ValueError as e:  # an invalid strategy or option (ConfigError is a ValueError)
            raise JobSubmissionException(str(e)) from None
        self.slot_pool = self.scheduler.pool
        self.eg.exception_history_size = int(self.config.get(JobManagerOptions.MAX_EXCEPTION_HISTORY_SIZE))
        if gateways is None:
            gateways = GrpcGatewayResolver()
        self.gateways: GatewayResolver = gateways
        #: collected results (execute_and_collect) by sink subtask: (attempt id, payload)
        self.collected: dict[int, list[tuple[str, bytes]]] = {}
        #: the same in arrival order, read by the client while the job runs (yarnflink.jobmaster.collect)
        self.collect_log = CollectLog()
        #: final task metrics (Flink's IOMetrics) by execution attempt id; read by the Dispatcher
        self.final_io_metrics: dict[str, dict[str, float]] = {}
        self._collected_bytes = 0
        self._timers: list[asyncio.Task[Any]] = []
        self._io: set[asyncio.Task[Any]] = set()  # RPCs in flight for the scheduler's actions
        self._timer: asyncio.TimerHandle | None = None
        self._declaring: asyncio.Task[None] | None = None
        self._declare_again = False
        self._terminated_notified = False
        #: checkpoints of a STREAMING job with execution.checkpointing.interval (None: off)
        self.checkpoints: CheckpointDriver | None = None
        #: the connection to the ResourceManager (None until the JobMaster started)
        self.rm_connection: ResourceManagerConnection | None = None
        #: HA takeover: the reconciliation with the TaskExecutors' reports (None: a fresh start)
        # (the Adaptive scheduler plans its parallelism at the start: it redeploys, as before)
        self.reconcile = reconcile and not isinstance(self.scheduler, AdaptiveScheduler)
        self.reconciliation: rc.Reconciliation | None = None
        #: what the reconciliation decided (None until then, or without one): the seam for the
        #: checkpoint driver -- adopted tasks keep their state, nothing of theirs is restored
        self.reconciled: rc.Decided | None = None
        #: task state updates that arrived while reconciling, applied once it decided
        self._early_updates: list[TaskExecutionState] = []
        self._reconcile_timer: asyncio.TimerHandle | None = None

        if checkpointing_enabled(
            {CheckpointingOptions.INTERVAL.key: self.config.get_string(CheckpointingOptions.INTERVAL) or ""},
            job_graph.runtime_mode,
        ) or (  # run -s: restore without checkpointing
            self.config.get_string(SavepointConfigOptions.SAVEPOINT_PATH) and job_graph.runtime_mode == "STREAMING"
        ):
            # (Adaptive: a rescale restores the latest completed checkpoint: CheckpointDriver.follow_rescale)
            try:
                self.checkpoints = CheckpointDriver(self)
            except (ValueError, OSError) as e:
                raise JobSubmissionException(f"checkpointing: {e}") from None

    @property
    def job_id(self) -> str:
        return self.job_graph.job_id

    @property
    def address(self) -> str:
        return f"{self.host}:{self.rpc_port}"

    @property
    def num_restarts(self) -> int:
        return self.eg.num_restarts

    @property
    def shared_slots(self) -> list[ExecutionSlotSharingGroup | SlotRequest]:
        """The shared slots the job needs now (held or waited for): what it declares."""
        needed = self.slot_pool.needed_keys()
        groups: list[ExecutionSlotSharingGroup | SlotRequest] = [g for g in self.scheduler.groups if g.key in needed]
        # slots of speculative attempts, and those an adaptive job would like beyond what it runs
        extra = self.scheduler.extra_slot_requests
        keys = {g.key for g in groups}
        return (
            groups
            + [r for k, r in extra.items() if k in needed and k not in keys]
            + self.slot_pool.idle_held_while_pending()
        )

    # ------------------------------------------------------------------ lifecycle
    async def on_start(self) -> None:
        await self.serve(JobMasterServicer(self), self.host, 0)
        if self.checkpoints is not None:
            try:
                await self.checkpoints.load_initial(tasks_adopted=self.reconcile)
            except Exception as e:  # noqa: BLE001 - an unreadable savepoint fails the job
                self.fail_job(Failure("CheckpointException", f"cannot restore {e}", "", now_ms()))
                return
            self.checkpoints.start()
        if self.reconcile:
            self._start_reconciliation()
        else:
            self._apply(self.scheduler.start(time.monotonic()))
        self._timers.append(asyncio.ensure_future(self._request_slots()))
        self._timers.append(asyncio.ensure_future(self._monitor_task_managers()))

    # ------------------------------------------------------------------ HA takeover: reconciliation
    def _start_reconciliation(self) -> None:
        timeout = self.config.get_seconds(JobManagerOptions.RECONCILIATION_TIMEOUT)
        timeout = 10.0 if timeout is None else timeout
        subtasks = {
            (ev.job_vertex.id, ev.subtask_index): self.scheduler.group_of(ev).key for ev in self.eg.all_vertices()
        }
        self.reconciliation = rc.Reconciliation(self.job_id, self.jobmaster_id, subtasks, time.monotonic() + timeout)
        self._reconcile_timer = asyncio.get_running_loop().call_later(
            timeout + 0.001, lambda: self._reconcile_event(rc.Timeout(time.monotonic()))
        )
        log.info(
            "job %s: waiting up to %.1f s for the TaskExecutors' reports of its %d subtasks (reconciliation)",
            self.job_id,
            timeout,
            len(subtasks),
        )

    def _reconcile_event(self, event: rc.Event) -> None:
        if self.reconciliation is None or self.eg.status.globally_terminal or not self.jobmaster_id:
            return
        actions = self.reconciliation.handle(event)
        decided = next((a for a in actions if isinstance(a, rc.Decided)), None)
        for a in actions:
            if isinstance(a, rc.RejectStale):
                raise FencingTokenMismatch(f"JobMaster of job {self.job_id}: {a.reason}")
            if isinstance(a, rc.CancelTasks):
                self._spawn(self._cancel_reported(a))
        if decided is None:
            return
        if self._reconcile_timer is not None:
            self._reconcile_timer.cancel()
            self._reconcile_timer = None
        self.reconciled = decided
        log.info(
            "job %s reconciled: %d task(s) adopted, %d finished, %d failed over%s",
            self.job_id,
            decided.adopted,
            decided.finished,
            decided.failed,
            " (reconciliation timed out)" if decided.timed_out else "",
        )
        out = self.scheduler.start_reconciled(actions, time.monotonic(), now_ms())
        self._apply(out)
        if self.checkpoints is not None:  # adopted tasks keep their state (checkpoint/takeover.py)
            adopted: dict[ExecutionState, list[Execution]] = {ExecutionState.RUNNING: [], ExecutionState.FINISHED: []}
            for a in actions:
                if isinstance(a, (rc.Adopt, rc.MarkFinished)):
                    execution = self.eg.find_execution(a.task.execution_id)
                    if execution is not None and execution.state in adopted:
                        adopted[execution.state].append(execution)
            # the latest completed checkpoint notified (committed once), in-flight ones aborted, ids continued
            self.checkpoints.on_tasks_adopted(adopted[ExecutionState.RUNNING], adopted[ExecutionState.FINISHED])
        early, self._early_updates = self._early_updates, []
        for update in early:
            self._task_execution_state(update)

    async def _cancel_reported(self, a: rc.CancelTasks) -> None:
        gateway = self.gateways.task_executor(a.rpc_address)
        for eid in a.execution_ids:
            try:
                await gateway.cancel_task(te.CancelTask(self.jobmaster_id, eid))
            except RpcException as e:
                log.debug("cancelling reported task %s at %s failed: %s", eid, a.resource_id, e)
        for alloc in a.allocation_ids:
            try:
                await gateway.free_slot(te.FreeSlot(alloc, a.cause, self.jobmaster_id))
            except RpcException as e:
                log.debug("freeing reported slot %s at %s failed: %s", alloc, a.resource_id, e)

    async def reconnect_task_manager(self, request: ReconnectTaskManager, *, timeout: float = RPC_TIMEOUT_S) -> None:
        """A TaskExecutor's report of the job's slots and tasks it kept (HA takeover)."""
        if self.reconciliation is None or not self.jobmaster_id:  # (suspended: refuses everything)
            check_fencing(self.jobmaster_id, request.jobmaster_id, "JobMaster")
            raise RpcRejected(
                f"the JobMaster of job {self.job_id} started the job afresh and adopts no tasks; free the job's slots"
            )
        self._reconcile_event(rc.ReportReceived(request, time.monotonic()))

    async def on_stop(self) -> None:
        if self._reconcile_timer is not None:
            self._reconcile_timer.cancel()
        if self.checkpoints is not None:
            self.checkpoints.stop()
        if self._timer is not None:
            self._timer.cancel()
        # its calls in flight end here, while their connections are still open, and none is left
        # pending on the loop the endpoint closes next
        in_flight = [t for t in (*self._timers, *self._io, self._declaring) if t is not None and not t.done()]
        for t in in_flight:
            t.cancel()
        if in_flight:
            await asyncio.wait(in_flight, timeout=self.stop_timeout_s)
        await self.gateways.close()

    async def suspend(self, cause: str, timeout: float = 2.0) -> None:
        """Leadership lost (HA): stop acting at once. Not a terminal state: nothing is reported,
        the job's HA data stays, and its slots and tasks stay at the TaskExecutors, which keep
        them for the next leader (they free them after high-availability.jobmaster.reconnect-timeout
        if no leader claims them)."""
        token, self.jobmaster_id = self.jobmaster_id, ""  # every RPC to this JobMaster is refused now
        self._terminated_notified = True
        for t in self._timers + list(self._io):
            t.cancel()
        if self.checkpoints is not None:
            self.checkpoints.suspended(cause)  # deletes no checkpoint file from now on
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._reconcile_timer is not None:
            self._reconcile_timer.cancel()
            self._reconcile_timer = None
        log.info("job %s suspended (JobMaster %s): %s", self.job_id, token, cause)

    async def _request_slots(self) -> None:
        # registration, requirements per slot sharing group, heartbeats: yarnflink.jobmaster.rm_connection

        self.rm_connection = ResourceManagerConnection(self, requirements_of(self.shared_slots, self.job_graph))
        await self.rm_connection.run()

    async def _monitor_task_managers(self) -> None:
        while True:
            await asyncio.sleep(min(1.0, self.heartbeat_interval_s))
            now = time.monotonic()
            for tm in list(self.slot_pool.task_managers.values()):
                if now - tm.last_heartbeat > self.heartbeat_timeout_s:
                    self.task_manager_lost(tm.resource_id, f"heartbeat of TaskManager {tm.resource_id} timed out")

    # ------------------------------------------------------------------ the scheduler's actions
    def _apply(self, actions: list[Action]) -> None:
        for a in actions:
            if isinstance(a, DeployTask):
                self._spawn(self._deploy(a.execution))
            elif isinstance(a, CancelTask):
                self._spawn(self._cancel_remote(a.execution))
            elif isinstance(a, ReleasePartitions):
                self._spawn(self._release_partitions(a))
            elif isinstance(a, FreeSlot):
                self._spawn(self._free_slot(a))
            elif isinstance(a, DeclareResources):
                self._declare_requirements()
            elif isinstance(a, CheckTaskManager):
                self._spawn(self._check_task_manager(a))
            elif isinstance(a, TaskManagerLost):
                self._spawn(self._report_task_manager_lost(a))
                self._spawn(self._disconnect_task_manager(a))
            elif isinstance(a, JobTerminated):
                self._job_terminated(a)
        self._arm_timer()

    def _spawn(self, coro: Any) -> None:
        t = asyncio.ensure_future(coro)
        self._io.add(t)
        t.add_done_callback(self._io.discard)

    def _arm_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = self.scheduler.next_deadline()
        if deadline is not None and not self.eg.status.globally_terminal:
            delay = max(0.0, deadline - time.monotonic()) + 0.001
            self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._apply(self.scheduler.on_timer(time.monotonic()))

    def _declare_requirements(self) -> None:
        """Declares the slots needed now at the ResourceManager (coalesced: one call at a time,
        the last one carries the newest requirements)."""
        self._declare_again = True
        if self._declaring is None or self._declaring.done():
            self._declaring = asyncio.ensure_future(self._declare_loop())

    async def _declare_loop(self) -> None:
        while self._declare_again:
            self._declare_again = False
            connection = self.rm_connection
            if connection is None:
                return  # not connected yet: the connection declares shared_slots when it starts
            try:
                await connection.declare(requirements_of(self.shared_slots, self.job_graph))
            except RpcException as e:
                log.info(
                    "job %s: declaring requirements failed (%s); the connection declares again when it re-registers",
                    self.job_id,
                    e,
                )

    async def _deploy(self, execution: Execution) -> None:
        slot = execution.slot
        assert slot is not None
        tdd = build_tdd(self.eg, execution.vertex, execution)
        if self.checkpoints is not None:
            # cluster-level s3.* keys
            job_config = {**self.checkpoints.storage_config(), **tdd.job_config}
            self.checkpoints.deploying(execution)
            try:
                await self.checkpoints.prepare_restore(execution)  # a damaged checkpoint: fall back
                task_state, restored_checkpoint_id = self.checkpoints.restore_state(execution)
            except Exception as e:  # noqa: BLE001 - the checkpoint does not fit the job
                self.fail_job(Failure("CheckpointException", f"cannot restore: {e}", "", now_ms()))
                return
            tdd = dataclasses.replace(
                tdd, job_config=job_config, task_state=task_state, restored_checkpoint_id=restored_checkpoint_id
            )
        try:
            await self.gateways.task_executor(slot.rpc_address).submit_task(te.SubmitTask(self.jobmaster_id, tdd))
        except RpcException as e:
            if isinstance(e, RpcUnreachable):
                self.task_manager_lost(
                    slot.resource_id,
                    f"TaskManager {slot.resource_id} at {slot.rpc_address} is unreachable (deploying a task: {e})",
                )
            self._apply(
                self.scheduler.deploy_failed(
                    execution,
                    Failure(
                        "TaskDeploymentException",
                        f"could not deploy to {slot.rpc_address}: {e}",
                        "",
                        now_ms(),
                        execution.vertex.task_name_with_subtask,
                        slot.data_address,
                        slot.resource_id,
                    ),
                    time.monotonic(),
                )
            )

    async def _cancel_remote(self, execution: Execution) -> None:
        slot = execution.slot
        assert slot is not None
        try:
            await self.gateways.task_executor(slot.rpc_address).cancel_task(
                te.CancelTask(self.jobmaster_id, execution.attempt_id)
            )
        except RpcException as e:
            # the TaskExecutor is gone (its tasks are gone with it) or the task already ended
            log.info("cancel of %s failed (%s); marking it canceled", execution.attempt_id, e)
            if isinstance(e, RpcUnreachable):
                self.task_manager_lost(
                    slot.resource_id,
                    f"TaskManager {slot.resource_id} at {slot.rpc_address} is unreachable (cancelling a task: {e})",
                )
            self._apply(self.scheduler.cancel_failed(execution, time.monotonic()))

    async def _check_task_manager(self, a: CheckTaskManager) -> None:
        try:
            await self.gateways.task_executor(a.rpc_address).request_task_executor_info(
                te.RequestTaskExecutorInfo(), timeout=PROBE_TIMEOUT_S
            )
        except RpcUnreachable as e:
            self.task_manager_lost(
                a.resource_id,
                f"TaskManager {a.resource_id} at {a.rpc_address} is "
                f"unreachable (a consumer lost its data connection; probe: {e})",
            )
            return
        except RpcException:
            pass  # slow or refusing, but there
        self._apply(self.scheduler.task_manager_checked(a.resource_id, time.monotonic()))

    async def _report_task_manager_lost(self, a: TaskManagerLost) -> None:
        """Tells the ResourceManager, so the dead TaskExecutor's slots stop counting as allocated
        and the restart gets slots elsewhere without waiting for its heartbeat timeout."""
        if not self.rm_token:
            return
        try:
            await self.gateways.resource_manager(self.rm_address).disconnect_task_executor(
                DisconnectTaskExecutor(
                    self.rm_token, a.resource_id, f"the JobMaster of job {self.job_id} lost it: {a.cause}"
                )
            )
        except RpcException as e:
            log.info("telling the ResourceManager about lost TaskManager %s failed: %s", a.resource_id, e)

    async def _disconnect_task_manager(self, a: TaskManagerLost) -> None:
        """Tells the TaskExecutor itself (Flink's ``disconnectJobManager``): one found lost by a
        heartbeat timeout or the ResourceManager's notice may be alive; it must free this job's
        slots and cancel its tasks there, which the restart replaces. Else its slot report, when it
        registers at the ResourceManager again, counts those slots as this job's, and the job's
        new slot requests are never served."""
        if not a.rpc_address:
            return
        try:
            await self.gateways.task_executor(a.rpc_address).disconnect_job_manager(
                te.DisconnectJobManager(
                    self.job_id, f"the JobMaster of job {self.job_id} lost it: {a.cause}", self.jobmaster_id
                )
            )
        except RpcException as e:
            log.debug("telling lost TaskManager %s to drop job %s failed: %s", a.resource_id, self.job_id, e)

    async def _release_partitions(self, a: ReleasePartitions) -> None:
        try:
            await self.gateways.task_executor(a.rpc_address).release_partitions(
                te.ReleasePartitions(self.job_id, tuple(a.partition_ids), self.jobmaster_id)
            )
        except RpcException as e:
            log.debug("releasing partitions at %s failed: %s", a.rpc_address, e)

    async def _free_slot(self, a: FreeSlot) -> None:
        try:
            await self.gateways.task_executor(a.slot.rpc_address).free_slot(
                te.FreeSlot(a.slot.allocation_id, a.cause, self.jobmaster_id)
            )
        except RpcException as e:
            log.debug("freeing slot %s failed: %s", a.slot.allocation_id, e)

    # ------------------------------------------------------------------ events
    def slots_offered(self, resource_id: str, offers: Sequence[Any]) -> list[str]:
        """``offers``: (allocation id, slot index[, the slot's ResourceProfile])."""
        accepted, actions = self.scheduler.slots_offered(resource_id, offers, time.monotonic())
        # deploy after this RPC returns, so the TaskExecutor knows the slots are accepted
        asyncio.get_running_loop().call_soon(self._apply, actions)
        return accepted

    def update_task_state(
        self,
        attempt_id: str,
        state: ExecutionState,
        error: SerializedThrowable | None,
        failed_partition_id: str = "",
    ) -> bool:
        execution = self.eg.find_execution(attempt_id)
        if execution is None or not self.scheduler.is_live(execution):
            return False
        failure = None
        if state == ExecutionState.FAILED:
            slot = execution.slot
            failure = Failure(
                error.exception_class if error else "Exception",
                error.message if error else "task failed",
                error.traceback if error else "",
                now_ms(),
                execution.vertex.task_name_with_subtask,
                slot.data_address if slot else "",
                slot.resource_id if slot else "",
                partition_id=failed_partition_id,
            )
            if execution.state in _DEPLOYED:
                self._fail_if_stopping(failure, [execution])
        produced = self.final_io_metrics.get(attempt_id, {}).get("numBytesOut")
        self._apply(
            self.scheduler.task_state_changed(
                attempt_id,
                state,
                failure,
                time.monotonic(),
                produced_bytes=int(produced) if produced is not None and produced == produced else None,
            )
        )
        if self.checkpoints is not None and not self.eg.status.globally_terminal:
            self.checkpoints.task_state_changed(execution, state)
        return True

    def _fail_if_stopping(self, failure: Failure, executions: Sequence[Execution]) -> None:
        """Tasks fail (``executions``; ``failure`` the cause): if a stop-with-savepoint's savepoint
        has completed, the job fails as a whole now, with no failover or restart (FLINK-26783; the
        decision is ``StopWithSavepointTerminationHandler.task_failed``). The scheduler, told of the
        tasks' failure after this, then counts them among the failed tasks of the failing job."""
        if self.checkpoints is None or self.eg.status != JobStatus.RUNNING or not executions:
            return
        cause = f"{failure.exception_class}: {failure.message}".splitlines()[0]
        decision = self.checkpoints.stop_task_failed(executions[0].vertex.task_name_with_subtask, cause)
        if decision is None:
            return
        first = failure.traceback or f"{failure.exception_class}: {failure.message}"
        self.fail_job(
            Failure(
                decision.exception_class,
                decision.message,
                f"{decision.exception_class}: {decision.message}\n\nCaused by: {first}",
                failure.timestamp_ms,
                failure.task_name,
                failure.endpoint,
                failure.task_manager_id,
            )
        )

    def fail_job(self, failure: Failure) -> None:
        """A failure of the job as a whole (not of one task): no restart."""
        self._apply(self.scheduler.fail_job(failure, time.monotonic()))

    def fail_global(self, failure: Failure) -> None:
        """A global failover (Flink's ``failGlobal``; checkpoint failures beyond the tolerable
        number): every task restarts from the latest completed checkpoint if the restart strategy
        allows, else the job fails."""
        self._apply(self.scheduler.global_failure(failure, time.monotonic()))

    def cancel(self) -> bool:
        now = time.monotonic()
        cancelled = self.scheduler.cancel(now)
        self._apply(self.scheduler.take_actions(now))
        return cancelled

    def task_manager_lost(self, resource_id: str, cause: str) -> None:
        failure = Failure("TaskManagerLostException", cause, "", now_ms(), task_manager_id=resource_id)
        self._fail_if_stopping(
            failure,
            [
                e
                for e in self.eg.executions()
                if e.state in _DEPLOYED and e.slot is not None and e.slot.resource_id == resource_id
            ],
        )
        self._apply(self.scheduler.task_manager_lost(resource_id, failure, time.monotonic()))

    def _job_terminated(self, a: JobTerminated) -> None:
        log.info("job %s (%s) %s", self.job_graph.job_name, self.job_id, a.status.value)
        if self.checkpoints is not None:
            self.checkpoints.job_terminated(a.status.value)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._terminated_notified:
            self._terminated_notified = True
            self.on_terminated(self)
        self._spawn(self._disconnect_resource_manager())

    async def _disconnect_resource_manager(self) -> None:
        await asyncio.sleep(0)  # the slot frees and partition releases of the same batch start first
        pending = [t for t in self._io if t is not asyncio.current_task()]
        if pending:
            await asyncio.wait(pending, timeout=RPC_TIMEOUT_S)
        try:
            await self.gateways.resource_manager(self.rm_address).disconnect_job_master(
                DisconnectJobMaster(self.rm_token, self.job_id, self.eg.status.value)
            )
        except RpcException:
            pass

    # ------------------------------------------------------------------ collect sink
    def add_collected(self, attempt_id: str, payload: bytes) -> None:
        execution = self.eg.find_execution(attempt_id)
        if execution is None or execution is not execution.vertex.current:
            return  # output of an attempt that a restart replaced
        self._collected_bytes += len(payload)
        if self._collected_bytes > MAX_COLLECTED_BYTES:
            self.fail_job(
                Failure(
                    "CollectSinkException",
                    f"execute_and_collect() results exceed {MAX_COLLECTED_BYTES} bytes; "
                    f"write large results with a FileSink instead",
                    "",
                    now_ms(),
                )
            )
            return
        self.collected.setdefault(execution.vertex.subtask_index, []).append((attempt_id, payload))
        self.collect_log.add(attempt_id, payload)

    def is_current_attempt(self, attempt_id: str) -> bool:
        execution = self.eg.find_execution(attempt_id)
        return execution is not None and execution is execution.vertex.current

    def collected_payloads(self) -> list[bytes]:
        """The results of each sink subtask's latest attempt (a restarted sink's earlier output is dropped)."""
        out = []
        for i in sorted(self.collected):
            for attempt_id, payload in self.collected[i]:
                execution = self.eg.find_execution(attempt_id)
                if execution is not None and execution is execution.vertex.current:
                    out.append(payload)
        return out

    # ------------------------------------------------------------------ views (REST)
    def checkpoint_stats(self) -> dict[str, Any] | None:
        """Flink's ``GET /jobs/:jobid/checkpoints`` (None without checkpointing: the Dispatcher
        shows empty statistics)."""
        return self.checkpoints.stats() if self.checkpoints is not None else None

    def details(self) -> dict[str, Any]:
        return job_details(self.eg)

    # ------------------------------------------------------------------ JobMasterGateway (served by rpc.servicers)
    async def register_task_manager(self, request: RegisterTaskManager, *, timeout: float = RPC_TIMEOUT_S) -> None:
        check_fencing(self.jobmaster_id, request.jobmaster_id, "JobMaster")
        self.scheduler.register_task_manager(
            request.resource_id, request.rpc_address, request.data_address, time.monotonic()
        )

    async def offer_slots(self, request: OfferSlots, *, timeout: float = RPC_TIMEOUT_S) -> tuple[str, ...]:
        check_fencing(self.jobmaster_id, request.jobmaster_id, "JobMaster")
        accepted = self.slots_offered(
            request.resource_id, [(o.allocation_id, o.slot_index, o.profile) for o in request.offers]
        )
        return tuple(accepted)

    async def update_task_execution_state(self, request: TaskExecutionState, *, timeout: float = RPC_TIMEOUT_S) -> None:
        check_fencing(self.jobmaster_id, request.jobmaster_id, "JobMaster")
        if self.reconciliation is not None and not self.reconciliation.decided:
            self._early_updates.append(request)  # of a task about to be adopted
            return
        self._task_execution_state(request)

    def _task_execution_state(self, request: TaskExecutionState) -> None:
        if request.io_metrics and self.eg.find_execution(request.execution_id) is not None:
            self.final_io_metrics[request.execution_id] = dict(request.io_metrics)
        self.update_task_state(request.execution_id, request.state, request.error, request.failed_partition_id)

    def _current_execution(self, execution_id: str) -> Execution | None:
        """The attempt, if it is its vertex's current one (an ended attempt's messages are dropped)."""
        execution = self.eg.find_execution(execution_id)
        return execution if execution is not None and execution is execution.vertex.current else None

    async def acknowledge_checkpoint(self, request: AcknowledgeCheckpoint, *, timeout: float = RPC_TIMEOUT_S) -> None:
        check_fencing(self.jobmaster_id, request.jobmaster_id, "JobMaster")
        execution = self._current_execution(request.execution_id)
        if self.checkpoints is not None and execution is not None:
            self.checkpoints.acknowledged(execution, request)

    async def decline_checkpoint(self, request: DeclineCheckpoint, *, timeout: float = RPC_TIMEOUT_S) -> None:
        check_fencing(self.jobmaster_id, request.jobmaster_id, "JobMaster")
        execution = self._current_execution(request.execution_id)
        if self.checkpoints is not None and execution is not None:
            self.checkpoints.declined(execution, request)

    async def send_coordination_data(self, request: CoordinationData, *, timeout: float = RPC_TIMEOUT_S) -> None:
        check_fencing(self.jobmaster_id, request.jobmaster_id, "JobMaster")
        if request.kind != "collect":
            raise InvalidRequest(f"unknown coordination data kind {request.kind!r}")
        self.add_collected(request.execution_id, request.payload)

    async def heartbeat_from_task_manager(
        self, request: TaskManagerHeartbeat, *, timeout: float = RPC_TIMEOUT_S
    ) -> None:
        check_fencing(self.jobmaster_id, request.jobmaster_id, "JobMaster")
        tm = self.slot_pool.task_managers.get(request.resource_id)
        if tm is None and self.reconciliation is not None and self.reconciliation.pending_for(request.resource_id):
            # reported its kept tasks; the decision waits for other TaskExecutors' reports: it
            # is this job's TaskManager already (refusing would make both sides time each other
            # out and its adopted tasks be redeployed); the decision registers it
            return
        if tm is None:
            # lost (or never registered): not answering lets its heartbeat timeout of this
            # JobMaster free the job's slots there, should the disconnect_job_manager sent at its
            # loss not have reached it (e.g. it was frozen); a TaskExecutor about to offer a slot
            # registers first
            raise UnknownTarget(
                f"TaskManager {request.resource_id} is not registered at the JobMaster of job {self.job_id}"
            )
        tm.last_heartbeat = time.monotonic()

    async def disconnect_task_manager(self, request: DisconnectTaskManager, *, timeout: float = RPC_TIMEOUT_S) -> None:
        check_fencing(self.jobmaster_id, request.jobmaster_id, "JobMaster")
        self.task_manager_lost(request.resource_id, request.cause or "TaskManager disconnected")
