"""Consumer side: InputGate and its local/remote input channels.

A gate multiplexes its channels for one task thread. Channels signal "I have something" through
a listener (called after every put into their queue, or when they fail), which appends the
channel index to the gate's availability deque -- so ``next()`` never scans idle channels and
serves channels with data round-robin, like Flink's ``inputChannelsWithData``.

Lock order: gate lock -> queue / partition / registry locks. Listeners are called by the queues
*outside* their own lock and only then take the gate lock, so the order is never inverted.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable, Optional, Sequence

from yarnflink.network.common import (
    KIND_DATA,
    KIND_END,
    BufferOrEvent,
    InputChannelSpec,
    Item,
)
from yarnflink.network.errors import CancelledTransfer, PartitionException
from yarnflink.network.partition import PartitionRegistry, SubpartitionView
from yarnflink.network.queues import BoundedQueue, MemoryAccount
from yarnflink.network.transport import PartitionReader


class InputChannel:
    """One channel of a gate. ``poll`` is only called with the gate lock held."""

    def __init__(self, index: int, spec: InputChannelSpec, notify: Callable[[], None]) -> None:
        self.index = index
        self.spec = spec
        self.finished = False
        self._notify = notify

    def start(self) -> None:
        pass

    def poll(self, now: float) -> Optional[Item]:
        raise NotImplementedError

    def has_more(self) -> bool:
        raise NotImplementedError

    def pending_deadline(self) -> Optional[float]:
        """Monotonic time at which a still-unresolved channel fails; None if resolved."""
        return None

    def close(self) -> None:
        pass

    def _error(self, message: str) -> PartitionException:
        return PartitionException(message, self.spec.partition_id, self.spec.address)


class LocalInputChannel(InputChannel):
    """Reads a subpartition of the same environment directly: batches are passed by reference,
    and the producer's queue is the only buffer (so it alone bounds memory)."""

    def __init__(
        self,
        index: int,
        spec: InputChannelSpec,
        notify: Callable[[], None],
        registry: PartitionRegistry,
        request_timeout: float,
    ) -> None:
        super().__init__(index, spec, notify)
        self._registry = registry
        self._request_timeout = request_timeout
        self._deadline = 0.0
        self._view: Optional[SubpartitionView] = None
        self._unsubscribe: Optional[Callable[[], None]] = None

    def start(self) -> None:
        self._deadline = time.monotonic() + self._request_timeout
        self._unsubscribe = self._registry.subscribe(self.spec.partition_id, self._notify)
        self._notify()  # the partition may already exist

    def pending_deadline(self) -> Optional[float]:
        return self._deadline if self._view is None and not self.finished else None

    def _resolve(self, now: float) -> Optional[SubpartitionView]:
        spec = self.spec
        partition = self._registry.lookup(spec.partition_id)
        if partition is None:
            if now >= self._deadline:
                raise self._error(
                    f"partition {spec.partition_id} not found within {self._request_timeout:g}s"
                )
            return None
        try:
            view = partition.create_view(spec.subpartition)
        except (ValueError, CancelledTransfer) as e:
            raise self._error(str(e)) from None
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        view.set_listener(self._notify)
        self._view = view
        return view

    def poll(self, now: float) -> Optional[Item]:
        view = self._view or self._resolve(now)
        if view is None:
            return None
        try:
            return view.poll()
        except CancelledTransfer as e:
            raise self._error(f"upstream subpartition unavailable: {e}") from None
        except Exception as e:  # ProducerFailed
            raise self._error(str(e)) from None

    def has_more(self) -> bool:
        return self._view is not None and self._view.has_items_or_error()

    def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._view is not None:
            self._view.release()


class RemoteInputChannel(InputChannel):
    """Reads over TCP through a PartitionReader thread into a bounded queue of its own."""

    def __init__(
        self,
        index: int,
        spec: InputChannelSpec,
        notify: Callable[[], None],
        *,
        max_buffers: int,
        max_bytes: int,
        account: MemoryAccount,
        connect_timeout: float,
    ) -> None:
        super().__init__(index, spec, notify)
        self._queue = BoundedQueue(max_buffers, max_bytes, account)
        self._queue.set_listener(notify)
        self._reader = PartitionReader(spec, self._queue, connect_timeout=connect_timeout)

    def start(self) -> None:
        self._reader.start()

    def poll(self, now: float) -> Optional[Item]:
        # PartitionException comes straight from the reader; CancelledTransfer only after close.
        return self._queue.poll()

    def has_more(self) -> bool:
        return self._queue.has_items_or_error()

    def close(self) -> None:
        self._queue.abort(CancelledTransfer("input channel closed"))
        self._reader.close()


class InputGate:
    """All input channels of one consuming task (one per producer subtask)."""

    def __init__(
        self,
        specs: Sequence[InputChannelSpec],
        *,
        local_address: str,
        registry: PartitionRegistry,
        account: MemoryAccount,
        max_buffers: int,
        max_bytes: int,
        request_timeout: float,
        on_close: Optional[Callable[["InputGate"], None]] = None,
    ) -> None:
        self.num_channels = len(specs)
        self._cond = threading.Condition(threading.Lock())
        self._available: deque[int] = deque()
        self._queued = [False] * self.num_channels
        self._num_finished = 0
        self._closed = False
        self._failure: Optional[PartitionException] = None
        self._on_close = on_close
        self.channels: list[InputChannel] = []
        for i, spec in enumerate(specs):
            notify = self._notifier(i)
            if spec.address == local_address:
                ch: InputChannel = LocalInputChannel(i, spec, notify, registry, request_timeout)
            else:
                ch = RemoteInputChannel(
                    i,
                    spec,
                    notify,
                    max_buffers=max_buffers,
                    max_bytes=max_bytes,
                    account=account,
                    connect_timeout=min(request_timeout, 10.0),
                )
            self.channels.append(ch)

    def _notifier(self, index: int) -> Callable[[], None]:
        def notify() -> None:
            with self._cond:
                if not self._queued[index]:
                    self._queued[index] = True
                    self._available.append(index)
                    self._cond.notify()

        return notify

    def start(self) -> None:
        for ch in self.channels:
            ch.start()

    def next(self, timeout: Optional[float] = None) -> Optional[BufferOrEvent]:
        """Next batch or event of any channel; None once every channel has ended.

        Raises PartitionException if a channel failed (and keeps raising it), CancelledTransfer
        after ``close()``, TimeoutError if nothing arrived within ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self._closed:
                    raise CancelledTransfer("input gate was closed")
                if self._failure is not None:
                    raise self._failure
                if self._num_finished == self.num_channels:
                    return None
                now = time.monotonic()
                while self._available:
                    index = self._available.popleft()
                    self._queued[index] = False
                    ch = self.channels[index]
                    if ch.finished:
                        continue
                    try:
                        item = ch.poll(now)
                    except PartitionException as e:
                        self._failure = e
                        raise
                    if item is None:
                        continue
                    if ch.has_more() and not self._queued[index]:
                        self._queued[index] = True
                        self._available.append(index)
                    kind = item[0]
                    if kind == KIND_END:
                        ch.finished = True
                        self._num_finished += 1
                        if self._num_finished == self.num_channels:
                            return None
                        continue
                    if kind == KIND_DATA:
                        return BufferOrEvent(index, batch=item[1])
                    return BufferOrEvent(index, event=item[1])
                wait = self._wait_time(now, deadline)
                if wait is not None and wait <= 0:
                    if deadline is not None and now >= deadline:
                        raise TimeoutError(f"no input within {timeout}s")
                    continue  # a pending local channel expired: poll it to raise
                self._cond.wait(wait)

    def _wait_time(self, now: float, deadline: Optional[float]) -> Optional[float]:
        """How long to sleep: until the caller's deadline or the earliest pending local channel's
        request deadline (which then gets polled to raise 'not found')."""
        wake = deadline
        for ch in self.channels:
            pending = ch.pending_deadline()
            if pending is not None:
                if pending <= now and not self._queued[ch.index]:
                    self._queued[ch.index] = True
                    self._available.append(ch.index)
                wake = pending if wake is None else min(wake, pending)
        return None if wake is None else wake - now

    def close(self) -> None:
        """Unblock ``next()``, release local views, cut connections and join reader threads."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        for ch in self.channels:
            ch.close()
        if self._on_close is not None:
            self._on_close(self)

    @property
    def is_finished(self) -> bool:
        return self._num_finished == self.num_channels
