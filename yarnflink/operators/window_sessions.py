"""Vectorized event-time session windows: ``window(EventTimeSessionWindows...).sum/min/max(field)``
on Arrow batches (the session counterpart of ``window_columns``).

State is one columnar table of open sessions (numpy arrays: key slot, start, end = last element +
gap, aggregate, the order its firing timer was registered in, fired, representative row) plus the
row of each key's latest session. A batch is taken without a Python call per record when, per key,
its timestamps do not decrease in arrival order and do not go back before the start of the key's
latest session (the usual in-order stream; elements of other keys interleave freely):

* the batch is sorted by key (stable: arrival order within a key), a session breaks where the key
  changes or two consecutive timestamps are more than the gap apart; the first run of a key
  continues its latest open session when it touches it (Flink's ``TimeWindow.intersects``);
* each session's aggregate is folded in arrival order (``ufunc.reduceat``; float sums with an
  unbuffered ``ufunc.at``, so the values are the per-record path's exactly);
* a session's representative row (the output record is that row with the field replaced, as
  ``FieldAggregator`` does) is its first element, or the open session's row it continues;
* the firing order is the per-record path's timer order: window end, then the arrival of the
  element that last changed the session's extent (that element registered the window's timer).

Elements whose own window ends at or before the watermark ("old": late, or within the allowed
lateness) are taken when they touch no session and no other element of their key: a late one goes
to the side output or is dropped, one within the lateness opens a session that fires at once.
Any other batch (out of order within a key, an old element that would merge) is not taken
(``add_batch`` returns None) and the ``WindowOperator`` moves the state to the per-record path,
which applies Flink's merging rules element by element. Checkpoints use the per-record path's form
(contents, merging-window set and timers per session), as ``window_columns`` does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from yarnflink.common.keygroups import key_group_ids
from yarnflink.common.records import Field, arrow_to_records, column_of, get_field, records_to_arrow, replace_field
from yarnflink.operators.keyed import _SlotTable, _vec_value_dtype
from yarnflink.operators.window_columns import _UFUNC, ColumnarKeyed

_COLUMNS = ("slot", "start", "end", "val", "seq", "fired", "rep")


class ColumnarSessions(ColumnarKeyed):
    """Columnar open sessions of every key, for an event-time gap and a field aggregation."""

    def __init__(self, agg: str, field: Field, key_field: Field, gap: int, allowed_lateness: int, max_parallelism: int):
        self.agg, self.field, self.key_field = agg, field, key_field
        self.gap = gap
        self.allowed_lateness = allowed_lateness
        self.max_parallelism = max_parallelism
        self.slots = _SlotTable()
        self._direct = np.full(0, -1, dtype=np.int64)
        self.dtype: np.dtype | None = None
        self.n = 0  # open sessions (rows of the table in use)
        self.slot = np.zeros(0, dtype=np.int64)
        self.start = np.zeros(0, dtype=np.int64)
        self.end = np.zeros(0, dtype=np.int64)
        self.val = np.zeros(0, dtype=np.int64)
        self.seq = np.zeros(0, dtype=np.int64)
        self.fired = np.zeros(0, dtype=bool)
        self.rep = np.zeros(0, dtype=np.int64)  # index into the concatenated rep pieces
        self.last = np.full(0, -1, dtype=np.int64)  # key slot -> row of its latest session
        self.pieces: list[pa.RecordBatch] = []  # representative rows
        self._nreps = 0
        self._seq = 0  # arrival counter (the per-record path's timer registration order)
        self.num_late_records_dropped = 0

    # ------------------------------------------------------------------ table
    def _reserve(self, extra: int) -> None:
        need = self.n + extra
        if need > len(self.slot):
            cap = max(need, 2 * len(self.slot), 1024)
            for name in _COLUMNS:
                old = getattr(self, name)
                new = np.zeros(cap, dtype=old.dtype)
                new[: self.n] = old[: self.n]
                setattr(self, name, new)

    def _grow_keys(self) -> None:
        k = len(self.slots)
        if len(self.last) < k:
            grown = np.full(max(k, 2 * len(self.last), 1024), -1, dtype=np.int64)
            grown[: len(self.last)] = self.last
            self.last = grown

    def _append(
        self,
        slot: np.ndarray,
        start: np.ndarray,
        end: np.ndarray,
        val: np.ndarray,
        seq: np.ndarray,
        fired: bool,
        ordered: bool = False,
    ) -> np.ndarray:
        """Append sessions (their reps appended by the caller, in the same order); their rows.
        ``ordered``: they are sorted by (slot, start) already."""
        m = len(slot)
        self._reserve(m)
        rows = np.arange(self.n, self.n + m)
        self.slot[rows], self.start[rows], self.end[rows] = slot, start, end
        self.val[rows], self.seq[rows], self.fired[rows] = val, seq, fired
        self.rep[rows] = np.arange(self._nreps, self._nreps + m)
        self._nreps += m
        self.n += m
        # a new session is its key's latest unless the key has a later one (old elements)
        cur = self.last[slot]
        take = ~((cur >= 0) & (self.start[np.maximum(cur, 0)] > start))
        if ordered:  # repeated slots: the last assignment (the latest start) stays
            self.last[slot[take]] = rows[take]
        else:
            o = np.lexsort((start, slot))
            o = o[take[o]]
            self.last[slot[o]] = rows[o]
        return rows

    def _set_dtype(self, dt: np.dtype) -> None:
        if self.dtype is None:
            self.dtype = dt
            self.val = self.val.astype(dt)
        elif dt != self.dtype:
            self.dtype = np.result_type(self.dtype, dt)
            self.val = self.val.astype(self.dtype)

    # ------------------------------------------------------------------ elements
    def add_batch(
        self, rb: pa.RecordBatch, ts: np.ndarray, watermark: int, late_tag: str | None
    ) -> tuple[pa.RecordBatch | list | None, np.ndarray, list, list] | None:
        """Fold ``rb`` in, or return None (nothing changed) when the batch needs the per-record
        path. Returns ``(rows fired at once or None, their timestamps, late records, their
        timestamps)``."""
        n = len(ts)
        gap = self.gap
        vcol = rb.column(column_of(rb, self.field)[0])
        dt = _vec_value_dtype(vcol.type)
        assert dt is not None  # eligible() checked it
        row_slot = self._slots_of(rb.column(column_of(rb, self.key_field)[0]))
        self._grow_keys()
        old = ts + (gap - 1) <= watermark
        old_idx = np.flatnonzero(old) if old.any() else None
        if old_idx is not None and not self._isolated(row_slot, ts, old_idx):
            return None
        fresh = np.flatnonzero(~old) if old_idx is not None else None
        f_slot = row_slot if fresh is None else row_slot[fresh]
        f_ts = ts if fresh is None else ts[fresh]
        order = np.argsort(f_slot, kind="stable")
        s_slot, s_ts = f_slot[order], f_ts[order]
        same = s_slot[1:] == s_slot[:-1]
        if (same & (s_ts[1:] < s_ts[:-1])).any():
            return None  # out of order within a key
        m = len(s_ts)
        first = np.ones(m, dtype=bool)
        first[1:] = ~same
        fl = np.flatnonzero(first & (self.last[s_slot] >= 0))
        lrow = self.last[s_slot[fl]]
        if (s_ts[fl] < self.start[lrow]).any():
            return None  # before the start of the key's latest session
        # ---- from here on the batch is taken
        self._set_dtype(dt)
        v = vcol.to_numpy(zero_copy_only=False)
        if v.dtype != self.dtype:
            v = v.astype(self.dtype)
        base = self._seq
        self._seq += n
        fired_rows: pa.RecordBatch | list | None = None
        fired_ts = np.zeros(0, dtype=np.int64)
        late: list = []
        late_ts: list = []
        if old_idx is not None:
            fired_rows, fired_ts, late, late_ts = self._add_old(rb, row_slot, ts, v, old_idx, watermark, late_tag)
        if m:
            self._add_fresh(rb, fresh, order, s_slot, s_ts, v, fl, lrow, base)
        return fired_rows, fired_ts, late, late_ts

    def _isolated(self, row_slot: np.ndarray, ts: np.ndarray, old_idx: np.ndarray) -> bool:
        """True when no old element's window touches an open session or another element's window
        of its key (then it merges with nothing, whatever the order)."""
        gap = self.gap
        n = self.n
        for i in old_idx.tolist():
            s, t = int(row_slot[i]), int(ts[i])
            mine = self.slot[:n] == s
            if (mine & (self.start[:n] <= t + gap) & (self.end[:n] >= t)).any():
                return False
            near = (row_slot == s) & (np.abs(ts - t) <= gap)
            if int(near.sum()) > 1:
                return False
        return True

    def _add_old(
        self,
        rb: pa.RecordBatch,
        row_slot: np.ndarray,
        ts: np.ndarray,
        v: np.ndarray,
        idx: np.ndarray,
        watermark: int,
        late_tag: str | None,
    ) -> tuple[pa.RecordBatch | list | None, np.ndarray, list, list]:
        """Isolated elements whose window ended: past the cleanup time they are late; within the
        allowed lateness each opens a session that fires at once (and stays until its cleanup)."""
        t = ts[idx]
        dead = t + (self.gap - 1 + self.allowed_lateness) <= watermark
        late: list = []
        late_ts: list = []
        if dead.any():
            d = idx[dead]
            if late_tag is None:
                self.num_late_records_dropped += len(d)
            else:
                late = arrow_to_records(rb.take(pa.array(d)))
                late_ts = ts[d].tolist()
        keep = idx[~dead]
        if not len(keep):
            return None, np.zeros(0, dtype=np.int64), late, late_ts
        self.pieces.append(rb.take(pa.array(keep)))
        ends = ts[keep] + self.gap
        rows = self._append(row_slot[keep], ts[keep], ends, v[keep], np.zeros(len(keep), dtype=np.int64), True)
        return self._rows_of(rows), ends - 1, late, late_ts

    def _add_fresh(
        self,
        rb: pa.RecordBatch,
        fresh: np.ndarray | None,
        order: np.ndarray,
        s_slot: np.ndarray,
        s_ts: np.ndarray,
        v: np.ndarray,
        fl: np.ndarray,
        lrow: np.ndarray,
        base: int,
    ) -> None:
        gap = self.gap
        m = len(s_ts)
        src = order if fresh is None else fresh[order]  # batch row of each sorted element
        sv = v[src]
        brk = np.ones(m, dtype=bool)
        brk[1:] = (s_slot[1:] != s_slot[:-1]) | (s_ts[1:] - s_ts[:-1] > gap)
        seg_start = np.flatnonzero(brk)
        seg_id = np.cumsum(brk) - 1
        seg_last = np.empty(len(seg_start), dtype=np.int64)
        seg_last[:-1] = seg_start[1:] - 1
        seg_last[-1] = m - 1
        seg_max = s_ts[seg_last]
        # the element that last changed the extent: the first to reach the session's last timestamp
        reach = np.where(s_ts == seg_max[seg_id], src, np.iinfo(np.int64).max)
        seg_seq = base + np.minimum.reduceat(reach, seg_start)
        # segments continuing the key's latest session (a first element touching it)
        touches = s_ts[fl] <= self.end[lrow]
        cont_pos = fl[touches]  # sorted positions (segment starts) that continue
        cont_row = lrow[touches]
        is_cont = np.zeros(len(seg_start), dtype=bool)
        cont_seg = seg_id[cont_pos]
        is_cont[cont_seg] = True
        ufunc = _UFUNC[self.agg]
        if self.agg == "sum" and self.dtype is not None and self.dtype.kind == "f":
            acc = sv[seg_start].copy()  # float sums: from the first value, in arrival order
            acc[cont_seg] = self.val[cont_row]
            rest = np.ones(m, dtype=bool)
            rest[seg_start[~is_cont]] = False
            ufunc.at(acc, seg_id[rest], sv[rest])
        else:
            acc = ufunc.reduceat(sv, seg_start)
            acc[cont_seg] = ufunc(self.val[cont_row], acc[cont_seg])
        if len(cont_row):
            new_end = seg_max[cont_seg] + gap
            grew = new_end > self.end[cont_row]
            self.val[cont_row] = acc[cont_seg]
            g = cont_row[grew]
            self.end[g] = new_end[grew]
            self.seq[g] = seg_seq[cont_seg][grew]
            self.fired[g] = False  # a fresh element moved the end past the watermark
        new = np.flatnonzero(~is_cont)
        if len(new):
            starts = seg_start[new]
            self.pieces.append(rb.take(pa.array(src[starts])))
            self._append(s_slot[starts], s_ts[starts], seg_max[new] + gap, acc[new], seg_seq[new], False, True)

    # ------------------------------------------------------------------ firing
    def _reps(self) -> pa.RecordBatch | None:
        """The representative rows as one batch (None when the pieces' schemas differ)."""
        if len(self.pieces) > 1:
            if not all(p.schema.equals(self.pieces[0].schema) for p in self.pieces):
                return None
            self.pieces = [pa.concat_batches(self.pieces)]
        return self.pieces[0] if self.pieces else None

    def _rows_of(self, rows: np.ndarray) -> pa.RecordBatch | list:
        values = self.val[rows]
        reps = self._reps()
        pos = self.rep[rows]
        if reps is not None:
            out = reps.take(pa.array(pos))
            vi, vname = column_of(out, self.field)
            return out.set_column(vi, pa.field(vname, pa.from_numpy_dtype(values.dtype)), pa.array(values))
        records = [r for p in self.pieces for r in arrow_to_records(p)]
        return [replace_field(records[i], self.field, x) for i, x in zip(pos.tolist(), values.tolist())]

    def advance(self, watermark: int) -> Iterator[tuple[pa.RecordBatch | list, np.ndarray]]:
        """Fire every session the watermark closes (window end, then timer order) as one piece
        (rows, timestamps) and drop those past their cleanup time."""
        n = self.n
        if not n:
            return iter(())
        end = self.end[:n]
        due = np.flatnonzero(~self.fired[:n] & (end - 1 <= watermark))
        out: list = []
        out_ts: list = []
        if len(due):
            due = due[np.lexsort((self.seq[due], end[due]))]
            out.append(self._rows_of(due))
            out_ts.append(end[due] - 1)
            self.fired[due] = True
        dead = end - 1 + self.allowed_lateness <= watermark
        if dead.any():
            self._compact(~dead)
        return zip(out, out_ts)

    def _compact(self, keep: np.ndarray) -> None:
        n = self.n
        rows = np.flatnonzero(keep)
        newpos = np.cumsum(keep) - 1
        live_last = self.last >= 0
        ok = np.zeros(len(self.last), dtype=bool)
        ok[live_last] = keep[self.last[live_last]]
        self.last = np.where(ok, newpos[np.maximum(self.last, 0)], -1)
        reps = self._reps()
        rep_rows = self.rep[rows]
        for name in _COLUMNS:
            arr = getattr(self, name)
            arr[: len(rows)] = arr[:n][rows]
        self.n = len(rows)
        if reps is not None:
            self.pieces = [reps.take(pa.array(rep_rows))] if len(rows) else []
        else:
            records = [r for p in self.pieces for r in arrow_to_records(p)]
            self.pieces = [records_to_arrow([records[i] for i in rep_rows.tolist()])] if len(rows) else []
        self.rep[: self.n] = np.arange(self.n)
        self._nreps = self.n

    def next_cleanup_pending(self) -> bool:
        return self.n > 0

    # ------------------------------------------------------------------ checkpoints / migration
    def entries(self) -> list[tuple[Any, int, int, int, Any, bool]]:
        """``(key, key group, start, end, record, fired)`` of every open session, in the order of
        their timers' registration."""
        n = self.n
        if not n:
            return []
        rows = np.argsort(self.seq[:n], kind="stable")
        out_rows = self._rows_of(rows)
        records = out_rows if isinstance(out_rows, list) else arrow_to_records(out_rows)
        keys = [self.slots.keys[s] for s in self.slot[rows].tolist()]
        kgs = key_group_ids(keys, self.max_parallelism).tolist()
        starts, ends, fired = self.start[rows].tolist(), self.end[rows].tolist(), self.fired[rows].tolist()
        return list(zip(keys, kgs, starts, ends, records, fired))

    def adopt(self, items: list[tuple[Any, int, int, Any, bool, int]]) -> None:
        """Take over ``(key, start, end, reduced record, fired, timer order)`` sessions of the
        per-record form (restored from a checkpoint)."""
        if not items:
            return
        items = sorted(items, key=lambda it: it[5])
        records = [it[3] for it in items]
        values = np.array([get_field(r, self.field) for r in records])
        self._set_dtype(np.dtype(np.float64) if values.dtype.kind == "f" else np.dtype(np.int64))
        slot_list = []
        for key, *_ in items:
            s = self.slots.map.get(key)
            if s is None:
                s = len(self.slots.keys)
                self.slots.map[key] = s
                self.slots.keys.append(key)
            slot_list.append(s)
        self._grow_keys()
        slots = np.array(slot_list, dtype=np.int64)
        starts = np.array([it[1] for it in items], dtype=np.int64)
        order = np.lexsort((starts, slots))  # per key by start: the latest is set last
        self.pieces.append(records_to_arrow([records[i] for i in order.tolist()]))
        self._append(
            slots[order],
            starts[order],
            np.array([it[2] for it in items], dtype=np.int64)[order],
            values.astype(self.dtype)[order],
            self._seq + order,  # timer order (items were sorted by it)
            False,
        )
        self.fired[self.n - len(items) : self.n] = np.array([it[4] for it in items], dtype=bool)[order]
        self._seq += len(items)
