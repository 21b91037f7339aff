"""TaskIOMetrics: the counters of one Task (Flink's TaskIOMetricGroup).

The task thread counts once per batch (``count_in``); outputs count themselves
(``NetworkOutput.records_out`` / ``bytes_out``, ``ResultPartition.backpressure_ns``) and are
registered here once at restore. Any other thread may call ``snapshot()``: it reads the plain
integer counters (each read is atomic under the GIL) and derives per-second rates from the
samples earlier snapshots left behind, so no background thread is needed.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from yarnflink.metrics import names as n

#: Rates average over about this many seconds (or since the previous snapshot, if that is older).
RATE_WINDOW_S = 10.0
#: A task counts as back-pressured when it spent more than this share of the window blocked.
BACKPRESSURED_THRESHOLD = 0.1


class _CountingOutput(Protocol):
    records_out: int


class TaskIOMetrics:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.records_in = 0
        self.bytes_in = 0
        self.current_input_watermark = n.MIN_WATERMARK
        #: set by checkpointing: duration (ms) and size (bytes) of the task's last checkpoint
        self.last_checkpoint_duration_ms = -1
        self.last_checkpoint_size = -1
        self.checkpoint_alignment_ms = -1
        self.checkpoint_start_delay_ns = -1
        self._outputs: list[Any] = []
        self._partitions: list[Any] = []
        self._clock = clock
        start = clock()
        self._samples: deque[tuple[float, tuple[int, ...]]] = deque([(start, (0, 0, 0, 0, 0))])
        self._lock = threading.Lock()  # guards _samples (snapshots may come from several threads)

    # ------------------------------------------------------------------ the task thread
    def count_in(self, batch: Any) -> None:
        """One input batch (a ``pyarrow.RecordBatch``) reached the chain."""
        self.records_in += batch.num_rows
        self.bytes_in += batch.nbytes

    def register_output(self, output: _CountingOutput, partition: Any | None = None) -> None:
        """An output counted as numRecordsOut/numBytesOut; its partition's blocked time as backpressure."""
        self._outputs.append(output)
        if partition is not None:
            self._partitions.append(partition)

    def current_output_watermark(self) -> int:
        """The lowest watermark the task's outputs sent (``NetworkOutput.current_watermark``);
        a task without network outputs (a sink) passes on what its input reached."""
        marks = [w for o in self._outputs if (w := getattr(o, "current_watermark", None)) is not None]
        return min(marks) if marks else self.current_input_watermark

    def checkpoint_completed(
        self, duration_ms: int, size_bytes: int, alignment_ms: int = 0, start_delay_ns: int = 0
    ) -> None:
        self.last_checkpoint_duration_ms = duration_ms
        self.last_checkpoint_size = size_bytes
        self.checkpoint_alignment_ms = alignment_ms
        self.checkpoint_start_delay_ns = start_delay_ns

    # ------------------------------------------------------------------ readers
    def counters(self) -> tuple[int, int, int, int, int]:
        """(records in, records out, bytes in, bytes out, backpressured ns). Backpressure is the
        blocked time of finished writes plus the time the write in progress has taken so far (a
        write into a full queue can block for many seconds behind a slow consumer)."""
        now_ns = time.monotonic_ns()
        in_progress = 0
        for o in self._outputs:
            started = getattr(o, "send_started_ns", 0)
            if started:
                in_progress += max(0, now_ns - started)
        return (
            self.records_in,
            sum(o.records_out for o in self._outputs),
            self.bytes_in,
            sum(getattr(o, "bytes_out", 0) for o in self._outputs),
            sum(getattr(p, "backpressure_ns", 0) for p in self._partitions) + in_progress,
        )

    def snapshot(self, final: bool = False) -> dict[str, float]:
        """Every task metric by its Flink name. ``final``: the task has ended, rates are 0."""
        now = self._clock()
        cur = self.counters()
        with self._lock:
            base_t, base = self._samples[0]
            if not final:
                if now - self._samples[-1][0] >= 0.05:
                    self._samples.append((now, cur))
                # keep one sample at or before the window's start as the base of the rates
                while len(self._samples) > 2 and self._samples[1][0] <= now - RATE_WINDOW_S:
                    self._samples.popleft()
                base_t, base = self._samples[0]
        dt = now - base_t
        rates = [(c - b) / dt if dt > 0 and not final else 0.0 for c, b in zip(cur, base)]
        bp_ms_per_s = min(1000.0, rates[4] / 1e6)
        out = {
            n.NUM_RECORDS_IN: cur[0],
            n.NUM_RECORDS_OUT: cur[1],
            n.NUM_BYTES_IN: cur[2],
            n.NUM_BYTES_OUT: cur[3],
            n.ACCUMULATED_BACKPRESSURED_TIME_MS: cur[4] // 1_000_000,
            n.NUM_RECORDS_IN_PER_SECOND: rates[0],
            n.NUM_RECORDS_OUT_PER_SECOND: rates[1],
            n.NUM_BYTES_IN_PER_SECOND: rates[2],
            n.NUM_BYTES_OUT_PER_SECOND: rates[3],
            n.BACKPRESSURED_TIME_MS_PER_SECOND: bp_ms_per_s,
            n.IS_BACKPRESSURED: 1.0 if bp_ms_per_s > BACKPRESSURED_THRESHOLD * 1000 else 0.0,
            n.CURRENT_INPUT_WATERMARK: self.current_input_watermark,
            n.CURRENT_OUTPUT_WATERMARK: self.current_output_watermark(),
            n.LAST_CHECKPOINT_DURATION: self.last_checkpoint_duration_ms,
            n.LAST_CHECKPOINT_SIZE: self.last_checkpoint_size,
            n.CHECKPOINT_ALIGNMENT_TIME: self.checkpoint_alignment_ms,
            n.CHECKPOINT_START_DELAY_NANOS: self.checkpoint_start_delay_ns,
        }
        return {k: float(v) for k, v in out.items()}
