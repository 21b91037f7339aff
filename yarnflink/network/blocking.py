"""Blocking result partitions: the output of a batch producer, spilled to local disk.

A ``BlockingResultPartition`` writes every subpartition to Arrow IPC stream files in the
TaskExecutor's spill directory as the producer emits (``emit`` never waits for a consumer), and
can be read only after ``finish()``. It is re-readable: every ``create_view`` is an independent
reader from the start, so a restarted consumer region reads the cached result again instead of
recomputing it (seed 000, "Error Recovery"). It stays registered until ``release()`` (the JobMaster
releases it once all its consumers finished, when its producer region restarts, or when the job
ends), which deletes its files.

Files: ``<spill dir>/<partition id>/<subpartition>-<segment>.arrow``. A subpartition starts a new
segment when the schema of its batches changes (one IPC stream has one schema). Events are kept
in memory in order with the data. Views read segments through memory maps, so batches handed to
a local consumer are zero-copy.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from yarnflink.network.common import KIND_DATA, KIND_END, KIND_EVENT, Item
from yarnflink.network.errors import CancelledTransfer, ProducerFailed

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


class _Subpartition:
    """What one subpartition holds: a list of entries, each an event or a batch of a segment."""

    def __init__(self, directory: str, index: int) -> None:
        self.directory = directory
        self.index = index
        self.entries: list[tuple[int, Any]] = []  # (KIND_DATA, segment) | (KIND_EVENT, object)
        self.segments: list[str] = []
        self._writer: pa.ipc.RecordBatchStreamWriter | None = None
        self._sink: pa.NativeFile | None = None
        self._schema: pa.Schema | None = None
        self.nbytes = 0

    def write(self, batch: pa.RecordBatch) -> None:
        if self._writer is None or not batch.schema.equals(self._schema):
            self.close()
            path = os.path.join(self.directory, f"{self.index}-{len(self.segments)}.arrow")
            self._sink = pa.OSFile(path, "wb")
            self._writer = pa.ipc.new_stream(self._sink, batch.schema)
            self._schema = batch.schema
            self.segments.append(path)
        self._writer.write_batch(batch)
        self.entries.append((KIND_DATA, len(self.segments) - 1))
        self.nbytes += batch.nbytes

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._sink is not None:
            self._sink.close()
            self._sink = None


class BlockingResultPartition:
    """Same producer interface as the pipelined ``ResultPartition``; see the module doc."""

    blocking = True

    def __init__(
        self,
        partition_id: str,
        num_subpartitions: int,
        spill_dir: str,
        *,
        on_dispose: Callable[[BlockingResultPartition], None] | None = None,
    ) -> None:
        if num_subpartitions < 1:
            raise ValueError("a result partition needs at least one subpartition")
        self.partition_id = partition_id
        self.num_subpartitions = num_subpartitions
        self.backpressure_ns = 0  # a blocking partition never waits for a consumer
        self.directory = os.path.join(spill_dir, _UNSAFE.sub("_", partition_id))
        os.makedirs(self.directory, exist_ok=True)
        self._subs = [_Subpartition(self.directory, i) for i in range(num_subpartitions)]
        self._on_dispose = on_dispose
        self._cond = threading.Condition()
        self._finished = False
        self._error: BaseException | None = None  # ProducerFailed or CancelledTransfer
        self._listeners: list[Callable[[], None]] = []

    def __repr__(self) -> str:
        return f"BlockingResultPartition({self.partition_id!r}, {self.num_subpartitions})"

    # -- writing (the producing task's thread) -----------------------------------------------
    def _check_writable(self) -> None:
        if self._error is not None:
            raise CancelledTransfer(f"partition {self.partition_id} was released or failed")
        if self._finished:
            raise RuntimeError(f"partition {self.partition_id} is already finished")

    def _sub(self, subpartition: int) -> _Subpartition:
        if not 0 <= subpartition < self.num_subpartitions:
            raise ValueError(f"subpartition {subpartition} out of range [0, {self.num_subpartitions})")
        return self._subs[subpartition]

    def emit(self, subpartition: int, batch: pa.RecordBatch) -> None:
        self._check_writable()
        self._sub(subpartition).write(batch)

    def broadcast(self, batch: pa.RecordBatch) -> None:
        self._check_writable()
        for sub in self._subs:
            sub.write(batch)

    def emit_event(self, event: object, subpartition: int | None = None) -> None:
        self._check_writable()
        for sub in self._subs if subpartition is None else [self._sub(subpartition)]:
            sub.entries.append((KIND_EVENT, event))

    def finish(self) -> None:
        """Closes the files; from now on consumers can read."""
        if self._finished:
            return
        self._check_writable()
        for sub in self._subs:
            sub.close()
        self._notify(finished=True)

    def fail(self, cause: BaseException) -> None:
        message = f"producer of partition {self.partition_id} failed: {type(cause).__name__}: {cause}"
        self._abort(ProducerFailed(message), dispose=False)

    def release(self) -> None:
        """Deletes the files and unregisters; readers raise CancelledTransfer from now on."""
        self._abort(CancelledTransfer(f"partition {self.partition_id} was released"), dispose=True)

    def _abort(self, error: BaseException, dispose: bool) -> None:
        with self._cond:
            first = self._error is None
            if first:
                self._error = error
            listeners = list(self._listeners)
            self._cond.notify_all()
        if first:
            for sub in self._subs:
                try:
                    sub.close()
                except OSError:
                    pass
            shutil.rmtree(self.directory, ignore_errors=True)
            for listener in listeners:
                listener()
        if dispose and self._on_dispose is not None:
            self._on_dispose(self)

    def _notify(self, finished: bool) -> None:
        with self._cond:
            self._finished = finished
            listeners = list(self._listeners)
            self._cond.notify_all()
        for listener in listeners:
            listener()

    @property
    def is_released(self) -> bool:
        return isinstance(self._error, CancelledTransfer)

    @property
    def is_finished(self) -> bool:
        return self._finished and self._error is None

    def buffered_bytes(self) -> int:
        return 0  # on disk, not in network memory

    def spilled_bytes(self) -> int:
        return sum(s.nbytes for s in self._subs)

    # -- reading ------------------------------------------------------------------------------
    def create_view(self, subpartition: int) -> BlockingSubpartitionView:
        """A new reader of one subpartition from its start (any number, at any time)."""
        sub = self._sub(subpartition)
        with self._cond:
            if isinstance(self._error, CancelledTransfer):
                raise CancelledTransfer(f"partition {self.partition_id} was released")
        return BlockingSubpartitionView(self, sub)

    def _add_listener(self, listener: Callable[[], None]) -> None:
        with self._cond:
            self._listeners.append(listener)

    def _remove_listener(self, listener: Callable[[], None]) -> None:
        with self._cond:
            if listener in self._listeners:
                self._listeners.remove(listener)


class BlockingSubpartitionView:
    """One reader of a blocking subpartition; the interface of ``SubpartitionView``. Before the
    partition is finished it has nothing (``poll`` returns None, ``get`` waits)."""

    def __init__(self, partition: BlockingResultPartition, sub: _Subpartition) -> None:
        self.partition = partition
        self.index = sub.index
        self._sub = sub
        self._pos = 0  # next entry
        self._reader: pa.ipc.RecordBatchStreamReader | None = None
        self._reader_segment = -1
        self._done = False
        self._released = False
        self._listener: Callable[[], None] | None = None

    @property
    def done(self) -> bool:
        return self._done

    def set_listener(self, listener: Callable[[], None] | None) -> None:
        if self._listener is not None:
            self.partition._remove_listener(self._listener)
        self._listener = listener
        if listener is not None:
            self.partition._add_listener(listener)

    def has_items_or_error(self) -> bool:
        p = self.partition
        return p._error is not None or (p._finished and not self._done)

    def _next(self) -> Item:
        sub = self._sub
        if self._pos >= len(sub.entries):
            self._done = True
            self._close_reader()
            return (KIND_END, None)
        kind, value = sub.entries[self._pos]
        self._pos += 1
        if kind == KIND_EVENT:
            return (KIND_EVENT, value)
        if self._reader_segment != value:
            self._close_reader()
            self._reader = pa.ipc.open_stream(pa.memory_map(sub.segments[value], "r"))
            self._reader_segment = value
        assert self._reader is not None
        return (KIND_DATA, self._reader.read_next_batch())

    def _check(self) -> None:
        error = self.partition._error
        if error is not None:
            raise error
        if self._released:
            raise CancelledTransfer("view was released")

    def poll(self) -> Item | None:
        self._check()
        if not self.partition._finished or self._done:
            return None
        return self._next()

    def get(self, timeout: float | None = None) -> Item:
        p = self.partition
        with p._cond:
            if not p._cond.wait_for(lambda: p._finished or p._error is not None, timeout):
                raise TimeoutError("blocking partition not finished in time")
        self._check()
        return self._next()

    def _close_reader(self) -> None:
        self._reader = None
        self._reader_segment = -1

    def release(self) -> None:
        self.set_listener(None)
        self._released = True
        self._close_reader()
