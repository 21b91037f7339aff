"""Keyed windows (Flink's ``WindowOperator``): tumbling, sliding and session windows in event
or processing time, with reduce, aggregate, process and apply window functions, allowed lateness
and a side output for late data.

Window contents live in the operator's keyed state backend (namespace = the window): a
ReducingState (reduce), an AggregatingState (aggregate) or a ListState (process/apply). Session
windows keep, per key, a merging-window set (window -> the window whose state holds its
contents). Triggers are Flink's defaults: an event-time window fires when the watermark passes its
end (``EventTimeTrigger``), a processing-time window when the clock does (``ProcessingTimeTrigger``).
An element that arrives after its window fired but within ``allowed_lateness`` fires the window
again with the updated contents; its state is removed when the watermark passes
``window end + allowed lateness``. Later elements are dropped, or sent to the late-data side
output. Results carry the timestamp ``window.max_timestamp()``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from yarnflink.common.keygroups import key_group_ids
from yarnflink.common.records import KIND_PICKLE, TIMESTAMPS_COLUMN, Batch, arrow_to_records, column_of, record_kind
from yarnflink.operators.base import OperatorContext, StreamOperator
from yarnflink.operators.functions import Function, RuntimeContext, Subscriptable
from yarnflink.operators.keyed import _vec_key_type_ok
from yarnflink.operators.keys import KeyExtractor
from yarnflink.operators.specs import KeySelectorSpec
from yarnflink.operators.timers import InternalTimerService
from yarnflink.operators.watermarks import MAX_TIMESTAMP, MIN_TIMESTAMP, Watermark
from yarnflink.operators.window_buffers import MISSING, WindowBuffers
from yarnflink.operators.window_columns import ColumnarWindows, FieldAggregator
from yarnflink.operators.window_sessions import ColumnarSessions
from yarnflink.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
    check_aggregate_function,
    to_millis,
)
from yarnflink.state.tables import copy_value
from yarnflink.state.task_state import keyed_state_backend_for


def _now_ms() -> int:
    return int(time.time() * 1000)


class Time:
    """PyFlink's ``Time`` (window sizes): ``Time.seconds(5)``."""

    def __init__(self, millis: int):
        self.millis = int(millis)

    @staticmethod
    def milliseconds(n: int) -> Time:
        return Time(n)

    @staticmethod
    def seconds(n: float) -> Time:
        return Time(round(n * 1000))

    @staticmethod
    def minutes(n: float) -> Time:
        return Time(round(n * 60_000))

    @staticmethod
    def hours(n: float) -> Time:
        return Time(round(n * 3_600_000))

    @staticmethod
    def days(n: float) -> Time:
        return Time(round(n * 86_400_000))

    def to_milliseconds(self) -> int:
        return self.millis

    def __repr__(self) -> str:
        return f"Time({self.millis} ms)"


@dataclass(frozen=True, order=True)
class TimeWindow:
    """``[start, end)`` in milliseconds."""

    start: int
    end: int

    def __hash__(self) -> int:
        # windows are dict keys of state and timers many times per record: hash once per object
        h = self.__dict__.get("_hash")
        if h is None:
            h = self.__dict__["_hash"] = hash((self.start, self.end))
        return h

    def __getstate__(self) -> dict:
        return {"start": self.start, "end": self.end}

    def max_timestamp(self) -> int:
        return self.end - 1

    def get_start(self) -> int:
        return self.start

    def get_end(self) -> int:
        return self.end

    def intersects(self, other: TimeWindow) -> bool:
        return self.start <= other.end and self.end >= other.start

    def cover(self, other: TimeWindow) -> TimeWindow:
        return TimeWindow(min(self.start, other.start), max(self.end, other.end))

    @staticmethod
    def get_window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
        return timestamp - (timestamp - offset) % window_size


def merge_time_windows(windows: Iterable[TimeWindow]) -> list[tuple[TimeWindow, list[TimeWindow]]]:
    """Flink's ``TimeWindow.mergeWindows``: groups of overlapping windows, each with its cover
    (only groups of more than one window)."""
    ordered = sorted(windows)
    groups: list[tuple[TimeWindow, list[TimeWindow]]] = []
    for w in ordered:
        if groups and groups[-1][0].intersects(w):
            cover, members = groups[-1]
            groups[-1] = (cover.cover(w), members + [w])
        else:
            groups.append((w, [w]))
    return [(c, m) for c, m in groups if len(m) > 1]


# ----------------------------------------------------------------------------- assigners
class WindowAssigner:
    event_time = True
    merging = False

    def assign_windows(self, timestamp: int) -> list[TimeWindow]:
        raise NotImplementedError

    def is_event_time(self) -> bool:
        return self.event_time


def _positive(value: Any, what: str) -> int:
    ms = to_millis(value, what)
    if ms <= 0:
        raise ValueError(f"{what}: must be positive, got {ms} ms")
    return ms


class TumblingEventTimeWindows(WindowAssigner):
    def __init__(self, size: int, offset: int = 0):
        if abs(offset) >= size:
            raise ValueError(f"TumblingWindows: |offset| must be smaller than the size ({offset} ms, {size} ms)")
        self.size, self.offset = size, offset

    @classmethod
    def of(cls, size: Any, offset: Any = 0) -> TumblingEventTimeWindows:
        return cls(_positive(size, f"{cls.__name__}.of() size"), to_millis(offset, f"{cls.__name__}.of() offset"))

    def assign_windows(self, timestamp: int) -> list[TimeWindow]:
        start = TimeWindow.get_window_start_with_offset(timestamp, self.offset, self.size)
        return [TimeWindow(start, start + self.size)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.size})"


class TumblingProcessingTimeWindows(TumblingEventTimeWindows):
    event_time = False


class SlidingEventTimeWindows(WindowAssigner):
    def __init__(self, size: int, slide: int, offset: int = 0):
        if abs(offset) >= slide:
            raise ValueError(f"SlidingWindows: |offset| must be smaller than the slide ({offset} ms, {slide} ms)")
        self.size, self.slide, self.offset = size, slide, offset

    @classmethod
    def of(cls, size: Any, slide: Any, offset: Any = 0) -> SlidingEventTimeWindows:
        return cls(
            _positive(size, f"{cls.__name__}.of() size"),
            _positive(slide, f"{cls.__name__}.of() slide"),
            to_millis(offset, f"{cls.__name__}.of() offset"),
        )

    def assign_windows(self, timestamp: int) -> list[TimeWindow]:
        last_start = TimeWindow.get_window_start_with_offset(timestamp, self.offset, self.slide)
        return [TimeWindow(s, s + self.size) for s in range(last_start, timestamp - self.size, -self.slide)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.size}, {self.slide})"


class SlidingProcessingTimeWindows(SlidingEventTimeWindows):
    event_time = False


class EventTimeSessionWindows(WindowAssigner):
    merging = True

    def __init__(self, gap: int):
        self.gap = gap

    @classmethod
    def with_gap(cls, gap: Any) -> EventTimeSessionWindows:
        return cls(_positive(gap, f"{cls.__name__}.with_gap()"))

    def assign_windows(self, timestamp: int) -> list[TimeWindow]:
        return [TimeWindow(timestamp, timestamp + self.gap)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.gap})"


class ProcessingTimeSessionWindows(EventTimeSessionWindows):
    event_time = False


def window_parameters(assigner: WindowAssigner) -> tuple[int, int, int] | None:
    """(size, slide, offset) of a tumbling / sliding event-time assigner, else None."""
    if type(assigner) is TumblingEventTimeWindows:
        return assigner.size, assigner.size, assigner.offset
    if type(assigner) is SlidingEventTimeWindows:
        return assigner.size, assigner.slide, assigner.offset
    return None


# ----------------------------------------------------------------------------- functions
class ProcessWindowFunction(Function):
    """``process(key, context, elements) -> iterable`` once per window firing."""

    class Context(Subscriptable):
        def __init__(self, op: WindowOperator):
            self._op = op
            self._window: TimeWindow | None = None

        def window(self) -> TimeWindow:
            assert self._window is not None
            return self._window

        def current_processing_time(self) -> int:
            return self._op.clock()

        def current_watermark(self) -> int:
            return self._op.timers.current_watermark if self._op.timers is not None else MIN_TIMESTAMP

    def process(self, key: Any, context: ProcessWindowFunction.Context, elements: Iterable[Any]) -> Iterable[Any]:
        raise NotImplementedError

    def clear(self, context: ProcessWindowFunction.Context) -> None:
        pass


class WindowFunction(Function):
    """``apply(key, window, inputs) -> iterable`` once per window firing."""

    def apply(self, key: Any, window: TimeWindow, inputs: Iterable[Any]) -> Iterable[Any]:
        raise NotImplementedError


@dataclass(frozen=True)
class OutputTag:
    """Names a side output: ``OutputTag("late-data")``."""

    tag_id: str
    type_info: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.tag_id, str) or not self.tag_id:
            raise ValueError(f"an OutputTag needs a non-empty id, got {self.tag_id!r}")

    def get_tag_id(self) -> str:
        return self.tag_id


@dataclass(frozen=True)
class SideOutputRecord:
    """A record for the side output ``tag_id``, in the operator's output stream until a
    ``SideOutputSelectOperator`` picks it (``get_side_output``) or drops it (the main output)."""

    tag_id: str
    value: Any


@dataclass
class WindowSpec:
    """``key_by(...).window(assigner)...`` then ``reduce`` / ``aggregate`` / ``process`` / ``apply``.
    ``function``: the ReduceFunction / AggregateFunction (None for process/apply);
    ``window_function``: the ProcessWindowFunction / WindowFunction (optional for reduce/aggregate)."""

    assigner: WindowAssigner
    key_selector: KeySelectorSpec
    function_kind: str  # reduce | aggregate | process | apply
    function: Any = None
    window_function: Any = None
    allowed_lateness_ms: int = 0
    late_data_tag: str | None = None
    kind: str = "window"


@dataclass
class SideOutputSelectSpec:
    """The main output (``tag_id`` None: drop side records) or one side output of an operator."""

    tag_id: str | None = None
    kind: str = "side_output"


class SideOutputSelectOperator(StreamOperator):
    def __init__(self, spec: SideOutputSelectSpec):
        self.tag_id = spec.tag_id

    def process_batch(self, batch: Batch) -> None:
        rows = batch.rows()
        ts = batch.timestamps
        if self.tag_id is None:
            keep = [type(r) is not SideOutputRecord for r in rows]
            if all(keep):
                if rows:
                    self.output.emit(batch)
                return
            out = [r for r, k in zip(rows, keep) if k]
        else:
            tag = self.tag_id
            keep = [type(r) is SideOutputRecord and r.tag_id == tag for r in rows]
            out = [r.value for r, k in zip(rows, keep) if k]
        if out:
            self.output.emit(Batch(out, None, None if ts is None else ts[np.array(keep, dtype=bool)]))


# ----------------------------------------------------------------------------- operator
_CONTENTS = "window-contents"
_MERGING = "merging-window-set"
#: the vectorized path emits the windows one watermark closes in batches of up to this many rows
FIRE_ROWS = 1 << 16


class WindowOperator(StreamOperator):
    def __init__(self, spec: WindowSpec):
        self.spec = spec
        self.assigner = spec.assigner
        self.event_time = spec.assigner.is_event_time()
        self.merging = spec.assigner.merging
        self.keys = KeyExtractor(spec.key_selector)
        self.allowed_lateness = spec.allowed_lateness_ms if self.event_time else 0
        self.late_tag = spec.late_data_tag
        self.clock: Callable[[], int] = _now_ms
        self.timers: InternalTimerService | None = None
        self.num_late_records_dropped = 0
        self._out: list = []
        self._out_ts: list = []
        kind = spec.function_kind
        if kind == "reduce":
            fn = spec.function
            reduce = getattr(fn, "reduce", None)
            self._reduce = reduce if callable(reduce) else fn
            self._descriptor: Any = ReducingStateDescriptor(_CONTENTS, self._reduce)
        elif kind == "aggregate":
            self._agg = check_aggregate_function(spec.function, "aggregate()")
            self._descriptor = AggregatingStateDescriptor(_CONTENTS, self._agg)
        elif kind in ("process", "apply"):
            self._descriptor = ListStateDescriptor(_CONTENTS)
        else:
            raise ValueError(f"unknown window function kind {kind!r}")
        self._kind = kind
        self._wfn = spec.window_function
        # the vectorized path (yarnflink.operators.window_columns): chosen by the first batch
        self._vec_params = window_parameters(spec.assigner) if self.event_time else None
        self._vec_gap = spec.assigner.gap if type(spec.assigner) is EventTimeSessionWindows else None
        self._vec_candidate = (
            kind == "reduce"
            and isinstance(spec.function, FieldAggregator)
            and spec.window_function is None
            and self.keys.is_field
            and (self._vec_params is not None or self._vec_gap is not None)
        )
        self.mode: str | None = None  # "vec" | "rec"
        self.columnar: ColumnarWindows | ColumnarSessions | None = None
        # per record, event-time tumbling / sliding windows keep their contents in plain dicts
        self.buffers: WindowBuffers | None = None
        # the per-record path groups a batch by (key, window start) for tumbling / sliding windows
        self._starts: Callable[[int], Any] | None = None
        self._tumbling: tuple[int, int] | None = None  # (size, offset)
        self._size = 0
        # one TimeWindow object per open window: equal objects would be compared on every lookup
        self._window_objects: dict[int, TimeWindow] = {}
        a = spec.assigner
        if isinstance(a, SlidingEventTimeWindows):
            size, slide, offset = a.size, a.slide, a.offset
            self._size = size
            self._starts = lambda t: range(t - (t - offset) % slide, t - size, -slide)
        elif isinstance(a, TumblingEventTimeWindows):
            size, offset = a.size, a.offset
            self._size = size
            self._starts = lambda t: (t - (t - offset) % size,)
            self._tumbling = (size, offset)
        self._buffered = self.event_time and self._starts is not None
        # an AggregateFunction's batch form (add_batch): one call per (key, window) and Arrow batch
        self._batch_agg = (
            self._agg
            if kind == "aggregate" and callable(getattr(self._agg, "add_batch", None)) and self._buffered
            else None
        )
        self._rich = [
            f
            for f in (spec.function, spec.window_function, self.keys.rich)
            if f is not None and callable(getattr(f, "open", None)) and not isinstance(f, type)
        ]

    # ------------------------------------------------------------------ lifecycle
    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        self.backend = keyed_state_backend_for(ctx, clock=lambda: self.clock())
        self.contents = self.backend.get_partitioned_state(self._descriptor)
        self.merging_sets = self.backend.get_partitioned_state(ValueStateDescriptor(_MERGING)) if self.merging else None
        self.timers = InternalTimerService(
            self.backend, "window-timers", self._on_event_time, self._on_processing_time, clock=lambda: self.clock()
        )
        self.wctx = ProcessWindowFunction.Context(self)
        for f in self._rich:
            f.open(RuntimeContext(ctx))

    def close(self) -> None:
        for f in self._rich:
            f.close()
        if getattr(self, "backend", None) is not None:
            self.backend.dispose()

    # ------------------------------------------------------------------ elements
    def process_batch(self, batch: Batch) -> None:
        self._fire_processing_timers()
        if self.mode != "rec" and self._vec_candidate and batch.timestamps is not None and len(batch):
            if self.mode == "vec" or (batch.has_arrow and not batch.has_rows):
                rb = batch.arrow()
                columnar = self.columnar or self._new_columnar()
                if columnar.eligible(rb) and self._process_columnar(columnar, rb, batch.timestamps):
                    self.mode = "vec"
                    return
            if self.columnar is not None:  # it may hold restored contents even before its first batch
                self._leave_columnar()
        self.mode = "rec"
        if self._batch_agg is not None and batch.has_arrow and not batch.has_rows and self._aggregate_batch(batch):
            return
        rows = batch.rows()
        if not rows:
            return
        keys = self.keys.keys_of_rows(rows)
        if self.event_time:
            ts = batch.timestamps
            if ts is None:
                raise ValueError(
                    f"window operator {self.ctx.operator_name!r}: the records have no timestamps. Event-time "
                    "windows need assign_timestamps_and_watermarks(...) before key_by() (a map_batches "
                    "function in between keeps them unless it returns another number of rows without the "
                    f"column {TIMESTAMPS_COLUMN!r}), or use a processing-time window assigner"
                )
            ts_list = ts.tolist()
        else:
            now = self.clock()
            ts_list = [now] * len(rows)
        late: list = []
        late_ts: list = []
        if self._buffered:
            self._process_buffered(keys, rows, ts_list, late, late_ts)
        elif self._starts is not None:
            kgs = key_group_ids(keys, self.ctx.max_parallelism).tolist()
            self._process_grouped(keys, kgs, rows, ts_list, late, late_ts)
        else:
            kgs = key_group_ids(keys, self.ctx.max_parallelism).tolist()
            self._process_each(keys, kgs, rows, ts_list, late, late_ts)
        self._flush()
        if late:
            self.output.emit(Batch(late, None, np.array(late_ts, dtype=np.int64)))

    def _process_buffered(self, keys: list, rows: list, ts_list: list, late: list, late_ts: list) -> None:
        buffers = self.buffers or self._new_buffers()
        size = self._size

        def refire(key: Any, start: int, contents: Any) -> None:
            self._emit_contents(key, TimeWindow(start, start + size), contents)

        for i in buffers.add_batch(keys, rows, ts_list, self.current_watermark, refire):
            if self.late_tag is not None:
                late.append(SideOutputRecord(self.late_tag, rows[i]))
                late_ts.append(ts_list[i])
            else:
                self.num_late_records_dropped += 1

    def _aggregate_batch(self, batch: Batch) -> bool:
        """Tumbling / sliding windows with an ``AggregateFunction`` that has ``add_batch``: the
        batch is grouped by (window, key) with numpy and ``add_batch(rows, accumulator)`` is called
        once per group with the group's rows (an Arrow RecordBatch, in arrival order), in the order
        the groups' first elements arrived (the per-record path's order). Only when no window of
        the batch has fired yet (else False: record by record, with lateness and late data)."""
        ts = batch.timestamps
        if ts is None or not len(batch) or not self.keys.is_field:
            return False
        ts = np.asarray(ts, dtype=np.int64)
        if int(ts.min()) <= self.current_watermark:
            return False
        rb = batch.arrow()
        if record_kind(rb) == KIND_PICKLE:
            return False
        try:
            kcol = rb.column(column_of(rb, self.keys.field)[0])  # type: ignore[arg-type]
        except (LookupError, TypeError):
            return False
        if kcol.null_count or not _vec_key_type_ok(kcol.type):
            return False
        enc = kcol.dictionary_encode()
        codes = enc.indices.to_numpy(zero_copy_only=False)
        ukeys = enc.dictionary.to_pylist()
        buffers = self.buffers or self._new_buffers()
        size, slide, offset = buffers.size, buffers.slide, buffers.offset
        last = ts - np.mod(ts - offset, slide)
        if slide == size:
            elem, starts = np.arange(len(ts)), last
        else:
            k = -(-size // slide)
            grid = last[:, None] - np.arange(k, dtype=np.int64)[None, :] * slide
            valid = grid > (ts - size)[:, None]
            elem = np.broadcast_to(np.arange(len(ts))[:, None], grid.shape)[valid]
            starts = grid[valid]
        pair_codes = codes[elem]
        order = np.lexsort((pair_codes, starts))  # stable: arrival order within a group
        s_st, s_c = starts[order], pair_codes[order]
        brk = np.ones(len(order), dtype=bool)
        brk[1:] = (s_st[1:] != s_st[:-1]) | (s_c[1:] != s_c[:-1])
        gs = np.flatnonzero(brk)
        ge = np.append(gs[1:], len(order))
        gorder = np.argsort(order[gs], kind="stable")  # groups in the order of their first element
        rows = rb.take(pa.array(elem[order]))
        fn, buckets = self._batch_agg, buffers.buckets
        assert fn is not None
        g_start, g_key = s_st[gs].tolist(), s_c[gs].tolist()
        g_lo, g_hi = gs.tolist(), ge.tolist()
        for g in gorder.tolist():
            start = g_start[g]
            bucket = buckets.get(start)
            if bucket is None:
                bucket = buckets[start] = {}
            key = ukeys[g_key[g]]
            acc = bucket.get(key, MISSING)
            if acc is MISSING:
                acc = fn.create_accumulator()
            bucket[key] = fn.add_batch(rows.slice(g_lo[g], g_hi[g] - g_lo[g]), acc)
        return True

    def _new_buffers(self) -> WindowBuffers:
        """The dict buffers, holding the (restored) contents of the keyed backend, if any."""
        a = self.assigner
        slide = a.slide if isinstance(a, SlidingEventTimeWindows) else a.size  # type: ignore[attr-defined]
        fn = self._reduce if self._kind == "reduce" else (self._agg if self._kind == "aggregate" else None)
        buffers = WindowBuffers(self._kind, fn, self._size, slide, a.offset, self.allowed_lateness)  # type: ignore[attr-defined]
        backend, timers = self.backend, self.timers
        assert timers is not None
        for kg, key, window in backend.entries(_CONTENTS):
            backend.set_current_key(key, kg)
            self.contents.set_current_namespace(window)
            contents = self.contents.get() if self._kind in ("process", "apply") else self.contents.get_internal()
            self.contents.clear()
            fired = not timers.event_queue.remove(window.max_timestamp(), key, window, kg)
            t = self._cleanup_time(window)
            if t != MAX_TIMESTAMP:
                timers.event_queue.remove(t, key, window, kg)
            if contents is not None:
                buffers.adopt(key, window.start, contents, fired)
        self.buffers = buffers
        return buffers

    def _fire_buffers(self, watermark: int) -> None:
        assert self.buffers is not None
        size = self._size

        def emit(key: Any, start: int, contents: Any) -> None:
            self._emit_contents(key, TimeWindow(start, start + size), contents)
            if len(self._out) >= FIRE_ROWS:  # many windows at once: sent as they are made
                self._flush()

        cleared = None
        if self._kind == "process" and self._wfn is not None:

            def cleared(key: Any, start: int) -> None:
                self.wctx._window = TimeWindow(start, start + size)
                self._wfn.clear(self.wctx)

        self.buffers.fire(watermark, emit, cleared)

    def _write_buffers(self) -> list[tuple[Any, int, TimeWindow]]:
        """Write the buffers into the keyed backend in its form (contents and timers)."""
        assert self.buffers is not None and self.timers is not None
        items = list(self.buffers.entries())
        kgs = key_group_ids([k for k, _, _, _ in items], self.ctx.max_parallelism).tolist() if items else []
        written = []
        listed = self._kind in ("process", "apply")
        for (key, start, contents, fired), kg in zip(items, kgs):
            window = TimeWindow(start, start + self._size)
            self.backend.set_current_key(key, kg)
            self.contents.set_current_namespace(window)
            if listed:
                self.contents.update(list(contents))
            else:
                self.contents.update_internal(copy_value(contents))
            if not fired:
                self.timers.register_event_time_timer(window, window.max_timestamp())
            self._register_cleanup_timer(window)
            written.append((key, kg, window))
        return written

    def _process_each(self, keys: list, kgs: list, rows: list, ts_list: list, late: list, late_ts: list) -> None:
        """Record by record (merging windows and other assigners)."""
        backend = self.backend
        for i, (key, value) in enumerate(zip(keys, rows)):
            backend.set_current_key(key, kgs[i])
            t = ts_list[i]
            skipped = True
            for window in self.assigner.assign_windows(t):
                known = False  # the element fell into a session unchanged: its timers exist
                if self.merging:
                    window, state_window, known = self._add_merging_window(window)
                    if self._is_window_late(window):
                        self._retire(window)
                        continue
                elif self._is_window_late(window):
                    continue
                else:
                    state_window = window
                skipped = False
                self.contents.set_current_namespace(state_window)
                self.contents.add(value)
                if known and (not self.event_time or window.max_timestamp() > self.current_watermark):
                    continue  # its timers were registered when the session got this extent
                if self._trigger_on_element(window):
                    self._emit_window(key, window, state_window)
                self._register_cleanup_timer(window)
            if skipped and self._is_element_late(t):
                if self.late_tag is not None:
                    late.append(SideOutputRecord(self.late_tag, value))
                    late_ts.append(t)
                else:
                    self.num_late_records_dropped += 1

    def _process_grouped(self, keys: list, kgs: list, rows: list, ts_list: list, late: list, late_ts: list) -> None:
        """Tumbling / sliding windows, record at a time but without per-record window objects or
        timers: the batch's records are grouped by (key, window start) (plain tuples of ints and
        keys), then each group's contents are added in one state access (``add_all``: the same
        values as adding one by one), and the timers of a (key, window) are registered once, when
        it gets its first contents, in the order the groups first appear (the per-record path's
        timer order). A window that has fired and gets late
        elements within the allowed lateness fires once per element, as Flink does."""
        starts_of = self._starts
        assert starts_of is not None
        groups: dict[tuple[Any, int], list[int]] = {}
        status: dict[int, int] = {}  # window start -> 0 open, 1 fired (within the lateness), 2 past cleanup
        refire: list[tuple[int, int]] = []
        if self._tumbling is not None and (not self.event_time or min(ts_list) > self.current_watermark):
            # the common case: one window per record and none has fired yet
            size, offset = self._tumbling
            get = groups.get
            for i, (key, t) in enumerate(zip(keys, ts_list)):
                gk = (key, t - (t - offset) % size)
                g = get(gk)
                if g is None:
                    groups[gk] = [i]
                else:
                    g.append(i)
            ts_list = []  # done
        for i, t in enumerate(ts_list):
            skipped = True
            for start in starts_of(t):
                st = status.get(start)
                if st is None:
                    st = status[start] = self._window_status(start)
                if st == 0:
                    g = groups.get((keys[i], start))
                    if g is None:
                        groups[(keys[i], start)] = [i]
                    else:
                        g.append(i)
                    skipped = False
                elif st == 1:
                    refire.append((i, start))
                    skipped = False
            if skipped and self._is_element_late(t):
                if self.late_tag is not None:
                    late.append(SideOutputRecord(self.late_tag, rows[i]))
                    late_ts.append(t)
                else:
                    self.num_late_records_dropped += 1
        backend, contents, size = self.backend, self.contents, self._size
        cleanup_differs = self.event_time and self.allowed_lateness > 0  # else one timer does both
        windows = self._window_objects
        for (key, start), idx in groups.items():
            window = windows.get(start)
            if window is None:
                window = windows[start] = TimeWindow(start, start + size)
            backend.set_current_key(key, kgs[idx[0]])
            contents.set_current_namespace(window)
            if contents.add_all([rows[j] for j in idx]):  # new contents: the window's timers
                self._trigger_on_element(window)  # registers the window's timer (it has not fired)
                if cleanup_differs:
                    self._register_cleanup_timer(window)
        for i, start in refire:
            window = TimeWindow(start, start + size)
            key = keys[i]
            backend.set_current_key(key, kgs[i])
            contents.set_current_namespace(window)
            contents.add(rows[i])
            self._emit_window(key, window, window)
            self._register_cleanup_timer(window)

    def _forget_windows(self) -> None:
        """Drop the cached window objects of windows past their cleanup time."""
        wm = self.current_watermark
        objs = self._window_objects
        for start in [s for s, w in objs.items() if self._cleanup_time(w) <= wm]:
            del objs[start]

    def _window_status(self, start: int) -> int:
        window = TimeWindow(start, start + self._size)
        if self._is_window_late(window):
            return 2
        if self.event_time and window.max_timestamp() <= self.current_watermark:
            return 1
        return 0

    # ------------------------------------------------------------------ vectorized path
    def _new_columnar(self) -> ColumnarWindows | ColumnarSessions:
        """The columnar state, holding the (restored) contents of the keyed backend, if any."""
        if self._vec_gap is not None:
            return self._new_sessions(self._vec_gap)
        assert self._vec_params is not None and self.keys.field is not None
        size, slide, offset = self._vec_params
        fn = self.spec.function
        columnar = ColumnarWindows(
            fn.agg, fn.field, self.keys.field, size, slide, offset, self.allowed_lateness, self.ctx.max_parallelism
        )
        items = []
        backend, timers = self.backend, self.timers
        assert timers is not None
        for kg, key, window in backend.entries(_CONTENTS):
            backend.set_current_key(key, kg)
            self.contents.set_current_namespace(window)
            record = self.contents.get()
            self.contents.clear()
            fired = not timers.event_queue.remove(window.max_timestamp(), key, window, kg)
            t = self._cleanup_time(window)
            if t != MAX_TIMESTAMP:
                timers.event_queue.remove(t, key, window, kg)
            if record is not None:
                items.append((key, window.start, record, fired))
        columnar.adopt(items)
        self.columnar = columnar
        return columnar

    def _new_sessions(self, gap: int) -> ColumnarSessions:
        """The columnar sessions, holding the (restored) sessions of the keyed backend, if any."""
        assert self.keys.field is not None and self.merging_sets is not None
        fn = self.spec.function
        sessions = ColumnarSessions(
            fn.agg, fn.field, self.keys.field, gap, self.allowed_lateness, self.ctx.max_parallelism
        )
        items = []
        backend, timers = self.backend, self.timers
        assert timers is not None
        queue = timers.event_queue
        for kg, key, _ in backend.entries(_MERGING):
            backend.set_current_key(key, kg)
            mapping = self._merging_set()
            self.merging_sets.clear()
            for window, state_window in mapping.items():
                self.contents.set_current_namespace(state_window)
                record = self.contents.get()
                self.contents.clear()
                order = queue.seq_of(window.max_timestamp(), key, window, kg)
                fired = not queue.remove(window.max_timestamp(), key, window, kg)
                t = self._cleanup_time(window)
                if t != MAX_TIMESTAMP:
                    queue.remove(t, key, window, kg)
                if record is not None:
                    items.append((key, window.start, window.end, record, fired, -1 if order is None else order))
        sessions.adopt(items)
        self.columnar = sessions
        return sessions

    def _process_columnar(self, columnar: ColumnarWindows | ColumnarSessions, rb: Any, ts: Any) -> bool:
        """Fold a batch into the columnar state; False (nothing changed) when it cannot."""
        dropped = columnar.num_late_records_dropped
        taken = columnar.add_batch(rb, np.asarray(ts, dtype=np.int64), self.current_watermark, self.late_tag)
        if taken is None:
            return False
        fired, fired_ts, late, late_ts = taken
        self.num_late_records_dropped += columnar.num_late_records_dropped - dropped
        if fired is not None and len(fired):
            self.output.emit(
                Batch(fired, None, np.asarray(fired_ts, dtype=np.int64))
                if isinstance(fired, list)
                else Batch(rb=fired, timestamps=np.asarray(fired_ts, dtype=np.int64))
            )
        if late:
            assert self.late_tag is not None
            tag = self.late_tag
            self.output.emit(Batch([SideOutputRecord(tag, r) for r in late], None, np.array(late_ts, dtype=np.int64)))
        return True

    def _fire_columnar(self, watermark: int) -> None:
        """Emit the windows the watermark closes: together, in batches of up to ``FIRE_ROWS``
        rows (a window larger than that goes alone), made and sent one after the other so
        that firing many windows at once (a watermark far ahead) stays within bounded memory."""
        assert self.columnar is not None
        pieces: list = []
        stamps: list = []
        rows = 0
        for piece, ts in self.columnar.advance(watermark):
            if pieces and rows + len(ts) > FIRE_ROWS:
                self._emit_fired(pieces, stamps)
                pieces, stamps, rows = [], [], 0
            pieces.append(piece)
            stamps.append(ts)
            rows += len(ts)
        if pieces:
            self._emit_fired(pieces, stamps)

    def _emit_fired(self, pieces: list, stamps: list) -> None:
        ts = np.concatenate(stamps) if len(stamps) > 1 else stamps[0]
        batches = [p for p in pieces if not isinstance(p, list)]
        if len(batches) == len(pieces) and all(b.schema.equals(batches[0].schema) for b in batches):
            self.output.emit(Batch(rb=pa.concat_batches(batches) if len(batches) > 1 else batches[0], timestamps=ts))
            return
        rows = [r for p in pieces for r in (p if isinstance(p, list) else arrow_to_records(p))]
        self.output.emit(Batch(rows, None, ts))

    def _write_columnar(self) -> list[tuple[Any, int, TimeWindow]]:
        """Write the columnar contents into the keyed backend in the per-record form (records
        and timers); returns what was written."""
        assert self.columnar is not None and self.timers is not None
        written = []
        backend = self.backend
        sessions: dict[tuple[Any, int], dict] = {}  # merging-window sets: each session its own state window
        for key, kg, start, end, record, fired in self.columnar.entries():
            window = TimeWindow(start, end)
            backend.set_current_key(key, kg)
            self.contents.set_current_namespace(window)
            self.contents.add(record)
            if not fired:
                self.timers.register_event_time_timer(window, window.max_timestamp())
            self._register_cleanup_timer(window)
            written.append((key, kg, window))
            if self.merging:
                sessions.setdefault((key, kg), {})[window] = window
        for (key, kg), mapping in sessions.items():
            backend.set_current_key(key, kg)
            self.merging_sets.update(mapping)  # type: ignore[union-attr]
        return written

    def _unwrite_columnar(self, written: list[tuple[Any, int, TimeWindow]]) -> None:
        assert self.timers is not None
        for key, kg, window in written:
            self.backend.set_current_key(key, kg)
            self.contents.set_current_namespace(window)
            self.contents.clear()
            if self.merging:
                self.merging_sets.clear()  # type: ignore[union-attr]
            self.timers.delete_event_time_timer(window, window.max_timestamp())
            t = self._cleanup_time(window)
            if t != MAX_TIMESTAMP:
                self.timers.delete_event_time_timer(window, t)

    def _leave_columnar(self) -> None:
        """A batch the vectorized path cannot take: move the contents to the per-record path."""
        if self.columnar is not None:
            self._write_columnar()
            self.columnar = None
        self.mode = "rec"

    # ------------------------------------------------------------------ time
    def process_watermark(self, watermark: Any) -> None:
        if isinstance(watermark, Watermark):
            self.timers.advance_watermark(watermark.timestamp)  # type: ignore[union-attr]
            if len(self._window_objects) > 64:
                self._forget_windows()
            if self.columnar is not None:
                self._fire_columnar(self.timers.current_watermark)  # type: ignore[union-attr]
            if self.buffers is not None:
                self._fire_buffers(self.timers.current_watermark)  # type: ignore[union-attr]
            self._flush()
        super().process_watermark(watermark)

    def end_input(self) -> None:
        if self.event_time and self.timers.current_watermark < MAX_TIMESTAMP:  # type: ignore[union-attr]
            self.timers.advance_watermark(MAX_TIMESTAMP)  # type: ignore[union-attr]
            if self.columnar is not None:
                self._fire_columnar(MAX_TIMESTAMP)
            if self.buffers is not None:
                self._fire_buffers(MAX_TIMESTAMP)
            self._flush()
        self.output.end_input()

    def on_processing_time(self, now: int) -> None:
        self.timers.on_processing_time(now)  # type: ignore[union-attr]
        self._flush()

    def next_processing_time(self) -> int | None:
        return self.timers.next_processing_time() if self.timers is not None else None

    def _fire_processing_timers(self) -> None:
        if not self.event_time and self.timers is not None and self.timers.processing_queue:
            self.on_processing_time(self.clock())

    @property
    def current_watermark(self) -> int:
        return self.timers.current_watermark if self.timers is not None else MIN_TIMESTAMP

    def _cleanup_time(self, window: TimeWindow) -> int:
        if not self.event_time:
            return window.max_timestamp()
        t = window.max_timestamp() + self.allowed_lateness
        return t if t >= window.max_timestamp() else MAX_TIMESTAMP

    def _is_window_late(self, window: TimeWindow) -> bool:
        return self.event_time and self._cleanup_time(window) <= self.current_watermark

    def _is_element_late(self, timestamp: int) -> bool:
        return self.event_time and timestamp + self.allowed_lateness <= self.current_watermark

    def _register_cleanup_timer(self, window: TimeWindow) -> None:
        t = self._cleanup_time(window)
        if t == MAX_TIMESTAMP:
            return
        if self.event_time:
            self.timers.register_event_time_timer(window, t)  # type: ignore[union-attr]
        else:
            self.timers.register_processing_time_timer(window, t)  # type: ignore[union-attr]

    # default triggers: EventTimeTrigger / ProcessingTimeTrigger
    def _trigger_on_element(self, window: TimeWindow) -> bool:
        if self.event_time:
            if window.max_timestamp() <= self.current_watermark:
                return True  # late but within the allowed lateness: fire again
            self.timers.register_event_time_timer(window, window.max_timestamp())  # type: ignore[union-attr]
            return False
        self.timers.register_processing_time_timer(window, window.max_timestamp())  # type: ignore[union-attr]
        return False

    def _trigger_clear(self, window: TimeWindow) -> None:
        if self.event_time:
            self.timers.delete_event_time_timer(window, window.max_timestamp())  # type: ignore[union-attr]
        else:
            self.timers.delete_processing_time_timer(window, window.max_timestamp())  # type: ignore[union-attr]

    def _on_event_time(self, timestamp: int, key: Any, window: TimeWindow) -> None:
        if not self.event_time:
            return
        self._on_timer(timestamp, key, window)

    def _on_processing_time(self, timestamp: int, key: Any, window: TimeWindow) -> None:
        if self.event_time:
            return
        self._on_timer(timestamp, key, window)

    def _on_timer(self, timestamp: int, key: Any, window: TimeWindow) -> None:
        if self.merging:
            state_window = self._merging_set().get(window)
            if state_window is None:
                return  # the window was merged into another one
        else:
            state_window = window
        if timestamp == window.max_timestamp():
            self._emit_window(key, window, state_window)
        if timestamp == self._cleanup_time(window):
            self._clear_all_state(window, state_window)

    def _clear_all_state(self, window: TimeWindow, state_window: TimeWindow) -> None:
        self.contents.set_current_namespace(state_window)
        self.contents.clear()
        self._trigger_clear(window)
        if self._kind == "process" and self._wfn is not None:
            self.wctx._window = window
            self._wfn.clear(self.wctx)
        if self.merging:
            self._retire(window)

    # ------------------------------------------------------------------ merging (sessions)
    def _merging_set(self) -> dict:
        return self.merging_sets.value() or {}  # type: ignore[union-attr]

    def _retire(self, window: TimeWindow) -> None:
        mapping = self._merging_set()
        if window in mapping:
            del mapping[window]
            self.merging_sets.update(mapping or None)  # type: ignore[union-attr]

    def _add_merging_window(self, new: TimeWindow) -> tuple[TimeWindow, TimeWindow, bool]:
        """Flink's ``MergingWindowSet.addWindow``: ``(the window new ends up in, its state window,
        whether that window existed before unchanged)``."""
        mapping = dict(self._merging_set())
        result = new
        merged_new = known = False
        for cover, members in merge_time_windows(list(mapping) + [new]):
            members = list(members)
            if new in members:
                members.remove(new)
                merged_new = True
                result = cover
                known = len(members) == 1 and members[0] == cover
            if not members:
                continue
            state_result = mapping[members[0]]
            merged_state = [mapping.pop(w) for w in members]
            mapping[cover] = state_result
            merged_state.remove(state_result)
            if not (len(members) == 1 and members[0] == cover):
                self._merge(cover, members, state_result, merged_state)
        if not merged_new and new not in mapping:
            mapping[new] = new
        if not known:
            self.merging_sets.update(mapping)  # type: ignore[union-attr]
        return result, mapping[result], known

    def _merge(
        self, cover: TimeWindow, merged: list[TimeWindow], state_result: TimeWindow, merged_state: list[TimeWindow]
    ) -> None:
        # EventTimeTrigger.onMerge: a timer for the merged window if it can still fire
        if self.event_time:
            if cover.max_timestamp() > self.current_watermark:
                self.timers.register_event_time_timer(cover, cover.max_timestamp())  # type: ignore[union-attr]
        else:
            self.timers.register_processing_time_timer(cover, cover.max_timestamp())  # type: ignore[union-attr]
        for w in merged:
            self._trigger_clear(w)
            t = self._cleanup_time(w)
            if t != MAX_TIMESTAMP:
                if self.event_time:
                    self.timers.delete_event_time_timer(w, t)  # type: ignore[union-attr]
                else:
                    self.timers.delete_processing_time_timer(w, t)  # type: ignore[union-attr]
        if merged_state:
            self.contents.merge_namespaces(state_result, merged_state)

    # ------------------------------------------------------------------ output
    def _emit_window(self, key: Any, window: TimeWindow, state_window: TimeWindow) -> None:
        self.contents.set_current_namespace(state_window)
        if self._kind == "reduce":
            contents = self.contents.get()
        elif self._kind == "aggregate":
            contents = self.contents.get_accumulator()
        else:
            contents = self.contents.get()
        self._emit_contents(key, window, contents)

    def _emit_contents(self, key: Any, window: TimeWindow, contents: Any) -> None:
        """Call the window function on a window's contents (reduced value, accumulator or
        elements) and buffer its results with the timestamp ``window.max_timestamp()``."""
        if self._kind == "reduce":
            if contents is None:
                return
            results: Any = self._window_fn(key, window, [contents])
        elif self._kind == "aggregate":
            if contents is None:
                return
            results = self._window_fn(key, window, [self._agg.get_result(contents)])
        else:
            if not contents:
                return
            results = self._window_fn(key, window, contents)
        if results is None:
            return
        if not hasattr(results, "__iter__"):
            raise TypeError(
                f"window operator {self.ctx.operator_name!r}: the window function must return an "
                f"iterable (or yield), got {type(results).__name__}"
            )
        n = len(self._out)
        self._out.extend(results)
        self._out_ts.extend([window.max_timestamp()] * (len(self._out) - n))

    def _window_fn(self, key: Any, window: TimeWindow, elements: list) -> Any:
        wfn = self._wfn
        if wfn is None:
            return elements  # reduce / aggregate without a window function: the result itself
        process = getattr(wfn, "process", None)
        if callable(process):
            self.wctx._window = window
            return process(key, self.wctx, elements)
        apply = getattr(wfn, "apply", None)
        if callable(apply):
            return apply(key, window, elements)
        return wfn(key, window, elements)

    def _flush(self) -> None:
        if self._out:
            self.output.emit(Batch(self._out, None, np.array(self._out_ts, dtype=np.int64)))
            self._out, self._out_ts = [], []

    # ------------------------------------------------------------------ checkpoints
    def snapshot_state(self, checkpoint_id: int, timestamp: int, stream_factory: Any = None) -> list:
        if self.columnar is None and self.buffers is None:
            return [self.backend.snapshot(checkpoint_id, timestamp, stream_factory)]
        # columnar and dict contents are checkpointed in the backend's form (see window_columns)
        written = self._write_columnar() if self.columnar is not None else self._write_buffers()
        try:
            return [self.backend.snapshot(checkpoint_id, timestamp, stream_factory)]
        finally:
            self._unwrite_columnar(written)
