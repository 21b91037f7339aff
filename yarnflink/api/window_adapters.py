"""Count windows and session windows with dynamic gaps, as adapters over keyed process functions
(keyed state and event-time timers), apart from the window operator (``yarnflink.operators.windows``).

* ``key_by(...).count_window(size)`` fires every ``size`` records of a key with those records;
  ``count_window(size, slide)`` fires once ``size`` records arrived and then every ``slide``
  records, each time with the last ``size`` (PyFlink's count window assigners; Java Flink's
  evictor-based sliding count window fires every ``slide`` records from the start instead).
  Incomplete windows never fire.
* ``window(EventTimeSessionWindows.with_dynamic_gap(extractor))`` gives each record the window
  ``[timestamp, timestamp + extractor.extract(record))``, merges the windows of a key that overlap
  or touch, and fires a session when the watermark passes its end (at the end of input at the
  latest); records whose session already ended are dropped (no allowed lateness).

The window function sees what it would see on a window operator: ``reduce`` / ``aggregate`` over
the window's records, then the optional window function; ``process(key, context, elements)`` with
``context.window()``; ``apply(key, window, elements)``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from yarnflink.api.typed import typed
from yarnflink.common.typeinfo import check_type_info
from yarnflink.operators.functions import KeyedProcessFunction
from yarnflink.operators.specs import ProcessSpec
from yarnflink.operators.watermarks import MAX_TIMESTAMP
from yarnflink.operators.windows import EventTimeSessionWindows as _EventTimeSessionWindows
from yarnflink.operators.windows import TimeWindow
from yarnflink.state.descriptors import ValueStateDescriptor, check_aggregate_function, to_millis

if TYPE_CHECKING:
    from yarnflink.api.datastream import DataStream, KeyedStream


@dataclass(frozen=True)
class CountWindow:
    """The window of a count window function: its number per key (0, 1, ...)."""

    id: int

    def max_timestamp(self) -> int:
        return MAX_TIMESTAMP

    def __class_getitem__(cls, params: Any) -> Any:
        return cls


@dataclass(frozen=True)
class GlobalWindow:
    """The one window of every key (``GlobalWindows``); only count windows use it here."""

    def max_timestamp(self) -> int:
        return MAX_TIMESTAMP


class SessionWindowTimeGapExtractor:
    """``extract(element) -> gap`` in milliseconds (or a ``Time`` / ``Duration``)."""

    def extract(self, element: Any) -> int:
        raise NotImplementedError


class DynamicEventTimeSessionWindows:
    """``EventTimeSessionWindows.with_dynamic_gap(extractor)``."""

    merging = True

    def __init__(self, extractor: Any):
        m = getattr(extractor, "extract", None)
        if isinstance(extractor, type) or (not callable(m) and not callable(extractor)):
            raise TypeError(
                "with_dynamic_gap() needs a SessionWindowTimeGapExtractor instance or a function element -> gap, "
                f"got {extractor!r}"
            )
        self.extract = m if callable(m) else extractor

    def is_event_time(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "DynamicEventTimeSessionWindows"


class EventTimeSessionWindows(_EventTimeSessionWindows):
    """Session windows in event time: ``with_gap(Time.seconds(10))`` or
    ``with_dynamic_gap(extractor)`` (a gap per record)."""

    @staticmethod
    def with_dynamic_gap(extractor: Any) -> DynamicEventTimeSessionWindows:  # type: ignore[override]
        return DynamicEventTimeSessionWindows(extractor)


class _WindowContext:
    """``context`` of ``ProcessWindowFunction.process`` for adapted windows."""

    def __init__(self, ctx: Any, window: Any):
        self._ctx = ctx
        self._window = window

    def window(self) -> Any:
        return self._window

    def current_processing_time(self) -> int:
        return int(self._ctx.timer_service().current_processing_time())

    def current_watermark(self) -> int:
        return int(self._ctx.timer_service().current_watermark())

    def window_state(self) -> Any:
        raise NotImplementedError("context.window_state() is not supported on count / dynamic-gap session windows")

    def global_state(self) -> Any:
        raise NotImplementedError("context.global_state() is not supported on count / dynamic-gap session windows")


class _WindowAdapter(KeyedProcessFunction):
    """The keyed process function of a count or dynamic-gap session window."""

    def __init__(
        self, kind: str, function: Any, window_function: Any, *, count: tuple[int, int] | None = None, gap: Any = None
    ):
        self.kind = kind
        self.function = function
        self.window_function = window_function
        self.count = count
        self.gap = gap

    def open(self, runtime_context: Any) -> None:
        self.state = runtime_context.get_state(ValueStateDescriptor("window-adapter-contents"))
        for f in (self.function, self.window_function):
            if f is not None and not isinstance(f, type) and callable(getattr(f, "open", None)):
                f.open(runtime_context)

    def close(self) -> None:
        for f in (self.function, self.window_function):
            if f is not None and not isinstance(f, type) and callable(getattr(f, "close", None)):
                f.close()

    # ------------------------------------------------------------------ firing
    def _fire(self, key: Any, window: Any, elements: list, ctx: Any) -> list:
        if self.kind == "reduce":
            reduce = getattr(self.function, "reduce", None)
            results: list = [functools.reduce(reduce if callable(reduce) else self.function, elements)]
        elif self.kind == "aggregate":
            agg = self.function
            acc = agg.create_accumulator()
            for e in elements:
                acc = agg.add(e, acc)
            results = [agg.get_result(acc)]
        else:
            results = elements
        wfn = self.window_function
        if wfn is None:
            return results
        process = getattr(wfn, "process", None)
        if callable(process):
            out = process(key, _WindowContext(ctx, window), results)
        elif callable(getattr(wfn, "apply", None)):
            out = wfn.apply(key, window, results)
        else:
            out = wfn(key, window, results)
        return list(out) if out is not None else []

    # ------------------------------------------------------------------ records
    def process_element(self, value: Any, ctx: Any) -> Iterable[Any]:
        if self.count is not None:
            return self._count_element(value, ctx)
        return self._session_element(value, ctx)

    def _count_element(self, value: Any, ctx: Any) -> list:
        size, slide = self.count  # type: ignore[misc]
        fired, seen, buffer = self.state.value() or (0, 0, [])
        buffer = (buffer + [value])[-size:]
        seen += 1
        out: list = []
        # PyFlink's count windows: the first fires with the first `size` records, each next one
        # `slide` records later with the last `size` (tumbling: slide == size)
        if seen >= size and (seen - size) % slide == 0:
            out = self._fire(ctx.get_current_key(), CountWindow(fired), list(buffer), ctx)
            fired += 1
        self.state.update((fired, seen, buffer))
        return out

    def _session_element(self, value: Any, ctx: Any) -> list:
        ts = ctx.timestamp()
        if ts is None:
            raise ValueError(
                "session windows with a dynamic gap work in event time: the records have no timestamps; call "
                "assign_timestamps_and_watermarks(...) (or from_source with a timestamp assigner) before key_by()"
            )
        gap = self.gap(value)
        gap_ms = to_millis(gap, "the session gap extractor")
        if gap_ms <= 0:
            raise ValueError(f"the session gap extractor must return a positive gap, got {gap!r} for {value!r}")
        window = TimeWindow(ts, ts + gap_ms)
        if window.max_timestamp() <= ctx.timer_service().current_watermark():
            return []  # late: its session already fired
        sessions: list = self.state.value() or []
        elements = [value]
        kept = []
        merged = window
        for start, end, els in sessions:
            if TimeWindow(start, end).intersects(merged):
                merged = merged.cover(TimeWindow(start, end))
                elements = els + elements
            else:
                kept.append((start, end, els))
        kept.append((merged.start, merged.end, elements))
        self.state.update(kept)
        ctx.timer_service().register_event_time_timer(merged.max_timestamp())
        return []

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any]:
        if self.count is not None:
            return []
        sessions: list = self.state.value() or []
        out: list = []
        kept = []
        for start, end, els in sessions:
            if end - 1 <= timestamp:
                out.extend(self._fire(ctx.get_current_key(), TimeWindow(start, end), els, ctx))
            else:
                kept.append((start, end, els))
        if kept:
            self.state.update(kept)
        else:
            self.state.clear()
        return out


class AdaptedWindowedStream:
    """``count_window(...)`` / ``window(EventTimeSessionWindows.with_dynamic_gap(...))``: the
    window functions of a ``WindowedStream``."""

    def __init__(
        self, keyed: KeyedStream, label: str, *, count: tuple[int, int] | None = None, gap: Any = None
    ) -> None:
        self._keyed = keyed
        self._label = label
        self._count = count
        self._gap = gap

    def _unsupported(self, call: str) -> NotImplementedError:
        return NotImplementedError(f"{call} is not supported on {self._label} windows in yarnflink")

    def allowed_lateness(self, time: Any) -> AdaptedWindowedStream:
        raise self._unsupported("allowed_lateness()")

    def side_output_late_data(self, output_tag: Any) -> AdaptedWindowedStream:
        raise self._unsupported("side_output_late_data()")

    def trigger(self, trigger: Any) -> AdaptedWindowedStream:
        raise self._unsupported("trigger()")

    def evictor(self, evictor: Any) -> AdaptedWindowedStream:
        raise self._unsupported("evictor()")

    def _result(self, kind: str, function: Any, window_function: Any, output_type: Any) -> DataStream:
        out = check_type_info(output_type, f"{kind}()")
        if out is None and kind == "reduce" and window_function is None:
            out = self._keyed._t.output_type
        adapter = _WindowAdapter(kind, function, window_function, count=self._count, gap=self._gap)
        fn = typed(adapter, "process_element", out, single=False)
        spec = ProcessSpec(fn=fn, key_selector=self._keyed.get_key_selector())
        return self._keyed._then(f"Window({self._label}, {kind})", spec, out)

    def reduce(self, reduce_function: Any, window_function: Any = None, output_type: Any = None) -> DataStream:
        if not callable(getattr(reduce_function, "reduce", None)) and not callable(reduce_function):
            raise TypeError(f"reduce() needs a function (a, b) -> c or a ReduceFunction, got {reduce_function!r}")
        return self._result("reduce", reduce_function, _window_fn(window_function), output_type)

    def aggregate(
        self,
        aggregate_function: Any,
        window_function: Any = None,
        accumulator_type: Any = None,
        output_type: Any = None,
    ) -> DataStream:
        check_aggregate_function(aggregate_function, "aggregate()")
        return self._result("aggregate", aggregate_function, _window_fn(window_function), output_type)

    def process(self, process_window_function: Any, output_type: Any = None) -> DataStream:
        if isinstance(process_window_function, type) or not callable(getattr(process_window_function, "process", None)):
            raise TypeError(f"process() needs a ProcessWindowFunction instance, got {process_window_function!r}")
        return self._result("process", None, process_window_function, output_type)

    def apply(self, window_function: Any, output_type: Any = None) -> DataStream:
        wfn = _window_fn(window_function)
        if wfn is None:
            raise TypeError("apply() needs a WindowFunction")
        return self._result("apply", None, wfn, output_type)


def _window_fn(fn: Any) -> Any:
    if fn is None:
        return None
    if isinstance(fn, type):
        raise TypeError(f"a window function must be an instance, got the class {fn.__name__}")
    if callable(getattr(fn, "process", None)) or callable(getattr(fn, "apply", None)) or callable(fn):
        return fn
    raise TypeError(f"expected a ProcessWindowFunction or WindowFunction, got {fn!r}")


def count_windowed(keyed: KeyedStream, size: Any, slide: Any = 0) -> AdaptedWindowedStream:
    for what, v in (("size", size), ("slide", slide)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"count_window(): {what} must be an integer >= 0, got {v!r}")
    if size == 0:
        raise ValueError("count_window(): size must be positive")
    return AdaptedWindowedStream(keyed, f"CountWindow({size}, {slide or size})", count=(size, slide or size))


def session_windowed(keyed: KeyedStream, assigner: DynamicEventTimeSessionWindows) -> AdaptedWindowedStream:
    return AdaptedWindowedStream(keyed, "DynamicEventTimeSessionWindows", gap=assigner.extract)


class CountTumblingWindowAssigner:
    """``window(CountTumblingWindowAssigner.of(n))``: the same as ``count_window(n)``."""

    def __init__(self, window_size: int, slide: int = 0):
        self.size = window_size
        self.slide = slide

    @staticmethod
    def of(window_size: int) -> CountTumblingWindowAssigner:
        return CountTumblingWindowAssigner(window_size)


class CountSlidingWindowAssigner(CountTumblingWindowAssigner):
    """``window(CountSlidingWindowAssigner.of(size, slide))``: the same as ``count_window(size, slide)``."""

    @staticmethod
    def of(window_size: int, window_slide: int) -> CountSlidingWindowAssigner:  # type: ignore[override]
        return CountSlidingWindowAssigner(window_size, window_slide)


def _all_key(record: Any) -> int:
    return 0


class _KeylessProcess:
    """A ``ProcessAllWindowFunction`` (``process(context, elements)``) called as a keyed one."""

    def __init__(self, fn: Any):
        self.fn = fn

    def open(self, runtime_context: Any) -> None:
        opener = getattr(self.fn, "open", None)
        if callable(opener):
            opener(runtime_context)

    def close(self) -> None:
        closer = getattr(self.fn, "close", None)
        if callable(closer):
            closer()

    def process(self, key: Any, context: Any, elements: Iterable[Any]) -> Any:
        return self.fn.process(context, elements)

    def clear(self, context: Any) -> None:
        clear = getattr(self.fn, "clear", None)
        if callable(clear):
            clear(context)


class _KeylessApply(_KeylessProcess):
    """An ``AllWindowFunction`` (``apply(window, inputs)``) called as a keyed one."""

    process = None  # type: ignore[assignment]

    def apply(self, key: Any, window: Any, inputs: Iterable[Any]) -> Any:
        return self.fn.apply(window, inputs)


def _keyless(fn: Any) -> Any:
    if fn is None or isinstance(fn, type):
        return fn
    if callable(getattr(fn, "process", None)):
        return _KeylessProcess(fn)
    if callable(getattr(fn, "apply", None)):
        return _KeylessApply(fn)
    return fn


class AllWindowedStream:
    """``window_all(assigner)``: the windows of the whole stream, in one subtask (as Flink): the
    records are keyed alike and windowed; the all-window functions get no key."""

    def __init__(self, stream: DataStream, assigner: Any):
        self._windowed = stream.key_by(_all_key).window(assigner)

    def allowed_lateness(self, time: Any) -> AllWindowedStream:
        self._windowed.allowed_lateness(time)
        return self

    def side_output_late_data(self, output_tag: Any) -> AllWindowedStream:
        self._windowed.side_output_late_data(output_tag)
        return self

    def trigger(self, trigger: Any) -> AllWindowedStream:
        self._windowed.trigger(trigger)
        return self

    def evictor(self, evictor: Any) -> AllWindowedStream:
        self._windowed.evictor(evictor)
        return self

    def reduce(self, reduce_function: Any, window_function: Any = None, output_type: Any = None) -> DataStream:
        return self._windowed.reduce(reduce_function, _keyless(window_function), output_type).set_parallelism(1)

    def aggregate(
        self,
        aggregate_function: Any,
        window_function: Any = None,
        accumulator_type: Any = None,
        output_type: Any = None,
    ) -> DataStream:
        out = self._windowed.aggregate(aggregate_function, _keyless(window_function), accumulator_type, output_type)
        return out.set_parallelism(1)

    def process(self, process_window_function: Any, output_type: Any = None) -> DataStream:
        if isinstance(process_window_function, type) or not callable(getattr(process_window_function, "process", None)):
            raise TypeError(f"process() needs a ProcessAllWindowFunction instance, got {process_window_function!r}")
        return self._windowed.process(_KeylessProcess(process_window_function), output_type).set_parallelism(1)

    def apply(self, window_function: Any, output_type: Any = None) -> DataStream:
        if isinstance(window_function, type) or not callable(getattr(window_function, "apply", None)):
            raise TypeError(f"apply() needs an AllWindowFunction instance, got {window_function!r}")
        return self._windowed.apply(_KeylessApply(window_function), output_type).set_parallelism(1)
