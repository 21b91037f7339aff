"""The WindowOperator: tumbling, sliding and session windows, window functions, allowed
lateness, late data, processing time, checkpointing mid-stream, and the side-output plumbing."""

from __future__ import annotations

import pytest

from yarnflink.common.records import Batch
from yarnflink.operators import specs as S
from yarnflink.operators.chain import OperatorChain
from yarnflink.operators.watermarks import (
    MAX_TIMESTAMP,
    Duration,
    TimestampsAndWatermarksSpec,
    Watermark,
    WatermarkStrategy,
)
from yarnflink.operators.windows import (
    EventTimeSessionWindows,
    ProcessWindowFunction,
    SideOutputRecord,
    SideOutputSelectSpec,
    SlidingEventTimeWindows,
    Time,
    TimeWindow,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowSpec,
)
from yarnflink.state import AggregateFunction, TaskStateManager
from yarnflink.state.task_state import snapshot_operators

from .helpers import Clock, batch, events, open_operator, wm

KEY = S.KeySelectorSpec(field=0)


def add(a, b):  # type: ignore[no-untyped-def]
    return (a[0], a[1] + b[1], max(a[2], b[2]))


class Describe(ProcessWindowFunction):
    def process(self, key, context, elements):  # type: ignore[no-untyped-def]
        w = context.window()
        return [(key, w.start, w.end, sorted(e[1] for e in elements), context.current_watermark())]


class Sum(AggregateFunction):
    def create_accumulator(self):  # type: ignore[no-untyped-def]
        return 0

    def add(self, value, acc):  # type: ignore[no-untyped-def]
        return acc + value[1]

    def get_result(self, acc):  # type: ignore[no-untyped-def]
        return acc

    def merge(self, a, b):  # type: ignore[no-untyped-def]
        return a + b


def spec(assigner, kind="reduce", fn=add, wfn=None, lateness=0, tag=None) -> WindowSpec:  # type: ignore[no-untyped-def]
    return WindowSpec(assigner, KEY, kind, fn, wfn, lateness, tag)


def test_tumbling_windows_fire_when_the_watermark_passes_their_end() -> None:
    op, out = open_operator(spec(TumblingEventTimeWindows.of(Time.seconds(10))))
    op.process_batch(events(("a", 1, 1_000), ("b", 2, 2_000), ("a", 3, 9_999), ("a", 4, 10_000)))
    assert out.rows == []
    op.process_watermark(wm(9_998))
    assert out.rows == [] and out.watermarks == [wm(9_998)]
    op.process_watermark(wm(9_999))
    assert out.timestamped == [(("a", 4, 9_999), 9_999), (("b", 2, 2_000), 9_999)]  # results: window end - 1
    assert out.log[-1] == ("wm", wm(9_999))  # results before the watermark that fired them
    out.clear()
    op.end_input()  # end of input: the final watermark fires the rest
    assert out.rows == [("a", 4, 10_000)] and out.ended == 1


def test_sliding_windows_with_an_aggregate_function() -> None:
    op, out = open_operator(spec(SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5)), "aggregate", Sum()))
    op.process_batch(events(("a", 1, 1_000), ("a", 2, 6_000), ("a", 4, 12_000)))
    op.end_input()
    assert out.timestamped == [(1, 4_999), (3, 9_999), (6, 14_999), (4, 19_999)]


def test_session_windows_merge_and_split_by_gap() -> None:
    op, out = open_operator(spec(EventTimeSessionWindows.with_gap(Time.seconds(3)), "process", None, Describe()))
    op.process_batch(events(("a", 1, 1_000), ("a", 2, 8_000), ("b", 9, 1_000)))
    op.process_batch(events(("a", 3, 5_000)))  # [5000, 8000) touches [8000, 11000): one session
    op.process_batch(events(("a", 4, 3_500)))  # [3500, 6500) bridges [1000, 4000) and [5000, 11000)
    op.process_watermark(wm(10_999))
    # fired in the order of the windows' ends
    assert out.rows == [("b", 1_000, 4_000, [9], 10_999), ("a", 1_000, 11_000, [1, 2, 3, 4], 10_999)]
    assert op.backend.num_entries() == 0  # contents, merging sets and timers all cleaned up


def test_allowed_lateness_fires_again_and_late_data_goes_to_the_side_output() -> None:
    op, out = open_operator(spec(TumblingEventTimeWindows.of(Time.seconds(10)), lateness=5_000, tag="late"))
    op.process_batch(events(("a", 1, 1_000)))
    op.process_watermark(wm(12_000))  # fires [0, 10000); kept until 14999
    assert out.rows == [("a", 1, 1_000)]
    out.clear()
    op.process_batch(events(("a", 2, 3_000)))  # late but within the allowed lateness: fires again
    assert out.timestamped == [(("a", 3, 3_000), 9_999)]
    out.clear()
    op.process_watermark(wm(14_999))  # cleanup time: state gone
    op.process_batch(events(("a", 5, 4_000), ("b", 6, 20_000)))
    assert out.timestamped == [(SideOutputRecord("late", ("a", 5, 4_000)), 4_000)]
    assert op.num_late_records_dropped == 0


def test_late_data_without_a_side_output_is_dropped_and_counted() -> None:
    op, out = open_operator(spec(TumblingEventTimeWindows.of(Time.seconds(10))))
    op.process_watermark(wm(50_000))
    op.process_batch(events(("a", 1, 1_000)))
    op.end_input()
    assert out.rows == [] and op.num_late_records_dropped == 1


def test_records_without_timestamps_are_a_clear_error() -> None:
    op, _ = open_operator(spec(TumblingEventTimeWindows.of(Time.seconds(10))))
    with pytest.raises(ValueError, match="no timestamps.*assign_timestamps_and_watermarks"):
        op.process_batch(batch([("a", 1, 1)]))


def test_processing_time_windows_fire_on_the_clock() -> None:
    clock = Clock(1_000)
    op, out = open_operator(spec(TumblingProcessingTimeWindows.of(Time.seconds(1))), clock)
    op.process_batch(batch([("a", 1, 0), ("a", 2, 0)]))
    clock.t = 1_500
    op.process_batch(batch([("a", 3, 0)]))
    assert out.rows == [] and op.next_processing_time() == 1_999
    op.on_processing_time(1_999)
    assert out.rows == [("a", 6, 0)]
    clock.t = 2_100
    op.process_batch(batch([("b", 1, 0)]))
    clock.t = 3_000
    op.process_batch(batch([]))  # due timers fire before a batch
    assert out.rows[-1] == ("b", 1, 0)


def test_window_state_and_timers_survive_a_checkpoint_and_restore() -> None:
    def run(stop_after: int, restored=None):  # type: ignore[no-untyped-def]
        mgr = TaskStateManager(restored=restored)
        op, out = open_operator(
            spec(EventTimeSessionWindows.with_gap(Time.seconds(3)), "process", None, Describe()),
            state=mgr,
            name="window",
        )
        inputs = [
            events(("a", 1, 1_000), ("b", 2, 1_500)),
            events(("a", 3, 3_000)),
            events(("b", 4, 9_000), ("a", 5, 20_000)),
        ]
        for b in inputs[stop_after:] if restored is not None else inputs[:stop_after]:
            op.process_batch(b)
        return op, out

    op, out = run(2)
    op.process_watermark(wm(2_000))
    snapshot = snapshot_operators([("window", op)], 1, 0).result()
    assert out.rows == []
    restored, out2 = run(2, snapshot)
    restored.end_input()
    assert out2.rows == [
        ("b", 1_500, 4_500, [2], MAX_TIMESTAMP),
        ("a", 1_000, 6_000, [1, 3], MAX_TIMESTAMP),
        ("b", 9_000, 12_000, [4], MAX_TIMESTAMP),
        ("a", 20_000, 23_000, [5], MAX_TIMESTAMP),
    ]


def test_assigner_window_and_side_output_selectors_in_one_chain() -> None:
    from tests.unit.operators.helpers import ListOutput, desc, make_ctx

    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0)).with_timestamp_assigner(
        lambda e, _: e[2]
    )
    descs = [
        desc(1, TimestampsAndWatermarksSpec(strategy), chained=[2]),
        desc(2, spec(TumblingEventTimeWindows.of(Time.seconds(10)), tag="late"), chained=[3, 4]),
        desc(3, SideOutputSelectSpec(None), datasets=["main"]),
        desc(4, SideOutputSelectSpec("late"), datasets=["late"]),
    ]
    main, late = ListOutput(), ListOutput()
    chain = OperatorChain(
        descs, {"main": main, "late": late}, lambda n: make_ctx(n, config={"pipeline.auto-watermark-interval": "1 ms"})
    )
    chain.open()
    clock = Clock(0)
    chain.operators[1].clock = clock
    for t, rows in enumerate([[("a", 1, 1_000), ("a", 1, 12_000)], [("a", 1, 2_000), ("b", 1, 15_000)]]):
        clock.t = t * 10
        chain.push(Batch.from_rows(rows))
    chain.end_input()
    chain.close()
    assert main.rows == [("a", 1, 1_000), ("a", 1, 12_000), ("b", 1, 15_000)]
    assert late.rows == [("a", 1, 2_000)]
    assert [int(t) for b in late.batches for t in b.timestamps] == [2_000]


def test_time_window_arithmetic() -> None:
    assert TumblingEventTimeWindows.of(Time.seconds(5)).assign_windows(-1) == [TimeWindow(-5_000, 0)]
    assert TumblingEventTimeWindows.of(Time.seconds(5), Time.seconds(1)).assign_windows(0) == [
        TimeWindow(-4_000, 1_000)
    ]
    assert SlidingEventTimeWindows.of(Time.seconds(3), Time.seconds(1)).assign_windows(2_500) == [
        TimeWindow(2_000, 5_000),
        TimeWindow(1_000, 4_000),
        TimeWindow(0, 3_000),
    ]
    with pytest.raises(ValueError, match="must be positive"):
        TumblingEventTimeWindows.of(Time.seconds(0))
    assert Watermark(5).get_timestamp() == 5


def test_tumbling_windows_keep_contents_outside_the_backend_between_checkpoints() -> None:
    def run(restored=None):  # type: ignore[no-untyped-def]
        mgr = TaskStateManager(restored=restored)
        op, out = open_operator(
            spec(TumblingEventTimeWindows.of(Time.seconds(5)), "process", None, Describe(), lateness=2_000),
            state=mgr,
            name="window",
        )
        return op, out

    op, out = run()
    op.process_batch(events(("a", 1, 1_000), ("b", 2, 1_500), ("a", 3, 6_000)))
    op.process_watermark(wm(5_500))  # fires [0, 5000); kept until 6999 for late data
    assert out.rows == [("a", 0, 5_000, [1], 5_500), ("b", 0, 5_000, [2], 5_500)]
    assert op.backend.num_entries() == 0  # contents in the window buffers, no timers
    snapshot = snapshot_operators([("window", op)], 1, 0).result()
    assert op.backend.num_entries() == 0  # written for the snapshot, removed again
    restored, out2 = run(snapshot)
    restored.process_watermark(wm(5_500))
    restored.process_batch(events(("a", 4, 2_000)))  # late within the allowed lateness: fires again
    restored.end_input()
    assert out2.rows == [
        ("a", 0, 5_000, [1, 4], 5_500),
        ("a", 5_000, 10_000, [3], MAX_TIMESTAMP),
    ]
