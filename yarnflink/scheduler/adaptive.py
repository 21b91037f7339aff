"""Adaptive scheduler for STREAMING jobs (Flink's AdaptiveScheduler,
``jobmanager.scheduler: Adaptive``), as a pure extension of the ``DefaultScheduler``.

The job declares the slots it would like (its vertices' configured parallelism per slot sharing
group) and runs with the slots it gets. Its states (Flink's names):

* WaitingForResources -- slots arrive. With all the slots it wants, the job starts at once; with
  at least one slot per slot sharing group it starts once the number of slots has not changed
  for ``jobmanager.adaptive-scheduler.resource-stabilization-timeout``; with fewer after
  ``jobmanager.adaptive-scheduler.resource-wait-timeout`` the job fails.
* Executing -- the ExecutionGraph runs at the parallelism the slots allow: a slot sharing group
  gets slots one at a time round-robin up to its highest configured parallelism, and each vertex
  runs at ``min(configured, slots of its group)``. When more slots arrive and stay for the
  stabilization timeout, the job rescales: every task is cancelled and the whole graph is
  recreated at the new parallelism.
* Restarting -- a failure (a lost TaskExecutor is one) restarts the whole job, as Flink's adaptive
  scheduler does, through the restart strategy; the restart re-decides the parallelism from the
  slots that are left (a lost TaskExecutor scales the job down) or waits for resources again.

With checkpointing, a rescale or restart restores the latest completed checkpoint at the new
parallelism (the JobMaster's ``CheckpointDriver.follow_rescale`` re-targets the checkpoint
coordinator at the rebuilt graph; sources keep parallelism-independent split state); without, it
starts from scratch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from yarnflink.common.config import ConfigOption
from yarnflink.executiongraph.executiongraph import ExecutionState, Failure, JobStatus, now_ms
from yarnflink.jobmaster.slotpool import SlotRequest
from yarnflink.scheduler.options import SchedulerOptions
from yarnflink.scheduler.scheduler import Action, DefaultScheduler

WAITING_FOR_RESOURCES = "WaitingForResources"
EXECUTING = "Executing"
RESTARTING = "Restarting"
_DEPLOYED = frozenset({ExecutionState.DEPLOYING, ExecutionState.INITIALIZING, ExecutionState.RUNNING})


@dataclass(frozen=True)
class AdaptiveOptions:
    #: negative: wait forever
    resource_wait_timeout_s: float = 300.0
    resource_stabilization_timeout_s: float = 10.0
    min_parallelism_increase: int = 1

    def __post_init__(self) -> None:
        if self.resource_stabilization_timeout_s < 0:
            raise ValueError("jobmanager.adaptive-scheduler.resource-stabilization-timeout must not be negative")
        if self.min_parallelism_increase < 1:
            raise ValueError("jobmanager.adaptive-scheduler.min-parallelism-increase must be at least 1")

    @staticmethod
    def from_configuration(config: Any) -> AdaptiveOptions:
        def seconds(option: ConfigOption) -> float:
            value = config.get(option)
            return value.total_seconds() if value is not None else 0.0

        return AdaptiveOptions(
            seconds(SchedulerOptions.RESOURCE_WAIT_TIMEOUT),
            seconds(SchedulerOptions.RESOURCE_STABILIZATION_TIMEOUT),
            int(config.get(SchedulerOptions.MIN_PARALLELISM_INCREASE)),
        )


def desired_slots(desired: dict[str, int], group_of: dict[str, str]) -> dict[str, int]:
    """Slots per slot sharing group for the configured parallelism: the group's highest."""
    out: dict[str, int] = {}
    for vertex_id, p in desired.items():
        out[group_of[vertex_id]] = max(out.get(group_of[vertex_id], 0), p)
    return out


def decide_parallelism(
    desired: dict[str, int], group_of: dict[str, str], slots: int, forward: tuple[tuple[str, str], ...] = ()
) -> dict[str, int] | None:
    """The parallelism of every vertex with ``slots`` slots, or None if fewer than one slot per
    slot sharing group. Slots go round-robin to the groups (in name order) up to what each wants;
    vertices joined by a ``forward`` edge keep equal parallelism (the lower one)."""
    wanted = desired_slots(desired, group_of)
    if slots < len(wanted):
        return None
    given = {g: 1 for g in wanted}
    left = slots - len(wanted)
    while left > 0:
        progressed = False
        for g in sorted(wanted):
            if left > 0 and given[g] < wanted[g]:
                given[g] += 1
                left -= 1
                progressed = True
        if not progressed:
            break
    out = {v: min(p, given[group_of[v]]) for v, p in desired.items()}
    changed = True
    while changed:
        changed = False
        for a, b in forward:
            if out[a] != out[b]:
                out[a] = out[b] = min(out[a], out[b])
                changed = True
    return out


class AdaptiveScheduler(DefaultScheduler):
    def __init__(self, eg: Any, *, adaptive: AdaptiveOptions | None = None, **kw: Any) -> None:
        kw["failover_strategy"] = "full"  # Flink's adaptive scheduler restarts the whole job
        kw["lazy"] = False
        super().__init__(eg, **kw)
        self.adaptive = adaptive or AdaptiveOptions()
        jg = eg.job_graph
        self.desired = {v.id: v.parallelism for v in jg.vertices}
        self._group_name = {v.id: v.slot_sharing_group for v in jg.vertices}
        self._forward = tuple(
            (jg.dataset(e.source).producer, e.target) for e in jg.edges if e.partitioning == "forward"
        )
        self.state = "Created"
        self._waiting_since = 0.0
        self._slots_seen = -1
        self._slots_changed_at = 0.0
        self._rescaling = False
        #: keys of slots wanted beyond the current shared slots (so the ResourceManager offers them)
        self.extra_slot_requests: dict[str, SlotRequest] = {}
        #: (time, parallelism of every vertex) each time the job (re)started executing
        self.rescales: list[tuple[float, dict[str, int]]] = []
        self.slot_request_timeout_s = math.inf  # waiting for slots is what this scheduler does

    # ------------------------------------------------------------------ queries
    @property
    def parallelism(self) -> dict[str, int]:
        return {ejv.id: ejv.job_vertex.parallelism for ejv in self.eg.job_vertices}

    def _decision(self) -> dict[str, int] | None:
        return decide_parallelism(self.desired, self._group_name, len(self.pool.slots), self._forward)

    def _worth_rescaling(self, decision: dict[str, int] | None) -> bool:
        """Scale up when some vertex gains at least min-parallelism-increase subtasks (Flink's
        EnforceMinimalIncreaseRescalingController); losses come through failures."""
        if decision is None:
            return False
        current = self.parallelism
        return any(p - current.get(v, p) >= self.adaptive.min_parallelism_increase for v, p in decision.items())

    def next_deadline(self) -> float | None:
        times = [t for t in (super().next_deadline(),) if t is not None and t != math.inf]
        if self.state == WAITING_FOR_RESOURCES:
            if self._decision() is not None:
                times.append(self._slots_changed_at + self.adaptive.resource_stabilization_timeout_s)
            elif self.adaptive.resource_wait_timeout_s >= 0:
                times.append(self._waiting_since + self.adaptive.resource_wait_timeout_s)
        elif self.state == EXECUTING and not self._rescaling and self._worth_rescaling(self._decision()):
            times.append(self._slots_changed_at + self.adaptive.resource_stabilization_timeout_s)
        return min(times, default=None)

    # ------------------------------------------------------------------ events
    def start(self, now: float) -> list[Action]:
        self.eg.transition_to(JobStatus.RUNNING)
        self._wait_for_resources(now)
        return self._flush(now)

    # ------------------------------------------------------------------ states
    def _wait_for_resources(self, now: float) -> None:
        self.state = WAITING_FOR_RESOURCES
        self._waiting_since = now
        self._slots_changed_at = now
        self._request_wanted_slots(now, self.groups_keys_for({}))

    def groups_keys_for(self, parallelism: dict[str, int]) -> set[str]:
        """Keys of the shared slots a graph at ``parallelism`` uses (group/region 0/index)."""
        used: dict[str, int] = {}
        for v, p in parallelism.items():
            used[self._group_name[v]] = max(used.get(self._group_name[v], 0), p)
        return {f"{g}/0/{i}" for g, n in used.items() for i in range(n)}

    def _request_wanted_slots(self, now: float, in_use: set[str]) -> None:
        """Asks for every slot the configured parallelism would use; those the running graph
        does not use are declared as extra requests."""
        self.extra_slot_requests = {}
        for group, n in sorted(desired_slots(self.desired, self._group_name).items()):
            for i in range(n):
                key = f"{group}/0/{i}"
                if key not in in_use:
                    self.extra_slot_requests[key] = SlotRequest(group, key)
                    self.pool.request(key, None, now)

    def _execute(self, now: float) -> None:
        """Executing: the whole graph anew at the parallelism the slots allow."""
        decision = self._decision()
        if decision is None:
            self._wait_for_resources(now)
            return
        self.state = EXECUTING
        self._batches.clear()
        self.eg.rescale(decision)
        self._rebuild_topology()
        self.pool.unassign_all(now)  # shared slots are re-planned for the new graph
        self._schedule(self.scheduling.start(), now)
        self._request_wanted_slots(now, {g.key for g in self.groups})
        self.rescales.append((now, dict(self.parallelism)))

    def _rescale(self, now: float) -> None:
        """More slots stayed: cancel everything; once all is terminal, execute anew."""
        self._rescaling = True
        self._batches.clear()
        self._cancel_executions()

    # ------------------------------------------------------------------ hooks into DefaultScheduler
    def _perform_due_restarts(self, now: float) -> None:
        if self.eg.status != JobStatus.RUNNING or self._checks:
            return
        due = [r for r in self.restarts if r.due <= now and all(v.current.state.terminal for v in r.vertices)]
        if due:  # a failure: the whole job restarts at the parallelism the slots left allow
            for r in due:
                self.restarts.remove(r)
            self.state = RESTARTING
            self._execute(now)

    def _group_maybe_done(self, ev: Any, now: float) -> None:
        if self._rescaling or self.state != EXECUTING:
            return  # the slots stay with the job for the next graph
        super()._group_maybe_done(ev, now)

    def _check_job_end(self) -> None:
        if self._rescaling and self.eg.status == JobStatus.RUNNING:
            return
        super()._check_job_end()

    def _flush(self, now: float) -> list[Action]:
        slots = len(self.pool.slots)
        if slots != self._slots_seen:
            self._slots_seen = slots
            self._slots_changed_at = now
        if self.eg.status == JobStatus.RUNNING:
            stable = now >= self._slots_changed_at + self.adaptive.resource_stabilization_timeout_s
            decision = self._decision()
            if self.state == WAITING_FOR_RESOURCES:
                full = decision is not None and decision == self.desired
                if decision is not None and (full or stable):
                    self._execute(now)
                elif (
                    decision is None
                    and self.adaptive.resource_wait_timeout_s >= 0
                    and now - self._waiting_since >= self.adaptive.resource_wait_timeout_s
                ):
                    self._fail_job(
                        Failure(
                            "NoResourceAvailableException",
                            f"Could not acquire the minimum required resources (one slot per slot sharing group) "
                            f"within jobmanager.adaptive-scheduler.resource-wait-timeout "
                            f"({self.adaptive.resource_wait_timeout_s:g} s); the job holds {slots} slot(s)",
                            "",
                            now_ms(),
                        ),
                        now,
                    )
            elif self.state == EXECUTING and not self.restarts:
                if self._rescaling:
                    if all(e.state.terminal for e in self.eg.executions()):
                        self._rescaling = False
                        self._execute(now)
                elif stable and self._worth_rescaling(decision):
                    self._rescale(now)
        return super()._flush(now)
