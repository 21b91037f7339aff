"""Producer side: ResultPartition, its per-consumer views, and the registry consumers look it up in.

A pipelined ``ResultPartition`` has one bounded queue per subpartition (one per consumer
subtask). The producing task's thread appends to it; exactly one reader per subpartition -- a
local input channel in the same environment or the server's connection handler for a remote one
-- takes items out through a ``SubpartitionView``.

Lifecycle (as in Flink's pipelined partitions): the partition is dropped from the registry by
itself once every subpartition has handed END_OF_PARTITION to its reader; ``release()`` is only
for cancellation/failover and discards what is still buffered. A reader that goes away before END
aborts its subpartition so the producer's ``emit()`` raises ``CancelledTransfer`` instead of
blocking forever on a queue nobody drains.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pyarrow as pa

from yarnflink.network.common import KIND_DATA, KIND_END, KIND_EVENT, Item
from yarnflink.network.errors import CancelledTransfer, ProducerFailed
from yarnflink.network.queues import BoundedQueue, MemoryAccount


class SubpartitionView:
    """The single reader handle of one subpartition."""

    def __init__(self, partition: ResultPartition, index: int, queue: BoundedQueue) -> None:
        self.partition = partition
        self.index = index
        self._queue = queue
        self._done = False
        self._released = False

    @property
    def done(self) -> bool:
        """END_OF_PARTITION has been taken out of the subpartition."""
        return self._done

    def set_listener(self, listener: Callable[[], None] | None) -> None:
        self._queue.set_listener(listener)

    def has_items_or_error(self) -> bool:
        return self._queue.has_items_or_error()

    def poll(self) -> Item | None:
        """Next item or None; raises ProducerFailed/CancelledTransfer once aborted."""
        item = self._queue.poll()
        if item is not None and item[0] == KIND_END:
            self._mark_done()
        return item

    def get(self, timeout: float | None = None) -> Item:
        """Blocking ``poll`` (used by the server's sender threads)."""
        item = self._queue.get(timeout)
        if item[0] == KIND_END:
            self._mark_done()
        return item

    def _mark_done(self) -> None:
        if not self._done:
            self._done = True
            self.partition._view_done()

    def release(self) -> None:
        """The reader goes away. Before END this aborts the subpartition (see module doc)."""
        self._queue.set_listener(None)
        if self._done or self._released:
            return
        self._released = True
        self._queue.abort(
            CancelledTransfer(
                f"consumer of subpartition {self.index} of partition {self.partition.partition_id} went away"
            )
        )


class ResultPartition:
    """Output of one producing subtask, one bounded queue per consumer subtask.

    ``emit``/``broadcast``/``emit_event``/``finish`` are meant to be called from the producing
    task's single thread (``backpressure_ns`` is a plain counter updated there).
    """

    def __init__(
        self,
        partition_id: str,
        num_subpartitions: int,
        *,
        max_buffers: int,
        max_bytes: int,
        account: MemoryAccount | None = None,
        on_dispose: Callable[[ResultPartition], None] | None = None,
    ) -> None:
        if num_subpartitions < 1:
            raise ValueError("a result partition needs at least one subpartition")
        self.partition_id = partition_id
        self.num_subpartitions = num_subpartitions
        self.backpressure_ns = 0
        self._queues = [BoundedQueue(max_buffers, max_bytes, account) for _ in range(num_subpartitions)]
        self._views: list[SubpartitionView | None] = [None] * num_subpartitions
        self._on_dispose = on_dispose
        self._lock = threading.Lock()
        self._finished = False
        self._failed = False
        self._released = False
        self._views_done = 0

    def __repr__(self) -> str:
        return f"ResultPartition({self.partition_id!r}, {self.num_subpartitions})"

    # -- writing -----------------------------------------------------------------------------
    def _check_writable(self) -> None:
        if self._released:
            raise CancelledTransfer(f"partition {self.partition_id} was released")
        if self._failed:
            raise CancelledTransfer(f"partition {self.partition_id} has failed")
        if self._finished:
            raise RuntimeError(f"partition {self.partition_id} is already finished")

    def _queue(self, subpartition: int) -> BoundedQueue:
        if not 0 <= subpartition < self.num_subpartitions:
            raise ValueError(f"subpartition {subpartition} out of range [0, {self.num_subpartitions})")
        return self._queues[subpartition]

    def emit(self, subpartition: int, batch: pa.RecordBatch) -> None:
        """Append ``batch`` to one subpartition; blocks while its queue is full (backpressure)."""
        self._check_writable()
        blocked = self._queue(subpartition).put((KIND_DATA, batch), batch.nbytes)
        if blocked:
            self.backpressure_ns += blocked

    def broadcast(self, batch: pa.RecordBatch) -> None:
        """Append the same (immutable) batch to every subpartition."""
        self._check_writable()
        nbytes = batch.nbytes
        item = (KIND_DATA, batch)
        for queue in self._queues:
            blocked = queue.put(item, nbytes)
            if blocked:
                self.backpressure_ns += blocked

    def emit_event(self, event: object, subpartition: int | None = None) -> None:
        """Send a small picklable object in order with the data (None = every subpartition).

        Local consumers receive the very same object, remote ones an unpickled copy."""
        self._check_writable()
        item = (KIND_EVENT, event)
        queues = self._queues if subpartition is None else [self._queue(subpartition)]
        for queue in queues:
            blocked = queue.put(item, 0)
            if blocked:
                self.backpressure_ns += blocked

    def finish(self) -> None:
        """End of partition on every subpartition; never blocks. Raises CancelledTransfer if a
        subpartition's consumer already went away (its END cannot be delivered)."""
        if self._finished:
            return
        self._check_writable()
        self._finished = True
        first_error: CancelledTransfer | None = None
        for queue in self._queues:
            try:
                queue.put((KIND_END, None), 0, force=True)
            except CancelledTransfer as e:
                first_error = first_error or e
        if first_error is not None:
            raise first_error

    def fail(self, cause: BaseException) -> None:
        """Discard buffered data; every consumer's ``next()`` raises PartitionException with
        the cause's text. The partition stays registered so late consumers see the failure."""
        self._failed = True
        message = f"producer of partition {self.partition_id} failed: {type(cause).__name__}: {cause}"
        for queue in self._queues:
            queue.abort(ProducerFailed(message))

    def release(self) -> None:
        """Drop buffered data and unregister; a blocked ``emit()`` raises CancelledTransfer."""
        with self._lock:
            if self._released:
                return
            self._released = True
        for queue in self._queues:
            queue.abort(CancelledTransfer(f"partition {self.partition_id} was released"))
        if self._on_dispose is not None:
            self._on_dispose(self)

    @property
    def is_released(self) -> bool:
        return self._released

    def buffered_bytes(self) -> int:
        return sum(q.nbytes for q in self._queues)

    # -- reading -----------------------------------------------------------------------------
    def create_view(self, subpartition: int) -> SubpartitionView:
        """Claim the single reader handle of a subpartition (ValueError if bad or taken)."""
        queue = self._queue(subpartition)
        with self._lock:
            if self._released:
                raise CancelledTransfer(f"partition {self.partition_id} was released")
            if self._views[subpartition] is not None:
                raise ValueError(
                    f"subpartition {subpartition} of partition {self.partition_id} is already being consumed"
                )
            view = SubpartitionView(self, subpartition, queue)
            self._views[subpartition] = view
            return view

    def _view_done(self) -> None:
        with self._lock:
            self._views_done += 1
            all_done = self._views_done == self.num_subpartitions
        if all_done and self._on_dispose is not None:
            self._on_dispose(self)


class PartitionRegistry:
    """Partitions of one environment by id, with waiting for ones not yet created.

    Consumers are deployed together with producers, so a request may arrive before the producer
    task has created its partition; server threads block in ``wait_for`` and local channels
    ``subscribe`` to be woken when it appears.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._partitions: dict[str, ResultPartition] = {}
        self._subscribers: dict[str, list[Callable[[], None]]] = {}
        self._closed = False

    def register(self, partition: ResultPartition) -> None:
        with self._lock:
            if self._closed:
                raise CancelledTransfer("shuffle environment is closed")
            if partition.partition_id in self._partitions:
                raise ValueError(f"partition {partition.partition_id} already exists")
            self._partitions[partition.partition_id] = partition
            callbacks = self._subscribers.pop(partition.partition_id, [])
            self._changed.notify_all()
        for callback in callbacks:
            callback()

    def unregister(self, partition: ResultPartition) -> None:
        """Remove ``partition`` if it is still the one registered under its id."""
        with self._lock:
            if self._partitions.get(partition.partition_id) is partition:
                del self._partitions[partition.partition_id]

    def lookup(self, partition_id: str) -> ResultPartition | None:
        return self._partitions.get(partition_id)

    def wait_for(self, partition_id: str, timeout: float) -> ResultPartition | None:
        """The partition, or None after ``timeout`` or when the registry is closed."""
        with self._lock:
            self._changed.wait_for(lambda: partition_id in self._partitions or self._closed, timeout)
            return self._partitions.get(partition_id)

    def subscribe(self, partition_id: str, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (once, from the registering thread) when ``partition_id`` appears.
        Returns a function that cancels the subscription."""
        with self._lock:
            self._subscribers.setdefault(partition_id, []).append(callback)

        def cancel() -> None:
            with self._lock:
                callbacks = self._subscribers.get(partition_id)
                if callbacks and callback in callbacks:
                    callbacks.remove(callback)
                    if not callbacks:
                        del self._subscribers[partition_id]

        return cancel

    def close(self) -> list[ResultPartition]:
        """Refuse new partitions, wake all waiters, and hand back the registered ones."""
        with self._lock:
            self._closed = True
            partitions = list(self._partitions.values())
            self._partitions.clear()
            self._subscribers.clear()
            self._changed.notify_all()
        return partitions

    def __len__(self) -> int:
        return len(self._partitions)
