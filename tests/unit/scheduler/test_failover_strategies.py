"""Which ExecutionVertices a failure restarts (seed 000, figures 8-11), and pipelined regions."""

from __future__ import annotations

import pytest

from yarnflink.executiongraph.executiongraph import ExecutionGraph, ExecutionState, IntermediateResultPartition
from yarnflink.scheduler.failover import (
    RestartAllFailoverStrategy,
    RestartIndividualFailoverStrategy,
    RestartPipelinedRegionFailoverStrategy,
    check_failover_strategy,
)
from yarnflink.scheduler.regions import RegionTopology, logical_regions

from .helpers import ev, graph, names

FINISHED, RUNNING = ExecutionState.FINISHED, ExecutionState.RUNNING


def region_strategy(
    eg: ExecutionGraph, lost: tuple[IntermediateResultPartition, ...] = ()
) -> RestartPipelinedRegionFailoverStrategy:
    return RestartPipelinedRegionFailoverStrategy(
        RegionTopology(eg), lambda p: p.producer.current.state == FINISHED and p not in lost
    )


def set_states(eg: ExecutionGraph, **states: ExecutionState) -> None:
    """``A0=FINISHED`` sets subtask 0 of vertex A."""
    for key, state in states.items():
        ev(eg, key[:-1], int(key[-1])).current.state = state


def test_pipelined_exchanges_join_regions_and_blocking_ones_separate_them() -> None:
    forward = ExecutionGraph(graph([("A", 2), ("B", 2)], [("A", "B", "forward", "P")]))
    assert [names(r.vertices) for r in RegionTopology(forward).regions] == [
        ["A (1/2)", "B (1/2)"],
        ["A (2/2)", "B (2/2)"],
    ]
    hashed = ExecutionGraph(graph([("A", 2), ("B", 3)], [("A", "B", "hash", "P")]))
    assert len(RegionTopology(hashed).regions) == 1
    blocking = ExecutionGraph(
        graph([("A", 2), ("B", 2), ("C", 2)], [("A", "B", "hash", "B"), ("B", "C", "forward", "P")])
    )
    topo = RegionTopology(blocking)
    assert [names(r.vertices) for r in topo.regions] == [
        ["A (1/2)"],
        ["A (2/2)"],
        ["B (1/2)", "C (1/2)"],
        ["B (2/2)", "C (2/2)"],
    ]
    assert [len(r.consumed) for r in topo.regions] == [0, 0, 2, 2]
    assert logical_regions(blocking.job_graph) == {v.id: i for v, i in zip(blocking.job_graph.vertices, [0, 1, 1])}


def test_full_restarts_everything_and_individual_only_the_failed_task() -> None:
    eg = ExecutionGraph(graph([("A", 2), ("B", 2)], []))
    assert names(RestartAllFailoverStrategy(eg).tasks_to_restart(ev(eg, "A", 1))) == [
        "A (1/2)",
        "A (2/2)",
        "B (1/2)",
        "B (2/2)",
    ]
    assert names(RestartIndividualFailoverStrategy().tasks_to_restart(ev(eg, "A", 1))) == ["A (2/2)"]


def test_individual_is_rejected_for_jobs_whose_tasks_exchange_data() -> None:
    check_failover_strategy("individual", graph([("A", 2), ("B", 2)], []))
    with pytest.raises(ValueError, match="only possible when tasks exchange no data.*from A"):
        check_failover_strategy("individual", graph([("A", 2), ("B", 2)], [("A", "B", "forward", "P")]))
    with pytest.raises(ValueError, match="unknown jobmanager.execution.failover-strategy"):
        check_failover_strategy("some", graph([("A", 1)], []))


def test_streaming_task_error_restarts_its_connected_region_only() -> None:
    eg = ExecutionGraph(graph([("X1", 2), ("X2", 2), ("Y", 2)], [("X1", "X2", "rebalance", "P")]))
    set_states(eg, X10=RUNNING, X11=RUNNING, X20=RUNNING, X21=RUNNING, Y0=RUNNING, Y1=RUNNING)
    assert names(region_strategy(eg).tasks_to_restart(ev(eg, "X2", 0))) == [
        "X1 (1/2)",
        "X1 (2/2)",
        "X2 (1/2)",
        "X2 (2/2)",
    ]
    assert names(region_strategy(eg).tasks_to_restart(ev(eg, "Y", 1))) == ["Y (2/2)"]


def test_batch_task_error_downstream_of_a_blocking_exchange_restarts_only_its_region() -> None:
    eg = ExecutionGraph(graph([("A", 2), ("B", 2)], [("A", "B", "hash", "B")], mode="BATCH"))
    set_states(eg, A0=FINISHED, A1=FINISHED, B0=FINISHED, B1=RUNNING)
    assert names(region_strategy(eg).tasks_to_restart(ev(eg, "B", 1))) == ["B (2/2)"]


@pytest.mark.parametrize(
    "partitioning, expected",
    [
        ("hash", ["A (2/2)", "B (2/2)"]),  # deterministic: the finished B0 keeps its result
        ("broadcast", ["A (2/2)", "B (2/2)"]),
        ("rebalance", ["A (2/2)", "B (1/2)", "B (2/2)"]),  # every consumer region restarts
        ("shuffle", ["A (2/2)", "B (1/2)", "B (2/2)"]),
    ],
)
def test_lost_upstream_partition_restarts_the_producer_region(partitioning: str, expected: list[str]) -> None:
    eg = ExecutionGraph(graph([("A", 2), ("B", 2)], [("A", "B", partitioning, "B")], mode="BATCH"))
    set_states(eg, A0=FINISHED, A1=FINISHED, B0=FINISHED, B1=RUNNING)
    lost = next(iter(ev(eg, "A", 1).produced.values()))
    assert names(region_strategy(eg, (lost,)).tasks_to_restart(ev(eg, "B", 1), lost)) == expected


def test_regions_restarted_for_a_nondeterministic_input_restart_their_consumers_too() -> None:
    eg = ExecutionGraph(
        graph([("A", 2), ("B", 2), ("C", 2)], [("A", "B", "rebalance", "B"), ("B", "C", "hash", "B")], mode="BATCH")
    )
    set_states(eg, A0=FINISHED, A1=FINISHED, B0=FINISHED, B1=FINISHED, C0=FINISHED, C1=RUNNING)
    lost = next(iter(ev(eg, "A", 1).produced.values()))
    # C0 finished from B's old output, which changes with A1's new distribution
    assert names(region_strategy(eg, (lost,)).tasks_to_restart(ev(eg, "A", 1))) == [
        "A (2/2)",
        "B (1/2)",
        "B (2/2)",
        "C (1/2)",
        "C (2/2)",
    ]


def test_a_restarted_region_also_restarts_producers_of_results_no_longer_available() -> None:
    eg = ExecutionGraph(graph([("A", 2), ("B", 2)], [("A", "B", "hash", "B")], mode="BATCH"))
    set_states(eg, A0=FINISHED, A1=FINISHED, B0=FINISHED, B1=RUNNING)
    released = next(iter(ev(eg, "A", 0).produced.values()))
    assert names(region_strategy(eg, (released,)).tasks_to_restart(ev(eg, "B", 1))) == ["A (1/2)", "B (2/2)"]
