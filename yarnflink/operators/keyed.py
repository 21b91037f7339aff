"""Keyed operators: ``reduce`` and ``sum``/``min``/``max``.

State is an in-memory dict per operator instance (proper keyed state backends come later).

STREAMING: one output per input record (the updated value of its key).
BATCH: nothing is emitted until ``end_input``; then each key's final value once, in the order the
keys were first seen.

``sum``/``min``/``max`` (Flink's and PyFlink's semantics): the output record is the key's *first*
record with ``field`` replaced by the running aggregate of its key (PyFlink's reduce keeps the
accumulator, which starts as the first record, and replaces that field only).
Aggregates are computed with Python ``+``/``min``/``max`` per record, or vectorized with numpy when
the key is a field and batches arrive in Arrow form with a null-free integer/string/boolean key
column and a null-free numeric value column (see ``AggregateOperator``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.types as pat

from yarnflink.common.lazy import load_module
from yarnflink.common.records import (
    KIND_PICKLE,
    Batch,
    arrow_to_records,
    column_of,
    field_getter,
    record_kind,
    replace_fields,
)
from yarnflink.operators.base import OperatorContext, StreamOperator
from yarnflink.operators.functions import RuntimeContext
from yarnflink.operators.keys import KeyExtractor, unwrap_function
from yarnflink.operators.specs import AggregateSpec, ReduceSpec

if TYPE_CHECKING:
    import pandas as pd

_MISSING = object()
EMIT_ROWS = 65536
#: integer keys in [0, this) may map to slots through a direct numpy table (if dense enough)
_DIRECT_LIMIT = 1 << 22


def _emit_rows(output, rows: list) -> None:
    for i in range(0, len(rows), EMIT_ROWS):
        output.emit(Batch.from_rows(rows[i : i + EMIT_ROWS]))


from yarnflink.operators.checkpointed import KeyedDictState  # noqa: E402


class ReduceOperator(StreamOperator):
    def __init__(self, spec: ReduceSpec):
        self.fn, self.rich = unwrap_function(spec.fn, "reduce")
        self.keys = KeyExtractor(spec.key_selector)
        self.batch_mode = spec.runtime_mode == "BATCH"
        self.state: dict = {}

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        self._checkpointed = KeyedDictState(ctx, "reduce")  # checkpointed per key group
        restored = self._checkpointed.restored()
        if restored is not None:
            self.state = restored
        for f in (self.rich, self.keys.rich):
            if f is not None:
                f.open(RuntimeContext(ctx))

    def snapshot_state(self, checkpoint_id: int, timestamp: int, factory: Any) -> list:
        return self._checkpointed.snapshot(self.state, checkpoint_id, timestamp, factory)

    def close(self) -> None:
        for f in (self.rich, self.keys.rich):
            if f is not None:
                f.close()

    def process_batch(self, batch: Batch) -> None:
        rows = batch.rows()
        keys = self.keys.keys_of_rows(rows)
        st = self.state
        get = st.get
        fn, c = self.fn, self.cancellation
        if self.batch_mode:
            for k, r in zip(keys, rows):
                if c.cancelled:
                    c.check()
                cur = get(k, _MISSING)
                st[k] = r if cur is _MISSING else fn(cur, r)
            return
        out: list[Any] = []
        append = out.append
        for k, r in zip(keys, rows):
            if c.cancelled:
                c.check()
            cur = get(k, _MISSING)
            v = r if cur is _MISSING else fn(cur, r)
            st[k] = v
            append(v)
        if out:
            self.output.emit(Batch(out, None, batch.timestamps))  # outputs keep their input's timestamp

    def end_input(self) -> None:
        if self.batch_mode and self.state:
            _emit_rows(self.output, list(self.state.values()))
        self.output.end_input()


# ----------------------------------------------------------------------------- aggregate
def _vec_key_type_ok(t: pa.DataType) -> bool:
    return (
        (pat.is_integer(t) and not pat.is_uint64(t))
        or pat.is_boolean(t)
        or pat.is_string(t)
        or pat.is_large_string(t)
        or pat.is_binary(t)
        or pat.is_large_binary(t)
    )


def _vec_value_dtype(t: pa.DataType) -> np.dtype | None:
    if pat.is_integer(t) and not pat.is_uint64(t):
        return np.dtype(np.int64)
    if pat.is_floating(t):
        return np.dtype(np.float64)
    return None


class _SlotTable:
    """Key -> dense slot number, assigned in first-seen order.

    A dict is the authority (Python equality: ``1 == 1.0 == True``); a pandas Index over the keys
    in slot order answers most lookups vectorized (its position is the slot). The Index is rebuilt
    when enough keys are missing from it (geometric growth keeps rebuilding amortized O(1) per
    key); keys not yet in it are looked up in the dict.
    """

    __slots__ = ("map", "keys", "index", "indexed")

    def __init__(self) -> None:
        self.map: dict = {}
        self.keys: list = []
        self.index: pd.Index | None = None
        self.indexed = 0

    def __len__(self) -> int:
        return len(self.keys)

    def lookup(self, uniq: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """``(slots, is_new)`` for distinct keys ``uniq`` (an Arrow array); new keys are added."""
        m = len(uniq)
        if self.index is not None:  # the first ``indexed`` keys
            slots = self.index.get_indexer(uniq.to_numpy(zero_copy_only=False)).astype(np.int64)
            miss = np.flatnonzero(slots < 0)
        else:
            slots = np.full(m, -1, dtype=np.int64)
            miss = np.arange(m)
        is_new = np.zeros(m, dtype=bool)
        if len(miss):
            miss_keys = uniq.take(pa.array(miss)).to_pylist()
            mp, keys = self.map, self.keys
            get = mp.get
            found = []
            for i, k in zip(miss.tolist(), miss_keys):
                s = get(k, -1)
                if s < 0:
                    s = len(keys)
                    mp[k] = s
                    keys.append(k)
                    is_new[i] = True
                found.append(s)
            slots[miss] = found
            unindexed = len(keys) - self.indexed
            if unindexed >= max(64, self.indexed // 8):
                # deferred: ~70 MB a TaskExecutor needs only for large keyed batches
                self.index = load_module("pandas").Index(keys)
                self.indexed = len(keys)
        return slots, is_new


class _FirstRows:
    """Vectorized: the first row of each key in slot order, without the aggregated column (which
    the output replaces); rows of one schema (another one makes the batch ineligible)."""

    __slots__ = ("pieces", "schema", "rows")

    def __init__(self) -> None:
        self.pieces: list[pa.RecordBatch] = []
        self.schema: pa.Schema | None = None
        self.rows = 0

    def append(self, rb: pa.RecordBatch) -> None:
        if self.schema is None:
            self.schema = rb.schema
        if rb.num_rows:
            self.pieces.append(rb)
            self.rows += rb.num_rows
        if len(self.pieces) > 32:  # keep take() on few chunks
            self.pieces = pa.Table.from_batches(self.pieces).combine_chunks().to_batches() or []

    def take(self, slots: np.ndarray) -> pa.RecordBatch:
        if len(self.pieces) == 1:
            return self.pieces[0].take(pa.array(slots))
        t = pa.Table.from_batches(self.pieces, schema=self.schema).take(pa.array(slots)).combine_chunks()
        return pa.RecordBatch.from_arrays(t.columns, schema=t.schema) if t.num_rows == 0 else t.to_batches()[0]


class AggregateOperator(StreamOperator):
    """Keyed running sum/min/max.

    Two interchangeable implementations share the semantics:

    * per record (``mode == "rec"``): a dict key -> aggregate, Python ``+``/``min``/``max``;
    * vectorized (``mode == "vec"``): keys are dictionary-encoded per batch, mapped to slots of a
      numpy state array (dict lookups only for the distinct keys of the batch), and the running
      aggregate within the batch is a grouped cumulative sum/min/max (stable radix argsort of the
      codes + ``np.cumsum``; pandas' grouped cummin/cummax, and for floats its grouped cumsum),
      plus the carried state of each key.

    The first batch picks the mode (vectorized if it is an eligible Arrow batch). A later batch that
    is not eligible switches the operator to per-record for good (the state is migrated). Float sums
    may differ from the per-record path by rounding (pandas' grouped cumsum is compensated).
    """

    def __init__(self, spec: AggregateSpec):
        if spec.agg not in ("sum", "min", "max"):
            raise ValueError(f"unknown aggregation {spec.agg!r}")
        self.agg = spec.agg
        self.field = spec.field
        self.keys = KeyExtractor(spec.key_selector)
        self.batch_mode = spec.runtime_mode == "BATCH"
        self.mode: str | None = None
        self._values_of = field_getter(spec.field)
        # per-record state
        self.rec_state: dict = {}
        self.rec_first: dict = {}  # key -> its first record (the output's other fields)
        self.rec_last: dict = {}  # BATCH: key -> latest output record
        # vectorized state
        self.slots = _SlotTable()  # key -> slot (slot order == first-seen order)
        self._direct = np.full(0, -1, dtype=np.int64)  # small int key -> slot (-1: none yet)
        self.vals = np.zeros(1024, dtype=np.int64)
        self.firsts = _FirstRows()
        #: the aggregated column's position and name, and whether the record's other columns are
        #: none or the key alone (then every row of a key has its first row's other fields)
        self.value_column: tuple[int, str, bool] = (0, "f0", True)
        #: the schema of the vectorized batches without that column (batches must share it)
        self.rest_schema: pa.Schema | None = None

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        self._checkpointed = KeyedDictState(ctx, f"aggregate-{self.agg}")  # checkpointed per key group
        # the first records apart, so "aggregate-<agg>" stays key -> aggregate (state processor);
        # a checkpoint without them (older) takes a key's next record as its first
        self._checkpointed_first = KeyedDictState(ctx, f"aggregate-{self.agg}-first", beside=self._checkpointed)
        restored = self._checkpointed.restored()
        if restored is not None:
            self.mode = "rec"
            self.rec_state = restored
            self.rec_first = self._checkpointed_first.restored() or {}
        if self.keys.rich is not None:
            self.keys.rich.open(RuntimeContext(ctx))

    def snapshot_state(self, checkpoint_id: int, timestamp: int, factory: Any) -> list:
        if not self._checkpointed.enabled:
            return []
        if self.mode == "vec":
            keys = self.slots.keys
            state = dict(zip(keys, self.vals[: len(keys)].tolist()))
            first = dict(zip(keys, self._vec_first_records()))
        else:
            state, first = self.rec_state, self.rec_first
        self._checkpointed_first.stage(first)  # written by the one snapshot of the shared backend
        return self._checkpointed.snapshot(state, checkpoint_id, timestamp, factory)

    def close(self) -> None:
        if self.keys.rich is not None:
            self.keys.rich.close()

    # ------------------------------------------------------------------ dispatch
    def process_batch(self, batch: Batch) -> None:
        if len(batch) == 0:
            return
        if self.mode != "rec" and self.keys.is_field:
            if self.mode == "vec" or (batch.has_arrow and not batch.has_rows):
                if self._process_vec(batch.arrow(), batch.timestamps):
                    self.mode = "vec"
                    return
            if self.mode == "vec":
                self._switch_to_rec()
        self.mode = "rec"
        self._process_rec(batch.rows(), batch.timestamps)

    def end_input(self) -> None:
        if self.batch_mode:
            if self.mode == "vec":
                self._emit_vec_final()
            elif self.rec_last:
                _emit_rows(self.output, list(self.rec_last.values()))
        self.output.end_input()

    # ------------------------------------------------------------------ per record
    def _process_rec(self, rows: list, ts: Any = None) -> None:
        keys = self.keys.keys_of_rows(rows)
        values = self._values_of(rows)
        st = self.rec_state
        get = st.get
        firsts = self.rec_first
        for k, r in zip(keys, rows):
            if k not in firsts:
                firsts[k] = r
        aggs: list[Any] = []
        append = aggs.append
        if self.agg == "sum":
            for k, v in zip(keys, values):
                cur = get(k, _MISSING)
                cur = v if cur is _MISSING else cur + v
                st[k] = cur
                append(cur)
        else:
            pick = min if self.agg == "min" else max
            for k, v in zip(keys, values):
                cur = get(k, _MISSING)
                cur = v if cur is _MISSING else pick(cur, v)
                st[k] = cur
                append(cur)
        out = replace_fields([firsts[k] for k in keys], self.field, aggs)
        if self.batch_mode:
            self.rec_last.update(zip(keys, out))
        elif out:
            self.output.emit(Batch(out, None, ts))  # outputs keep their input's timestamp

    # ------------------------------------------------------------------ vectorized
    def _process_vec(self, rb: pa.RecordBatch, ts: Any = None) -> bool:
        """Process ``rb`` vectorized; False (nothing done) if it is not eligible."""
        if record_kind(rb) == KIND_PICKLE:
            return False
        assert self.keys.field is not None  # called for keys that are fields only
        ki = column_of(rb, self.keys.field)[0]
        vi, vname = column_of(rb, self.field)
        kcol, vcol = rb.column(ki), rb.column(vi)
        acc = _vec_value_dtype(vcol.type)
        if acc is None or not _vec_key_type_ok(kcol.type) or kcol.null_count or vcol.null_count:
            return False
        v = vcol.to_numpy(zero_copy_only=False)
        if acc.kind == "f" and self.agg != "sum" and np.isnan(v).any():
            return False  # Python's min/max with NaN depend on order; leave it to the per-record path
        rest_schema = rb.schema.remove(vi)
        if self.rest_schema is not None and not self.rest_schema.equals(rest_schema, check_metadata=True):
            return False  # other fields of another type than the first rows' (kept per-record then)
        # no other field, or the key alone (integer / string / binary: equal keys are the same value)
        only = rb.num_columns == 1 or (rb.num_columns == 2 and ki != vi)
        old_n = len(self.slots)
        direct = self._direct_codes(kcol)
        if direct is not None:
            # small non-negative integer keys: the codes are the rows' slots, over every slot
            codes, first_new = direct
            nu = len(self.slots)
            slots = np.arange(nu, dtype=np.int64)
            new = slots >= old_n
        else:
            enc = kcol.dictionary_encode()
            codes = enc.indices.to_numpy(zero_copy_only=False)
            nu = len(enc.dictionary)
            # slots of the distinct keys; new keys get new slots
            slots, new = self.slots.lookup(enc.dictionary)
            first_new = None
        need = len(self.slots)
        if need > len(self.vals):
            grown = np.zeros(max(need, 2 * len(self.vals)), dtype=self.vals.dtype)
            grown[:old_n] = self.vals[:old_n]
            self.vals = grown
        has_state = ~new
        if self.vals.dtype != acc:
            if old_n == 0:
                self.vals = self.vals.astype(acc)
            else:
                self.vals = self.vals.astype(np.result_type(self.vals.dtype, acc))
        acc = self.vals.dtype
        if v.dtype != acc:
            v = v.astype(acc)
        self.value_column = (vi, vname, only)
        self.rest_schema = rest_schema
        if rb.num_columns > 1 and new.any():
            # the first row of each new key (dictionary order = first-seen order = their slots')
            if first_new is None:
                _, first_idx = np.unique(codes, return_index=True)
                first_new = first_idx[new]
            self.firsts.append(rb.remove_column(vi).take(pa.array(first_new)))
        if self.batch_mode:
            if direct is not None:  # the batch's keys only
                present = np.bincount(codes, minlength=nu) > 0
                slots, new = slots[present], new[present]
                codes = np.cumsum(present)[codes] - 1
            self._batch_vec(v, codes, slots, new)
        else:
            self._stream_vec(rb, v, codes, nu, slots, has_state, ts)
        return True

    def _direct_codes(self, kcol: pa.Array) -> tuple[np.ndarray, np.ndarray] | None:
        """For small non-negative integer keys: ``(slot of each row, the first row of each key
        new to the slot table, in slot order)``, through a table key -> slot (a numpy take per
        batch instead of hashing every row); None for other keys."""
        if not pat.is_integer(kcol.type):
            return None
        keys = kcol.to_numpy(zero_copy_only=False)
        lo, hi = int(keys.min()), int(keys.max())
        if lo < 0 or hi >= min(_DIRECT_LIMIT, max(1 << 16, 16 * (len(self.slots) + len(keys)))):
            return None  # negative, large or sparse keys: hashed
        table = self._direct
        if len(table) <= hi:
            table = np.full(max(hi + 1, 2 * len(table)), -1, dtype=np.int64)
            table[: len(self._direct)] = self._direct
            self._direct = table
        row_slot = table[keys]
        missing = np.flatnonzero(row_slot < 0)
        if not len(missing):
            return row_slot, np.zeros(0, dtype=np.int64)
        # keys not in the table yet, in first-seen order (slots are given in that order)
        uniq, first = np.unique(keys[missing], return_index=True)
        seen = np.argsort(first, kind="stable")
        uniq, first_rows = uniq[seen], missing[first[seen]]
        found, is_new = self.slots.lookup(pa.array(uniq))
        table[uniq] = found
        return table[keys], first_rows[is_new]

    def _with_values(self, slots: np.ndarray, values: np.ndarray, rb: pa.RecordBatch | None = None) -> pa.RecordBatch:
        """Output rows: the first rows of ``slots`` with the aggregated column set to ``values``
        (``rb``: the rows of this batch, whose other fields are those if ``only``)."""
        vi, vname, only = self.value_column
        field = pa.field(vname, pa.from_numpy_dtype(values.dtype))
        if only and rb is not None:
            return rb.set_column(vi, field, pa.array(values))
        if self.firsts.schema is None:  # no other field
            meta = self.rest_schema.metadata if self.rest_schema is not None else None
            return pa.RecordBatch.from_arrays([pa.array(values)], schema=pa.schema([field], metadata=meta))
        out: pa.RecordBatch = self.firsts.take(slots).add_column(vi, field, pa.array(values))
        return out

    def _identity(self) -> Any:
        dt = self.vals.dtype
        if self.agg == "sum":
            return dt.type(0)
        if dt.kind == "f":
            return dt.type(np.inf if self.agg == "min" else -np.inf)
        info = np.iinfo(dt)
        return dt.type(info.max if self.agg == "min" else info.min)

    def _batch_vec(self, v, codes, slots, new) -> None:
        """BATCH: fold the batch into the state with unbuffered ufunc.at (sequential per key, so
        float sums equal the per-record path exactly); the output comes at the end."""
        if new.any():
            self.vals[slots[new]] = self._identity()
        ufunc = {"sum": np.add, "min": np.minimum, "max": np.maximum}[self.agg]
        ufunc.at(self.vals, slots[codes], v)

    def _stream_vec(self, rb, v, codes, nu, slots, has_state, ts=None) -> None:
        """STREAMING: running aggregate per row = grouped cumulative op within the batch
        (stable radix argsort of the codes) combined with each key's carried state."""
        n = len(v)
        acc = self.vals.dtype
        carry = np.where(has_state, self.vals[slots], self._identity())
        order = np.argsort(codes.astype(np.uint16) if nu <= 65536 else codes, kind="stable")
        counts = np.bincount(codes, minlength=nu)
        ends = np.cumsum(counts)
        starts = ends - counts
        res_sorted = None
        if acc.kind == "i":
            sv = v[order]
            if self.agg == "sum":
                at = np.minimum(starts, n - 1)  # (an empty group's value is never used)
                first = sv[at]
                np.cumsum(sv, out=sv)
                adj = sv[at] - first - carry  # running total before the group, minus carry
                sv -= np.repeat(adj, counts)
                res_sorted = sv
            elif n:
                vmin, vmax = int(sv.min()), int(sv.max())
                span = vmax - vmin + 1
                if nu * span < 2**62:
                    # segmented running max via one accumulate over (segment, value) packed keys
                    seg = np.repeat(np.arange(nu, dtype=np.int64) * span, counts)
                    if self.agg == "max":
                        sv -= vmin
                    else:
                        np.subtract(vmax, sv, out=sv)
                    sv += seg
                    np.maximum.accumulate(sv, out=sv)
                    sv -= seg
                    if self.agg == "max":
                        sv += vmin
                        np.maximum(sv, np.repeat(carry, counts), out=sv)
                    else:
                        np.subtract(vmax, sv, out=sv)
                        np.minimum(sv, np.repeat(carry, counts), out=sv)
                    res_sorted = sv
        present = np.flatnonzero(counts) if len(counts) and counts.min() == 0 else None  # keys of the batch
        if res_sorted is not None:
            res = np.empty(n, dtype=acc)
            res[order] = res_sorted
            if present is None:
                self.vals[slots] = res_sorted[ends - 1]
            else:
                self.vals[slots[present]] = res_sorted[ends[present] - 1]
        else:
            pd = load_module("pandas")  # deferred (see _SlotTable)
            s = pd.Series(v, copy=False).groupby(codes, sort=False)
            if self.agg == "sum":
                res = (s.cumsum().to_numpy() + carry[codes]).astype(acc, copy=False)
            elif self.agg == "min":
                res = np.minimum(s.cummin().to_numpy(), carry[codes]).astype(acc, copy=False)
            else:
                res = np.maximum(s.cummax().to_numpy(), carry[codes]).astype(acc, copy=False)
            if present is None:
                self.vals[slots] = res[order[ends - 1]]
            else:
                self.vals[slots[present]] = res[order[ends[present] - 1]]
        out_rb = self._with_values(slots[codes], res.astype(acc, copy=False), rb)
        self.output.emit(Batch(rb=out_rb, timestamps=ts))

    def _vec_final_rb(self) -> pa.RecordBatch:
        """Every key's output record (first row, aggregate), in slot order (= first-seen order)."""
        n = len(self.slots)
        return self._with_values(np.arange(n, dtype=np.int64), self.vals[:n])

    def _vec_first_records(self) -> list:
        return arrow_to_records(self._vec_final_rb()) if len(self.slots) else []

    def _emit_vec_final(self) -> None:
        if not len(self.slots):
            return
        rb = self._vec_final_rb()
        for i in range(0, rb.num_rows, EMIT_ROWS):
            self.output.emit(Batch.from_arrow(rb.slice(i, EMIT_ROWS)))

    def _switch_to_rec(self) -> None:
        keys = self.slots.keys
        self.rec_state = dict(zip(keys, self.vals[: len(keys)].tolist()))
        records = self._vec_first_records()
        self.rec_first = dict(zip(keys, records))
        if self.batch_mode:
            self.rec_last = dict(zip(keys, records))
        self.slots = _SlotTable()
        self._direct = np.full(0, -1, dtype=np.int64)
        self.firsts = _FirstRows()
        self.rest_schema = None
        self.mode = "rec"
