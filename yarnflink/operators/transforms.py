"""Stateless record-at-a-time and batch-at-a-time transformations, and ``process``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from yarnflink.common.records import (
    KIND_KEY,
    TIMESTAMPS_COLUMN,
    Batch,
    split_timestamps,
    table_to_batch,
    with_kind,
)
from yarnflink.operators.base import OperatorContext, StreamOperator
from yarnflink.operators.functions import (
    KeyedProcessFunction,
    ProcessFunction,
    RuntimeContext,
)
from yarnflink.operators.keys import KeyExtractor, unwrap_function
from yarnflink.operators.specs import (
    FilterSpec,
    FlatMapSpec,
    MapBatchesSpec,
    MapSpec,
    ProcessSpec,
)


class UserFunctionOperator(StreamOperator):
    """An operator around one user function; opens/closes it if it is a rich function."""

    method = ""

    def __init__(self, fn: Any):
        self.fn, self.rich = unwrap_function(fn, self.method)
        self._opened = False

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        if self.rich is not None:
            self.rich.open(RuntimeContext(ctx))
            self._opened = True

    def close(self) -> None:
        if self._opened and self.rich is not None:
            self._opened = False
            self.rich.close()

    @property
    def operator_name(self) -> str:
        ctx = getattr(self, "ctx", None)
        return ctx.operator_name if ctx is not None else type(self).__name__


class MapOperator(UserFunctionOperator):
    method = "map"

    def __init__(self, spec: MapSpec):
        super().__init__(spec.fn)

    def process_batch(self, batch: Batch) -> None:
        rows = batch.rows()
        if rows:
            fn, c = self.fn, self.cancellation
            # the condition is a slotted attribute read: a few ns per record (see Cancellation)
            out = [fn(r) for r in rows if not c.cancelled]
            c.check()  # cancelled inside the batch: the rest was skipped
            self.output.emit(Batch(out, None, batch.timestamps))


class FlatMapOperator(UserFunctionOperator):
    method = "flat_map"

    def __init__(self, spec: FlatMapSpec):
        super().__init__(spec.fn)

    def process_batch(self, batch: Batch) -> None:
        fn = self.fn
        out: list = []
        extend = out.extend
        ts = batch.timestamps
        ends: list | None = None if ts is None else []  # outputs inherit their input's timestamp
        c = self.cancellation
        for r in batch.rows():
            if c.cancelled:
                c.check()
            res = fn(r)
            if res is not None:
                if not hasattr(res, "__iter__"):
                    raise TypeError(
                        f"flat_map operator {self.operator_name!r}: the function must return an "
                        f"iterable (or be a generator), got {type(res).__name__}"
                    )
                extend(res)
            if ends is not None:
                ends.append(len(out))
        if out:
            if ends is not None:
                ts = np.repeat(ts, np.diff(np.array([0] + ends)))
            self.output.emit(Batch(out, None, ts))


class FilterOperator(UserFunctionOperator):
    method = "filter"

    def __init__(self, spec: FilterSpec):
        super().__init__(spec.fn)

    def process_batch(self, batch: Batch) -> None:
        fn, c = self.fn, self.cancellation
        rows = batch.rows()
        ts = batch.timestamps
        if ts is not None:
            keep = np.fromiter((not c.cancelled and bool(fn(r)) for r in rows), dtype=bool, count=len(rows))
            c.check()
            out = [r for r, k in zip(rows, keep) if k]
            ts = ts[keep]
        else:
            out = [r for r in rows if not c.cancelled and fn(r)]
            c.check()
        if len(out) == len(rows):
            if out:
                self.output.emit(batch)  # unchanged: keep the cached forms
        elif out:
            self.output.emit(Batch(out, None, ts))


class MapBatchesOperator(UserFunctionOperator):
    """``map_batches(fn)``: ``fn(RecordBatch) -> RecordBatch | Table``.

    Event timestamps follow the rows the function returns: a batch with timestamps reaches the
    function with them as the last column, ``TIMESTAMPS_COLUMN`` (int64 ms). A result that has that
    column gives its rows those timestamps (so ``rb.filter(mask)``, ``rb.take(idx)``, ``rb.slice``
    and column-appending results keep them for free, and a function may set new ones). A result
    without it keeps the input's timestamps by position if it has the same number of rows (a map);
    a result with another number of rows and no timestamp column has no timestamps (as Flink's
    records without one), since which row has which timestamp is unknown (e.g. an aggregation)."""

    method = "map_batches"

    def __init__(self, spec: MapBatchesSpec):
        super().__init__(spec.fn)

    def process_batch(self, batch: Batch) -> None:
        if len(batch) == 0:
            return
        ts = batch.timestamps
        rb_in = batch.arrow() if ts is None else batch.wire_arrow()
        res = self.fn(rb_in)
        if isinstance(res, pa.RecordBatch):
            if res.num_rows:
                self.output.emit(self._result(rb_in, res, ts))
        elif isinstance(res, pa.Table):
            if res.num_rows and ts is not None and res.schema.get_field_index(TIMESTAMPS_COLUMN) < 0:
                res = pa.Table.from_batches([table_to_batch(res)])  # one batch: positions line up with the input
            for rb in res.to_batches():
                if rb.num_rows:
                    self.output.emit(self._result(rb_in, rb, ts))
        else:
            raise TypeError(
                f"map_batches operator {self.operator_name!r}: the function must return a "
                f"pyarrow.RecordBatch or pyarrow.Table, got {type(res).__name__}"
            )

    def _result(self, rb_in: pa.RecordBatch, rb: pa.RecordBatch, ts: np.ndarray | None) -> Batch:
        i = rb.schema.get_field_index(TIMESTAMPS_COLUMN)
        if i >= 0 and (rb.column(i).null_count or not _ts_type_ok(rb.column(i).type)):
            raise TypeError(
                f"map_batches operator {self.operator_name!r}: column {TIMESTAMPS_COLUMN!r} holds the "
                f"rows' event timestamps and must be int64 milliseconds without nulls, got {rb.column(i).type}"
            )
        rb, new_ts = split_timestamps(rb)
        rb = _fix_kind(split_timestamps(rb_in)[0], rb)
        if new_ts is not None or ts is None:
            return Batch(rb=rb, timestamps=new_ts)
        if rb.num_rows != rb_in.num_rows:
            return Batch(rb=rb)  # which row has which timestamp is unknown: the rows have none
        return Batch(rb=rb, timestamps=ts)


def _ts_type_ok(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_timestamp(t)


def _fix_kind(rb_in: pa.RecordBatch, rb_out: pa.RecordBatch) -> pa.RecordBatch:
    """Drop a kind the output inherited from the input (pyarrow keeps schema metadata through
    ``append_column``/``select``/...) when the columns changed: the columns then decide."""
    md = rb_out.schema.metadata
    if md and KIND_KEY in md and rb_out.schema.names != rb_in.schema.names:
        in_md = rb_in.schema.metadata or {}
        if in_md.get(KIND_KEY) == md[KIND_KEY]:
            return with_kind(rb_out, None)
    return rb_out


class ProcessOperator(UserFunctionOperator):
    """``process(fn)``: fn is a ProcessFunction / KeyedProcessFunction-like object (with
    ``process_element(value, ctx)``) or a plain callable ``value -> iterable``. Return values are
    iterated (as PyFlink does); ``None`` means no output."""

    method = "process_element"

    def __init__(self, spec: ProcessSpec):
        super().__init__(spec.fn)
        self.keys: KeyExtractor | None = KeyExtractor(spec.key_selector) if spec.key_selector is not None else None
        self.with_ctx = callable(getattr(spec.fn, "process_element", None))
        self.pctx: ProcessFunction.Context = KeyedProcessFunction.Context() if self.keys else ProcessFunction.Context()
        if self.keys is not None and self.keys.rich is not None:
            self._key_rich = self.keys.rich
        else:
            self._key_rich = None

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        if self._key_rich is not None:
            self._key_rich.open(RuntimeContext(ctx))

    def _bad_result(self, res: Any) -> TypeError:
        return TypeError(
            f"process operator {self.operator_name!r}: process_element must return an iterable "
            f"(or yield), got {type(res).__name__}"
        )

    def process_batch(self, batch: Batch) -> None:
        rows = batch.rows()
        fn = self.fn
        out: list = []
        extend = out.extend
        pctx = self.pctx
        c = self.cancellation
        if self.keys is not None:
            assert isinstance(pctx, KeyedProcessFunction.Context)  # made so when keyed
            keys = self.keys.keys_of_rows(rows)
            for k, r in zip(keys, rows):
                if c.cancelled:
                    c.check()
                pctx._current_key = k
                res = fn(r, pctx) if self.with_ctx else fn(r)
                if res is not None:
                    if not hasattr(res, "__iter__"):
                        raise self._bad_result(res)
                    extend(res)
        else:
            for r in rows:
                if c.cancelled:
                    c.check()
                res = fn(r, pctx) if self.with_ctx else fn(r)
                if res is not None:
                    if not hasattr(res, "__iter__"):
                        raise self._bad_result(res)
                    extend(res)
        if out:
            self.output.emit(Batch.from_rows(out))

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self._key_rich is not None:
                self._key_rich.close()
