"""Keyed operators: ``reduce`` and ``sum``/``min``/``max``.

State is an in-memory dict per operator instance (proper keyed state backends come later).

STREAMING: one output per input record (the updated value of its key).
BATCH: nothing is emitted until ``end_input``; then each key's final value once, in the order the
keys were first seen.

``sum``/``min``/``max`` (Flink semantics, with the lead's choice for the other fields): the output
record is the *incoming* record with ``field`` replaced by the running aggregate of its key.
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


class _SchemaGroup:
    """BATCH mode, vectorized: the latest output row per key seen so far for batches of one
    schema; ``seqs`` orders rows across groups."""

    __slots__ = ("pieces", "rows", "_compacted")

    def __init__(self) -> None:
        self.pieces: list[tuple[np.ndarray, np.ndarray, pa.RecordBatch]] = []  # slots, seqs, rb
        self.rows = 0
        self._compacted = False

    def add(self, slots: np.ndarray, seqs: np.ndarray, rb: pa.RecordBatch) -> None:
        self.pieces.append((slots, seqs, rb))
        self._compacted = False
        self.rows += len(slots)

    def compact(self) -> tuple[np.ndarray, np.ndarray, pa.RecordBatch]:
        """Keep only the last row per slot; returns (slots ascending, seqs, rb)."""
        if len(self.pieces) == 1 and self._compacted:
            return self.pieces[0]
        slots = np.concatenate([p[0] for p in self.pieces])
        seqs = np.concatenate([p[1] for p in self.pieces])
        rb = pa.concat_batches([p[2] for p in self.pieces])
        # last occurrence per slot = first occurrence in the reversed array
        uniq, first_rev = np.unique(slots[::-1], return_index=True)
        idx = len(slots) - 1 - first_rev
        out = (uniq, seqs[idx], rb.take(pa.array(idx)))
        self.pieces = [out]
        self.rows = len(out[0])
        self._compacted = True
        return out


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
        self.rec_last: dict = {}  # BATCH: key -> latest output record
        # vectorized state
        self.slots = _SlotTable()  # key -> slot (slot order == first-seen order)
        self.vals = np.zeros(1024, dtype=np.int64)
        self.groups: dict[pa.Schema, _SchemaGroup] = {}
        self.seq = 0
        self.stored_rows = 0

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        self._checkpointed = KeyedDictState(ctx, f"aggregate-{self.agg}")  # checkpointed per key group
        restored = self._checkpointed.restored()
        if restored is not None:
            self.mode = "rec"
            self.rec_state = restored
        if self.keys.rich is not None:
            self.keys.rich.open(RuntimeContext(ctx))

    def snapshot_state(self, checkpoint_id: int, timestamp: int, factory: Any) -> list:
        if not self._checkpointed.enabled:
            return []
        if self.mode == "vec":
            keys = self.slots.keys
            state = dict(zip(keys, self.vals[: len(keys)].tolist()))
        else:
            state = self.rec_state
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
        out = replace_fields(rows, self.field, aggs)
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
        enc = kcol.dictionary_encode()
        codes = enc.indices.to_numpy(zero_copy_only=False)
        nu = len(enc.dictionary)

        # slots of the distinct keys; new keys get new slots
        old_n = len(self.slots)
        slots, new = self.slots.lookup(enc.dictionary)
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
        if self.batch_mode:
            self._batch_vec(rb, vi, vname, v, codes, nu, slots, new)
        else:
            self._stream_vec(rb, vi, vname, v, codes, nu, slots, has_state, ts)
        return True

    def _identity(self) -> Any:
        dt = self.vals.dtype
        if self.agg == "sum":
            return dt.type(0)
        if dt.kind == "f":
            return dt.type(np.inf if self.agg == "min" else -np.inf)
        info = np.iinfo(dt)
        return dt.type(info.max if self.agg == "min" else info.min)

    def _batch_vec(self, rb, vi, vname, v, codes, nu, slots, new) -> None:
        """BATCH: fold the batch into the state with unbuffered ufunc.at (sequential per key, so
        float sums equal the per-record path exactly); keep each key's last row."""
        if new.any():
            self.vals[slots[new]] = self._identity()
        ufunc = {"sum": np.add, "min": np.minimum, "max": np.maximum}[self.agg]
        ufunc.at(self.vals, slots[codes], v)
        last_idx = np.full(nu, -1, dtype=np.int64)
        np.maximum.at(last_idx, codes, np.arange(len(codes), dtype=np.int64))
        last = rb.take(pa.array(last_idx))
        last = last.set_column(vi, pa.field(vname, pa.from_numpy_dtype(self.vals.dtype)), pa.array(self.vals[slots]))
        self.seq += 1
        self._store_last(slots, last)

    def _stream_vec(self, rb, vi, vname, v, codes, nu, slots, has_state, ts=None) -> None:
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
                first = sv[starts]
                np.cumsum(sv, out=sv)
                adj = sv[starts] - first - carry  # running total before the group, minus carry
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
        if res_sorted is not None:
            res = np.empty(n, dtype=acc)
            res[order] = res_sorted
            self.vals[slots] = res_sorted[ends - 1]
        else:
            pd = load_module("pandas")  # deferred (see _SlotTable)
            s = pd.Series(v, copy=False).groupby(codes, sort=False)
            if self.agg == "sum":
                res = (s.cumsum().to_numpy() + carry[codes]).astype(acc, copy=False)
            elif self.agg == "min":
                res = np.minimum(s.cummin().to_numpy(), carry[codes]).astype(acc, copy=False)
            else:
                res = np.maximum(s.cummax().to_numpy(), carry[codes]).astype(acc, copy=False)
            self.vals[slots] = res[order[ends - 1]]
        out_rb = rb.set_column(vi, pa.field(vname, pa.from_numpy_dtype(acc)), pa.array(res))
        self.output.emit(Batch(rb=out_rb, timestamps=ts))

    def _store_last(self, slots: np.ndarray, rb: pa.RecordBatch) -> None:
        group = self.groups.get(rb.schema)
        if group is None:
            group = self.groups[rb.schema] = _SchemaGroup()
        group.add(slots, np.full(len(slots), self.seq, dtype=np.int64), rb)
        self.stored_rows += len(slots)
        if self.stored_rows > 2 * len(self.slots) + 65536:
            self.stored_rows = sum(len(g.compact()[0]) for g in self.groups.values())

    def _vec_final(self) -> list:
        """BATCH: per group (slots, rb) of the rows that are final (latest seq of the slot)."""
        compacted = [g.compact() for g in self.groups.values()]
        if len(compacted) == 1:
            slots, _, rb = compacted[0]
            return [(slots, rb)]
        nslots = len(self.slots)
        best_seq = np.full(nslots, -1, dtype=np.int64)
        for slots, seqs, _ in compacted:
            np.maximum.at(best_seq, slots, seqs)
        out = []
        for slots, seqs, rb in compacted:
            keep = np.flatnonzero(seqs == best_seq[slots])
            if len(keep):
                out.append((slots[keep], rb.take(pa.array(keep))))
        return out

    def _vec_final_records(self) -> list:
        """BATCH: the final output record of every key, in slot order (= first-seen order)."""
        pieces = self._vec_final()
        records: list = [None] * len(self.slots)
        for slots, rb in pieces:
            for s, r in zip(slots.tolist(), arrow_to_records(rb)):
                records[s] = r
        return records

    def _emit_vec_final(self) -> None:
        pieces = self._vec_final()
        if len(pieces) == 1:
            slots, rb = pieces[0]  # slots ascending = first-seen order
            for i in range(0, rb.num_rows, EMIT_ROWS):
                self.output.emit(Batch.from_arrow(rb.slice(i, EMIT_ROWS)))
        elif pieces:
            _emit_rows(self.output, self._vec_final_records())

    def _switch_to_rec(self) -> None:
        keys = self.slots.keys
        self.rec_state = dict(zip(keys, self.vals[: len(keys)].tolist()))
        if self.batch_mode:
            self.rec_last = dict(zip(keys, self._vec_final_records()))
        self.slots = _SlotTable()
        self.groups = {}
        self.mode = "rec"
