"""Event-time windows and keyed state end to end: real master and TaskExecutor processes.

The records cross a keyed exchange between TaskExecutors with their timestamps (an extra Arrow
column on the wire); the bounded input's end is the final watermark, so every window fires and
every event-time timer runs.
"""

from __future__ import annotations

import pytest

from yarnflink import (
    AggregateFunction,
    Duration,
    EventTimeSessionWindows,
    KeyedProcessFunction,
    ProcessWindowFunction,
    SlidingEventTimeWindows,
    StreamExecutionEnvironment,
    Time,
    TumblingEventTimeWindows,
    ValueStateDescriptor,
    WatermarkStrategy,
)

pytestmark = pytest.mark.e2e

# (key, timestamp ms, value)
EVENTS = [
    ("a", 1_000, 1),
    ("b", 1_500, 10),
    ("a", 4_999, 2),
    ("a", 5_000, 3),
    ("b", 12_000, 20),
    ("a", 7_000, 4),
    ("c", 3_000, 100),
    ("b", 2_500, 30),
    ("a", 16_000, 5),
    ("c", 3_500, 200),
]


def _stream(env: StreamExecutionEnvironment):  # type: ignore[no-untyped-def]
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1)).with_timestamp_assigner(
        lambda e, _ts: e[1]
    )
    return env.from_collection(EVENTS).assign_timestamps_and_watermarks(strategy).key_by(lambda e: e[0])


def _env() -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    return env


def test_tumbling_window_reduce_with_process_window_function(executor) -> None:  # type: ignore[no-untyped-def]
    class WithWindow(ProcessWindowFunction):
        def process(self, key, context, elements):  # type: ignore[no-untyped-def]
            w = context.window()
            for total in elements:
                yield (key, w.start, w.end, total[2])

    out = list(
        _stream(_env())
        .window(TumblingEventTimeWindows.of(Time.seconds(5)))
        .reduce(lambda x, y: (x[0], x[1], x[2] + y[2]), window_function=WithWindow())
        .execute_and_collect()
    )
    assert sorted(out) == [
        ("a", 0, 5_000, 3),
        ("a", 5_000, 10_000, 7),
        ("a", 15_000, 20_000, 5),
        ("b", 0, 5_000, 40),
        ("b", 10_000, 15_000, 20),
        ("c", 0, 5_000, 300),
    ]


def test_sliding_window_aggregate(executor) -> None:  # type: ignore[no-untyped-def]
    class CountAndSum(AggregateFunction):
        def create_accumulator(self):  # type: ignore[no-untyped-def]
            return (0, 0)

        def add(self, value, acc):  # type: ignore[no-untyped-def]
            return (acc[0] + 1, acc[1] + value[2])

        def get_result(self, acc):  # type: ignore[no-untyped-def]
            return acc

        def merge(self, a, b):  # type: ignore[no-untyped-def]
            return (a[0] + b[0], a[1] + b[1])

    class Keyed(ProcessWindowFunction):
        def process(self, key, context, elements):  # type: ignore[no-untyped-def]
            ((count, total),) = elements
            return [(key, context.window().start, count, total)]

    out = list(
        _stream(_env())
        .window(SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5)))
        .aggregate(CountAndSum(), window_function=Keyed())
        .execute_and_collect()
    )
    assert sorted(out) == [
        ("a", -5_000, 2, 3),
        ("a", 0, 4, 10),
        ("a", 5_000, 2, 7),
        ("a", 10_000, 1, 5),
        ("a", 15_000, 1, 5),
        ("b", -5_000, 2, 40),
        ("b", 0, 2, 40),
        ("b", 5_000, 1, 20),
        ("b", 10_000, 1, 20),
        ("c", -5_000, 2, 300),
        ("c", 0, 2, 300),
    ]


def test_session_windows_merge(executor) -> None:  # type: ignore[no-untyped-def]
    class Session(ProcessWindowFunction):
        def process(self, key, context, elements):  # type: ignore[no-untyped-def]
            w = context.window()
            return [(key, w.start, w.end, sorted(e[2] for e in elements))]

    out = list(
        _stream(_env())
        .window(EventTimeSessionWindows.with_gap(Time.seconds(3)))
        .process(Session())
        .execute_and_collect()
    )
    assert sorted(out) == [
        ("a", 1_000, 4_000, [1]),
        ("a", 4_999, 10_000, [2, 3, 4]),
        ("a", 16_000, 19_000, [5]),
        ("b", 1_500, 5_500, [10, 30]),
        ("b", 12_000, 15_000, [20]),
        ("c", 3_000, 6_500, [100, 200]),
    ]


def test_keyed_process_function_with_value_state_and_event_time_timers(executor) -> None:  # type: ignore[no-untyped-def]
    class SumUntilQuiet(KeyedProcessFunction):
        """Sums values per key; an event-time timer 4 s after the latest record emits the sum."""

        def open(self, runtime_context):  # type: ignore[no-untyped-def]
            self.total = runtime_context.get_state(ValueStateDescriptor("total"))
            self.last = runtime_context.get_state(ValueStateDescriptor("last"))

        def process_element(self, value, ctx):  # type: ignore[no-untyped-def]
            self.total.update((self.total.value() or 0) + value[2])
            t = ctx.timestamp()
            if self.last.value() is None or t > self.last.value():
                self.last.update(t)
            ctx.timer_service().register_event_time_timer(self.last.value() + 4_000)
            return []

        def on_timer(self, timestamp, ctx):  # type: ignore[no-untyped-def]
            if timestamp == self.last.value() + 4_000:
                yield (ctx.get_current_key(), timestamp, self.total.value())
                self.total.clear()

    out = list(_stream(_env()).process(SumUntilQuiet()).execute_and_collect())
    # every timer fires at the end of input (final watermark); only the latest per key emits
    assert sorted(out) == [("a", 20_000, 15), ("b", 16_000, 60), ("c", 7_500, 300)]


@pytest.mark.parametrize("vectorized", [True, False], ids=["vectorized", "per-record"])
def test_window_sum_on_arrow_batches_and_per_record(executor, vectorized: bool) -> None:  # type: ignore[no-untyped-def]
    """The same job on the vectorized path (Arrow batches: a timestamp column, a filtering
    map_batches the timestamps follow, the columnar window) and on the per-record path."""
    import pyarrow.compute as pc

    bounded = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1))
    stream = _env().from_collection(EVENTS)
    if vectorized:
        stream = (
            stream.map_batches(lambda rb: rb)  # Arrow batches from here on
            .assign_timestamps_and_watermarks(bounded.with_timestamp_column(1))
            .map_batches(lambda rb: rb.filter(pc.not_equal(rb.column(0), "c")))
        )
    else:
        stream = stream.assign_timestamps_and_watermarks(bounded.with_timestamp_assigner(lambda e, _ts: e[1])).filter(
            lambda e: e[0] != "c"
        )
    out = list(stream.key_by(0).window(TumblingEventTimeWindows.of(Time.seconds(5))).sum(2).execute_and_collect())
    assert sorted(out) == [
        ("a", 1_000, 3),
        ("a", 5_000, 7),
        ("a", 16_000, 5),
        ("b", 1_500, 40),
        ("b", 12_000, 20),
    ]


@pytest.mark.parametrize("vectorized", [True, False], ids=["vectorized", "per-record"])
def test_session_window_sum_on_arrow_batches_and_per_record(executor, vectorized: bool) -> None:  # type: ignore[no-untyped-def]
    """Event-time session windows with sum: the columnar sessions (Arrow batches, per key in
    order) and the per-record path give the same sessions."""
    bounded = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1))
    stream = _env().from_collection(sorted(EVENTS, key=lambda e: e[1]))
    if vectorized:
        stream = stream.map_batches(lambda rb: rb).assign_timestamps_and_watermarks(bounded.with_timestamp_column(1))
    else:
        stream = stream.assign_timestamps_and_watermarks(bounded.with_timestamp_assigner(lambda e, _ts: e[1]))
    out = list(stream.key_by(0).window(EventTimeSessionWindows.with_gap(Time.seconds(3))).sum(2).execute_and_collect())
    # sum keeps the other fields of the session's first record *to arrive*; two source subtasks
    # feed each key, so which of a session's records arrives first is not fixed (as in Flink)
    sessions = {
        ("a", 1): {1_000},
        ("a", 9): {4_999, 5_000, 7_000},  # 4999 is more than the gap after 1000
        ("a", 5): {16_000},
        ("b", 40): {1_500, 2_500},
        ("b", 20): {12_000},
        ("c", 300): {3_000, 3_500},
    }
    assert sorted((key, total) for key, _ts, total in out) == sorted(sessions)
    for key, ts, total in out:
        assert ts in sessions[(key, total)], (key, ts, total)
