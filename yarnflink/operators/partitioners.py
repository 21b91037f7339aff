"""The end of a chain: partition batches over the channels of a result partition.

``NetworkOutput`` implements ``Output`` (``emit(batch)`` / ``end_input()``) on top of a writer with
``emit(channel, rb)``, ``broadcast(rb)`` and ``finish()``.

Partitionings:

* ``forward``   -- one channel: the own subtask index when producer and consumer parallelism are
  equal (``producer_parallelism`` if given, else assumed when ``subtask_index < num_channels``),
  else channel 0;
* ``rebalance`` / ``rescale`` -- round robin: a batch of at least ``num_channels * 1024`` rows is
  cut into ``num_channels`` equal contiguous slices (one per channel, the first slice going to the
  next channel in turn); a smaller batch goes whole to the next channel. Producer i starts at
  channel ``i % num_channels``;
* ``shuffle``   -- a uniformly random channel per record;
* ``broadcast`` -- every record to every channel (``writer.broadcast``);
* ``hash``      -- ``operator_index_for_key_group(max_parallelism, num_channels,
  key_group(key))``, vectorized: channel ids per record, one stable argsort, one ``take``, slices.
  The order of the records of one channel (hence of one key) is preserved.

Buffering: outputs are coalesced per channel and sent in batches of exactly ``batch_rows`` rows
(big inputs are sliced zero-copy), the remainder staying buffered; only batches of an identical
schema are concatenated (a schema change flushes the channel first). Buffers are
flushed when full, lazily on the next ``emit`` once the oldest buffered row is older than
``buffer_timeout_s`` (Flink's ``execution.buffer-timeout``), by ``flush()`` / ``flush_if_due()``
which the Task should call periodically while it waits for input (``next_flush_deadline()`` says
when), and at ``end_input`` (which then calls ``writer.finish()``). ``buffer_timeout_s == 0``
flushes after every emit; a negative value flushes only when full and at the end. There is no
background thread; all methods take an internal lock, so ``flush`` may be called from another
thread (writer calls are then serialized by that lock).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

import numpy as np
import pyarrow as pa

from yarnflink.common.keygroups import OperatorIndexTable
from yarnflink.common.records import Batch
from yarnflink.operators.keys import KeyExtractor
from yarnflink.operators.specs import KeySelectorSpec
from yarnflink.operators.watermarks import MAX_WATERMARK

PARTITIONINGS = ("forward", "rebalance", "rescale", "shuffle", "broadcast", "hash")
REBALANCE_SPLIT_MIN_ROWS = 1024


class ChannelWriter(Protocol):
    def emit(self, channel: int, rb: pa.RecordBatch) -> None: ...

    def broadcast(self, rb: pa.RecordBatch) -> None: ...

    def finish(self) -> None: ...


_BROADCAST = -1
_MIN_WATERMARK = -(2**63)
_MAX_WATERMARK = 2**63 - 1


class NetworkOutput:
    def __init__(
        self,
        writer: ChannelWriter,
        partitioning: str,
        num_channels: int,
        key_selector: KeySelectorSpec | None,
        max_parallelism: int,
        subtask_index: int,
        batch_rows: int = 65536,
        buffer_timeout_s: float = 0.1,
        producer_parallelism: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        end_watermark: bool = False,
    ):
        if partitioning not in PARTITIONINGS:
            raise ValueError(f"unknown partitioning {partitioning!r}; expected one of {PARTITIONINGS}")
        if num_channels < 1:
            raise ValueError(f"num_channels must be >= 1, got {num_channels}")
        if partitioning == "hash" and key_selector is None:
            raise ValueError("hash partitioning needs a key selector")
        self.writer = writer
        self.partitioning = partitioning
        self.num_channels = num_channels
        self.max_parallelism = max_parallelism
        self.subtask_index = subtask_index
        self.batch_rows = max(int(batch_rows), 1)
        self.buffer_timeout_s = buffer_timeout_s
        self.clock = clock
        self.keys = KeyExtractor(key_selector) if partitioning == "hash" and key_selector is not None else None
        self._channel_of = OperatorIndexTable(max_parallelism, num_channels)
        if partitioning == "forward":
            if producer_parallelism is not None:
                same = producer_parallelism == num_channels
            else:
                same = subtask_index < num_channels
            self.forward_channel = subtask_index if same else 0
        self._next = subtask_index % num_channels
        self._rng = np.random.default_rng()
        self._buffers: dict[int, list[pa.RecordBatch]] = {}
        self._counts: dict[int, int] = {}
        self._oldest: float | None = None
        self._lock = threading.Lock()
        self._finished = False
        self.records_out = 0
        self.bytes_out = 0  # Arrow bytes handed to the writer (numBytesOut)
        self.send_started_ns = 0  # monotonic_ns when the writer call in progress began (0: none)
        #: send ``MAX_WATERMARK`` to every channel at ``end_input`` (a STREAMING task's end of
        #: input: consumers' valves then stop waiting for this producer, as in Flink)
        self.end_watermark = end_watermark
        self.current_watermark = _MIN_WATERMARK  # the last watermark sent (currentOutputWatermark)

    # ------------------------------------------------------------------ Output
    def emit(self, batch: Batch) -> None:
        n = len(batch)
        if n == 0:
            return
        with self._lock:
            if self._finished:
                raise RuntimeError("NetworkOutput.emit after end_input")
            self.records_out += n
            p = self.partitioning
            if p == "forward":
                self._add(self.forward_channel, batch.network_arrow())
            elif p == "hash":
                self._hash(batch)
            elif p in ("rebalance", "rescale"):
                self._round_robin(batch.network_arrow())
            elif p == "broadcast":
                self._add(_BROADCAST, batch.network_arrow())
            else:  # shuffle
                rb = batch.network_arrow()
                self._scatter(rb, self._rng.integers(0, self.num_channels, size=rb.num_rows))
            t = self.buffer_timeout_s
            if self._oldest is not None and t >= 0 and (t == 0 or self.clock() - self._oldest >= t):
                self._flush_all()

    def end_input(self) -> None:
        with self._lock:
            if self._finished:
                return
            self._flush_all()
            if self.end_watermark and self.current_watermark < _MAX_WATERMARK:
                send = getattr(self.writer, "emit_event", None)
                if send is not None:
                    self.current_watermark = _MAX_WATERMARK
                    send(MAX_WATERMARK)
            self._finished = True
        self.writer.finish()

    def emit_watermark(self, watermark: object) -> None:
        """Send a watermark or a watermark status (an event) to every channel whatever the
        partitioning, after the rows buffered before it (so it never waits behind a partly
        filled buffer, and it stays in order with the records). A writer without
        ``emit_event`` drops it."""
        send = getattr(self.writer, "emit_event", None)
        if send is None:
            return
        with self._lock:
            if self._finished:
                return
            self._flush_all()
            ts = getattr(watermark, "timestamp", None)
            if isinstance(ts, int) and ts > self.current_watermark:
                self.current_watermark = ts
            send(watermark)

    # ------------------------------------------------------------------ flushing
    def flush(self) -> None:
        """Send every buffered row now."""
        with self._lock:
            self._flush_all()

    def flush_if_due(self, now: float | None = None) -> bool:
        """Flush if the oldest buffered row has waited ``buffer_timeout_s``; True if it did."""
        with self._lock:
            if self._oldest is None or self.buffer_timeout_s < 0:
                return False
            if (self.clock() if now is None else now) - self._oldest >= self.buffer_timeout_s:
                self._flush_all()
                return True
            return False

    def next_flush_deadline(self) -> float | None:
        """Clock time at which buffered rows become due (None if nothing is buffered)."""
        if self._oldest is None or self.buffer_timeout_s < 0:
            return None
        return self._oldest + self.buffer_timeout_s

    @property
    def buffered_rows(self) -> int:
        return sum(self._counts.values())

    # ------------------------------------------------------------------ internals
    def _send(self, channel: int, rb: pa.RecordBatch) -> None:
        self.bytes_out += rb.nbytes
        # while a full queue blocks the writer, metrics readers count the time as backpressure
        self.send_started_ns = time.monotonic_ns()
        try:
            if channel == _BROADCAST:
                self.writer.broadcast(rb)
            else:
                self.writer.emit(channel, rb)
        finally:
            self.send_started_ns = 0

    def _flush_channel(self, channel: int) -> None:
        buf = self._buffers.pop(channel, None)
        self._counts.pop(channel, None)
        if buf:
            self._send(channel, buf[0] if len(buf) == 1 else pa.concat_batches(buf))

    def _flush_all(self) -> None:
        for ch in list(self._buffers):
            self._flush_channel(ch)
        self._oldest = None

    def _add(self, channel: int, rb: pa.RecordBatch) -> None:
        n = rb.num_rows
        if n == 0:
            return
        buf = self._buffers.get(channel)
        if buf and not buf[0].schema.equals(rb.schema, check_metadata=True):
            self._flush_channel(channel)
            buf = None
        if buf is None:
            buf = self._buffers[channel] = []
            self._counts[channel] = 0
        buf.append(rb)
        count = self._counts[channel] = self._counts[channel] + n
        if self._oldest is None:
            self._oldest = self.clock()
        limit = self.batch_rows
        if count >= limit:
            # send full batches of exactly ``limit`` rows; keep the rest buffered
            merged = buf[0] if len(buf) == 1 else pa.concat_batches(buf)
            full = count - count % limit
            for i in range(0, full, limit):
                self._send(channel, merged.slice(i, limit))
            if full < count:
                self._buffers[channel] = [merged.slice(full)]
                self._counts[channel] = count - full
            else:
                del self._buffers[channel]
                del self._counts[channel]

    def _scatter(self, rb: pa.RecordBatch, channels: np.ndarray) -> None:
        nc = self.num_channels
        if nc == 1:
            self._add(0, rb)
            return
        lo, hi = int(channels.min()), int(channels.max())
        if lo == hi:
            self._add(lo, rb)
            return
        if nc <= 8:  # a pass per channel is cheaper than a sort
            picks = [np.flatnonzero(channels == ch) for ch in range(lo, hi + 1)]
            order = np.concatenate(picks)
            counts = np.zeros(nc, dtype=np.int64)
            counts[lo : hi + 1] = [len(p) for p in picks]
        else:
            keys = channels.astype(np.uint16) if nc <= 65536 else channels
            order = np.argsort(keys, kind="stable")
            counts = np.bincount(channels, minlength=nc)
        taken = rb.take(pa.array(order))
        off = 0
        for ch in np.flatnonzero(counts).tolist():
            c = int(counts[ch])
            self._add(ch, taken.slice(off, c))
            off += c

    def _hash(self, batch: Batch) -> None:
        assert self.keys is not None  # hash partitioning has a key selector
        keys = self.keys.keys_of_batch(batch)
        channels = self._channel_of(keys)
        self._scatter(batch.network_arrow(), channels)

    def _round_robin(self, rb: pa.RecordBatch) -> None:
        nc = self.num_channels
        n = rb.num_rows
        if nc == 1:
            self._add(0, rb)
            return
        start = self._next
        self._next = (start + 1) % nc
        if n < nc * REBALANCE_SPLIT_MIN_ROWS:
            self._add(start, rb)
            return
        off = 0
        for i in range(nc):
            c = (n - off) // (nc - i)
            self._add((start + i) % nc, rb.slice(off, c))
            off += c
