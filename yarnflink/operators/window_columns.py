"""Vectorized event-time windows: ``window(...).sum/min/max(field)`` on Arrow batches.

The ``WindowOperator`` hands eligible batches here (tumbling or sliding event-time windows, a
field aggregation, the key a field; see ``ColumnarWindows.eligible``). Nothing is done per record:

* window assignment is numpy arithmetic on the batch's timestamp column (a sliding window
  repeats each row once per window it belongs to);
* state is columnar: one ``_Bucket`` per open window (start), holding dense numpy arrays indexed
  by the key's slot (``_SlotTable``: key -> slot, dict lookups only for the distinct keys of a
  batch): the aggregate, whether the key has contents, the order the (key, window) first got
  contents in, and the first row of each (key, window) as Arrow (the output record is that row
  with the field replaced by the aggregate, as ``FieldAggregator`` does per record);
* a batch is folded in per window with one unbuffered ``ufunc.at`` (sequential per key, so the
  values equal the per-record path's exactly, floats included);
* a watermark fires every window it closes as one Arrow batch, in the per-record path's order
  (window end, then the order the (key, window) got its first element).

Allowed lateness, late data and checkpoints behave as in the per-record path: an element for a
window that already fired but is not yet cleaned up fires that window again at once (rare: done
per element); elements of windows past their cleanup time are dropped or go to the side output.
For a checkpoint the buckets are written into the operator's keyed backend in the per-record
path's form (one reduced record per (key, window) plus its timers), snapshotted and removed
again, so checkpoints and savepoints of both paths are the same and rescale alike; restored
entries move back into buckets on the first batch (``adopt``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.types as pat

from yarnflink.common.keygroups import key_group_ids
from yarnflink.common.records import (
    KIND_PICKLE,
    Field,
    arrow_to_records,
    column_of,
    get_field,
    record_kind,
    records_to_arrow,
    replace_field,
)
from yarnflink.operators.keyed import _SlotTable, _vec_key_type_ok, _vec_value_dtype

AGGREGATIONS = ("sum", "min", "max")


class FieldAggregator:
    """The reduce function of ``window(...).sum/min/max(field)`` (Flink's ``SumAggregator`` /
    ``ComparableAggregator``): the first record of the window with ``field`` replaced by the
    sum / min / max of the field over the window's records."""

    def __init__(self, agg: str, field: Field):
        if agg not in AGGREGATIONS:
            raise ValueError(f"unknown aggregation {agg!r}; expected one of {AGGREGATIONS}")
        self.agg = agg
        self.field = field

    def __call__(self, a: Any, b: Any) -> Any:
        x, y = get_field(a, self.field), get_field(b, self.field)
        v = x + y if self.agg == "sum" else (min(x, y) if self.agg == "min" else max(x, y))
        return replace_field(a, self.field, v)

    reduce = __call__

    def __repr__(self) -> str:
        return f"{self.agg}({self.field!r})"


_UFUNC = {"sum": np.add, "min": np.minimum, "max": np.maximum}
_ALL = np.arange(0)  # "every element, in order" (tumbling windows: one window per element)
#: integer keys in [0, this) map to slots through a direct numpy table
_DIRECT_LIMIT = 1 << 22


class _Bucket:
    """The contents of one window for every key (dense arrays over key slots)."""

    __slots__ = ("start", "end", "vals", "present", "seq", "reps", "fired")

    def __init__(self, start: int, end: int, capacity: int, dtype: np.dtype):
        self.start, self.end = start, end
        self.vals = np.zeros(capacity, dtype=dtype)
        self.present = np.zeros(capacity, dtype=bool)
        self.seq = np.zeros(capacity, dtype=np.int64)
        self.reps: list[tuple[np.ndarray, pa.RecordBatch]] = []  # (slots, their first rows)
        self.fired = False

    def grow(self, capacity: int) -> None:
        n = len(self.vals)
        if capacity > n:
            cap = max(capacity, 2 * n)
            for name in ("vals", "present", "seq"):
                old = getattr(self, name)
                new = np.zeros(cap, dtype=old.dtype)
                new[:n] = old
                setattr(self, name, new)

    def contents(self) -> tuple[np.ndarray, list[tuple[np.ndarray, pa.RecordBatch]]]:
        """(slots with contents in first-element order, the representative rows' pieces)."""
        slots = np.flatnonzero(self.present)
        return slots[np.argsort(self.seq[slots], kind="stable")], self.reps


class ColumnarKeyed:
    """What the columnar window states share: which batches they take, and key -> slot."""

    agg: str
    field: Field
    key_field: Field
    slots: _SlotTable
    _direct: np.ndarray

    # ------------------------------------------------------------------ eligibility
    def eligible(self, rb: pa.RecordBatch) -> bool:
        """True when ``rb``'s key and value columns can be processed here."""
        if record_kind(rb) == KIND_PICKLE:
            return False
        try:
            kcol = rb.column(column_of(rb, self.key_field)[0])
            vcol = rb.column(column_of(rb, self.field)[0])
        except (LookupError, TypeError):
            return False  # the per-record path raises the clear error
        dt = _vec_value_dtype(vcol.type)
        if dt is None or not _vec_key_type_ok(kcol.type) or kcol.null_count or vcol.null_count:
            return False
        if dt.kind == "f" and self.agg != "sum" and np.isnan(vcol.to_numpy(zero_copy_only=False)).any():
            return False  # Python's min/max with NaN depend on the order: left to the per-record path
        if pat.is_boolean(kcol.type):
            return False  # True == 1 as a Python key: the per-record path keeps those semantics
        return True

    def _slots_of(self, kcol: pa.Array) -> np.ndarray:
        """The slot of each row's key. Small non-negative integer keys go through a direct table
        (value -> slot: one numpy take per batch); other keys are dictionary-encoded and only the
        distinct ones looked up."""
        if pat.is_integer(kcol.type) and len(kcol):
            keys = kcol.to_numpy(zero_copy_only=False)
            lo, hi = int(keys.min()), int(keys.max())
            if lo >= 0 and hi < _DIRECT_LIMIT:
                if len(self._direct) <= hi:
                    grown = np.full(max(hi + 1, 2 * len(self._direct)), -1, dtype=np.int64)
                    grown[: len(self._direct)] = self._direct
                    self._direct = grown
                row_slot = self._direct[keys]
                missing = row_slot < 0
                if missing.any():
                    new_keys = np.unique(keys[missing])
                    slots, _ = self.slots.lookup(pa.array(new_keys))
                    self._direct[new_keys] = slots
                    row_slot = self._direct[keys]
                return row_slot
        enc = kcol.dictionary_encode()
        uslots, _ = self.slots.lookup(enc.dictionary)
        return uslots[enc.indices.to_numpy(zero_copy_only=False)]


class ColumnarWindows(ColumnarKeyed):
    """Columnar contents of tumbling / sliding event-time windows with a field aggregation."""

    def __init__(
        self,
        agg: str,
        field: Field,
        key_field: Field,
        size: int,
        slide: int,
        offset: int,
        allowed_lateness: int,
        max_parallelism: int,
    ):
        self.agg, self.field, self.key_field = agg, field, key_field
        self.size, self.slide, self.offset = size, slide, offset
        self.allowed_lateness = allowed_lateness
        self.max_parallelism = max_parallelism
        self.slots = _SlotTable()
        self.buckets: dict[int, _Bucket] = {}  # window start -> bucket
        self.dtype: np.dtype | None = None
        self._seq = 0
        self._first = np.empty(1024, dtype=np.int64)  # scratch: first row per slot
        self._direct = np.full(0, -1, dtype=np.int64)  # small int key -> slot (-1: not yet)
        self.num_late_records_dropped = 0

    # ------------------------------------------------------------------ time arithmetic
    def cleanup_time(self, end: np.ndarray | int) -> Any:
        max_ts = end - 1
        t = max_ts + self.allowed_lateness
        return t  # int64 windows end far below the overflow in practice (checked in assign)

    def _windows(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(element index, window start) of every (element, window) pair, in the per-record
        path's order (elements in order; a sliding element's windows latest first)."""
        last = ts - np.mod(ts - self.offset, self.slide)
        if self.slide == self.size:
            return _ALL, last
        k = -(-self.size // self.slide)
        starts = last[:, None] - np.arange(k, dtype=np.int64)[None, :] * self.slide
        valid = starts > (ts - self.size)[:, None]
        elem = np.broadcast_to(np.arange(len(ts))[:, None], starts.shape)
        return elem[valid], starts[valid]

    # ------------------------------------------------------------------ elements
    def add_batch(
        self, rb: pa.RecordBatch, ts: np.ndarray, watermark: int, late_tag: str | None
    ) -> tuple[list, list, list, list]:
        """Fold ``rb`` in. Returns ``(fired rows, their timestamps, late rows, their timestamps)``:
        windows that had fired and get a late element within the allowed lateness fire again at
        once (as Python records); late elements (records) for the side output."""
        ki = column_of(rb, self.key_field)[0]
        vi = column_of(rb, self.field)[0]
        vcol = rb.column(vi)
        v = vcol.to_numpy(zero_copy_only=False)
        dt = _vec_value_dtype(vcol.type)
        assert dt is not None  # eligible() checked it
        if self.dtype is None:
            self.dtype = dt
        elif self.dtype != dt:
            self._promote(np.result_type(self.dtype, dt))
        if v.dtype != self.dtype:
            v = v.astype(self.dtype)
        row_slot = self._slots_of(rb.column(ki))
        cap = len(self.slots)

        elem, starts = self._windows(ts)
        if len(ts) and int(ts.min()) > watermark:  # every window ends after the element: none has fired
            self._fold(rb, elem, starts, row_slot, v, cap)
            return [], [], [], []
        if elem is _ALL:
            elem = np.arange(len(ts))
        max_ts = starts + (self.size - 1)
        cleanup = max_ts + self.allowed_lateness
        dead = cleanup <= watermark  # the window is past its cleanup time: skipped
        refire = ~dead & (max_ts <= watermark)  # fired already, within the allowed lateness
        normal = ~dead & ~refire

        if normal.all():
            self._fold(rb, elem, starts, row_slot, v, cap)
        elif normal.any():
            self._fold(rb, elem[normal], starts[normal], row_slot, v, cap)
        fired: list = []
        fired_ts: list = []
        if refire.any():
            for e, s in zip(elem[refire].tolist(), starts[refire].tolist()):
                self._fold(rb, np.array([e]), np.array([s], dtype=np.int64), row_slot, v, cap)
                b = self.buckets[s]
                b.fired = True
                fired.append(self._record_of(b, int(row_slot[e])))
                fired_ts.append(b.end - 1)
        late: list = []
        late_ts: list = []
        if dead.any():
            accepted = np.zeros(len(ts), dtype=bool)
            accepted[elem[~dead]] = True
            is_late = ~accepted & (ts + self.allowed_lateness <= watermark)
            if is_late.any():
                idx = np.flatnonzero(is_late)
                if late_tag is None:
                    self.num_late_records_dropped += len(idx)
                else:
                    late = arrow_to_records(rb.take(pa.array(idx)))
                    late_ts = ts[idx].tolist()
        return fired, fired_ts, late, late_ts

    def _promote(self, dtype: np.dtype) -> None:
        self.dtype = dtype
        for b in self.buckets.values():
            b.vals = b.vals.astype(dtype)

    def _bucket(self, start: int, cap: int) -> _Bucket:
        b = self.buckets.get(start)
        if b is None:
            assert self.dtype is not None
            # sized for the keys known so far (a window usually gets most of them): the doubling
            # of ``grow`` is for the first windows only, not slack in every open window
            b = self.buckets[start] = _Bucket(start, start + self.size, max(cap, 64), self.dtype)
        elif len(b.vals) < cap:
            b.grow(cap)
        return b

    def _fold(
        self, rb: pa.RecordBatch, elem: np.ndarray, starts: np.ndarray, row_slot: np.ndarray, v: np.ndarray, cap: int
    ) -> None:
        """Fold the (element, window start) pairs in; no sorting: a few passes per window."""
        ufunc = _UFUNC[self.agg]
        if not len(starts):
            return
        lo, hi = int(starts.min()), int(starts.max())
        if lo == hi:
            groups: list[tuple[int, np.ndarray]] = [(lo, elem)]
        elif (hi - lo) // self.slide < 16:  # a few windows: one mask each
            groups = []
            for start in range(lo, hi + 1, self.slide):
                mask = starts == start
                if mask.any():
                    groups.append((start, np.flatnonzero(mask) if elem is _ALL else elem[mask]))
        else:
            if elem is _ALL:
                elem = np.arange(len(starts))
            ustarts, inverse = np.unique(starts, return_inverse=True)
            order = np.argsort(inverse, kind="stable")
            bounds = np.searchsorted(inverse[order], np.arange(len(ustarts) + 1))
            groups = [(int(x), elem[order[bounds[k] : bounds[k + 1]]]) for k, x in enumerate(ustarts.tolist())]
        for start, rows in groups:
            b = self._bucket(start, cap)
            if rows is _ALL:
                rows = np.arange(len(v))
                slots, vals = row_slot, v
            else:
                slots, vals = row_slot[rows], v[rows]
            cand = np.flatnonzero(~b.present[slots])  # rows of keys new to this window
            if len(cand):
                cslots = slots[cand]
                first = self._scratch(cap)
                first[cslots[::-1]] = cand[::-1]  # repeated indices: the last assignment stays
                first_new = cand[first[cslots] == cand]  # each new key's first row, in row order
                new_slots = slots[first_new]
                b.present[new_slots] = True
                b.seq[new_slots] = np.arange(self._seq, self._seq + len(new_slots))
                self._seq += len(new_slots)
                if self._identity is not None:  # exact: start from the identity, fold every row
                    b.vals[new_slots] = self._identity
                    ufunc.at(b.vals, slots, vals)
                else:  # float sums start from the first value (0.0 + -0.0 would lose the sign)
                    b.vals[new_slots] = vals[first_new]
                    if len(first_new) < len(rows):
                        rest = np.ones(len(rows), dtype=bool)
                        rest[first_new] = False
                        ufunc.at(b.vals, slots[rest], vals[rest])
                b.reps.append(
                    (new_slots.astype(np.int32) if cap < 1 << 31 else new_slots, rb.take(pa.array(rows[first_new])))
                )
            else:
                ufunc.at(b.vals, slots, vals)

    @property
    def _identity(self) -> Any:
        """The aggregation's identity in the state's dtype, where folding from it is exact."""
        dt = self.dtype
        assert dt is not None
        if dt.kind == "f":
            return None if self.agg == "sum" else dt.type(np.inf if self.agg == "min" else -np.inf)
        if self.agg == "sum":
            return dt.type(0)
        info = np.iinfo(dt)
        return dt.type(info.max if self.agg == "min" else info.min)

    def _scratch(self, cap: int) -> np.ndarray:
        if len(self._first) < cap:
            self._first = np.empty(max(cap, 2 * len(self._first)), dtype=np.int64)
        return self._first

    # ------------------------------------------------------------------ firing
    def _rows_of(self, b: _Bucket, slots: np.ndarray) -> pa.RecordBatch | list:
        """The output rows of ``slots`` of bucket ``b``: one RecordBatch when every piece has one
        schema, else Python records."""
        pieces = b.reps
        if len(pieces) == 1:
            pslots, prb = pieces[0]
            schemas_equal = True
        else:
            schemas_equal = all(p[1].schema.equals(pieces[0][1].schema) for p in pieces)
            pslots = np.concatenate([p[0] for p in pieces])
            prb = pa.concat_batches([p[1] for p in pieces]) if schemas_equal else None
        where = np.empty(len(b.vals), dtype=np.int64)
        where[pslots] = np.arange(len(pslots))
        pos = where[slots]
        values = b.vals[slots]
        if schemas_equal:
            assert prb is not None
            out = prb.take(pa.array(pos))
            vi, vname = column_of(out, self.field)
            return out.set_column(vi, pa.field(vname, pa.from_numpy_dtype(values.dtype)), pa.array(values))
        records = [r for _, p in pieces for r in arrow_to_records(p)]
        return [replace_field(records[i], self.field, x) for i, x in zip(pos.tolist(), values.tolist())]

    def _record_of(self, b: _Bucket, slot: int) -> Any:
        rows = self._rows_of(b, np.array([slot]))
        return rows[0] if isinstance(rows, list) else arrow_to_records(rows)[0]

    def advance(self, watermark: int) -> Iterator[tuple[pa.RecordBatch | list, np.ndarray]]:
        """Fire every window the watermark closes and drop those past their cleanup time.
        Yields the fired rows (one piece per window, in order of window end) and their
        timestamps, lazily: a window's bucket is dropped before the next window's rows are made,
        so a watermark that closes many windows never holds all their rows and all their state
        at once."""
        for start in sorted(self.buckets):
            b = self.buckets[start]
            if b.end - 1 > watermark:
                break
            piece = None
            if not b.fired:
                slots, _ = b.contents()
                if len(slots):
                    piece = (self._rows_of(b, slots), np.full(len(slots), b.end - 1, dtype=np.int64))
                b.fired = True
            if self.cleanup_time(b.end) <= watermark:
                del self.buckets[start]
            del b
            if piece is not None:
                yield piece

    def next_cleanup_pending(self) -> bool:
        return bool(self.buckets)

    # ------------------------------------------------------------------ checkpoints / migration
    def entries(self) -> list[tuple[Any, int, int, int, Any, bool]]:
        """``(key, key group, start, end, record, fired)`` of every (key, window) with contents."""
        out: list[tuple[Any, int, int, int, Any, bool]] = []
        for start in sorted(self.buckets):
            b = self.buckets[start]
            slots, _ = b.contents()
            if not len(slots):
                continue
            rows = self._rows_of(b, slots)
            records = rows if isinstance(rows, list) else arrow_to_records(rows)
            keys = [self.slots.keys[s] for s in slots.tolist()]
            kgs = key_group_ids(keys, self.max_parallelism).tolist()
            out.extend((k, kg, start, b.end, r, b.fired) for k, kg, r in zip(keys, kgs, records))
        return out

    def adopt(self, items: list[tuple[Any, int, Any, bool]]) -> None:
        """Take over (key, window start, reduced record, fired) entries of the per-record form
        (restored from a checkpoint, in their order)."""
        by_start: dict[int, list[tuple[Any, Any]]] = {}
        fired: dict[int, bool] = {}
        for key, start, record, was_fired in items:
            by_start.setdefault(start, []).append((key, record))
            fired[start] = fired.get(start, False) or was_fired
        for start, pairs in by_start.items():
            keys = [k for k, _ in pairs]
            records = [r for _, r in pairs]
            values = np.array([get_field(r, self.field) for r in records])
            dt = np.dtype(np.float64) if values.dtype.kind == "f" else np.dtype(np.int64)
            if self.dtype is None:
                self.dtype = dt
            elif dt != self.dtype:
                self._promote(np.result_type(self.dtype, dt))
            slot_list = []
            for k in keys:
                s = self.slots.map.get(k)
                if s is None:
                    s = len(self.slots.keys)
                    self.slots.map[k] = s
                    self.slots.keys.append(k)
                slot_list.append(s)
            slots = np.array(slot_list, dtype=np.int64)
            b = self._bucket(start, len(self.slots))
            b.present[slots] = True
            b.seq[slots] = np.arange(self._seq, self._seq + len(slots))
            self._seq += len(slots)
            b.vals[slots] = values.astype(self.dtype)
            b.reps.append((slots, records_to_arrow(records)))
            b.fired = fired[start]
