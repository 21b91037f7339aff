"""Count windows and session windows with dynamic gaps (adapters over keyed process functions),
and typed window results."""

import numpy as np
import pytest

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment, WindowFunction
from pyflink.datastream.functions import ProcessWindowFunction
from pyflink.datastream.window import CountWindow, EventTimeSessionWindows, SessionWindowTimeGapExtractor, TimeWindow
from tests.unit.operators.helpers import run_operator
from yarnflink.common.records import Batch
from yarnflink.common.row import Row
from yarnflink.operators.specs import ProcessSpec


def window_spec(ds):
    """The ProcessSpec of the windowed stream ``ds`` (the last operator of its environment)."""
    spec = ds._t.spec
    assert isinstance(spec, ProcessSpec)
    return spec


class SumWindow(WindowFunction[tuple, tuple, str, CountWindow]):
    def apply(self, key, window, inputs):
        return [(key, window.id, sum(i[0] for i in inputs))]


def test_a_tumbling_count_window_fires_every_n_records_of_a_key_and_never_incomplete():
    env = StreamExecutionEnvironment()
    data = [(1, "hi"), (2, "hello"), (3, "hi"), (4, "hello"), (5, "hi"), (6, "hello"), (6, "hello")]
    ds = env.from_collection(data).key_by(lambda x: x[1]).count_window(3).apply(SumWindow())
    _, out = run_operator(window_spec(ds), [data])
    assert out.rows == [("hi", 0, 9), ("hello", 0, 12)]


def test_a_sliding_count_window_fires_every_slide_records_with_the_last_size():
    env = StreamExecutionEnvironment()
    data = [(i, "k") for i in range(1, 8)]
    ds = env.from_collection(data).key_by(lambda x: x[1]).count_window(3, 2).reduce(lambda a, b: (a[0] + b[0], a[1]))
    _, out = run_operator(window_spec(ds), [data])
    assert out.rows == [(6, "k"), (12, "k"), (18, "k")]  # 1+2+3, 3+4+5, 5+6+7: what PyFlink prints
    # PyFlink's CountSlidingWindowAssigner puts record n (from 0) in window k if k*slide <= n <
    # k*slide + size, and CountTrigger(size) fires a window when it holds size records: with
    # slide > size the records between windows are in none (1+2, 4+5; 7 alone never fires)
    ds = env.from_collection(data).key_by(lambda x: x[1]).count_window(2, 3).reduce(lambda a, b: (a[0] + b[0], a[1]))
    _, out = run_operator(window_spec(ds), [data])
    assert out.rows == [(3, "k"), (9, "k")]


class Gap(SessionWindowTimeGapExtractor):
    def extract(self, element):
        return element[1]


class CountPerSession(ProcessWindowFunction[tuple, tuple, str, TimeWindow]):
    def process(self, key, context: ProcessWindowFunction.Context[TimeWindow], elements):
        return [(key, context.window().start, context.window().end, len(list(elements)))]


def test_session_windows_with_a_dynamic_gap_merge_what_overlaps_and_fire_at_the_end():
    env = StreamExecutionEnvironment()
    data = [("hi", 1), ("hi", 2), ("hi", 3), ("hi", 4), ("hi", 9), ("hi", 9), ("hi", 15)]
    out_t = Types.TUPLE([Types.STRING(), Types.INT(), Types.INT(), Types.INT()])
    ds = (
        env.from_collection(data)
        .key_by(lambda x: x[0])
        .window(EventTimeSessionWindows.with_dynamic_gap(Gap()))
        .process(CountPerSession(), out_t)
    )
    batch = Batch(data, None, np.array([t for _, t in data], dtype=np.int64))
    _, out = run_operator(window_spec(ds), [batch])
    assert out.rows == [("hi", 1, 8, 4), ("hi", 9, 30, 3)]
    assert [int(t) for b in out.batches for t in b.timestamps] == [7, 29]  # the windows' max timestamps
    assert ds.get_type() == out_t


def test_dynamic_session_windows_need_timestamps():
    env = StreamExecutionEnvironment()
    ds = env.from_collection([("a", 1)]).key_by(lambda x: x[0]).window(EventTimeSessionWindows.with_dynamic_gap(Gap()))
    with pytest.raises(ValueError, match="assign_timestamps_and_watermarks"):
        run_operator(window_spec(ds.reduce(lambda a, b: a)), [[("a", 1)]])
    with pytest.raises(NotImplementedError, match="allowed_lateness"):
        ds.allowed_lateness(10)


def test_window_results_with_a_row_output_type_become_named_rows():
    env = StreamExecutionEnvironment()
    row_t = Types.ROW_NAMED(["word", "n"], [Types.STRING(), Types.INT()])
    ds = (
        env.from_collection([("a", 1)]).key_by(lambda x: x[0]).count_window(1).reduce(lambda a, b: a, output_type=row_t)
    )
    _, out = run_operator(window_spec(ds), [[("a", 1)]])
    (row,) = out.rows
    assert isinstance(row, Row) and (row.word, row.n) == ("a", 1)
