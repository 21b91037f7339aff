"""Timestamps as a column: they follow the rows through ``map_batches`` and keyed operators, and
``WatermarkStrategy.with_timestamp_column`` assigns a whole Arrow batch at once."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from yarnflink.common.records import TIMESTAMPS_COLUMN, Batch, FieldError
from yarnflink.operators import specs as S
from yarnflink.operators.chain import OperatorChain
from yarnflink.operators.watermarks import Duration, TimestampsAndWatermarksSpec, WatermarkStrategy
from yarnflink.operators.windows import Time, TumblingEventTimeWindows, WindowSpec

from .helpers import Clock, batch, open_operator, wm

BOUNDED = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0))


def arrow_events(keys: list, values: list, ts: list) -> Batch:
    return Batch.from_arrow(pa.record_batch([pa.array(keys), pa.array(values), pa.array(ts)], names=["k", "v", "ts"]))


def test_an_identity_map_batches_between_the_assigner_and_a_window_keeps_the_timestamps() -> None:
    from tests.unit.operators.helpers import ListOutput, desc, make_ctx

    descs = [
        desc(1, TimestampsAndWatermarksSpec(BOUNDED.with_timestamp_assigner(lambda e, _: e[2])), chained=[2]),
        desc(2, S.MapBatchesSpec(fn=lambda rb: rb), chained=[3]),
        desc(
            3,
            WindowSpec(TumblingEventTimeWindows.of(Time.seconds(10)), S.KeySelectorSpec(field=0), "reduce", _add),
            datasets=["main"],
        ),
    ]
    main = ListOutput()
    chain = OperatorChain(descs, {"main": main}, lambda n: make_ctx(n))
    chain.open()
    chain.push(Batch.from_rows([("a", 1, 1_000), ("a", 2, 2_000), ("b", 5, 12_000)]))
    chain.end_input()
    chain.close()
    assert main.rows == [("a", 3, 1_000), ("b", 5, 12_000)]


def _add(a, b):  # type: ignore[no-untyped-def]
    return (a[0], a[1] + b[1], a[2])


def _map_batches(fn, b: Batch) -> list[Batch]:  # type: ignore[no-untyped-def]
    op, out = open_operator(S.MapBatchesSpec(fn=fn))
    op.process_batch(b)
    return [e for e in out.log if e[0] == "rows"]


def test_map_batches_sees_the_timestamps_as_a_column_and_they_follow_the_rows_it_returns() -> None:
    seen: list = []

    def keep_even(rb: pa.RecordBatch) -> pa.RecordBatch:
        seen.append(rb.schema.names)
        return rb.filter(pc.equal(pc.bit_wise_and(rb.column(0), 1), 0))

    got = _map_batches(keep_even, batch([1, 2, 3, 4], [10, 20, 30, 40]))
    assert seen == [["f0", TIMESTAMPS_COLUMN]]
    assert got == [("rows", [2, 4], [20, 40])]


def test_map_batches_may_set_new_timestamps() -> None:
    def shift(rb: pa.RecordBatch) -> pa.RecordBatch:
        return pa.record_batch([rb.column(0), pc.add(rb.column(1), 5)], names=["x", TIMESTAMPS_COLUMN])

    assert _map_batches(shift, batch([1, 2], [10, 20])) == [("rows", [{"x": 1}, {"x": 2}], [15, 25])]
    # a batch without timestamps may get some
    ts = pa.array([7, 8], type=pa.int64())
    assert _map_batches(lambda rb: rb.append_column(TIMESTAMPS_COLUMN, ts), batch([1, 2])) == [("rows", [1, 2], [7, 8])]


def test_map_batches_without_the_column_keeps_timestamps_by_position_or_drops_them() -> None:
    def square(rb: pa.RecordBatch) -> pa.RecordBatch:
        return pa.record_batch([pc.multiply(rb.column(0), rb.column(0))], names=["f0"])

    assert _map_batches(square, batch([2, 3], [10, 20])) == [("rows", [4, 9], [10, 20])]
    # another number of rows without the column: which row has which timestamp is unknown
    assert _map_batches(lambda rb: rb.select([0]).slice(0, 1), batch([2, 3], [10, 20])) == [("rows", [2], None)]
    with pytest.raises(TypeError, match="must be int64 milliseconds"):
        _map_batches(lambda rb: rb.set_column(1, TIMESTAMPS_COLUMN, pa.array(["x", "y"])), batch([2, 3], [10, 20]))
    assert _map_batches(lambda rb: rb, batch([2, 3])) == [("rows", [2, 3], None)]


def test_keyed_operators_keep_the_timestamps_of_their_inputs() -> None:
    key = S.KeySelectorSpec(field=0)
    op, out = open_operator(S.AggregateSpec(agg="sum", field=1, key_selector=key))
    rb = pa.record_batch([pa.array(["a", "a"]), pa.array([1, 2])], names=["f0", "f1"])
    op.process_batch(Batch(rb=rb, timestamps=np.array([5, 6])))  # the vectorized sum
    op.process_batch(batch([("a", 3)], [7]))
    assert out.log == [("rows", [("a", 1), ("a", 3)], [5, 6]), ("rows", [("a", 6)], [7])]
    op, out = open_operator(S.ReduceSpec(fn=lambda a, b: a + b, key_selector=S.KeySelectorSpec(fn=lambda x: 0)))
    op.process_batch(batch([1, 2], [5, 6]))
    assert out.log == [("rows", [1, 3], [5, 6])]


def test_with_timestamp_column_assigns_a_whole_arrow_batch_and_watermarks_per_batch() -> None:
    clock = Clock(0)
    op, out = open_operator(
        TimestampsAndWatermarksSpec(BOUNDED.with_timestamp_column("ts")),
        clock,
        **{"pipeline.auto-watermark-interval": "0 ms"},
    )
    op.process_batch(arrow_events(["a", "b"], [1, 2], [1_000, 900]))
    assert out.log[0] == ("rows", [{"k": "a", "v": 1, "ts": 1_000}, {"k": "b", "v": 2, "ts": 900}], [1_000, 900])
    op.end_input()
    assert out.watermarks == [wm(999)]
    # rows (tuples) work too, by position, and Arrow timestamps are converted to milliseconds
    op, out = open_operator(TimestampsAndWatermarksSpec(BOUNDED.with_timestamp_column(1)))
    op.process_batch(batch([("a", 5), ("b", 6)]))
    assert out.log[0][2] == [5, 6]
    op, out = open_operator(TimestampsAndWatermarksSpec(BOUNDED.with_timestamp_column("t")))
    stamps = pa.array([1, 2], type=pa.timestamp("s"))
    op.process_batch(Batch.from_arrow(pa.record_batch([stamps], names=["t"])))
    assert out.log[0][2] == [1_000, 2_000]


def test_with_timestamp_column_errors() -> None:
    with pytest.raises(TypeError, match="column name"):
        BOUNDED.with_timestamp_column(1.5)  # type: ignore[arg-type]
    op, _ = open_operator(TimestampsAndWatermarksSpec(BOUNDED.with_timestamp_column("when")))
    with pytest.raises(FieldError, match="with_timestamp_column\\('when'\\).*not found"):
        op.process_batch(arrow_events(["a"], [1], [1]))
    with pytest.raises(TypeError, match="must hold integers"):
        op.process_batch(batch([{"when": "noon"}]))
    op, _ = open_operator(TimestampsAndWatermarksSpec(BOUNDED.with_timestamp_column("k")))
    with pytest.raises(TypeError, match="integers \\(ms\\) or Arrow timestamps"):
        op.process_batch(arrow_events(["a"], [1], [1]))


def test_timestamps_that_are_an_int64_column_cross_the_network_as_that_column_not_a_copy() -> None:
    from yarnflink.operators.partitioners import NetworkOutput

    sent: list = []

    class Writer:
        def emit(self, channel: int, rb: pa.RecordBatch) -> None:
            sent.append(rb)

        def finish(self) -> None:
            pass

    op, _ = open_operator(TimestampsAndWatermarksSpec(BOUNDED.with_timestamp_column("ts")))
    emitted: list[Batch] = []
    op.output.emit = emitted.append  # type: ignore[method-assign]
    keys = list(range(20))
    op.process_batch(Batch.from_arrow(pa.record_batch({"k": keys, "ts": [1_000 + k for k in keys]})))
    net = NetworkOutput(Writer(), "hash", 3, S.KeySelectorSpec(field="k"), 128, 0, buffer_timeout_s=0)
    net.emit(emitted[0])
    assert sent and all(rb.schema.names == ["k", "ts"] for rb in sent)  # no extra timestamp column
    for rb in sent:
        got = Batch.from_arrow(rb)
        assert got.timestamps.tolist() == got.arrow().column("ts").to_pylist()
        assert got.arrow().schema.metadata is None  # the mark is gone
        assert got.network_arrow().equals(rb, check_metadata=True)  # and comes back to send it on
    assert sorted(k for rb in sent for k in rb.column("k").to_pylist()) == keys
    # a map_batches still sees the timestamps as a column of their own
    assert emitted[0].wire_arrow().schema.names == ["k", "ts", TIMESTAMPS_COLUMN]
    # timestamps of other columns (int32 here, or Arrow timestamps) still travel as a copy
    op.process_batch(Batch.from_arrow(pa.record_batch({"k": [1], "ts": pa.array([5], pa.int32())})))
    assert emitted[1].network_arrow().schema.names == ["k", "ts", TIMESTAMPS_COLUMN]
