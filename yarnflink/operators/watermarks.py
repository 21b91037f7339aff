"""Event time: timestamps, watermarks, watermark strategies (PyFlink's names), the operator
that assigns them, and the ``StatusWatermarkValve`` that combines the watermarks of a task's
input channels.

Timestamps are milliseconds. A record's timestamp travels with it in its ``Batch``
(``Batch.timestamps``: an int64 array, one per record; across the network an extra Arrow column).
Watermarks are events that flow through the operator chain (``StreamOperator.process_watermark``)
and, between tasks, as ``ResultPartition`` events (``NetworkOutput.emit_watermark``).

Watermark generation follows Flink: ``for_bounded_out_of_orderness(d)`` emits
``max_timestamp - d - 1``; watermarks are emitted periodically (``pipeline.auto-watermark-interval``,
checked after each batch and on ``on_processing_time``), and once more at the end of the input.
``with_idleness(d)`` marks the stream idle (``WatermarkStatus.IDLE``) when no record arrived for
``d`` of processing time, so that downstream valves stop waiting for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from yarnflink.common.records import (
    KIND_PICKLE,
    Batch,
    FieldError,
    column_of,
    field_getter,
    record_kind,
    timestamps_of_column,
)
from yarnflink.jobgraph.options import PipelineOptions
from yarnflink.operators.base import OperatorContext, StreamOperator
from yarnflink.operators.functions import RuntimeContext
from yarnflink.state.descriptors import to_millis

_INT64 = pa.int64()

MIN_TIMESTAMP = -(2**63)  # Long.MIN_VALUE: "no watermark yet"
MAX_TIMESTAMP = 2**63 - 1  # Long.MAX_VALUE: end of event time
_INT_TYPES = frozenset({int, np.int64, np.int32, np.uint32, np.int16, np.int8, np.uint16, np.uint8})


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class Watermark:
    """No record with a timestamp <= ``timestamp`` is expected any more."""

    timestamp: int

    def get_timestamp(self) -> int:
        return self.timestamp


MAX_WATERMARK = Watermark(MAX_TIMESTAMP)


@dataclass(frozen=True)
class WatermarkStatus:
    """A stream is ``ACTIVE`` (its watermarks count) or ``IDLE`` (ignored by downstream)."""

    status: str

    @property
    def is_idle(self) -> bool:
        return self.status == "IDLE"


WatermarkStatus.ACTIVE = WatermarkStatus("ACTIVE")  # type: ignore[attr-defined]
WatermarkStatus.IDLE = WatermarkStatus("IDLE")  # type: ignore[attr-defined]


class Duration:
    """PyFlink's ``pyflink.common.Duration``."""

    def __init__(self, millis: int):
        self.millis = int(millis)

    @staticmethod
    def of_millis(millis: int) -> Duration:
        return Duration(millis)

    @staticmethod
    def of_seconds(seconds: float) -> Duration:
        return Duration(round(seconds * 1000))

    @staticmethod
    def of_minutes(minutes: float) -> Duration:
        return Duration(round(minutes * 60_000))

    @staticmethod
    def of_hours(hours: float) -> Duration:
        return Duration(round(hours * 3_600_000))

    @staticmethod
    def of_days(days: float) -> Duration:
        return Duration(round(days * 86_400_000))

    @staticmethod
    def zero() -> Duration:
        return Duration(0)

    def to_milliseconds(self) -> int:
        return self.millis

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Duration) and other.millis == self.millis

    def __hash__(self) -> int:
        return hash(self.millis)

    def __repr__(self) -> str:
        return f"Duration({self.millis} ms)"


class TimestampAssigner:
    """PyFlink's ``TimestampAssigner``: ``extract_timestamp(value, record_timestamp) -> int`` (ms)."""

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        raise NotImplementedError


# ----------------------------------------------------------------------------- generators
class BoundedOutOfOrdernessWatermarks:
    """Flink's ``BoundedOutOfOrdernessWatermarks``: watermark = max timestamp - bound - 1."""

    def __init__(self, max_out_of_orderness_ms: int):
        if max_out_of_orderness_ms < 0:
            raise ValueError(f"the out-of-orderness bound must not be negative, got {max_out_of_orderness_ms} ms")
        self.bound = max_out_of_orderness_ms
        self.max_timestamp = MIN_TIMESTAMP + self.bound + 1

    def on_event(self, timestamp: int) -> None:
        if timestamp > self.max_timestamp:
            self.max_timestamp = timestamp

    def current_watermark(self) -> int:
        return self.max_timestamp - self.bound - 1


class NoWatermarks:
    def on_event(self, timestamp: int) -> None:
        pass

    def current_watermark(self) -> int:
        return MIN_TIMESTAMP


class IdlenessTimer:
    """Idle once no event arrived for ``timeout_ms`` of processing time (Flink's
    ``WatermarksWithIdleness.IdlenessTimer``)."""

    def __init__(self, timeout_ms: int, clock: Callable[[], int]):
        if timeout_ms <= 0:
            raise ValueError(f"the idle timeout must be positive, got {timeout_ms} ms")
        self.timeout_ms = timeout_ms
        self.clock = clock
        self.last_activity = clock()
        self.idle = False

    def activity(self) -> bool:
        """Record an event; True if the stream was idle (it is active again)."""
        self.last_activity = self.clock()
        was_idle, self.idle = self.idle, False
        return was_idle

    def check(self) -> bool:
        """True once, when the stream becomes idle."""
        if not self.idle and self.clock() - self.last_activity >= self.timeout_ms:
            self.idle = True
            return True
        return False


# ----------------------------------------------------------------------------- strategy
@dataclass
class WatermarkStrategy:
    """How a stream gets timestamps and watermarks (PyFlink's ``WatermarkStrategy``)::

        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5)) \\
            .with_timestamp_assigner(MyAssigner()) \\
            .with_idleness(Duration.of_minutes(1))

    or, vectorized, ``...for_bounded_out_of_orderness(d).with_timestamp_column("ts")``.
    Watermarks are generated per batch: the generator sees each batch's largest timestamp.
    """

    kind: str  # bounded | none
    bound_ms: int = 0
    timestamp_assigner: Any | None = None
    idle_timeout_ms: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    timestamp_column: int | str | None = None

    @staticmethod
    def for_bounded_out_of_orderness(max_out_of_orderness: Any) -> WatermarkStrategy:
        ms = to_millis(max_out_of_orderness, "for_bounded_out_of_orderness()")
        if ms < 0:
            raise ValueError(f"for_bounded_out_of_orderness(): the bound must not be negative, got {ms} ms")
        return WatermarkStrategy("bounded", ms)

    @staticmethod
    def for_monotonous_timestamps() -> WatermarkStrategy:
        return WatermarkStrategy("bounded", 0)

    @staticmethod
    def no_watermarks() -> WatermarkStrategy:
        return WatermarkStrategy("none")

    def with_timestamp_assigner(self, timestamp_assigner: Any) -> WatermarkStrategy:
        """``timestamp_assigner``: a TimestampAssigner or a function ``(value, record_timestamp) -> ms``."""
        m = getattr(timestamp_assigner, "extract_timestamp", None)
        if not callable(m) and not callable(timestamp_assigner):
            raise TypeError(
                f"with_timestamp_assigner() needs a TimestampAssigner or a function, got {timestamp_assigner!r}"
            )
        return WatermarkStrategy(self.kind, self.bound_ms, timestamp_assigner, self.idle_timeout_ms, dict(self.extra))

    def with_timestamp_column(self, column: int | str) -> WatermarkStrategy:
        """Vectorized timestamps: each record's timestamp is its field ``column`` (a column name or
        tuple position) holding epoch milliseconds (an integer) or an Arrow timestamp, read for a
        whole batch at once (one Arrow column, no Python call per record). Replaces a timestamp
        assigner."""
        if isinstance(column, bool) or not isinstance(column, (int, str)) or column == "":
            raise TypeError(
                f"with_timestamp_column() needs a column name (str) or a tuple position (int >= 0), got {column!r}"
            )
        if isinstance(column, int) and column < 0:
            raise ValueError(f"with_timestamp_column(): the tuple position must be >= 0, got {column}")
        return WatermarkStrategy(self.kind, self.bound_ms, None, self.idle_timeout_ms, dict(self.extra), column)

    def with_idleness(self, idle_timeout: Any) -> WatermarkStrategy:
        ms = to_millis(idle_timeout, "with_idleness()")
        if ms <= 0:
            raise ValueError(f"with_idleness(): the timeout must be positive, got {ms} ms")
        return WatermarkStrategy(
            self.kind, self.bound_ms, self.timestamp_assigner, ms, dict(self.extra), self.timestamp_column
        )

    def create_watermark_generator(self) -> Any:
        return BoundedOutOfOrdernessWatermarks(self.bound_ms) if self.kind == "bounded" else NoWatermarks()

    def create_timestamp_extractor(self) -> Callable[[Any, int], int] | None:
        a = self.timestamp_assigner
        if a is None:
            return None
        m = getattr(a, "extract_timestamp", None)
        return m if callable(m) else a


@dataclass
class TimestampsAndWatermarksSpec:
    """``assign_timestamps_and_watermarks(strategy)``."""

    strategy: WatermarkStrategy
    kind: str = "timestamps_watermarks"


class TimestampsAndWatermarksOperator(StreamOperator):
    """Assigns each record its timestamp and emits watermarks (Flink's
    ``TimestampsAndWatermarksOperator``). Watermarks from upstream are dropped, except the final
    ``MAX_WATERMARK``."""

    def __init__(self, spec: TimestampsAndWatermarksSpec):
        self.strategy = spec.strategy
        self.extract = spec.strategy.create_timestamp_extractor()
        self.generator = spec.strategy.create_watermark_generator()
        self.clock: Callable[[], int] = _now_ms  # processing time (ms); tests replace it
        self.interval_ms = 200
        self.idleness: IdlenessTimer | None = None
        self.last_emitted = MIN_TIMESTAMP
        self.last_emit_time: int | None = None

    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        if PipelineOptions.AUTO_WATERMARK_INTERVAL.key in ctx.config:
            interval = PipelineOptions.AUTO_WATERMARK_INTERVAL.read(ctx.config)
            self.interval_ms = int(interval.total_seconds() * 1000)
        if self.strategy.idle_timeout_ms is not None:
            self.idleness = IdlenessTimer(self.strategy.idle_timeout_ms, lambda: self.clock())
        rich = getattr(self.extract, "__self__", None)  # a bound method of a rich function
        if rich is not None and callable(getattr(rich, "open", None)):
            rich.open(RuntimeContext(ctx))

    def process_batch(self, batch: Batch) -> None:
        n = len(batch)
        if n == 0:
            return
        extract = self.extract
        previous = batch.timestamps
        column = self.strategy.timestamp_column
        ts_col = None  # the index of an int64 column that is the timestamps
        if column is not None:
            ts = self._column_timestamps(batch, column)
            if batch.has_arrow:
                rb = batch.arrow()
                try:
                    i = column_of(rb, column)[0]
                except (LookupError, TypeError):
                    i = -1
                if i >= 0 and rb.column(i).type == _INT64 and record_kind(rb) != KIND_PICKLE:
                    ts_col = i
        elif extract is None:
            if previous is None:
                raise ValueError(
                    f"operator {self.ctx.operator_name!r}: the records have no timestamps; give the "
                    "WatermarkStrategy a timestamp assigner (with_timestamp_assigner)"
                )
            ts = np.asarray(previous, dtype=np.int64)
        else:
            rows = batch.rows()
            if previous is None:
                values = [extract(r, MIN_TIMESTAMP) for r in rows]
            else:
                values = [extract(r, int(p)) for r, p in zip(rows, previous)]
            types = set(map(type, values))
            try:
                if not types <= _INT_TYPES:
                    raise TypeError
                ts = np.array(values, dtype=np.int64)
            except (TypeError, ValueError, OverflowError):
                bad = next((v for v in values if type(v) not in _INT_TYPES), values[0])
                raise TypeError(
                    f"operator {self.ctx.operator_name!r}: the timestamp assigner must return an int "
                    f"(milliseconds), got {type(bad).__name__} {bad!r}"
                ) from None
        self.generator.on_event(int(ts.max()))
        if self.idleness is not None and self.idleness.activity():
            self._emit(WatermarkStatus.ACTIVE)  # type: ignore[attr-defined]
        self.output.emit(Batch(batch._rows, batch._rb, ts, ts_col))
        self._maybe_periodic_emit()

    def _column_timestamps(self, batch: Batch, column: int | str) -> np.ndarray:
        name = self.ctx.operator_name
        if batch.has_arrow or not batch.has_rows:
            rb = batch.arrow()
            if record_kind(rb) != KIND_PICKLE:
                try:
                    col = rb.column(column_of(rb, column)[0])
                except FieldError as e:
                    raise FieldError(f"operator {name!r}: with_timestamp_column({column!r}): {e}") from None
                if col.null_count:
                    raise ValueError(f"operator {name!r}: the timestamp column {column!r} has nulls")
                try:
                    return np.asarray(timestamps_of_column(col), dtype=np.int64)
                except TypeError as e:
                    raise TypeError(f"operator {name!r}: with_timestamp_column({column!r}): {e}") from None
        try:
            values = field_getter(column)(batch.rows())
        except FieldError as e:
            raise FieldError(f"operator {name!r}: with_timestamp_column({column!r}): {e}") from None
        if not set(map(type, values)) <= _INT_TYPES:
            bad = next(v for v in values if type(v) not in _INT_TYPES)
            raise TypeError(
                f"operator {name!r}: the timestamp column {column!r} must hold integers (ms), "
                f"got {type(bad).__name__} {bad!r}"
            )
        return np.array(values, dtype=np.int64)

    def _emit(self, element: Any) -> None:
        emit = getattr(self.output, "emit_watermark", None)
        if emit is not None:
            emit(element)

    def _maybe_periodic_emit(self) -> None:
        if self.interval_ms <= 0:
            return
        now = self.clock()
        if self.last_emit_time is None or now - self.last_emit_time >= self.interval_ms:
            self.last_emit_time = now
            self.emit_periodic()

    def emit_periodic(self) -> None:
        """Emit the generator's watermark if it advanced (and the idle status if it changed)."""
        if self.idleness is not None and self.idleness.check():
            self._emit(WatermarkStatus.IDLE)  # type: ignore[attr-defined]
            return
        wm = self.generator.current_watermark()
        if wm > self.last_emitted:
            self.last_emitted = wm
            self._emit(Watermark(wm))

    def on_processing_time(self, now: int) -> None:
        """Periodic tick without data (the Task's timer): watermarks and idleness."""
        self._maybe_periodic_emit()

    def next_processing_time(self) -> int | None:
        """When the Task's timer should call ``on_processing_time`` next (wall-clock ms): the
        next periodic emission, if an idle timeout can make it emit without input."""
        if self.idleness is None or self.interval_ms <= 0 or self.idleness.idle:
            return None
        if self.last_emit_time is None:
            return self.clock()
        return self.last_emit_time + self.interval_ms

    def process_watermark(self, watermark: Any) -> None:
        if isinstance(watermark, Watermark) and watermark.timestamp == MAX_TIMESTAMP:
            self.last_emitted = MAX_TIMESTAMP
            self._emit(watermark)

    def end_input(self) -> None:
        wm = self.generator.current_watermark()
        if wm > self.last_emitted:
            self.last_emitted = wm
            self._emit(Watermark(wm))
        self.output.end_input()

    def close(self) -> None:
        rich = getattr(self.extract, "__self__", None)  # a bound method of a rich function
        if rich is not None and callable(getattr(rich, "close", None)):
            rich.close()


# ----------------------------------------------------------------------------- valve
class _Channel:
    __slots__ = ("watermark", "active", "aligned")

    def __init__(self) -> None:
        self.watermark = MIN_TIMESTAMP
        self.active = True
        self.aligned = True


class StatusWatermarkValve:
    """Combines the watermarks and statuses of a task's input channels (Flink's
    ``StatusWatermarkValve``): the output watermark is the minimum over the active channels that
    have caught up; idle channels do not hold it back; when all channels are idle the output
    is idle. An ended channel counts as having reached ``MAX_TIMESTAMP``.

    Each method returns the elements to pass on (``Watermark`` / ``WatermarkStatus``), in order.
    """

    def __init__(self, num_channels: int):
        if num_channels < 1:
            raise ValueError(f"a valve needs at least one channel, got {num_channels}")
        self.channels = [_Channel() for _ in range(num_channels)]
        self.last_output_watermark = MIN_TIMESTAMP
        self.idle = False

    def input_watermark(self, channel: int, watermark: Watermark | int) -> list[Any]:
        ts = watermark.timestamp if isinstance(watermark, Watermark) else int(watermark)
        ch = self.channels[channel]
        if not ch.active or ts <= ch.watermark:
            return []  # an idle channel's watermarks are ignored (Flink)
        ch.watermark = ts
        if not ch.aligned and ts >= self.last_output_watermark:
            ch.aligned = True
        return self._new_min()

    def input_watermark_status(self, channel: int, status: WatermarkStatus) -> list[Any]:
        ch = self.channels[channel]
        out: list[Any] = []
        if status.is_idle and ch.active:
            ch.active = False
            ch.aligned = False
            if not any(c.active for c in self.channels):
                if ch.watermark == self.last_output_watermark:
                    out += self._max_all()
                self.idle = True
                out.append(WatermarkStatus.IDLE)  # type: ignore[attr-defined]
            elif ch.watermark == self.last_output_watermark:
                out += self._new_min()
        elif not status.is_idle and not ch.active:
            ch.active = True
            ch.aligned = ch.watermark >= self.last_output_watermark
            if self.idle:
                self.idle = False
                out.append(WatermarkStatus.ACTIVE)  # type: ignore[attr-defined]
        return out

    def end_of_input(self, channel: int) -> list[Any]:
        ch = self.channels[channel]
        out: list[Any] = []
        if not ch.active:
            out += self.input_watermark_status(channel, WatermarkStatus.ACTIVE)  # type: ignore[attr-defined]
        return out + self.input_watermark(channel, MAX_TIMESTAMP)

    def _new_min(self) -> list[Any]:
        aligned = [c.watermark for c in self.channels if c.active and c.aligned]
        if not aligned:
            return []
        m = min(aligned)
        if m > self.last_output_watermark:
            self.last_output_watermark = m
            return [Watermark(m)]
        return []

    def _max_all(self) -> list[Any]:
        m = max(c.watermark for c in self.channels)
        if m > self.last_output_watermark:
            self.last_output_watermark = m
            return [Watermark(m)]
        return []
