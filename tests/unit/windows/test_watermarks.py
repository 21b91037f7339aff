"""Timestamps and watermarks: strategies, the assigning operator, the valve, and timestamps
travelling with records through operators and the network."""

from __future__ import annotations

import numpy as np
import pytest

from yarnflink.common.records import Batch
from yarnflink.operators import specs as S
from yarnflink.operators.factory import create_partitioner_output
from yarnflink.operators.watermarks import (
    MAX_TIMESTAMP,
    MIN_TIMESTAMP,
    BoundedOutOfOrdernessWatermarks,
    Duration,
    StatusWatermarkValve,
    TimestampsAndWatermarksSpec,
    Watermark,
    WatermarkStatus,
    WatermarkStrategy,
)

from .helpers import Clock, batch, open_operator, wm

ACTIVE, IDLE = WatermarkStatus.ACTIVE, WatermarkStatus.IDLE  # type: ignore[attr-defined]


def test_bounded_out_of_orderness_is_max_timestamp_minus_bound_minus_one() -> None:
    g = BoundedOutOfOrdernessWatermarks(5000)
    assert g.current_watermark() == MIN_TIMESTAMP
    for t in (10_000, 7_000, 12_000, 11_000):
        g.on_event(t)
    assert g.current_watermark() == 12_000 - 5_000 - 1


def strategy(bound_ms: int = 100, idle_ms: int = 0) -> WatermarkStrategy:
    s = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(bound_ms)).with_timestamp_assigner(
        lambda e, _: e[1]
    )
    return s.with_idleness(Duration.of_millis(idle_ms)) if idle_ms else s


def test_assigner_attaches_timestamps_and_emits_periodic_watermarks() -> None:
    clock = Clock(0)
    op, out = open_operator(
        TimestampsAndWatermarksSpec(strategy()), clock, **{"pipeline.auto-watermark-interval": "50 ms"}
    )
    op.process_batch(batch([("a", 1000), ("b", 900)]))
    assert out.log[0] == ("rows", [("a", 1000), ("b", 900)], [1000, 900])
    assert out.watermarks == [wm(899)]  # first batch: emitted at once
    op.process_batch(batch([("c", 2000)]))
    assert out.watermarks == [wm(899)]  # interval not yet elapsed
    clock.t = 50
    op.process_batch(batch([("d", 1500)]))
    assert out.watermarks == [wm(899), wm(1899)]
    op.process_watermark(wm(5000))  # upstream watermarks are replaced by this operator's ...
    assert out.watermarks == [wm(899), wm(1899)]
    op.process_watermark(Watermark(MAX_TIMESTAMP))  # ... except the final one
    assert out.watermarks[-1] == Watermark(MAX_TIMESTAMP)


def test_assigner_emits_its_watermark_at_end_of_input_and_checks_results() -> None:
    op, out = open_operator(
        TimestampsAndWatermarksSpec(strategy()), Clock(0), **{"pipeline.auto-watermark-interval": "0"}
    )
    op.process_batch(batch([("a", 1000)]))
    assert out.watermarks == []  # interval 0: no periodic watermarks (Flink)
    op.end_input()
    assert out.watermarks == [wm(899)] and out.ended == 1
    bad, _ = open_operator(
        TimestampsAndWatermarksSpec(
            WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: str(e))
        )
    )
    with pytest.raises(TypeError, match="must return an int"):
        bad.process_batch(batch([1]))
    none, _ = open_operator(TimestampsAndWatermarksSpec(WatermarkStrategy.for_monotonous_timestamps()))
    with pytest.raises(ValueError, match="no timestamps"):
        none.process_batch(batch([1]))


def test_idleness_marks_the_stream_idle_and_active_again() -> None:
    clock = Clock(0)
    op, out = open_operator(
        TimestampsAndWatermarksSpec(strategy(idle_ms=1000)), clock, **{"pipeline.auto-watermark-interval": "100 ms"}
    )
    op.process_batch(batch([("a", 5000)]))
    clock.t = 999
    op.on_processing_time(clock.t)
    assert IDLE not in out.watermarks
    clock.t = 1200
    op.on_processing_time(clock.t)
    assert out.watermarks[-1] == IDLE
    clock.t = 1300
    op.process_batch(batch([("a", 6000)]))
    assert out.watermarks[-2:] == [ACTIVE, wm(5899)]


def test_valve_takes_the_minimum_over_active_channels() -> None:
    v = StatusWatermarkValve(3)
    assert v.input_watermark(0, wm(10)) == []
    assert v.input_watermark(1, wm(20)) == []
    assert v.input_watermark(2, wm(5)) == [wm(5)]
    assert v.input_watermark(2, wm(4)) == []  # never backwards
    assert v.input_watermark(2, wm(30)) == [wm(10)]
    assert v.input_watermark(0, wm(25)) == [wm(20)]


def test_valve_ignores_idle_channels_and_realigns_them() -> None:
    v = StatusWatermarkValve(2)
    v.input_watermark(0, wm(10))
    assert v.input_watermark_status(1, IDLE) == [wm(10)]  # the idle channel no longer holds it back
    assert v.input_watermark(0, wm(50)) == [wm(50)]
    assert v.input_watermark(1, wm(60)) == []  # watermarks of an idle channel are ignored
    assert v.input_watermark_status(1, ACTIVE) == []
    assert v.input_watermark(1, wm(40)) == []  # behind the output: not aligned yet
    assert v.input_watermark(0, wm(70)) == [wm(70)]
    assert v.input_watermark(1, wm(65)) == []  # not yet caught up with 70
    assert v.input_watermark(1, wm(80)) == []  # aligned now; output waits for channel 0 (70)
    assert v.input_watermark(0, wm(90)) == [wm(80)]


def test_valve_all_idle_outputs_idle_then_active() -> None:
    v = StatusWatermarkValve(2)
    v.input_watermark(0, wm(10))
    v.input_watermark(1, wm(20))
    assert v.input_watermark_status(0, IDLE) == [wm(20)]
    assert v.input_watermark_status(1, IDLE) == [IDLE]
    assert v.input_watermark_status(0, ACTIVE) == [ACTIVE]


def test_valve_ended_channels_count_as_max() -> None:
    v = StatusWatermarkValve(2)
    v.input_watermark(0, wm(10))
    assert v.end_of_input(1) == [wm(10)]
    assert v.end_of_input(0) == [Watermark(MAX_TIMESTAMP)]


def test_timestamps_follow_records_through_map_filter_flat_map() -> None:
    from tests.unit.operators.helpers import ListOutput, make_ctx
    from yarnflink.operators.factory import create_operator

    def run(spec):  # type: ignore[no-untyped-def]
        op = create_operator(spec)
        out = ListOutput()
        op.output = out
        op.open(make_ctx())
        op.process_batch(batch([1, 2, 3, 4], [10, 20, 30, 40]))
        return [(r, int(t)) for b in out.batches for r, t in zip(b.rows(), b.timestamps)]

    assert run(S.MapSpec(lambda x: x * 2)) == [(2, 10), (4, 20), (6, 30), (8, 40)]
    assert run(S.FilterSpec(lambda x: x % 2 == 0)) == [(2, 20), (4, 40)]
    assert run(S.FlatMapSpec(lambda x: [x] * (x - 2))) == [(3, 30), (4, 40), (4, 40)]
    assert run(S.ProcessSpec(fn=lambda x: [x, -x] if x > 3 else [])) == [(4, 40), (-4, 40)]


class _Writer:
    def __init__(self) -> None:
        self.sent: list = []
        self.events: list = []

    def emit(self, channel, rb):  # type: ignore[no-untyped-def]
        self.sent.append((channel, rb))

    def broadcast(self, rb):  # type: ignore[no-untyped-def]
        self.sent.append((-1, rb))

    def emit_event(self, event):  # type: ignore[no-untyped-def]
        self.events.append((len(self.sent), event))

    def finish(self) -> None:
        pass


def test_timestamps_cross_the_network_with_their_records_and_watermarks_follow_the_data() -> None:
    w = _Writer()
    out = create_partitioner_output(w, "hash", 3, S.KeySelectorSpec(field=0), 128, 0, buffer_timeout_s=-1)
    rows = [(f"k{i}", i) for i in range(60)]
    out.emit(Batch(rows, None, np.arange(60, dtype=np.int64) * 100))
    out.emit_watermark(wm(4000))
    out.end_input()
    assert w.events == [(len(w.sent), wm(4000))]  # after all buffered rows were sent
    got = []
    for _, rb in w.sent:
        b = Batch.from_arrow(rb)
        assert b.arrow().schema.names == ["f0", "f1"]  # the timestamp column is stripped again
        got += [(r, int(t)) for r, t in zip(b.rows(), b.timestamps)]
    assert sorted(got) == sorted((r, r[1] * 100) for r in rows)
    plain = Batch.from_arrow(Batch.from_rows([1, 2]).wire_arrow())
    assert plain.timestamps is None and plain.rows() == [1, 2]
