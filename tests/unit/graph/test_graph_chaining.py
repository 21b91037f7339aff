"""StreamGraph -> JobGraph chaining rules, each in isolation, plus naming and wiring."""

import cloudpickle
import pytest

from yarnflink import SlotSharingGroup, StreamExecutionEnvironment
from yarnflink.jobgraph.jobgraph import JobGraph
from yarnflink.operators.specs import KeySelectorSpec
from yarnflink.streaming.graph import ChainingStrategy, StreamGraph, StreamGraphError
from yarnflink.streaming.jobgraph_generator import create_job_graph


def inc(x):
    return x + 1


def positive(x):
    return x > 0


def env(**conf):
    e = StreamExecutionEnvironment(configuration=conf or None)
    return e


def names(jg):
    return [v.name for v in jg.vertices]


def edge_parts(jg):
    return [e.partitioning for e in jg.edges]


def test_forward_edges_of_equal_parallelism_chain_into_one_vertex():
    e = env()
    e.from_sequence(1, 10).map(inc).filter(positive)
    jg = e.get_job_graph()
    assert names(jg) == ["Source: Sequence -> Map -> Filter"]
    v = jg.vertices[0]
    assert [o.name for o in v.operators] == ["Source: Sequence", "Map", "Filter"]
    assert [o.chained_outputs for o in v.operators] == [[2], [3], []]
    assert [o.kind for o in v.operators] == ["source", "map", "filter"]
    assert jg.edges == [] and jg.datasets == []


def test_rebalance_breaks_the_chain():
    e = env()
    e.from_sequence(1, 10).rebalance().map(inc)
    jg = e.get_job_graph()
    assert names(jg) == ["Source: Sequence", "Map"]
    assert edge_parts(jg) == ["rebalance"]


@pytest.mark.parametrize("method", ["shuffle", "broadcast", "rescale"])
def test_other_explicit_partitionings_break_the_chain(method):
    e = env()
    getattr(e.from_sequence(1, 10), method)().map(inc)
    jg = e.get_job_graph()
    assert len(jg.vertices) == 2
    assert edge_parts(jg) == [method]


def test_explicit_forward_with_equal_parallelism_still_chains():
    e = env()
    e.from_sequence(1, 10).forward().map(inc)
    assert names(e.get_job_graph()) == ["Source: Sequence -> Map"]


def test_parallelism_change_breaks_the_chain_and_defaults_to_rebalance():
    e = env()
    e.from_sequence(1, 10).map(inc).set_parallelism(2)
    jg = e.get_job_graph()
    assert names(jg) == ["Source: Sequence", "Map"]
    assert [v.parallelism for v in jg.vertices] == [1, 2]
    assert edge_parts(jg) == ["rebalance"]


def test_disable_chaining_isolates_the_operator():
    e = env()
    e.from_sequence(1, 10).map(inc).disable_chaining().filter(positive)
    jg = e.get_job_graph()
    assert names(jg) == ["Source: Sequence", "Map", "Filter"]
    assert edge_parts(jg) == ["forward", "forward"]


def test_start_new_chain_breaks_only_before_the_operator():
    e = env()
    e.from_sequence(1, 10).map(inc).start_new_chain().filter(positive)
    jg = e.get_job_graph()
    assert names(jg) == ["Source: Sequence", "Map -> Filter"]


def test_different_slot_sharing_groups_break_the_chain_and_groups_are_inherited():
    e = env()
    e.from_sequence(1, 10).map(inc).slot_sharing_group("g").filter(positive)
    jg = e.get_job_graph()
    assert names(jg) == ["Source: Sequence", "Map -> Filter"]
    assert [v.slot_sharing_group for v in jg.vertices] == ["default", "g"]


def test_slot_sharing_group_object_keeps_resources_in_stream_graph():
    e = env()
    ssg = SlotSharingGroup.builder("heavy").set_cpu_cores(2.0).set_task_heap_memory_mb(256).build()
    e.from_sequence(1, 10).map(inc).slot_sharing_group(ssg)
    sg = e.get_stream_graph()
    assert sg.slot_sharing_groups == {"heavy": ssg}
    assert sg.nodes[2].slot_sharing_group == "heavy"
    assert e.get_job_graph().vertices[1].slot_sharing_group == "heavy"


@pytest.mark.parametrize("how", ["method", "config"])
def test_chaining_disabled_globally(how):
    e = env()
    if how == "method":
        e.disable_operator_chaining()
    else:
        e.configure({"pipeline.operator-chaining.enabled": "false"})
    e.from_sequence(1, 10).map(inc).filter(positive)
    jg = e.get_job_graph()
    assert names(jg) == ["Source: Sequence", "Map", "Filter"]
    assert edge_parts(jg) == ["forward", "forward"]


def test_hash_edge_breaks_the_chain_and_carries_the_key_selector():
    e = env()
    e.from_collection([(1, 2)]).key_by(0).sum(1)
    jg = e.get_job_graph()
    assert names(jg) == ["Source: Collection", "Keyed Aggregation"]
    (edge,) = jg.edges
    assert edge.partitioning == "hash"
    assert cloudpickle.loads(edge.key_selector) == KeySelectorSpec(field=0)


def test_key_by_function_is_pickled_on_the_edge():
    e = env()
    e.from_collection([(1, 2)]).key_by(lambda r: r[0] * 10).reduce(lambda a, b: a)
    (edge,) = e.get_job_graph().edges
    ks = cloudpickle.loads(edge.key_selector)
    assert ks.field is None and ks.fn((3, 4)) == 30


def test_branch_chains_both_successors_and_names_them_in_parentheses():
    e = env()
    src = e.from_sequence(1, 10)
    src.map(inc)
    src.filter(positive).map(inc)
    jg = e.get_job_graph()
    assert names(jg) == ["Source: Sequence -> (Map, Filter -> Map)"]
    ops = jg.vertices[0].operators
    assert ops[0].chained_outputs == [2, 3]
    assert [o.node_id for o in ops] == [1, 2, 3, 4]


def test_branch_with_one_chained_and_one_network_output():
    e = env()
    src = e.from_sequence(1, 10).map(inc)
    src.filter(positive)
    src.rebalance().map(inc)
    jg = e.get_job_graph()
    assert names(jg) == ["Source: Sequence -> Map -> Filter", "Map"]
    head = jg.vertices[0]
    mapper = [o for o in head.operators if o.node_id == 2][0]
    assert mapper.chained_outputs == [3]
    assert mapper.output_datasets == [jg.datasets[0].id]
    assert jg.datasets[0].producer == head.id
    assert jg.datasets[0].result_type == "PIPELINED_BOUNDED"
    assert jg.edges[0].source == jg.datasets[0].id and jg.edges[0].target == jg.vertices[1].id


def test_node_with_two_inputs_is_a_chain_head():
    g = StreamGraph()
    g.add_node(1, "Source: A", None, 1)
    g.add_node(2, "Source: B", None, 1)
    g.add_node(3, "Join", None, 1)
    e1 = g.add_edge(1, 3)
    e2 = g.add_edge(2, 3)
    assert e1.partitioning == e2.partitioning == "forward"
    assert not g.is_chainable(e1) and not g.is_chainable(e2)
    jg = create_job_graph(g)
    assert [v.name for v in jg.vertices] == ["Source: A", "Source: B", "Join"]
    assert len(jg.datasets) == 2


def test_never_upstream_does_not_chain_but_head_upstream_does():
    g = StreamGraph()
    g.add_node(1, "Source: A", None, 1, chaining_strategy=ChainingStrategy.HEAD)
    g.add_node(2, "M", None, 1, chaining_strategy=ChainingStrategy.NEVER)
    g.add_node(3, "N", None, 1)
    a = g.add_edge(1, 2)
    b = g.add_edge(2, 3)
    assert not g.is_chainable(a) and not g.is_chainable(b)
    g2 = StreamGraph()
    g2.add_node(1, "Source: A", None, 1, chaining_strategy=ChainingStrategy.HEAD)
    g2.add_node(2, "M", None, 1)
    assert g2.is_chainable(g2.add_edge(1, 2))


def test_default_partitioning_forward_when_equal_else_rebalance():
    g = StreamGraph()
    g.add_node(1, "a", None, 2)
    g.add_node(2, "b", None, 2)
    g.add_node(3, "c", None, 3)
    assert g.add_edge(1, 2).partitioning == "forward"
    assert g.add_edge(2, 3).partitioning == "rebalance"


def test_forward_between_different_parallelisms_names_both_operators():
    e = env()
    e.from_sequence(1, 10).map(inc).name("up").set_parallelism(2).forward().filter(positive).name(
        "down"
    ).set_parallelism(3)
    with pytest.raises(StreamGraphError) as err:
        e.get_job_graph()
    msg = str(err.value)
    assert "'up'" in msg and "'down'" in msg and "2" in msg and "3" in msg


def test_vertices_are_in_topological_order_and_graph_round_trips():
    e = env()
    s = e.from_sequence(1, 100).map(inc).set_parallelism(2)
    s.key_by(lambda x: x % 2).reduce(lambda a, b: a + b).print()
    s.rebalance().filter(positive).set_parallelism(3).print()
    jg = e.get_job_graph("round trip")
    pos = {v.id: i for i, v in enumerate(jg.vertices)}
    for edge in jg.edges:
        assert pos[jg.dataset(edge.source).producer] < pos[edge.target]
    back = JobGraph.from_json(jg.to_json())
    assert back == jg
    assert back.job_name == "round trip"


def test_names_and_prefixes():
    e = env()
    e.from_sequence(1, 3).name("numbers").map(inc).name("plus one").print().name("stdout")
    assert names(e.get_job_graph()) == ["Source: numbers -> plus one -> Sink: stdout"]
