"""AdaptiveBatch scheduling as pure logic: which vertices get a parallelism at run time, the
decision from input bytes, the ExecutionGraph expanded when the producers finish, and the
subpartitions producers write and consumers read. No servers."""

from __future__ import annotations

import pytest

from yarnflink.executiongraph.executiongraph import ExecutionGraph, ExecutionState
from yarnflink.jobgraph.jobgraph import JobGraph, JobGraphError
from yarnflink.scheduler.adaptive_batch import (
    AdaptiveBatchOptions,
    adaptive_vertices,
    decide_parallelism,
    subpartition_range,
)
from yarnflink.scheduler.scheduler import DefaultScheduler, DeployTask

from .helpers import Driver, ev, graph, vid

OPTS = AdaptiveBatchOptions(min_parallelism=1, max_parallelism=4, avg_data_volume_per_task=1000)


def batch_job(partitioning: str = "hash", unset: tuple[str, ...] = ("agg",)) -> JobGraph:
    jg = graph(
        [("src", 2), ("agg", 1), ("sink", 1)],
        [("src", "agg", partitioning, "B"), ("agg", "sink", "rebalance", "B")],
        mode="BATCH",
    )
    for v in jg.vertices:
        v.parallelism_configured = v.name not in unset
    return jg


def test_the_decision_follows_input_bytes_within_the_bounds() -> None:
    assert decide_parallelism(0, 0, OPTS, 4) == 1
    assert decide_parallelism(999, 0, OPTS, 4) == 1
    assert decide_parallelism(1001, 0, OPTS, 4) == 2
    assert decide_parallelism(2500, 0, OPTS, 4) == 3
    assert decide_parallelism(10**9, 0, OPTS, 4) == 4  # the configured maximum
    assert decide_parallelism(10**9, 0, OPTS, 2) == 2  # the vertex's own bound
    assert decide_parallelism(0, 0, AdaptiveBatchOptions(3, 8, 1000), 8) == 3  # the minimum
    # broadcast input is read by every subtask: it shrinks what each can take (capped at half)
    assert decide_parallelism(1500, 400, OPTS, 4) == 3
    assert decide_parallelism(1500, 10**6, OPTS, 4) == 3


def test_options_are_validated() -> None:
    with pytest.raises(ValueError, match="max-parallelism"):
        AdaptiveBatchOptions(min_parallelism=5, max_parallelism=2)


def test_only_unset_vertices_reading_blocking_all_to_all_results_are_adaptive() -> None:
    assert adaptive_vertices(batch_job(), OPTS) == {vid("agg"): 4}
    # a source, or a vertex whose parallelism was set, keeps it
    assert adaptive_vertices(batch_job(unset=("src",)), OPTS) == {}
    assert adaptive_vertices(batch_job(unset=()), OPTS) == {}
    # a forward input needs equal parallelism; a pipelined input is not complete when it starts
    fwd = graph([("a", 1), ("b", 1)], [("a", "b", "forward", "B")], mode="BATCH")
    pipe = graph([("a", 1), ("b", 1)], [("a", "b", "rebalance", "P")], mode="BATCH")
    for jg in (fwd, pipe):
        jg.vertices[1].parallelism_configured = False
        assert adaptive_vertices(jg, OPTS) == {}


def test_subpartition_ranges_cover_every_subpartition_once() -> None:
    for n in (1, 4, 7, 128):
        for p in range(1, n + 1):
            got = [s for i in range(p) for s in subpartition_range(n, p, i)]
            assert got == list(range(n)), (n, p)


def test_parallelism_configured_round_trips_through_json_and_defaults_to_true() -> None:
    jg = batch_job()
    data = jg.to_json()
    assert [v.get("parallelismConfigured", True) for v in data["vertices"]] == [True, False, True]
    assert [v.parallelism_configured for v in JobGraph.from_json(data).vertices] == [True, False, True]
    data["vertices"][1]["parallelismConfigured"] = "no"
    with pytest.raises(JobGraphError, match=r"vertices\[1\].parallelismConfigured"):
        JobGraph.from_json(data)


def run(partitioning: str, produced: int) -> tuple[DefaultScheduler, Driver]:
    eg = ExecutionGraph(batch_job(partitioning))
    s = DefaultScheduler(eg, adaptive_batch=OPTS)
    d = Driver(s, task_managers=2, slots_each=2)
    d.start()
    for i in range(2):
        v = ev(eg, "src", i)
        d.report(v, ExecutionState.RUNNING)
        d.run(s.task_state_changed(v.current.attempt_id, ExecutionState.FINISHED, None, d.now, produced_bytes=produced))
        d.offer()
    return s, d


def test_a_consumer_gets_its_parallelism_when_its_producers_finish() -> None:
    s, d = run("hash", 1200)  # 2400 bytes / 1000 per task -> 3 subtasks
    eg = s.eg
    agg = eg.vertex(vid("agg"))
    assert agg.job_vertex.parallelism == 3 and len(agg.task_vertices) == 3
    assert s.parallelism_decisions == {vid("agg"): (3, 2400)}
    assert sorted(v.task_name_with_subtask for v in d.deployed if v.job_vertex is agg) == [
        "agg (1/3)",
        "agg (2/3)",
        "agg (3/3)",
    ]
    # producers wrote one subpartition per key group; subtask i reads its key-group range
    edge = eg.job_graph.inputs_of(vid("agg"))[0]
    assert eg.num_subpartitions(edge) == 128
    assert [eg.consumed_subpartitions(edge, v) for v in agg.task_vertices] == [
        range(0, 43),
        range(43, 86),
        range(86, 128),
    ]
    # the next vertex (fixed parallelism) reads the decided one's 3 subtasks; the job finishes
    for v in list(agg.task_vertices):
        d.finish(v)
    sink = ev(eg, "sink", 0)
    assert sink in d.deployed
    d.finish(sink)
    assert eg.status.value == "FINISHED"


def test_small_input_gives_one_subtask_and_rebalance_splits_the_upper_bound() -> None:
    s, _ = run("rebalance", 10)
    agg = s.eg.vertex(vid("agg"))
    assert agg.job_vertex.parallelism == 1
    edge = s.eg.job_graph.inputs_of(vid("agg"))[0]
    assert s.eg.num_subpartitions(edge) == 4
    assert s.eg.consumed_subpartitions(edge, agg.task_vertices[0]) == range(0, 4)


def test_nothing_is_decided_before_every_producer_finished() -> None:
    eg = ExecutionGraph(batch_job())
    s = DefaultScheduler(eg, adaptive_batch=OPTS)
    d = Driver(s)
    d.start()
    v = ev(eg, "src", 0)
    d.report(v, ExecutionState.RUNNING)
    d.run(s.task_state_changed(v.current.attempt_id, ExecutionState.FINISHED, None, d.now, produced_bytes=10**6))
    assert eg.vertex(vid("agg")).awaiting_parallelism and not s.parallelism_decisions
    assert not any(isinstance(a, DeployTask) and a.execution.vertex.job_vertex.id == vid("agg") for a in d.actions)


def test_without_the_adaptive_batch_scheduler_the_generated_parallelism_stays() -> None:
    eg = ExecutionGraph(batch_job())
    s = DefaultScheduler(eg)
    d = Driver(s)
    d.start()
    for i in range(2):
        d.finish(ev(eg, "src", i))
    assert eg.vertex(vid("agg")).job_vertex.parallelism == 1 and not s.parallelism_decisions
    assert eg.num_subpartitions(eg.job_graph.inputs_of(vid("agg"))[0]) == 1


def test_the_jobgraph_records_which_parallelisms_the_user_left_unset() -> None:
    from yarnflink import RuntimeExecutionMode, StreamExecutionEnvironment

    def job(**config: str) -> dict[str, bool]:
        env = StreamExecutionEnvironment.get_execution_environment(config)
        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
        (
            env.from_sequence(0, 9)
            .set_parallelism(2)
            .map(lambda x: (x, 1))
            .name("Pair")
            .key_by(lambda t: t[0])
            .sum(1)
            .name("Sum")
            .print()
        )
        return {v.name.split(" ->")[0]: v.parallelism_configured for v in env.get_job_graph().vertices}

    got = job()
    assert [configured for name, configured in got.items() if "Source" in name] == [True]
    assert [configured for name, configured in got.items() if "Source" not in name] == [False, False]
    assert all(job(**{"parallelism.default": "3"}).values())  # -p / parallelism.default set it


def test_auto_parallelism_can_be_switched_off() -> None:
    off = AdaptiveBatchOptions(1, 4, 1000, enabled=False)
    assert adaptive_vertices(batch_job(), off) == {}
