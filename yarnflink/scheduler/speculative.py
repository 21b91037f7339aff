"""Speculative execution for BATCH jobs (Flink's SpeculativeScheduler and
ExecutionTimeBasedSlowTaskDetector), as a pure extension of the ``DefaultScheduler``.

Slow tasks. Every ``slow-task-detector.check-interval`` the detector looks at each eligible
vertex: once ``baseline-ratio`` of its subtasks finished, the baseline is the median execution
time of those (deployment to FINISHED) times ``baseline-multiplier``, at least
``baseline-lower-bound``; a subtask running longer than the baseline is slow.

Speculative attempts. A slow subtask gets another attempt (up to
``execution.batch.speculative.max-concurrent-executions`` at once) in a slot of its own, never on
a TaskExecutor where the vertex was slow (the slow attempt's TaskExecutor is blocked for the
vertex). Every attempt writes partitions of its own. The first attempt to finish wins: it becomes
the subtask's current attempt, so consumers read its partitions; the others are cancelled (their
partitions released) and shown as ``other-concurrent-attempts``. A failed speculative attempt is
dropped; a failure of the current attempt cancels the speculative ones and goes through failover
as usual. The job ends once every losing attempt is terminal.

Eligible vertices: every input and output is a BLOCKING result and the vertex has outputs (a
sink writes files named by subtask, which two attempts must not share).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from yarnflink.executiongraph.executiongraph import (
    Execution,
    ExecutionJobVertex,
    ExecutionState,
    ExecutionVertex,
    Failure,
    JobStatus,
)
from yarnflink.jobmaster.slotpool import SlotRequest
from yarnflink.scheduler.options import BatchExecutionOptions, SlowTaskDetectorOptions
from yarnflink.scheduler.scheduler import (
    Action,
    CancelTask,
    DefaultScheduler,
    DeployTask,
    ReleasePartitions,
)

_RUNNING = frozenset({ExecutionState.DEPLOYING, ExecutionState.INITIALIZING, ExecutionState.RUNNING})


@dataclass(frozen=True)
class SpeculativeOptions:
    max_concurrent_executions: int = 2
    check_interval_s: float = 1.0
    baseline_ratio: float = 0.75
    baseline_multiplier: float = 1.5
    baseline_lower_bound_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_concurrent_executions < 2:
            raise ValueError("execution.batch.speculative.max-concurrent-executions must be at least 2")
        if self.check_interval_s <= 0:
            raise ValueError("slow-task-detector.check-interval must be positive")
        if not 0.0 <= self.baseline_ratio <= 1.0:
            raise ValueError("slow-task-detector.execution-time.baseline-ratio must be between 0 and 1")
        if self.baseline_multiplier < 1.0:
            raise ValueError("slow-task-detector.execution-time.baseline-multiplier must be at least 1")
        if self.baseline_lower_bound_s < 0:
            raise ValueError("slow-task-detector.execution-time.baseline-lower-bound must not be negative")

    @staticmethod
    def from_configuration(config: Any) -> SpeculativeOptions:
        return SpeculativeOptions(
            int(config.get(BatchExecutionOptions.SPECULATIVE_MAX_CONCURRENT_EXECUTIONS)),
            config.get_seconds(SlowTaskDetectorOptions.CHECK_INTERVAL) or 0.0,
            float(config.get(SlowTaskDetectorOptions.EXECUTION_TIME_BASELINE_RATIO)),
            float(config.get(SlowTaskDetectorOptions.EXECUTION_TIME_BASELINE_MULTIPLIER)),
            config.get_seconds(SlowTaskDetectorOptions.EXECUTION_TIME_BASELINE_LOWER_BOUND) or 0.0,
        )


def eligible_vertices(eg: Any) -> set[str]:
    """Vertices whose subtasks may be speculated: blocking inputs and outputs, at least one output."""
    jg = eg.job_graph
    out = set()
    for v in jg.vertices:
        outputs = [d for d in jg.datasets if d.producer == v.id]
        inputs = [jg.dataset(e.source) for e in jg.inputs_of(v.id)]
        if outputs and all(d.result_type == "BLOCKING" for d in (*outputs, *inputs)):
            out.add(v.id)
    return out


def slow_subtasks(
    ejv: ExecutionJobVertex,
    started: dict[str, float],
    finished: dict[str, float],
    now: float,
    options: SpeculativeOptions,
) -> list[ExecutionVertex]:
    """The subtasks of ``ejv`` whose current attempt has run longer than the baseline.
    ``started`` / ``finished``: attempt id -> when it was deployed / finished (monotonic s)."""
    vertices = ejv.task_vertices
    done = [v.current for v in vertices if v.current.state == ExecutionState.FINISHED]
    if not vertices or len(done) < math.ceil(options.baseline_ratio * len(vertices)):
        return []
    times = sorted(
        finished[e.attempt_id] - started[e.attempt_id]
        for e in done
        if e.attempt_id in started and e.attempt_id in finished
    )
    median = times[len(times) // 2] if times else 0.0
    baseline = max(options.baseline_lower_bound_s, median * options.baseline_multiplier)
    return [
        v
        for v in vertices
        if v.current.state in _RUNNING
        and v.current.attempt_id in started
        and now - started[v.current.attempt_id] > baseline
    ]


class SpeculativeScheduler(DefaultScheduler):
    def __init__(self, eg: Any, *, speculative: SpeculativeOptions | None = None, **kw: Any) -> None:
        super().__init__(eg, **kw)
        self.speculative = speculative or SpeculativeOptions()
        self.eligible = eligible_vertices(eg) if self.lazy else set()
        self._started: dict[str, float] = {}  # attempt id -> deployed at (monotonic)
        self._ended: dict[str, float] = {}  # attempt id -> finished at
        self._blocked: dict[str, set[str]] = {}  # vertex id -> TaskExecutors where it was slow
        self._spec_key: dict[str, str] = {}  # speculative attempt id -> its SlotPool key
        self._next_check: float | None = None
        #: (task name with subtask, resource id of the slow attempt) per speculative attempt started
        self.speculations: list[tuple[str, str]] = []
        #: SlotPool key -> the slot request of a speculative attempt (declared with its group's)
        self.extra_slot_requests: dict[str, SlotRequest] = {}

    # ------------------------------------------------------------------ queries
    def is_live(self, execution: Execution) -> bool:
        ev = execution.vertex
        return (
            execution is ev.current
            or execution in ev.speculative
            or (execution in ev.concurrent and not execution.state.terminal)
        )

    def next_deadline(self) -> float | None:
        base = super().next_deadline()
        if self._next_check is None or self.eg.status != JobStatus.RUNNING:
            return base
        return self._next_check if base is None else min(base, self._next_check)

    # ------------------------------------------------------------------ events
    def task_state_changed(
        self,
        attempt_id: str,
        state: ExecutionState,
        failure: Failure | None,
        now: float,
        produced_bytes: int | None = None,
    ) -> list[Action]:
        execution = self.eg.find_execution(attempt_id)
        if execution is None:
            return []
        ev = execution.vertex
        if execution in ev.speculative:
            self._speculative_state(execution, state, now, produced_bytes)
            return self._flush(now)
        if execution in ev.concurrent and execution is not ev.current:
            if not execution.state.terminal and state.terminal:  # a loser ended (cancelled or not)
                execution.state = state if state != ExecutionState.FAILED else ExecutionState.CANCELED
                if state == ExecutionState.FINISHED:  # the cancel came too late: nobody reads it
                    self._release_partitions_of(execution)
                self._release_attempt(execution, now)
                self._group_maybe_done(ev, now)
            elif not state.terminal:
                execution.transition(state)
            return self._flush(now)
        if execution is ev.current and state == ExecutionState.FINISHED:
            self._ended[attempt_id] = now
        if execution is ev.current and state in (ExecutionState.FAILED, ExecutionState.CANCELED):
            self._cancel_speculative(ev, now)
        return super().task_state_changed(attempt_id, state, failure, now, produced_bytes)

    def deploy_failed(self, execution: Execution, failure: Failure, now: float) -> list[Action]:
        if execution in execution.vertex.speculative:
            self._speculative_state(execution, ExecutionState.FAILED, now, None)
            return self._flush(now)
        return super().deploy_failed(execution, failure, now)

    def task_manager_lost(self, resource_id: str, failure: Failure, now: float) -> list[Action]:
        for ev in self.eg.all_vertices():
            for e in list(ev.speculative):
                if e.slot is not None and e.slot.resource_id == resource_id:
                    self._speculative_state(e, ExecutionState.FAILED, now, None)
            for e in ev.concurrent:
                if e.slot is not None and e.slot.resource_id == resource_id and not e.state.terminal:
                    e.state = ExecutionState.CANCELED
        return super().task_manager_lost(resource_id, failure, now)

    def on_timer(self, now: float) -> list[Action]:
        if self._next_check is not None and now >= self._next_check and self.eg.status == JobStatus.RUNNING:
            self._detect(now)
        return super().on_timer(now)

    # ------------------------------------------------------------------ detection
    def _detect(self, now: float) -> None:
        self._next_check = None
        for ejv in self.eg.job_vertices:
            if ejv.id not in self.eligible:
                continue
            for ev in slow_subtasks(ejv, self._started, self._ended, now, self.speculative):
                if self._pending_restart_of(ev) is None:
                    self._speculate(ev, now)

    def _speculate(self, ev: ExecutionVertex, now: float) -> None:
        if 1 + len(ev.speculative) >= self.speculative.max_concurrent_executions:
            return
        slow = ev.current
        blocked = self._blocked.setdefault(ev.job_vertex.id, set())
        if slow.slot is not None:
            blocked.add(slow.slot.resource_id)
        number = max(e.attempt_number for e in (ev.current, *ev.prior, *ev.speculative)) + 1
        attempt = Execution(ev, number)
        attempt.transition(ExecutionState.SCHEDULED)
        ev.speculative.append(attempt)
        group = self.group_of(ev)
        key = f"{group.key}#{number}"
        self._spec_key[attempt.attempt_id] = key
        self.extra_slot_requests[key] = SlotRequest(group.group_name, key)
        self.pool.request(key, None, now, self.profile_of(group), excluded=frozenset(blocked))
        self.speculations.append((ev.task_name_with_subtask, slow.slot.resource_id if slow.slot else ""))

    # ------------------------------------------------------------------ attempts
    def _speculative_state(self, e: Execution, state: ExecutionState, now: float, produced_bytes: int | None) -> None:
        ev = e.vertex
        if (
            state == ExecutionState.FINISHED
            and ev.current.state != ExecutionState.FINISHED
            and self.eg.status == JobStatus.RUNNING
            and self._pending_restart_of(ev) is None
        ):
            e.transition(ExecutionState.FINISHED)
            self._win(e, now, produced_bytes)
            return
        if state == ExecutionState.FAILED or state.terminal:
            e.state = (
                ExecutionState.FINISHED
                if state == ExecutionState.FINISHED
                else (ExecutionState.FAILED if state == ExecutionState.FAILED else ExecutionState.CANCELED)
            )
            ev.speculative.remove(e)
            ev.prior.append(e)
            if state == ExecutionState.FINISHED:  # finished after the winner: its output is not read
                self._release_partitions_of(e)
            self._release_attempt(e, now)
        else:
            e.transition(state)

    def _win(self, winner: Execution, now: float, produced_bytes: int | None) -> None:
        ev = winner.vertex
        loser = ev.current
        ev.speculative.remove(winner)
        ev.prior.append(loser)
        ev.current = winner
        ev.concurrent.append(loser)
        self._cancel_attempt(loser)
        self._cancel_speculative(ev, now)
        self._ended[winner.attempt_id] = now
        if produced_bytes is not None:
            self._produced_bytes[winner.attempt_id] = max(0, int(produced_bytes))
        # the winner's slot has done its work; the loser's (the group's) is released once it ended
        key = self._spec_key.pop(winner.attempt_id, None)
        if key is not None:
            self.extra_slot_requests.pop(key, None)
            self.pool.release(key, now)
        self._finished(ev, now)

    def _cancel_speculative(self, ev: ExecutionVertex, now: float) -> None:
        for e in list(ev.speculative):
            ev.speculative.remove(e)
            ev.prior.append(e)
            ev.concurrent.append(e)
            self._cancel_attempt(e)
            if e.state.terminal:
                self._release_attempt(e, now)

    def _cancel_attempt(self, e: Execution) -> None:
        if e.state in _RUNNING:
            e.transition(ExecutionState.CANCELING)
            self._out.append(CancelTask(e))
        elif e.state in (ExecutionState.CREATED, ExecutionState.SCHEDULED):
            e.transition(ExecutionState.CANCELED)

    def _release_attempt(self, e: Execution, now: float) -> None:
        """A speculative attempt ended: its slot goes back (or its request is withdrawn)."""
        key = self._spec_key.pop(e.attempt_id, None)
        if key is None:
            return
        self.extra_slot_requests.pop(key, None)
        if self.pool.slot_for(key) is not None:
            self.pool.release(key, now)
        else:
            self.pool.cancel_request(key)

    def _release_partitions_of(self, e: Execution) -> None:
        if e.slot is not None and e.slot.resource_id not in self._lost_task_managers:
            ids = [p.partition_id_of(e) for p in e.vertex.produced.values()]
            self._release.setdefault(e.slot.rpc_address, []).extend(ids)

    # ------------------------------------------------------------------ hooks into DefaultScheduler
    def _finished(self, ev: ExecutionVertex, now: float) -> None:
        self._cancel_speculative(ev, now)  # the current attempt won
        super()._finished(ev, now)

    def _group_maybe_done(self, ev: ExecutionVertex, now: float) -> None:
        g = self.group_of(ev)
        if any(not e.state.terminal and e is not v.current for v in g.vertices for e in v.concurrent):
            return  # a losing attempt still runs in the group's slot
        super()._group_maybe_done(ev, now)

    def _cancel_everything(self, now: float) -> None:
        for ev in self.eg.all_vertices():
            self._cancel_speculative(ev, now)
        super()._cancel_everything(now)

    def _check_job_end(self) -> None:
        if any(not e.state.terminal for ev in self.eg.all_vertices() for e in (*ev.speculative, *ev.concurrent)):
            return  # losing attempts are still being cancelled
        super()._check_job_end()

    def _flush(self, now: float) -> list[Action]:
        self._deploy_speculative(now)
        out = super()._flush(now)
        for a in out:
            if isinstance(a, DeployTask):
                self._started.setdefault(a.execution.attempt_id, now)
        if (
            self._next_check is None
            and self.eg.status == JobStatus.RUNNING
            and any(
                ev.current.state in _RUNNING
                for ejv in self.eg.job_vertices
                if ejv.id in self.eligible
                for ev in ejv.task_vertices
            )
        ):
            self._next_check = now + self.speculative.check_interval_s
        return out

    def _deploy_speculative(self, now: float) -> None:
        for ev in self.eg.all_vertices():
            for e in ev.speculative:
                if e.state != ExecutionState.SCHEDULED:
                    continue
                slot = self.pool.slot_for(self._spec_key[e.attempt_id])
                if slot is None:
                    continue
                e.slot = slot
                e.transition(ExecutionState.DEPLOYING)
                self._started[e.attempt_id] = now
                self._out.append(DeployTask(e))


__all__ = ["ReleasePartitions", "SpeculativeOptions", "SpeculativeScheduler", "eligible_vertices", "slow_subtasks"]
