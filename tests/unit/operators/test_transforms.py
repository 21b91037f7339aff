import pyarrow as pa
import pytest

from yarnflink.common.records import Batch, records_to_arrow
from yarnflink.operators import specs as S
from yarnflink.operators.functions import (
    FilterFunction,
    FlatMapFunction,
    KeyedProcessFunction,
    MapFunction,
    ProcessFunction,
)

from .helpers import run_operator


def test_map():
    _, out = run_operator(S.MapSpec(lambda x: x * 2), [[1, 2], [3]])
    assert out.rows == [2, 4, 6]
    assert all(b.has_rows and not b.has_arrow for b in out.batches)  # stays a row list


def test_map_on_arrow_input():
    _, out = run_operator(S.MapSpec(lambda t: t[0] + t[1]), [Batch.from_arrow(records_to_arrow([(1, 2), (3, 4)]))])
    assert out.rows == [3, 7]


def test_flat_map_with_generator_list_and_none():
    def gen(x):
        for i in range(x):
            yield (x, i)

    _, out = run_operator(S.FlatMapSpec(gen), [[0, 1, 2]])
    assert out.rows == [(1, 0), (2, 0), (2, 1)]
    _, out = run_operator(S.FlatMapSpec(lambda s: s.split()), [["a b", "", "c"]])
    assert out.rows == ["a", "b", "c"]
    _, out = run_operator(S.FlatMapSpec(lambda s: None), [["a"]])
    assert out.rows == []


def test_flat_map_non_iterable_names_operator():
    with pytest.raises(TypeError, match="flat_map operator 'op'"):
        run_operator(S.FlatMapSpec(lambda x: 5), [[1]])


def test_filter_and_unchanged_batch_reused():
    _, out = run_operator(S.FilterSpec(lambda x: x % 2 == 0), [[1, 2, 3, 4]])
    assert out.rows == [2, 4]
    b = Batch.from_rows([2, 4])
    _, out = run_operator(S.FilterSpec(lambda x: True), [b])
    assert out.batches[0] is b


def test_rich_functions_open_and_close():
    events = []

    class Doubler(MapFunction):
        def open(self, rc):
            events.append(("open", rc.get_index_of_this_subtask(), rc.get_number_of_parallel_subtasks()))
            self.k = 2

        def map(self, v):
            return v * self.k

        def close(self):
            events.append("close")

    _, out = run_operator(S.MapSpec(Doubler()), [[1, 2]], subtask=1, parallelism=3)
    assert out.rows == [2, 4]
    assert events == [("open", 1, 3), "close"]

    class Split(FlatMapFunction):
        def flat_map(self, v):
            return [v, v]

    class Even(FilterFunction):
        def filter(self, v):
            return v % 2 == 0

    assert run_operator(S.FlatMapSpec(Split()), [[1]])[1].rows == [1, 1]
    assert run_operator(S.FilterSpec(Even()), [[1, 2]])[1].rows == [2]


def test_map_batches_record_batch_and_table():
    def add_col(rb):
        return rb.append_column("f1", pa.array([v * 10 for v in rb.column(0).to_pylist()]))

    _, out = run_operator(S.MapBatchesSpec(add_col), [[1, 2]])
    assert out.rows == [(1, 10), (2, 20)]

    def to_table(rb):
        return pa.Table.from_batches([rb.slice(0, 1), rb.slice(1)])

    _, out = run_operator(S.MapBatchesSpec(to_table), [[1, 2, 3]])
    assert len(out.batches) == 2 and out.rows == [1, 2, 3]


def test_map_batches_wrong_return_type_names_operator():
    with pytest.raises(TypeError, match="map_batches operator 'op'.*got list"):
        run_operator(S.MapBatchesSpec(lambda rb: [1]), [[1]])


def test_process_with_process_function_and_callable():
    class P(ProcessFunction):
        def open(self, rc):
            self.name = rc.get_task_name()

        def process_element(self, value, ctx):
            assert ctx.timestamp() is None
            if value > 1:
                yield (self.name, value)

    _, out = run_operator(S.ProcessSpec(P()), [[1, 2, 3]])
    assert out.rows == [("task", 2), ("task", 3)]
    _, out = run_operator(S.ProcessSpec(lambda v: [v, -v]), [[1, 2]])
    assert out.rows == [1, -1, 2, -2]

    class R(ProcessFunction):
        def process_element(self, value, ctx):
            return [value + 1]  # returning a list works too

    assert run_operator(S.ProcessSpec(R()), [[1]])[1].rows == [2]


def test_process_non_iterable_result():
    class Bad(ProcessFunction):
        def process_element(self, value, ctx):
            return 5

    with pytest.raises(TypeError, match="process operator 'op'"):
        run_operator(S.ProcessSpec(Bad()), [[1]])


def test_keyed_process_current_key():
    class K(KeyedProcessFunction):
        def process_element(self, value, ctx):
            yield (ctx.get_current_key(), value)

    spec = S.ProcessSpec(K(), key_selector=S.KeySelectorSpec(fn=lambda v: v % 3))
    _, out = run_operator(spec, [[1, 2, 3, 4]])
    assert out.rows == [(1, 1), (2, 2), (0, 3), (1, 4)]
    spec = S.ProcessSpec(K(), key_selector=S.KeySelectorSpec(field="w"))
    _, out = run_operator(spec, [[{"w": "a"}, {"w": "b"}]])
    assert out.rows == [("a", {"w": "a"}), ("b", {"w": "b"})]


def test_empty_batches_produce_nothing():
    for spec in [
        S.MapSpec(lambda x: x),
        S.FilterSpec(bool),
        S.FlatMapSpec(lambda x: [x]),
        S.MapBatchesSpec(lambda rb: rb),
        S.ProcessSpec(lambda x: [x]),
    ]:
        _, out = run_operator(spec, [[]])
        assert out.batches == [] and out.ended == 1
