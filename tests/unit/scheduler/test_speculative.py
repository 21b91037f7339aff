"""Speculative execution as pure logic: slow-task detection, a speculative attempt on another
TaskExecutor, the first attempt to finish wins, the other is cancelled. No servers."""

from __future__ import annotations

from yarnflink.executiongraph.executiongraph import ExecutionGraph, ExecutionState
from yarnflink.scheduler.scheduler import CancelTask, DeployTask, ReleasePartitions
from yarnflink.scheduler.speculative import (
    SpeculativeOptions,
    SpeculativeScheduler,
    eligible_vertices,
    slow_subtasks,
)

from .helpers import Driver, ev, fail, graph, vid

OPTS = SpeculativeOptions(
    max_concurrent_executions=2,
    check_interval_s=0.5,
    baseline_ratio=0.5,
    baseline_multiplier=1.5,
    baseline_lower_bound_s=1.0,
)


def job() -> ExecutionGraph:
    return ExecutionGraph(
        graph(
            [("src", 2), ("map", 2), ("sink", 1)],
            [("src", "map", "rebalance", "B"), ("map", "sink", "rebalance", "B")],
            mode="BATCH",
        )
    )


def started() -> tuple[SpeculativeScheduler, Driver]:
    s = SpeculativeScheduler(job(), speculative=OPTS)
    d = Driver(s, task_managers=2, slots_each=2)
    d.start()
    for i in range(2):
        d.finish(ev(s.eg, "src", i))
    d.run_all()  # the map subtasks run
    d.take()
    return s, d


def deploys(d: Driver) -> list:  # type: ignore[type-arg]
    return [a.execution for a in d.take() if isinstance(a, DeployTask)]


def test_only_vertices_with_blocking_inputs_and_outputs_are_eligible() -> None:
    assert eligible_vertices(job()) == {vid("src"), vid("map")}  # the sink writes files by subtask
    pipelined = ExecutionGraph(graph([("a", 1), ("b", 1)], [("a", "b", "rebalance", "P")], mode="BATCH"))
    assert eligible_vertices(pipelined) == set()


def test_a_subtask_is_slow_once_enough_peers_finished_and_it_ran_past_the_baseline() -> None:
    s, d = started()
    mapv = s.eg.vertex(vid("map"))
    m0, m1 = mapv.task_vertices
    begin = {m0.current.attempt_id: 0.0, m1.current.attempt_id: 0.0}
    assert slow_subtasks(mapv, begin, {}, 100.0, OPTS) == []  # no peer finished: no baseline
    m1.current.state = ExecutionState.FINISHED
    end = {m1.current.attempt_id: 2.0}  # median 2 s * 1.5 = 3 s
    assert slow_subtasks(mapv, begin, end, 2.9, OPTS) == []
    assert slow_subtasks(mapv, begin, end, 3.1, OPTS) == [m0]
    # short peers: the lower bound is the baseline
    assert slow_subtasks(mapv, begin, {m1.current.attempt_id: 0.1}, 0.9, OPTS) == []
    assert slow_subtasks(mapv, begin, {m1.current.attempt_id: 0.1}, 1.1, OPTS) == [m0]


def test_the_speculative_attempt_runs_elsewhere_wins_and_the_slow_one_is_cancelled() -> None:
    s, d = started()
    m0, m1 = s.eg.vertex(vid("map")).task_vertices
    slow = m0.current
    d.advance(0.5)
    d.finish(m1)
    d.advance(2.0)  # m0 has run 2.5 s > max(1 s, 1.5 x m1's ~0.5 s)
    spec = [e for e in deploys(d) if e.vertex is m0]
    assert len(spec) == 1 and spec[0] is not slow and spec[0].attempt_number == 1
    assert spec[0].slot.resource_id != slow.slot.resource_id  # the slow TaskExecutor is blocked
    assert s.speculations == [("map (1/2)", slow.slot.resource_id)]
    d.run(s.task_state_changed(spec[0].attempt_id, ExecutionState.RUNNING, None, d.now))
    d.run(s.task_state_changed(spec[0].attempt_id, ExecutionState.FINISHED, None, d.now))
    d.offer()
    # the winner is the subtask's attempt now; the slow one is cancelled
    assert m0.current is spec[0] and m0.concurrent == [slow]
    assert [a.execution for a in d.actions if isinstance(a, CancelTask)] == [slow]
    assert slow.state == ExecutionState.CANCELING
    # the consumer was deployed and reads the winner's partition
    sink = ev(s.eg, "sink", 0)
    assert sink.current.state == ExecutionState.DEPLOYING
    assert m0.produced[next(iter(m0.produced))].partition_id.endswith(spec[0].attempt_id)
    d.finish(sink)
    assert s.eg.status.value == "RUNNING"  # the job waits for the loser to end
    d.run(s.task_state_changed(slow.attempt_id, ExecutionState.CANCELED, None, d.now))
    assert slow.state == ExecutionState.CANCELED and s.eg.status.value == "FINISHED"


def test_when_the_original_finishes_first_the_speculative_attempt_is_cancelled() -> None:
    s, d = started()
    m0, m1 = s.eg.vertex(vid("map")).task_vertices
    original = m0.current
    d.finish(m1)
    d.advance(3.0)
    spec = [e for e in deploys(d) if e.vertex is m0][0]
    d.run(s.task_state_changed(spec.attempt_id, ExecutionState.RUNNING, None, d.now))
    d.finish(m0)
    assert m0.current is original and spec.state == ExecutionState.CANCELING
    assert any(isinstance(a, CancelTask) and a.execution is spec for a in d.take())
    # its late FINISHED (the cancel came too late) does not win; its partitions are released
    d.run(s.task_state_changed(spec.attempt_id, ExecutionState.FINISHED, None, d.now))
    assert m0.current is original and spec.state.terminal
    released = [p for a in d.take() if isinstance(a, ReleasePartitions) for p in a.partition_ids]
    assert any(p.endswith(spec.attempt_id) for p in released)


def test_a_failed_speculative_attempt_is_dropped_without_failover() -> None:
    s, d = started()
    m0, m1 = s.eg.vertex(vid("map")).task_vertices
    d.finish(m1)
    d.advance(3.0)
    spec = [e for e in deploys(d) if e.vertex is m0][0]
    d.run(s.task_state_changed(spec.attempt_id, ExecutionState.FAILED, fail(m0), d.now))
    assert spec.state == ExecutionState.FAILED and not m0.speculative and s.eg.num_restarts == 0
    assert m0.current.state == ExecutionState.RUNNING and not s.eg.failures
    d.finish(m0)
    d.finish(ev(s.eg, "sink", 0))
    assert s.eg.status.value == "FINISHED"


def test_speculative_slots_are_declared_and_the_slot_pool_keeps_them_away_from_the_slow_executor() -> None:
    s, d = started()
    m0, m1 = s.eg.vertex(vid("map")).task_vertices
    d.finish(m1)
    required = s.pool.required
    d.advance(3.0)
    spec = m0.current.vertex.speculative or [e for e in deploys(d) if e.vertex is m0]
    assert spec and s.pool.required >= required
    assert all(r.group_name == "default" for r in s.extra_slot_requests.values())
