"""DataStream API: operators produce the right specs, names and settings; eager validation."""

import pytest

from yarnflink import (
    FileSink,
    FileSource,
    KeySelector,
    MapFunction,
    ProcessFunction,
    SlotSharingGroup,
    StreamExecutionEnvironment,
)
from yarnflink.operators.specs import (
    AggregateSpec,
    CollectionSourceSpec,
    FileSinkSpec,
    FileSourceSpec,
    FilterSpec,
    FlatMapSpec,
    KeySelectorSpec,
    MapBatchesSpec,
    MapSpec,
    PrintSinkSpec,
    ProcessSpec,
    ReduceSpec,
    SequenceSourceSpec,
)


@pytest.fixture
def env():
    return StreamExecutionEnvironment()


def nodes(env):
    return list(env.get_stream_graph().nodes.values())


def only_edge(env):
    (e,) = env.get_stream_graph().edges
    return e


class Double(MapFunction):
    def map(self, value):
        return value * 2


class FirstKey(KeySelector):
    def get_key(self, value):
        return value[0]


class Emit(ProcessFunction):
    def process_element(self, value, ctx):
        yield value


def test_operators_create_specs_and_default_names(env):
    s = env.from_collection([1, 2, 3])
    s.map(str)
    s.flat_map(lambda x: [x, x])
    s.filter(bool)
    s.map_batches(lambda b: b)
    s.process(Emit())
    ns = nodes(env)
    assert [n.name for n in ns] == ["Source: Collection", "Map", "Flat Map", "Filter", "Map Batches", "Process"]
    assert [type(n.spec) for n in ns] == [
        CollectionSourceSpec,
        MapSpec,
        FlatMapSpec,
        FilterSpec,
        MapBatchesSpec,
        ProcessSpec,
    ]
    assert ns[0].spec.items == [1, 2, 3]
    assert ns[1].spec.fn is str
    assert ns[5].spec.key_selector is None


def test_function_objects_are_kept_for_the_runtime_to_open(env):
    fn = Double()
    env.from_sequence(1, 2).map(fn)
    assert nodes(env)[1].spec.fn is fn


def test_from_sequence_and_from_source(env):
    env.from_sequence(3, 7)
    env.from_source(FileSource("/data/in.parquet"), name="orders")
    env.from_source(FileSource("s3://b/x", format="CSV"), None, "legacy name")
    ns = nodes(env)
    assert ns[0].spec == SequenceSourceSpec(start=3, end=7)
    assert ns[1].name == "Source: orders"
    assert ns[1].spec == FileSourceSpec(path="/data/in.parquet", format="parquet")
    assert ns[2].name == "Source: legacy name" and ns[2].spec.format == "csv"


def test_key_by_variants(env):
    s = env.from_collection([(1, "a")])
    s.key_by(0).sum(1)
    s.key_by("user").min("amount")
    sel = lambda r: r[0]  # noqa: E731
    s.key_by(sel).max()
    fk = FirstKey()
    s.key_by(fk).reduce(lambda a, b: b)
    sg = env.get_stream_graph()
    hash_edges = [e for e in sg.edges if e.partitioning == "hash"]
    assert [e.key_selector for e in hash_edges] == [
        KeySelectorSpec(field=0),
        KeySelectorSpec(field="user"),
        KeySelectorSpec(fn=sel),
        KeySelectorSpec(fn=fk),
    ]
    specs = [sg.nodes[e.target_id].spec for e in hash_edges]
    assert (specs[0].agg, specs[0].field) == ("sum", 1)
    assert (specs[1].agg, specs[1].field) == ("min", "amount")
    assert (specs[2].agg, specs[2].field) == ("max", 0)
    assert isinstance(specs[3], ReduceSpec) and specs[3].key_selector == KeySelectorSpec(fn=fk)
    assert all(isinstance(s, AggregateSpec) for s in specs[:3])
    assert [sg.nodes[e.target_id].name for e in hash_edges] == ["Keyed Aggregation"] * 3 + ["Keyed Reduce"]


def test_keyed_process_and_keyed_map(env):
    keyed = env.from_collection([(1, 2)]).key_by(0)
    keyed.process(Emit())
    keyed.map(str)
    sg = env.get_stream_graph()
    assert sg.nodes[2].name == "KeyedProcess" and sg.nodes[2].spec.key_selector == KeySelectorSpec(field=0)
    assert [e.partitioning for e in sg.edges] == ["hash", "hash"]


def test_sinks(env):
    s = env.from_sequence(1, 2)
    s.print()
    s.print("out")
    s.sink_to(FileSink("/tmp/x", format="parquet"))
    ns = nodes(env)[1:]
    assert [n.name for n in ns] == ["Sink: Print to Std. Out", "Sink: Print to Std. Out", "Sink: File Sink"]
    assert ns[0].spec == PrintSinkSpec() and ns[1].spec == PrintSinkSpec(prefix="out")
    assert ns[2].spec == FileSinkSpec(path="/tmp/x", format="parquet")


def test_operator_settings_apply_to_the_operator(env):
    m = (
        env.from_sequence(1, 2)
        .map(str)
        .set_parallelism(3)
        .set_max_parallelism(12)
        .name("m")
        .uid("u")
        .slot_sharing_group("g")
    )
    assert m.get_parallelism() == 3 and m.get_name() == "m"
    sink = m.print().set_parallelism(2).name("out").uid("sink-uid").disable_chaining()
    assert sink.get_name() == "out"
    n = nodes(env)
    assert (n[1].parallelism, n[1].max_parallelism, n[1].uid, n[1].slot_sharing_group) == (3, 12, "u", "g")
    assert (n[2].name, n[2].parallelism, n[2].uid, n[2].slot_sharing_group) == ("Sink: out", 2, "sink-uid", "g")
    assert n[2].chaining_strategy.value == "NEVER"


def test_partitioning_views_set_the_next_edge(env):
    s = env.from_sequence(1, 2)
    for method in ["rebalance", "shuffle", "broadcast", "forward", "rescale"]:
        getattr(s, method)().map(str)
    assert [e.partitioning for e in env.get_stream_graph().edges] == [
        "rebalance",
        "shuffle",
        "broadcast",
        "forward",
        "rescale",
    ]


def test_default_edge_partitioning(env):
    s = env.from_sequence(1, 2)
    s.map(str)
    s.map(str).set_parallelism(2)
    assert [e.partitioning for e in env.get_stream_graph().edges] == ["forward", "rebalance"]


# ----------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "p,exc", [(0, ValueError), (-1, ValueError), ("2", TypeError), (True, TypeError), (1.0, TypeError)]
)
def test_bad_parallelism(env, p, exc):
    with pytest.raises(exc, match="parallelism"):
        env.from_sequence(1, 2).map(str).set_parallelism(p)
    with pytest.raises(exc, match="parallelism"):
        env.set_parallelism(p)


def test_bad_max_parallelism(env):
    m = env.from_sequence(1, 2).map(str)
    with pytest.raises(ValueError, match="between 1 and 32768"):
        m.set_max_parallelism(40000)
    m.set_parallelism(8)
    with pytest.raises(ValueError, match="smaller than its parallelism 8"):
        m.set_max_parallelism(4)
    m2 = env.from_sequence(1, 2).set_max_parallelism(4)
    with pytest.raises(ValueError, match="larger than its max parallelism 4"):
        m2.set_parallelism(5)


@pytest.mark.parametrize("op", ["map", "flat_map", "filter", "map_batches", "process"])
def test_non_callable_function(env, op):
    s = env.from_sequence(1, 2)
    with pytest.raises(TypeError, match=f"{op}\\(\\) needs a function"):
        getattr(s, op)(42)


def test_function_class_instead_of_instance(env):
    with pytest.raises(TypeError, match="got the class Double"):
        env.from_sequence(1, 2).map(Double)


def test_reduce_needs_a_function(env):
    with pytest.raises(TypeError, match="reduce\\(\\) needs a function"):
        env.from_collection([(1, 2)]).key_by(0).reduce("sum")


@pytest.mark.parametrize(
    "field,exc", [(1.5, TypeError), (-1, ValueError), (True, TypeError), ("", ValueError), (None, TypeError)]
)
def test_bad_aggregate_field(env, field, exc):
    with pytest.raises(exc, match="sum\\(\\)"):
        env.from_collection([(1, 2)]).key_by(0).sum(field)


@pytest.mark.parametrize("key", [1.5, None, [0], True])
def test_bad_key(env, key):
    with pytest.raises(TypeError, match="key_by\\(\\)"):
        env.from_collection([(1, 2)]).key_by(key)


def test_settings_on_partitioning_views_are_rejected(env):
    s = env.from_sequence(1, 2)
    with pytest.raises(TypeError, match="set_parallelism\\(\\) is not supported on a KeyedStream"):
        s.key_by(0).set_parallelism(2)
    with pytest.raises(TypeError, match="name\\(\\) cannot be applied to the result of rebalance\\(\\)"):
        s.rebalance().name("x")


def test_bad_names_uids_and_groups(env):
    m = env.from_sequence(1, 2).map(str)
    with pytest.raises(TypeError, match="name"):
        m.name("")
    with pytest.raises(TypeError, match="uid"):
        m.uid(3)
    with pytest.raises(TypeError, match="slot_sharing_group"):
        m.slot_sharing_group(None)
    with pytest.raises(ValueError, match="name"):
        SlotSharingGroup("")
    with pytest.raises(ValueError, match="cpu_cores"):
        SlotSharingGroup("g", cpu_cores=-1)


def test_connector_validation():
    with pytest.raises(ValueError, match="unknown FileSource format 'orc'"):
        FileSource("/x", format="orc")
    with pytest.raises(ValueError, match="cannot infer the format"):
        FileSource("/data/dir")
    with pytest.raises(ValueError, match="unknown FileSink format 'txt'"):
        FileSink("/x", format="txt")
    with pytest.raises(TypeError, match="path"):
        FileSink("", format="csv")
    with pytest.raises(TypeError, match="storage_options"):
        FileSource("/x.csv", storage_options="anon")
    assert FileSource("/x.jsonl").format == "jsonl"


def test_source_validation(env):
    with pytest.raises(ValueError, match="start \\(5\\) must not be larger than end \\(1\\)"):
        env.from_sequence(5, 1)
    with pytest.raises(TypeError, match="end must be an integer"):
        env.from_sequence(1, 2.0)
    with pytest.raises(TypeError, match="from_collection"):
        env.from_collection("abc")
    with pytest.raises(TypeError, match="from_source\\(\\) needs a source: a FileSource"):
        env.from_source("/x.csv")
    with pytest.raises(TypeError, match="sink_to\\(\\) needs a FileSink"):
        env.from_sequence(1, 2).sink_to("/out")
