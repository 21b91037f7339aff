"""connect() (CoMap / CoFlatMap / KeyedCoProcess), window_all() and min_by / max_by, as adapters
over union, keyed process functions and reduce."""

import numpy as np

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import (
    AllWindowFunction,
    CoFlatMapFunction,
    CoMapFunction,
    KeyedCoProcessFunction,
    ProcessAllWindowFunction,
)
from pyflink.datastream.window import CountTumblingWindowAssigner, TumblingEventTimeWindows
from tests.unit.operators.helpers import run_operator
from yarnflink.common.records import Batch


def graph_names(env):
    return [n.name for n in env.get_stream_graph().nodes.values()]


class Describe(CoMapFunction):
    def map1(self, value):
        return f"number {value}"

    def map2(self, value):
        return f"word {value}"


class Explode(CoFlatMapFunction):
    def flat_map1(self, value):
        yield from [value] * value

    def flat_map2(self, value):
        yield from value.split("-")


def test_connect_tags_each_side_unions_them_and_dispatches_per_side():
    env = StreamExecutionEnvironment()
    numbers, words = env.from_collection([1, 2]), env.from_collection(["a-b"])
    mapped = numbers.connect(words).map(Describe(), output_type=Types.STRING())
    flat = numbers.connect(words).flat_map(Explode())
    assert mapped.get_type() == Types.STRING()
    _, out = run_operator(mapped._t.spec, [[(0, 1), (1, "a-b")]])
    assert out.rows == ["number 1", "word a-b"]
    _, out = run_operator(flat._t.spec, [[(0, 2), (1, "a-b")]])
    assert out.rows == [2, 2, "a", "b"]
    assert "Union" in graph_names(env) and "Co-Map" in graph_names(env)


class Join(KeyedCoProcessFunction):
    def open(self, runtime_context):
        from pyflink.datastream.state import ValueStateDescriptor

        self.order = runtime_context.get_state(ValueStateDescriptor("order", Types.STRING()))
        self.paid = runtime_context.get_state(ValueStateDescriptor("paid", Types.INT()))

    def process_element1(self, value, ctx):
        if self.paid.value() is not None:
            yield value[0], value[1], self.paid.value()
        else:
            self.order.update(value[1])

    def process_element2(self, value, ctx):
        if self.order.value() is not None:
            yield value[0], self.order.value(), value[1]
        else:
            self.paid.update(value[1])


def test_keyed_connect_shares_keyed_state_between_the_two_inputs():
    env = StreamExecutionEnvironment()
    orders = env.from_collection([(1, "book"), (2, "pen")]).key_by(lambda v: v[0])
    payments = env.from_collection([(1, 12), (3, 9)]).key_by(lambda v: v[0])
    joined = orders.connect(payments).process(Join(), Types.TUPLE([Types.INT(), Types.STRING(), Types.INT()]))
    tagged = [(0, (1, "book")), (1, (3, 9)), (0, (2, "pen")), (1, (1, 12))]
    _, out = run_operator(joined._t.spec, [tagged])
    assert out.rows == [(1, "book", 12)]


class Summary(ProcessAllWindowFunction):
    def process(self, context: ProcessAllWindowFunction.Context, elements):
        values = list(elements)
        yield context.window().start, len(values), sum(values)


class Total(AllWindowFunction):
    def apply(self, window, inputs):
        return [sum(inputs)]


def test_window_all_windows_the_whole_stream_in_one_subtask():
    env = StreamExecutionEnvironment()
    env.set_parallelism(4)
    ds = env.from_collection([1, 2, 5, 11])
    by_time = ds.window_all(TumblingEventTimeWindows.of(10)).process(Summary())
    by_count = ds.window_all(CountTumblingWindowAssigner.of(2)).apply(Total())
    assert by_time.get_parallelism() == 1 and by_count.get_parallelism() == 1
    batch = Batch([1, 2, 5, 11], None, np.array([1, 2, 5, 11], dtype=np.int64))
    _, out = run_operator(by_time._t.spec, [batch])
    assert out.rows == [(0, 3, 8), (10, 1, 11)]
    _, out = run_operator(by_count._t.spec, [[1, 2, 5, 11]])
    assert out.rows == [3, 16]


def test_min_by_and_max_by_keep_the_whole_record_with_the_extreme_field():
    env = StreamExecutionEnvironment()
    keyed = env.from_collection([]).key_by(lambda v: v[0])
    data = [("a", 3, "x"), ("a", 1, "z"), ("a", 1, "w"), ("a", 7, "v")]
    _, out = run_operator(keyed.min_by(1)._t.spec, [data])
    assert out.rows == [("a", 3, "x"), ("a", 1, "z"), ("a", 1, "z"), ("a", 1, "z")]
    _, out = run_operator(keyed.max_by(1)._t.spec, [data])
    assert out.rows[-1] == ("a", 7, "v")


def test_a_process_function_yielding_output_tag_and_value_feeds_that_side_output():
    from pyflink.datastream import OutputTag, ProcessFunction

    odd = OutputTag("odd", Types.INT())

    class Split(ProcessFunction):
        def process_element(self, value, ctx):
            yield (odd, value) if value % 2 else value * 10

    env = StreamExecutionEnvironment()
    main = env.from_collection([1, 2, 3]).process(Split(), output_type=Types.INT())
    evens = main.map(lambda v: v)  # a consumer made before the side output was asked for
    side = main.get_side_output(odd)
    evens.print()
    side.print()
    names = graph_names(env)
    assert names.count("Main Output") == 1 and "Side Output 'odd'" in names
    process_spec = main._t.spec
    _, out = run_operator(process_spec, [[1, 2, 3]])
    assert [getattr(r, "value", r) for r in out.rows] == [1, 20, 3]
    assert [r.tag_id for r in out.rows if hasattr(r, "tag_id")] == ["odd", "odd"]
    graph = env.get_stream_graph()
    main_id = next(i for i, n in graph.nodes.items() if n.name == "Main Output")
    map_id = next(i for i, n in graph.nodes.items() if n.name == "Map")
    assert any(e.source_id == main_id and e.target_id == map_id for e in graph.edges)


def test_side_outputs_nobody_asked_for_are_dropped():
    from pyflink.datastream import OutputTag, ProcessFunction

    class Split(ProcessFunction):
        def process_element(self, value, ctx):
            yield OutputTag("unused"), value
            yield value

    env = StreamExecutionEnvironment()
    ds = env.from_collection([1]).process(Split())
    ds.print()
    _, out = run_operator(ds._t.spec, [[1, 2]])
    assert out.rows == [1, 2]
    assert "Main Output" not in graph_names(env)


def test_a_side_output_result_is_told_apart_as_pyflink_does():
    """PyFlink's rule (fn_execution ``_emit_results``): a result is a side output when it is a
    tuple whose first element is an OutputTag, its value the second element; anything else
    (a list ``[tag, v]``, a tuple with the tag second) is a main-output record."""
    from pyflink.datastream import OutputTag, ProcessFunction

    tag = OutputTag("t")

    class Emit(ProcessFunction):
        def process_element(self, value, ctx):
            yield tag, value, "ignored"
            yield [tag, value]
            yield value, tag

    env = StreamExecutionEnvironment()
    ds = env.from_collection([1]).process(Emit())
    ds.get_side_output(tag).print()
    _, out = run_operator(ds._t.spec, [[7]])
    side = [r.value for r in out.rows if hasattr(r, "tag_id")]
    main = [r for r in out.rows if not hasattr(r, "tag_id")]
    assert side == [7] and main == [[tag, 7], (7, tag)]
