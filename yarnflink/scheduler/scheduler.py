"""DefaultScheduler: the JobMaster's decisions about one job, as a pure state machine.

Events in (the job starts, slots arrive, tasks change state, a TaskExecutor is lost, time passes),
actions out (deploy, cancel, release partitions, free slots, declare the slots needed, probe a
TaskExecutor, the job ended). The JobMaster turns actions into RPCs; this module does no I/O and
reads no clock: every event carries ``now`` (monotonic seconds), failures carry their wall-clock
timestamps.

It combines a ``SchedulingStrategy`` (eager for streaming, pipelined regions for batch), a
``FailoverStrategy`` (full / individual / region: what a failure restarts), a
``RestartBackoffTimeStrategy`` (whether and when to restart) and the ``SlotPool`` (slots per slot
sharing group, sticky across restarts).

Restart protocol: a failure computes the restart set; its running tasks are cancelled; once every
one of them is terminal, the backoff has passed and no TaskExecutor probe is open, each gets a new
Execution attempt and the scheduling strategy schedules them again (into the slots they had when
those are still held). Blocking partitions that a restarted producer had written are released.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Union

from yarnflink.executiongraph.executiongraph import (
    Execution,
    ExecutionGraph,
    ExecutionState,
    ExecutionVertex,
    Failure,
    IntermediateResultPartition,
    JobStatus,
    LogicalSlot,
)
from yarnflink.jobmaster import reconciliation as rc
from yarnflink.jobmaster.gateway import ReportedTask
from yarnflink.jobmaster.slotpool import Offer, SlotPool, SlotRequest
from yarnflink.resourcemanager.resources import ResourceProfile
from yarnflink.scheduler.adaptive_batch import AdaptiveBatchOptions, adaptive_vertices, decide_parallelism
from yarnflink.scheduler.failover import create_failover_strategy
from yarnflink.scheduler.regions import RegionTopology
from yarnflink.scheduler.restart import NoRestartBackoffTimeStrategy, RestartBackoffTimeStrategy
from yarnflink.scheduler.slotsharing import ExecutionSlotSharingGroup, compute_slot_sharing
from yarnflink.scheduler.strategy import (
    Batch,
    EagerSchedulingStrategy,
    PipelinedRegionSchedulingStrategy,
    SchedulingStrategy,
)


# ----------------------------------------------------------------------------- actions
@dataclass(frozen=True)
class DeployTask:
    execution: Execution


@dataclass(frozen=True)
class CancelTask:
    execution: Execution


@dataclass(frozen=True)
class ReleasePartitions:
    """Drop partitions at a TaskExecutor; no ids: every partition of the job there."""

    rpc_address: str
    partition_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class FreeSlot:
    slot: LogicalSlot
    cause: str


@dataclass(frozen=True)
class DeclareResources:
    slots: int


@dataclass(frozen=True)
class CheckTaskManager:
    """Find out whether a TaskExecutor is still alive; answer with ``task_manager_checked``."""

    resource_id: str
    rpc_address: str


@dataclass(frozen=True)
class TaskManagerLost:
    """This job found a TaskExecutor dead (tell the ResourceManager, so it frees its slots, and
    the TaskExecutor itself at ``rpc_address``: if it is alive after all, e.g. only its heartbeats
    were late, it must drop the job's slots and tasks, or its slot report keeps them counted as
    the job's at the ResourceManager while the job waits for new ones)."""

    resource_id: str
    cause: str
    rpc_address: str = ""


@dataclass(frozen=True)
class JobTerminated:
    status: JobStatus


Action = Union[
    DeployTask,
    CancelTask,
    ReleasePartitions,
    FreeSlot,
    DeclareResources,
    CheckTaskManager,
    TaskManagerLost,
    JobTerminated,
]

_DEPLOYED = frozenset({ExecutionState.DEPLOYING, ExecutionState.INITIALIZING, ExecutionState.RUNNING})
_BUSY = _DEPLOYED | {ExecutionState.SCHEDULED, ExecutionState.CANCELING}


@dataclass
class PendingRestart:
    vertices: list[ExecutionVertex]
    due: float
    failure: Failure


class DefaultScheduler:
    def __init__(
        self,
        eg: ExecutionGraph,
        *,
        failover_strategy: str = "region",
        restart_strategy: RestartBackoffTimeStrategy | None = None,
        slot_pool: SlotPool | None = None,
        lazy: bool | None = None,
        slot_request_timeout_s: float = 300.0,
        adaptive_batch: AdaptiveBatchOptions | None = None,
    ) -> None:
        self.eg = eg
        if lazy is None:  # batch (blocking exchanges): regions one after another
            lazy = any(d.result_type == "BLOCKING" for d in eg.job_graph.datasets)
        self.lazy = lazy
        #: AdaptiveBatch: vertices whose parallelism is decided when their producers finish
        self.adaptive_batch = adaptive_batch if lazy else None
        if self.adaptive_batch is not None:
            for vertex_id, bound in adaptive_vertices(eg.job_graph, self.adaptive_batch).items():
                eg.vertex(vertex_id).adaptive_upper_bound = bound
        self._produced_bytes: dict[str, int] = {}  # attempt id -> bytes written (final IO metrics)
        self._failover_strategy_name = failover_strategy
        self.topology = RegionTopology(eg)
        self.groups = compute_slot_sharing(eg, per_region=lazy)
        self._group_of: dict[int, ExecutionSlotSharingGroup] = {id(v): g for g in self.groups for v in g.vertices}
        self.scheduling: SchedulingStrategy = (
            PipelinedRegionSchedulingStrategy(self.topology, self.is_available) if lazy else EagerSchedulingStrategy(eg)
        )
        self.failover = create_failover_strategy(failover_strategy, eg, self.topology, self.is_available)
        self.restart_strategy = restart_strategy or NoRestartBackoffTimeStrategy()
        self.pool = slot_pool if slot_pool is not None else SlotPool()
        self.slot_request_timeout_s = slot_request_timeout_s
        self.restarts: list[PendingRestart] = []
        #: AdaptiveBatch: vertex id -> (decided parallelism, bytes of input it was decided from)
        self.parallelism_decisions: dict[str, tuple[int, int]] = {}
        self._batches: list[Batch] = []  # scheduled, waiting for slots
        self._unavailable: set[str] = set()  # partition ids lost with their TaskExecutor or released
        self._checks: dict[str, str] = {}  # resource id -> rpc address of open probes
        self._lost_task_managers: set[str] = set()
        self._declared = -1
        self._out: list[Action] = []
        self._release: dict[str, list[str]] = {}  # rpc address -> partition ids to release
        #: SlotPool key -> slots wanted beyond the shared slots of the tasks (the speculative and
        #: adaptive schedulers' extra attempts or scale-up); none here
        self.extra_slot_requests: dict[str, SlotRequest] = {}

    # ------------------------------------------------------------------ queries
    def is_available(self, p: IntermediateResultPartition) -> bool:
        """A blocking partition can be read: its producer's current attempt finished and the
        partition has been neither lost nor released."""
        return p.producer.current.state == ExecutionState.FINISHED and p.partition_id not in self._unavailable

    def is_live(self, execution: Execution) -> bool:
        """Reports about ``execution`` still matter (it is its subtask's current attempt)."""
        return execution is execution.vertex.current

    def group_of(self, ev: ExecutionVertex) -> ExecutionSlotSharingGroup:
        return self._group_of[id(ev)]

    def profile_of(self, g: ExecutionSlotSharingGroup) -> ResourceProfile:
        """What a shared slot of ``g`` needs (its group's declared resources, else UNKNOWN)."""
        return ResourceProfile.of_slot_sharing_group(self.eg.job_graph.slot_sharing_groups.get(g.group_name))

    def next_deadline(self) -> float | None:
        """When ``on_timer`` should run next (monotonic seconds), if ever."""
        times = [r.due for r in self.restarts]
        idle = self.pool.next_idle_expiry()
        if idle is not None:
            times.append(idle)
        oldest = self.pool.oldest_pending()
        if oldest is not None:
            times.append(oldest + self.slot_request_timeout_s)
        return min(times, default=None)

    # ------------------------------------------------------------------ events
    def start(self, now: float) -> list[Action]:
        self.eg.transition_to(JobStatus.RUNNING)
        self._schedule(self.scheduling.start(), now)
        return self._flush(now)

    def start_reconciled(self, decision: Sequence[rc.Action], now: float, wall_ms: int) -> list[Action]:
        """HA: the job starts from the tasks TaskExecutors kept running (``decision``: the actions
        of ``yarnflink.jobmaster.reconciliation`` up to its ``Decided``) instead of deploying
        anew. Adopted executions keep their attempt ids and slots (their partitions keep their
        ids); subtasks that failed, finished badly or went missing while the job had no leader are
        handed to the failover strategy as task failures (a region restart, counted by the restart
        strategy), never a global restart. ``wall_ms``: the failures' timestamp."""
        self.eg.transition_to(JobStatus.RUNNING)
        for a in decision:
            if isinstance(a, rc.AdoptSlots):
                self.register_task_manager(a.resource_id, a.rpc_address, a.data_address, now)
                self.pool.adopt_slots(a.resource_id, [(o.allocation_id, o.slot_index, o.profile) for o in a.slots], now)
        failed: list[tuple[ExecutionVertex, Failure]] = []
        finished: list[ExecutionVertex] = []
        addresses = {a.resource_id: (a.rpc_address, a.data_address) for a in decision if isinstance(a, rc.AdoptSlots)}
        for a in decision:
            if isinstance(a, rc.MarkFinished) and a.resource_id in addresses:
                # finished (meanwhile, or under an earlier leader: item 5): it needs no slot -- its
                # slot may be another stage's by now -- only where its results are kept
                ev = self.eg.vertex(a.task.vertex_id).task_vertices[a.task.subtask_index]
                rpc_address, data_address = addresses[a.resource_id]
                e = ev.current
                e.attempt_id, e.attempt_number, e.state = a.task.execution_id, a.task.attempt_number, a.task.state
                e.slot = LogicalSlot("", a.resource_id, rpc_address, data_address, -1)
                e.timestamps[a.task.state.value] = wall_ms
                finished.append(ev)
            elif isinstance(a, (rc.Adopt, rc.MarkFinished)):
                ev = self.eg.vertex(a.task.vertex_id).task_vertices[a.task.subtask_index]
                if self._take_over(ev, a.task, wall_ms):
                    if isinstance(a, rc.MarkFinished):
                        finished.append(ev)
                    continue
                why = "its slot is not the one its slot sharing group holds"
                failed.append((ev, self._reconcile_failure(ev, why, a.resource_id, wall_ms)))
            elif isinstance(a, rc.FailSubtask):
                ev = self.eg.vertex(a.vertex_id).task_vertices[a.subtask_index]
                if a.task is not None:
                    e = ev.current
                    e.attempt_id, e.attempt_number = a.task.execution_id, a.task.attempt_number
                    e.slot = self.pool.slots.get(a.task.allocation_id)
                failed.append((ev, self._reconcile_failure(ev, a.cause, a.resource_id, wall_ms)))
        for g in self.groups:
            self._group_maybe_done(g.vertices[0], now)
        for ev in finished:
            self._schedule(self.scheduling.on_finished(ev), now)
        if failed:
            primary = failed[0][1]
            primary.concurrent.extend(f for _, f in failed[1:])
            self._handle_failure(failed, primary, now)
        self._schedule(self.scheduling.start(), now)  # what never ran (CREATED) and may run now
        return self._flush(now)

    def _take_over(self, ev: ExecutionVertex, task: ReportedTask, wall_ms: int) -> bool:
        """The subtask's current execution becomes the reported attempt, in its slot."""
        slot = self.pool.assign(self.group_of(ev).key, task.allocation_id)
        if slot is None:
            return False
        e = ev.current
        e.attempt_id, e.attempt_number, e.slot = task.execution_id, task.attempt_number, slot
        e.state = task.state
        e.timestamps[task.state.value] = wall_ms
        return True

    def _reconcile_failure(self, ev: ExecutionVertex, cause: str, resource_id: str, wall_ms: int) -> Failure:
        slot = ev.current.slot
        return Failure(
            "TaskReconciliationException",
            f"{ev.task_name_with_subtask}: {cause}",
            "",
            wall_ms,
            ev.task_name_with_subtask,
            slot.data_address if slot is not None else "",
            resource_id,
        )

    def register_task_manager(self, resource_id: str, rpc_address: str, data_address: str, now: float) -> None:
        """A TaskExecutor that offers slots to this job (again: one found dead may come back)."""
        self._lost_task_managers.discard(resource_id)
        self.pool.register_task_manager(resource_id, rpc_address, data_address, now)

    def slots_offered(self, resource_id: str, offers: Sequence[Offer], now: float) -> tuple[list[str], list[Action]]:
        if self.eg.status != JobStatus.RUNNING:
            return [], []
        accepted, _ = self.pool.offer_slots(resource_id, offers, now)
        return accepted, self._flush(now)

    def task_state_changed(
        self,
        attempt_id: str,
        state: ExecutionState,
        failure: Failure | None,
        now: float,
        produced_bytes: int | None = None,
    ) -> list[Action]:
        """``produced_bytes``: with FINISHED, the bytes the task wrote (its final numBytesOut);
        the AdaptiveBatch decisions size consumers by it."""
        execution = self.eg.find_execution(attempt_id)
        if execution is None or execution is not execution.vertex.current:
            return []
        if state == ExecutionState.FINISHED and produced_bytes is not None:
            self._produced_bytes[attempt_id] = max(0, int(produced_bytes))
        ev = execution.vertex
        if state == ExecutionState.FAILED:
            failure = failure or Failure("Exception", "task failed", "", 0, ev.task_name_with_subtask)
            if execution.state == ExecutionState.CANCELING or self.eg.status != JobStatus.RUNNING:
                # a task we are cancelling (restart or job end) failed on its way out
                self._note_concurrent(ev, failure)
                execution.state = (
                    ExecutionState.FAILED if self.eg.status == JobStatus.FAILING else ExecutionState.CANCELED
                )
                execution.failure = failure
                self._group_maybe_done(ev, now)
            elif not execution.state.terminal:
                lost = self._lost_partition(failure)
                self._handle_failure([(ev, failure)], failure, now, lost)
        elif execution.transition(state):
            if state == ExecutionState.FINISHED and self._pending_restart_of(ev) is None:
                self._finished(ev, now)
            elif state.terminal:
                self._group_maybe_done(ev, now)
        return self._flush(now)

    def deploy_failed(self, execution: Execution, failure: Failure, now: float) -> list[Action]:
        if execution is execution.vertex.current and execution.state == ExecutionState.DEPLOYING:
            if self.eg.status == JobStatus.RUNNING:
                self._handle_failure([(execution.vertex, failure)], failure, now)
            else:
                execution.state = ExecutionState.FAILED
                self._group_maybe_done(execution.vertex, now)
        return self._flush(now)

    def cancel_failed(self, execution: Execution, now: float) -> list[Action]:
        """The cancel RPC failed: the task's TaskExecutor is gone (or the task already ended)."""
        if execution.transition(ExecutionState.CANCELED):
            self._group_maybe_done(execution.vertex, now)
        return self._flush(now)

    def task_manager_checked(self, resource_id: str, now: float) -> list[Action]:
        """A probe found the TaskExecutor alive."""
        self._checks.pop(resource_id, None)
        return self._flush(now)

    def task_manager_lost(self, resource_id: str, failure: Failure, now: float) -> list[Action]:
        """``failure`` (class, message, time) describes the loss; each affected task gets a copy.
        If a consumer's failure had this TaskExecutor probed, its restart (counted, and waiting
        for the probe) takes the tasks the loss adds: one failure, not two."""
        probed = self._checks.pop(resource_id, None) is not None
        known = resource_id in self.pool.task_managers or any(
            e.slot is not None and e.slot.resource_id == resource_id for e in self.eg.executions()
        )
        if resource_id in self._lost_task_managers or not known:
            return self._flush(now)
        tm = self.pool.task_managers.get(resource_id)
        rpc_address = tm.rpc_address if tm is not None else ""
        holds = any(s.resource_id == resource_id for s in self.pool.slots.values())
        for ev in self.eg.all_vertices():
            e = ev.current
            if e.slot is not None and e.slot.resource_id == resource_id:
                rpc_address = rpc_address or e.slot.rpc_address
                holds = holds or e.state in _BUSY or e.state == ExecutionState.FINISHED
        if not holds:
            # registered here once but holds nothing of this job (its offer was refused, its slots
            # were freed): it sends this job no heartbeats, so their timeout says nothing about
            # it. It is forgotten, not reported: reporting it would have the ResourceManager drop
            # a healthy TaskExecutor and fail the other jobs' tasks on it.
            self.pool.release_task_manager(resource_id)
            return self._flush(now)
        self._lost_task_managers.add(resource_id)
        self._out.append(TaskManagerLost(resource_id, failure.message, rpc_address))
        self.pool.release_task_manager(resource_id)  # groups that lost their slot ask again
        failed: list[tuple[ExecutionVertex, Failure]] = []
        for ev in self.eg.all_vertices():
            e = ev.current
            if e.slot is None or e.slot.resource_id != resource_id:
                continue
            for p in ev.produced.values():
                self._unavailable.add(p.partition_id)
            if e.state == ExecutionState.CANCELING:
                e.transition(ExecutionState.CANCELED)
            elif e.state in _DEPLOYED:
                failed.append(
                    (
                        ev,
                        dataclasses.replace(
                            failure,
                            task_name=ev.task_name_with_subtask,
                            endpoint=e.slot.data_address,
                            task_manager_id=resource_id,
                            concurrent=[],
                            restarted_tasks=[],
                        ),
                    )
                )
            elif e.state == ExecutionState.FINISHED and self._results_needed(ev):
                failed.append(
                    (
                        ev,
                        dataclasses.replace(
                            failure,
                            task_name=ev.task_name_with_subtask,
                            endpoint=e.slot.data_address,
                            task_manager_id=resource_id,
                            concurrent=[],
                            restarted_tasks=[],
                            message=f"{failure.message}; the results of {ev.task_name_with_subtask} kept there are lost",
                        ),
                    )
                )
        if failed:
            primary = failed[0][1]
            primary.concurrent.extend(f for _, f in failed[1:])
            self._handle_failure(failed, primary, now, merge=probed)
        else:
            for g in self.groups:
                self._group_maybe_done(g.vertices[0], now)
        return self._flush(now)

    def on_timer(self, now: float) -> list[Action]:
        for slot in self.pool.expire_idle(now):
            self._out.append(FreeSlot(slot, f"idle for slot.idle.timeout ({self.pool.idle_timeout_s:g} s)"))
        oldest = self.pool.oldest_pending()
        if oldest is not None and now - oldest >= self.slot_request_timeout_s and self.eg.status == JobStatus.RUNNING:
            self._fail_job(
                Failure(
                    "NoResourceAvailableException",
                    f"Could not acquire the minimum required resources: {len(self.pool.pending)} slot "
                    f"request(s) unfulfilled within slot.request.timeout ({self.slot_request_timeout_s:g} s); "
                    f"the job holds {len(self.pool.slots)} slot(s)",
                    "",
                    0,
                ),
                now,
            )
        return self._flush(now)

    def cancel(self, now: float) -> bool:
        if self.eg.status.globally_terminal or self.eg.status == JobStatus.CANCELLING:
            return False
        self.eg.transition_to(JobStatus.CANCELLING)
        self._cancel_everything(now)
        return True

    def fail_job(self, failure: Failure, now: float) -> list[Action]:
        """A failure of the job as a whole (not of one task): no restart."""
        self._fail_job(failure, now)
        return self._flush(now)

    def global_failure(self, failure: Failure, now: float) -> list[Action]:
        """A failure of the job as a whole that may be recovered (Flink's ``handleGlobalFailure``,
        e.g. checkpoint failures beyond the tolerable number): every task restarts, whatever the
        failover strategy, if the restart strategy allows; else the job fails."""
        if self.eg.status == JobStatus.RUNNING:
            pending = {v for r in self.restarts for v in r.vertices}
            fresh = [
                v for v in self.eg.all_vertices() if v not in pending and v.current.state != ExecutionState.CREATED
            ]
            if fresh:
                self._restart_or_fail(fresh, failure, now)
            elif self.restarts:  # every task is restarting already: this failure joins that restart
                self.restarts[-1].failure.concurrent.append(failure)
        return self._flush(now)

    def take_actions(self, now: float) -> list[Action]:
        """Actions produced by ``cancel`` (which returns a bool)."""
        return self._flush(now)

    # ------------------------------------------------------------------ scheduling
    def _schedule(self, batches: list[Batch], now: float) -> None:
        for batch in batches:
            vertices = [v for v in batch if v.current.state == ExecutionState.CREATED]
            if not vertices:
                continue
            for v in vertices:
                v.current.transition(ExecutionState.SCHEDULED)
            for g in {id(self.group_of(v)): self.group_of(v) for v in vertices}.values():
                preferred = next((s.allocation_id for s in map(ExecutionVertex.last_slot, g.vertices) if s), None)
                self.pool.request(g.key, preferred, now, self.profile_of(g))
            self._batches.append(vertices)

    def _deploy_ready(self, now: float) -> None:
        waiting: list[Batch] = []
        for batch in self._batches:
            live = [v for v in batch if v.current.state == ExecutionState.SCHEDULED]
            if not live:
                continue
            for v in live:
                key = self.group_of(v).key
                if self.pool.slot_for(key) is None and key not in self.pool.pending:
                    self.pool.request(key, None, now, self.profile_of(self.group_of(v)))  # its slot was lost
            slots = [self.pool.slot_for(self.group_of(v).key) for v in live]
            if any(s is None for s in slots):
                waiting.append(live)
                continue
            for v, slot in zip(live, slots):
                v.current.slot = slot
                v.current.transition(ExecutionState.DEPLOYING)
            self._out.extend(DeployTask(v.current) for v in live)
        self._batches = waiting

    def _finished(self, ev: ExecutionVertex, now: float) -> None:
        # blocking inputs whose consumers have all finished are released (Flink's region release)
        for p in self.eg.consumed_partitions(ev):
            if (
                p.blocking
                and p.partition_id not in self._unavailable
                and all(c.current.state == ExecutionState.FINISHED for c in self.eg.consumers_of(p))
            ):
                self._release_partition(p)
        self._group_maybe_done(ev, now)
        self._decide_parallelisms(ev)
        self._schedule(self.scheduling.on_finished(ev), now)

    def _decide_parallelisms(self, ev: ExecutionVertex) -> None:
        """AdaptiveBatch: consumers of ``ev`` awaiting a parallelism get one once all their
        producers finished, from the bytes those wrote; the topology is then rebuilt."""
        if self.adaptive_batch is None:
            return
        jg = self.eg.job_graph
        decided = False
        for edge in [e for e in jg.edges if e.source in ev.produced]:
            consumer = self.eg.vertex(edge.target)
            if not consumer.awaiting_parallelism:
                continue
            inputs = jg.inputs_of(consumer.id)
            producers = [self.eg.vertex(jg.dataset(e.source).producer) for e in inputs]
            if not all(v.current.state == ExecutionState.FINISHED for p in producers for v in p.task_vertices):
                continue
            sizes = {"broadcast": 0, "other": 0}
            for e, p in zip(inputs, producers):
                written = sum(self._produced_bytes.get(v.current.attempt_id, 0) for v in p.task_vertices)
                sizes["broadcast" if e.partitioning == "broadcast" else "other"] += written
            parallelism = decide_parallelism(
                sizes["other"], sizes["broadcast"], self.adaptive_batch, consumer.adaptive_upper_bound or 1
            )
            self.eg.set_parallelism(consumer.id, parallelism)
            self.parallelism_decisions[consumer.id] = (
                consumer.job_vertex.parallelism,
                sizes["other"] + sizes["broadcast"],
            )
            decided = True
        if decided:
            self._rebuild_topology()

    def _rebuild_topology(self) -> None:
        """Regions, shared slots and failover follow the ExecutionGraph after a vertex got its
        parallelism (keys of existing shared slots do not change)."""
        self.topology = RegionTopology(self.eg)
        self.groups = compute_slot_sharing(self.eg, per_region=self.lazy)
        self._group_of = {id(v): g for g in self.groups for v in g.vertices}
        self.scheduling = (
            PipelinedRegionSchedulingStrategy(self.topology, self.is_available)
            if self.lazy
            else EagerSchedulingStrategy(self.eg)
        )
        self.failover = create_failover_strategy(
            self._failover_strategy_name, self.eg, self.topology, self.is_available
        )

    def _group_maybe_done(self, ev: ExecutionVertex, now: float) -> None:
        """Gives the group's slot back to the pool once none of its tasks needs it."""
        g = self.group_of(ev)
        if any(v.current.state in _BUSY for v in g.vertices):
            return
        if self.pool.slot_for(g.key) is not None:
            self.pool.release(g.key, now)
        else:
            self.pool.cancel_request(g.key)

    def _results_needed(self, ev: ExecutionVertex) -> bool:
        """Some consumer of ev's blocking results has not finished (it will read them)."""
        return any(
            p.blocking and any(c.current.state != ExecutionState.FINISHED for c in self.eg.consumers_of(p))
            for p in ev.produced.values()
        )

    def _release_partition(self, p: IntermediateResultPartition) -> None:
        slot = p.producer.current.slot
        self._unavailable.add(p.partition_id)
        if slot is not None and slot.resource_id not in self._lost_task_managers:
            self._release.setdefault(slot.rpc_address, []).append(p.partition_id)

    # ------------------------------------------------------------------ failures
    def _lost_partition(self, failure: Failure) -> IntermediateResultPartition | None:
        """The upstream partition a consumer could not read, if that is its current producer's
        (then the producer's region restarts and its TaskExecutor is probed)."""
        if not failure.partition_id:
            return None
        found = self.eg.find_partition(failure.partition_id)
        if found is None:
            return None
        partition, attempt = found
        if attempt is not partition.producer.current:
            return None  # an old attempt's result: the consumer just reads the new one
        self._unavailable.add(failure.partition_id)
        slot = attempt.slot
        if (
            slot is not None
            and slot.resource_id not in self._lost_task_managers
            and slot.resource_id not in self._checks
        ):
            self._checks[slot.resource_id] = slot.rpc_address
            self._out.append(CheckTaskManager(slot.resource_id, slot.rpc_address))
        return partition

    def _pending_restart_of(self, ev: ExecutionVertex) -> PendingRestart | None:
        return next((r for r in self.restarts if ev in r.vertices), None)

    def _note_concurrent(self, ev: ExecutionVertex, failure: Failure) -> None:
        restart = self._pending_restart_of(ev)
        if restart is not None and failure is not restart.failure:
            restart.failure.concurrent.append(failure)
        elif self.eg.failures and failure is not self.eg.failures[-1]:
            self.eg.failures[-1].concurrent.append(failure)

    def _handle_failure(
        self,
        failed: list[tuple[ExecutionVertex, Failure]],
        primary: Failure,
        now: float,
        lost: IntermediateResultPartition | None = None,
        merge: bool = False,
    ) -> None:
        """``merge``: the failure is the cause found for the latest pending restart (a probe's
        answer): tasks it adds join that restart instead of counting as a new failure."""
        for ev, f in failed:
            e = ev.current
            if not e.state.terminal:
                e.state = ExecutionState.FAILED
                e.timestamps[ExecutionState.FAILED.value] = f.timestamp_ms
                e.failure = f
        if self.eg.status != JobStatus.RUNNING:
            return
        to_restart: set[ExecutionVertex] = set()
        for ev, _ in failed:
            to_restart |= self.failover.tasks_to_restart(ev, lost if ev is failed[0][0] else None)
        pending = {v for r in self.restarts for v in r.vertices}
        fresh = [
            v
            for v in self.eg.all_vertices()
            if v in to_restart and v not in pending and v.current.state != ExecutionState.CREATED
        ]
        if not fresh:
            self._note_concurrent(failed[0][0], primary)
            for ev, _ in failed:
                self._group_maybe_done(ev, now)
            return
        if merge and self.restarts:
            restart = self.restarts[-1]
            restart.failure.concurrent.append(primary)
            restart.failure.restarted_tasks.extend(v.task_name_with_subtask for v in fresh)
            restart.vertices.extend(fresh)
            self._stop_for_restart(fresh, now)
            return
        self._restart_or_fail(fresh, primary, now)

    def _restart_or_fail(self, fresh: list[ExecutionVertex], primary: Failure, now: float) -> None:
        """The restart strategy decides: ``fresh`` restart after its backoff, or the job fails."""
        new_attempt = self.restart_strategy.notify_failure(now)
        if not self.restart_strategy.can_restart():
            primary.message = (
                f"{primary.message} (recovery is suppressed by {self.restart_strategy})"
                if not isinstance(self.restart_strategy, NoRestartBackoffTimeStrategy)
                else primary.message
            )
            self._fail_job(primary, now)
            return
        if new_attempt:
            self.eg.num_restarts += 1
        primary.restarted_tasks = [v.task_name_with_subtask for v in fresh]
        self.eg.failures.append(primary)
        self.restarts.append(PendingRestart(fresh, now + self.restart_strategy.backoff_time(now), primary))
        self._stop_for_restart(fresh, now)

    def _stop_for_restart(self, vertices: list[ExecutionVertex], now: float) -> None:
        """Cancel what runs of ``vertices`` (about to restart); let go of their old results."""
        for v in vertices:
            e = v.current
            if e.state in _DEPLOYED:
                e.transition(ExecutionState.CANCELING)
                self._out.append(CancelTask(e))
            elif e.state == ExecutionState.SCHEDULED:
                e.transition(ExecutionState.CANCELED)
            elif e.state == ExecutionState.FINISHED:
                for p in v.produced.values():  # its results are about to be recomputed
                    if p.partition_id not in self._unavailable:
                        self._release_partition(p)
        for v in vertices:
            self._group_maybe_done(v, now)

    def _perform_due_restarts(self, now: float) -> None:
        if self.eg.status != JobStatus.RUNNING or self._checks:
            return  # a TaskExecutor probe is open: its answer may take slots away
        due = [r for r in self.restarts if r.due <= now and all(v.current.state.terminal for v in r.vertices)]
        for r in due:
            self.restarts.remove(r)
            for v in r.vertices:
                v.new_attempt()
            self._schedule(self.scheduling.restart(r.vertices), now)

    def _fail_job(self, failure: Failure, now: float) -> None:
        if self.eg.status.globally_terminal or self.eg.status in (JobStatus.FAILING, JobStatus.CANCELLING):
            return
        self.eg.failures.append(failure)
        self.eg.transition_to(JobStatus.FAILING)
        self._cancel_everything(now)

    def _cancel_everything(self, now: float) -> None:
        self.restarts.clear()
        self._batches.clear()
        self._cancel_executions()
        for g in self.groups:
            self._group_maybe_done(g.vertices[0], now)

    def _cancel_executions(self) -> None:
        """Cancel every deployed execution; those not deployed yet are CANCELED at once."""
        for ev in self.eg.all_vertices():
            e = ev.current
            if e.state in _DEPLOYED:
                e.transition(ExecutionState.CANCELING)
                self._out.append(CancelTask(e))
            elif e.state in (ExecutionState.CREATED, ExecutionState.SCHEDULED):
                e.transition(ExecutionState.CANCELED)

    # ------------------------------------------------------------------ the end of every event
    def _flush(self, now: float) -> list[Action]:
        self._perform_due_restarts(now)
        self._deploy_ready(now)
        self._check_job_end()
        if not self.eg.status.globally_terminal and self.pool.required != self._declared:
            self._declared = self.pool.required
            self._out.append(DeclareResources(self._declared))
        for address, ids in self._release.items():
            self._out.append(ReleasePartitions(address, tuple(ids)))
        self._release.clear()
        out, self._out = self._out, []
        return out

    def _check_job_end(self) -> None:
        status = self.eg.status
        if status.globally_terminal:
            return
        executions = list(self.eg.executions())
        if status == JobStatus.RUNNING and all(e.state == ExecutionState.FINISHED for e in executions):
            self._terminate(JobStatus.FINISHED)
        elif status == JobStatus.FAILING and all(e.state.terminal for e in executions):
            self._terminate(JobStatus.FAILED)
        elif status == JobStatus.CANCELLING and all(e.state.terminal for e in executions):
            self._terminate(JobStatus.CANCELED)

    def _terminate(self, status: JobStatus) -> None:
        self.eg.transition_to(status)
        self.restarts.clear()
        self._release.clear()
        addresses: dict[str, None] = {}
        for ev in self.eg.all_vertices():
            for e in (*ev.prior, ev.current):
                if e.slot is not None and e.slot.resource_id not in self._lost_task_managers:
                    addresses[e.slot.rpc_address] = None
        self._out.extend(ReleasePartitions(a) for a in addresses)
        self._out.extend(FreeSlot(s, f"job {status.value}") for s in self.pool.release_all())
        self._out.append(JobTerminated(status))
