"""Timers (Flink's ``InternalTimerService``) and the ``process`` operators that use them.

Timers are kept per key and namespace in key-grouped priority queues of the operator's keyed
state backend, so they are checkpointed (and redistributed on rescale) with the state. Event-time
timers fire when a watermark passes them (``advance_watermark``); processing-time timers fire when
``on_processing_time(now)`` is called (by the Task's timer later; today also before each batch).
At the end of a bounded input the final watermark (``MAX_TIMESTAMP``) fires every event-time timer,
as in Flink.

``KeyedProcessOperator`` runs a ``KeyedProcessFunction`` with keyed state
(``get_runtime_context().get_state(...)``), timers (``ctx.timer_service()``) and ``on_timer``.
Outputs carry the input record's timestamp; outputs of an event-time timer carry the timer's.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from yarnflink.common.keygroups import key_group_ids
from yarnflink.common.records import Batch
from yarnflink.operators.base import OperatorContext, StreamOperator
from yarnflink.operators.functions import KeyedProcessFunction, RuntimeContext, TimerService
from yarnflink.operators.specs import ProcessSpec
from yarnflink.operators.transforms import ProcessOperator
from yarnflink.operators.watermarks import MAX_TIMESTAMP, MIN_TIMESTAMP, Watermark
from yarnflink.state.task_state import keyed_state_backend_for

if TYPE_CHECKING:
    from yarnflink.state.task_state import KeyedStateBackend


def _now_ms() -> int:
    return int(time.time() * 1000)


class TimeDomain(enum.Enum):
    EVENT_TIME = 0
    PROCESSING_TIME = 1


class InternalTimerService:
    """Event-time and processing-time timers of one operator, per (key, namespace).
    ``on_event_time(timestamp, key, namespace)`` / ``on_processing_time(...)`` are called with the
    backend's current key set to the timer's key."""

    def __init__(
        self,
        backend: KeyedStateBackend,
        name: str,
        on_event_time: Callable[[int, Any, Any], None],
        on_processing_time: Callable[[int, Any, Any], None],
        clock: Callable[[], int] = _now_ms,
    ):
        self.backend = backend
        self.event_queue = backend.create_timer_queue(f"_timer_state/event_{name}")
        self.processing_queue = backend.create_timer_queue(f"_timer_state/processing_{name}")
        self._on_event_time = on_event_time
        self._on_processing_time = on_processing_time
        self.clock = clock
        self.current_watermark = MIN_TIMESTAMP

    def current_processing_time(self) -> int:
        return self.clock()

    def register_event_time_timer(self, namespace: Any, timestamp: int) -> None:
        b = self.backend
        self.event_queue.add(int(timestamp), b.get_current_key(), namespace, b.current_key_group)

    def delete_event_time_timer(self, namespace: Any, timestamp: int) -> None:
        b = self.backend
        self.event_queue.remove(int(timestamp), b.get_current_key(), namespace, b.current_key_group)

    def register_processing_time_timer(self, namespace: Any, timestamp: int) -> None:
        b = self.backend
        self.processing_queue.add(int(timestamp), b.get_current_key(), namespace, b.current_key_group)

    def delete_processing_time_timer(self, namespace: Any, timestamp: int) -> None:
        b = self.backend
        self.processing_queue.remove(int(timestamp), b.get_current_key(), namespace, b.current_key_group)

    def advance_watermark(self, timestamp: int) -> int:
        """Set the watermark and fire every event-time timer at or before it (timers registered
        while firing fire too if due). Returns the number fired."""
        self.current_watermark = max(self.current_watermark, timestamp)
        return self._fire(self.event_queue, timestamp, self._on_event_time)

    def on_processing_time(self, now: int) -> int:
        return self._fire(self.processing_queue, now, self._on_processing_time)

    def next_processing_time(self) -> int | None:
        head = self.processing_queue.peek()
        return None if head is None else head[0]

    def _fire(self, queue: Any, upto: int, callback: Callable[[int, Any, Any], None]) -> int:
        fired = 0
        b = self.backend
        while True:
            head = queue.peek()
            if head is None or head[0] > upto:
                return fired
            ts, key, ns, kg = queue.poll()
            b.set_current_key(key, kg)
            callback(ts, key, ns)
            fired += 1


class _UserTimerService(TimerService):
    """``ctx.timer_service()`` of a keyed process function (timers in the void namespace)."""

    def __init__(self, internal: InternalTimerService):
        self._internal = internal

    def current_processing_time(self) -> int:
        return self._internal.current_processing_time()

    def current_watermark(self) -> int:
        return self._internal.current_watermark

    def register_event_time_timer(self, timestamp: int) -> None:
        self._internal.register_event_time_timer(None, timestamp)

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._internal.register_processing_time_timer(None, timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._internal.delete_event_time_timer(None, timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._internal.delete_processing_time_timer(None, timestamp)


class _NoTimers(TimerService):
    """Non-keyed process functions: time queries only (Flink: timers need a keyed stream)."""

    def __init__(self, watermark: Callable[[], int]):
        self._watermark = watermark

    def current_watermark(self) -> int:
        return self._watermark()

    def register_event_time_timer(self, timestamp: int) -> None:
        raise RuntimeError("timers can only be used on a keyed stream (after key_by)")

    register_processing_time_timer = register_event_time_timer


class _Context(KeyedProcessFunction.Context):
    def __init__(self, timer_service: TimerService):
        super().__init__()
        self._timer_service = timer_service
        self._ts: int | None = None
        self._domain: TimeDomain | None = None

    def timestamp(self) -> int | None:
        return self._ts

    def time_domain(self) -> TimeDomain | None:
        """In ``on_timer``: which kind of timer fired."""
        return self._domain


def _extend(out: list, res: Any, bad: Callable[[Any], Exception]) -> None:
    if res is not None:
        if not hasattr(res, "__iter__"):
            raise bad(res)
        out.extend(res)


class TimestampedProcessOperator(ProcessOperator):
    """Non-keyed ``process``: outputs carry their input's timestamp, ``ctx.timestamp()`` is the
    record's, and the current watermark is known."""

    def __init__(self, spec: ProcessSpec):
        super().__init__(spec)
        self.watermark = MIN_TIMESTAMP
        self.pctx: _Context = _Context(_NoTimers(lambda: self.watermark))

    def process_batch(self, batch: Batch) -> None:
        ts = batch.timestamps
        if ts is None:
            super().process_batch(batch)
            return
        rows = batch.rows()
        fn, pctx = self.fn, self.pctx
        out: list = []
        out_ts: list = []
        c = self.cancellation
        for r, t in zip(rows, ts.tolist()):
            if c.cancelled:
                c.check()
            pctx._ts = t
            n = len(out)
            _extend(out, fn(r, pctx) if self.with_ctx else fn(r), self._bad_result)
            out_ts.extend([t] * (len(out) - n))
        pctx._ts = None
        if out:
            self.output.emit(Batch(out, None, np.array(out_ts, dtype=np.int64)))

    def process_watermark(self, watermark: Any) -> None:
        if isinstance(watermark, Watermark):
            self.watermark = max(self.watermark, watermark.timestamp)
        super().process_watermark(watermark)


class KeyedProcessOperator(ProcessOperator):
    """``key_by(...).process(KeyedProcessFunction)`` with keyed state and timers."""

    def __init__(self, spec: ProcessSpec):
        super().__init__(spec)
        self.clock: Callable[[], int] = _now_ms
        self.backend: KeyedStateBackend | None = None
        self.timers: InternalTimerService | None = None
        self._on_timer = getattr(spec.fn, "on_timer", None) if self.with_ctx else None
        self._out: list = []
        self._out_ts: list = []

    def open(self, ctx: OperatorContext) -> None:
        StreamOperator.open(self, ctx)
        self.backend = keyed_state_backend_for(ctx, clock=lambda: self.clock())
        self.timers = InternalTimerService(
            self.backend, "user-timers", self._event_timer, self._processing_timer, clock=lambda: self.clock()
        )
        self.pctx: _Context = _Context(_UserTimerService(self.timers))
        if self.rich is not None:
            rc = RuntimeContext(ctx)
            rc._keyed_backend = self.backend  # type: ignore[attr-defined]
            self.rich.open(rc)
            self._opened = True
        if self._key_rich is not None:
            self._key_rich.open(RuntimeContext(ctx))

    # ------------------------------------------------------------------ records
    def process_batch(self, batch: Batch) -> None:
        self._fire_processing_timers()
        rows = batch.rows()
        if not rows:
            return
        keys = self.keys.keys_of_rows(rows)  # type: ignore[union-attr]
        kgs = key_group_ids(keys, self.ctx.max_parallelism).tolist()
        ts = batch.timestamps
        ts_list = ts.tolist() if ts is not None else None
        fn, pctx, backend = self.fn, self.pctx, self.backend
        out: list = []
        out_ts: list = []
        c = self.cancellation
        for i, (k, r) in enumerate(zip(keys, rows)):
            if c.cancelled:
                c.check()
            backend.set_current_key(k, kgs[i])  # type: ignore[union-attr]
            pctx._current_key = k
            pctx._ts = ts_list[i] if ts_list is not None else None
            n = len(out)
            _extend(out, fn(r, pctx) if self.with_ctx else fn(r), self._bad_result)
            if ts_list is not None:
                out_ts.extend([ts_list[i]] * (len(out) - n))
        pctx._ts = None
        if out:
            self.output.emit(Batch(out, None, np.array(out_ts, dtype=np.int64) if ts_list is not None else None))

    # ------------------------------------------------------------------ timers
    def _timer(self, timestamp: int, key: Any, domain: TimeDomain) -> None:
        if self._on_timer is None:
            return
        pctx = self.pctx
        pctx._current_key = key
        pctx._ts = timestamp if domain is TimeDomain.EVENT_TIME else None
        pctx._domain = domain
        try:
            _extend(self._out, self._on_timer(timestamp, pctx), self._bad_timer_result)
        finally:
            pctx._domain = None
            pctx._ts = None

    def _bad_timer_result(self, res: Any) -> TypeError:
        return TypeError(
            f"process operator {self.operator_name!r}: on_timer must return an iterable "
            f"(or yield), got {type(res).__name__}"
        )

    def _event_timer(self, timestamp: int, key: Any, namespace: Any) -> None:
        n = len(self._out)
        self._timer(timestamp, key, TimeDomain.EVENT_TIME)
        self._out_ts.extend([timestamp] * (len(self._out) - n))

    def _processing_timer(self, timestamp: int, key: Any, namespace: Any) -> None:
        self._timer(timestamp, key, TimeDomain.PROCESSING_TIME)

    def _flush(self, with_timestamps: bool) -> None:
        if self._out:
            ts = np.array(self._out_ts, dtype=np.int64) if with_timestamps else None
            self.output.emit(Batch(self._out, None, ts))
        self._out, self._out_ts = [], []

    def _fire_processing_timers(self) -> None:
        if self.timers is not None and self.timers.processing_queue:
            self.timers.on_processing_time(self.clock())
            self._flush(False)

    def on_processing_time(self, now: int) -> None:
        """Fire processing-time timers due at ``now`` (the Task's timer, later)."""
        self.timers.on_processing_time(now)  # type: ignore[union-attr]
        self._flush(False)

    def next_processing_time(self) -> int | None:
        return self.timers.next_processing_time() if self.timers is not None else None

    def process_watermark(self, watermark: Any) -> None:
        if isinstance(watermark, Watermark) and self.timers is not None:
            self.timers.advance_watermark(watermark.timestamp)
            self._flush(True)
        super().process_watermark(watermark)

    def end_input(self) -> None:
        if self.timers is not None and self.timers.current_watermark < MAX_TIMESTAMP:
            self.timers.advance_watermark(MAX_TIMESTAMP)  # end of input: the final watermark
            self._flush(True)
        self.output.end_input()

    # ------------------------------------------------------------------ checkpoints
    def snapshot_state(self, checkpoint_id: int, timestamp: int, stream_factory: Any = None) -> list:
        return [self.backend.snapshot(checkpoint_id, timestamp, stream_factory)]  # type: ignore[union-attr]

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        f = getattr(self.rich, "notify_checkpoint_complete", None)
        if f is not None:
            f(checkpoint_id)

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self.backend is not None:
                self.backend.dispose()


def create_process_operator(spec: ProcessSpec) -> StreamOperator:
    """``process``: keyed (state, timers) after key_by, else timestamp-aware non-keyed."""
    if spec.key_selector is not None:
        return KeyedProcessOperator(spec)
    return TimestampedProcessOperator(spec)


__all__ = [
    "InternalTimerService",
    "KeyedProcessOperator",
    "TimeDomain",
    "TimestampedProcessOperator",
    "create_process_operator",
]
