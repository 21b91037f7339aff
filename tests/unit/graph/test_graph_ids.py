"""Deterministic ids (Flink's StreamGraphHasher), uids, max parallelism derivation, specs."""

import re

import cloudpickle
import pytest

from yarnflink import RuntimeExecutionMode, StreamExecutionEnvironment
from yarnflink.operators.specs import AggregateSpec, ReduceSpec
from yarnflink.streaming.graph import StreamGraphError
from yarnflink.streaming.jobgraph_generator import compute_default_max_parallelism

HEX32 = re.compile(r"^[0-9a-f]{32}$")


def program(e, with_extra_filter=False, uid=None):
    s = e.from_sequence(1, 100)
    if with_extra_filter:
        s = s.filter(lambda x: x > 1).disable_chaining()
    m = s.rebalance().map(lambda x: (x % 2, x)).set_parallelism(2)
    if uid:
        m.uid(uid)
    m.key_by(0).sum(1).print()
    return e


def ids(jg):
    return [v.id for v in jg.vertices], [d.id for d in jg.datasets]


def test_same_program_gives_same_ids():
    a = program(StreamExecutionEnvironment()).get_job_graph()
    b = program(StreamExecutionEnvironment()).get_job_graph()
    assert ids(a) == ids(b)
    assert a.job_id != b.job_id  # job ids are random, like Flink's JobID
    for i in ids(a)[0] + ids(a)[1] + [a.job_id]:
        assert HEX32.match(i)


def test_ids_are_unique_within_a_graph():
    jg = program(StreamExecutionEnvironment()).get_job_graph()
    vids, dids = ids(jg)
    assert len(set(vids + dids)) == len(vids) + len(dids)


def test_changing_the_program_changes_ids_but_not_the_uid_ones():
    a = program(StreamExecutionEnvironment(), uid="mapper").get_job_graph()
    b = program(StreamExecutionEnvironment(), with_extra_filter=True, uid="mapper").get_job_graph()
    map_a = [v for v in a.vertices if v.head.uid == "mapper"][0]
    map_b = [v for v in b.vertices if v.head.uid == "mapper"][0]
    assert map_a.id == map_b.id
    c = program(StreamExecutionEnvironment()).get_job_graph()
    d = program(StreamExecutionEnvironment(), with_extra_filter=True).get_job_graph()
    assert c.vertices[1].id != d.vertices[2].id


def test_uid_changes_the_id():
    a = program(StreamExecutionEnvironment(), uid="x").get_job_graph()
    b = program(StreamExecutionEnvironment(), uid="y").get_job_graph()
    assert a.vertices[1].id != b.vertices[1].id
    assert a.vertices[1].head.uid == "x"


def test_duplicate_uid_is_an_error():
    e = StreamExecutionEnvironment()
    e.from_sequence(1, 2).uid("same").map(lambda x: x).uid("same")
    with pytest.raises(StreamGraphError, match="uid 'same'"):
        e.get_job_graph()


@pytest.mark.parametrize(
    "p,expected", [(1, 128), (2, 128), (85, 128), (86, 256), (100, 256), (200, 512), (1000, 2048), (30000, 32768)]
)
def test_default_max_parallelism_formula(p, expected):
    assert compute_default_max_parallelism(p) == expected


def test_vertex_max_parallelism_operator_then_env_then_derived():
    e = StreamExecutionEnvironment()
    e.from_sequence(1, 10).set_parallelism(100).map(lambda x: x).set_parallelism(4).set_max_parallelism(16)
    jg = e.get_job_graph()
    assert [v.max_parallelism for v in jg.vertices] == [256, 16]

    e = StreamExecutionEnvironment()
    e.set_max_parallelism(64)
    e.from_sequence(1, 10).map(lambda x: x).set_parallelism(4).set_max_parallelism(16)
    assert [v.max_parallelism for v in e.get_job_graph().vertices] == [64, 16]

    e = StreamExecutionEnvironment(configuration={"pipeline.max-parallelism": "512"})
    e.from_sequence(1, 10)
    assert e.get_job_graph().vertices[0].max_parallelism == 512


def test_env_max_parallelism_below_parallelism_is_an_error():
    e = StreamExecutionEnvironment()
    e.set_max_parallelism(4)
    e.from_sequence(1, 10).set_parallelism(8)
    with pytest.raises(StreamGraphError, match="max parallelism 4.*parallelism 8"):
        e.get_job_graph()


def test_reduce_and_aggregate_get_the_runtime_mode_at_build_time():
    e = StreamExecutionEnvironment()
    keyed = e.from_collection([(1, 2)]).key_by(0)
    keyed.sum(1)
    keyed.reduce(lambda a, b: a)
    e.set_runtime_mode(RuntimeExecutionMode.BATCH)
    jg = e.get_job_graph()
    assert jg.runtime_mode == "BATCH"
    specs = [cloudpickle.loads(o.spec) for v in jg.vertices for o in v.operators]
    agg = [s for s in specs if isinstance(s, AggregateSpec)][0]
    red = [s for s in specs if isinstance(s, ReduceSpec)][0]
    assert agg.runtime_mode == red.runtime_mode == "BATCH"
    assert agg.agg == "sum" and agg.field == 1
    e.set_runtime_mode("streaming")
    specs = [cloudpickle.loads(o.spec) for v in e.get_job_graph().vertices for o in v.operators]
    assert {s.runtime_mode for s in specs if hasattr(s, "runtime_mode")} == {"STREAMING"}


def test_automatic_mode_resolves_to_batch():
    e = StreamExecutionEnvironment()
    e.set_runtime_mode(RuntimeExecutionMode.AUTOMATIC)
    e.from_sequence(1, 2)
    assert e.get_job_graph().runtime_mode == "BATCH"


def test_unpicklable_function_error_names_the_operator():
    import threading

    lock = threading.Lock()
    e = StreamExecutionEnvironment()
    e.from_sequence(1, 2).map(lambda x: (lock, x)).name("locky")
    with pytest.raises(StreamGraphError, match="locky.*cannot be serialized"):
        e.get_job_graph()


def test_job_config_travels_with_the_graph():
    e = StreamExecutionEnvironment(configuration={"execution.buffer-timeout": "5 ms", "metrics.foo": "bar"})
    e.from_sequence(1, 2)
    jg = e.get_job_graph()
    assert jg.config["execution.buffer-timeout"] == "5 ms"
    assert jg.config["metrics.foo"] == "bar"
