import pytest

from yarnflink.executiongraph.executiongraph import ExecutionGraph, ExecutionState, LogicalSlot
from yarnflink.jobgraph.jobgraph import JobGraph, JobGraphError
from yarnflink.jobmaster.deployment import build_tdd
from yarnflink.scheduler.slotsharing import compute_slot_sharing

from .graphs import job_graph, vid


def test_expansion_by_parallelism_and_partitions() -> None:
    eg = ExecutionGraph(job_graph([("src", 2, "default"), ("agg", 3, "default")], [("src", "agg", "hash")]))
    assert [len(v.task_vertices) for v in eg.job_vertices] == [2, 3]
    src = eg.vertex(vid("src")).task_vertices[1]
    (partition,) = src.produced.values()
    assert partition.partition_id.startswith(f"{0:032x}-1-")
    assert eg.vertex(vid("agg")).task_vertices[2].task_name_with_subtask == "agg (3/3)"


def test_execution_transitions_reject_late_or_backward_states() -> None:
    eg = ExecutionGraph(job_graph([("a", 1, "default")], []))
    (e,) = eg.executions()
    assert e.transition(ExecutionState.SCHEDULED) and e.transition(ExecutionState.DEPLOYING)
    assert e.transition(ExecutionState.RUNNING)
    assert e.transition(ExecutionState.CANCELING) and e.transition(ExecutionState.CANCELED)
    assert not e.transition(ExecutionState.RUNNING)  # a late RUNNING after CANCELED is ignored
    assert e.state == ExecutionState.CANCELED
    assert eg.job_vertices[0].aggregate_state() == ExecutionState.CANCELED


def test_slot_sharing_needs_max_parallelism_per_group_and_never_pairs_a_vertex_with_itself() -> None:
    eg = ExecutionGraph(
        job_graph(
            [("a", 2, "default"), ("b", 3, "default"), ("c", 2, "iso")],
            [("a", "b", "rebalance"), ("b", "c", "rebalance")],
        )
    )
    shared = compute_slot_sharing(eg)
    assert len(shared) == 3 + 2
    for s in shared:
        names = [ev.job_vertex.job_vertex.name for ev in s.vertices]
        assert len(names) == len(set(names))
        assert len({ev.job_vertex.job_vertex.slot_sharing_group for ev in s.vertices}) == 1
    covered = sorted((ev.job_vertex.job_vertex.name, ev.subtask_index) for s in shared for ev in s.vertices)
    assert covered == [("a", 0), ("a", 1), ("b", 0), ("b", 1), ("b", 2), ("c", 0), ("c", 1)]


def _assign_slots(eg: ExecutionGraph) -> None:
    for n, shared in enumerate(compute_slot_sharing(eg)):
        for ev in shared.vertices:
            ev.current.slot = LogicalSlot(f"alloc{n}", f"te{n}", f"te{n}:1", f"te{n}:2", 0)


def test_deployment_descriptor_wires_all_to_all_and_pointwise_channels() -> None:
    eg = ExecutionGraph(
        job_graph(
            [("src", 2, "default"), ("map", 2, "default"), ("agg", 3, "default")],
            [("src", "map", "forward"), ("map", "agg", "hash")],
        )
    )
    _assign_slots(eg)
    m1 = eg.vertex(vid("map")).task_vertices[1]
    tdd = build_tdd(eg, m1)
    (gate,) = tdd.input_gates
    assert gate.partitioning == "forward"
    assert [(c.subpartition, c.producer_data_address) for c in gate.channels] == [(0, "te1:2")]
    (out,) = tdd.produced_partitions
    assert out.num_subpartitions == 3 and out.partitioning == "hash" and out.key_selector == b"ks"
    agg2 = build_tdd(eg, eg.vertex(vid("agg")).task_vertices[2])
    assert [c.subpartition for c in agg2.input_gates[0].channels] == [2, 2]
    assert {c.partition_id for c in agg2.input_gates[0].channels} == {
        ev.produced[gate_id].partition_id for ev in eg.vertex(vid("map")).task_vertices for gate_id in ev.produced
    }


def test_job_graph_json_round_trip_and_validation() -> None:
    jg = job_graph([("src", 2, "default"), ("agg", 2, "default")], [("src", "agg", "hash")])
    again = JobGraph.from_json(jg.to_json())
    assert again == jg
    bad = jg.to_json()
    bad["vertices"][1]["parallelism"] = 0
    with pytest.raises(JobGraphError, match=r"vertices\[1\]\.parallelism must be an integer >= 1"):
        JobGraph.from_json(bad)
    bad = jg.to_json()
    bad["edges"][0]["partitioning"] = "teleport"
    with pytest.raises(JobGraphError, match="partitioning must be one of"):
        JobGraph.from_json(bad)
    bad = jg.to_json()
    bad["edges"][0]["target"] = bad["vertices"][0]["id"]
    with pytest.raises(JobGraphError, match="against topological order"):
        JobGraph.from_json(bad)
    with pytest.raises(JobGraphError, match="must be a JSON object"):
        JobGraph.from_json([1, 2])
    bad = jg.to_json()
    bad["vertices"][0]["operators"][0]["spec"] = "%%%"
    with pytest.raises(JobGraphError, match="not valid base64"):
        JobGraph.from_json(bad)
    bad = jg.to_json()
    bad["edges"][0]["partitioning"] = "forward"
    bad["vertices"][1]["parallelism"] = 1
    with pytest.raises(JobGraphError, match="forward partitioning needs equal parallelism"):
        JobGraph.from_json(bad)
