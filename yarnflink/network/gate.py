"""Consumer side: InputGate and its local/remote input channels.

A gate multiplexes its channels for one task thread. Channels signal "I have something" through
a listener (called after every put into their queue, or when they fail), which appends the
channel index to the gate's availability deque -- so ``next()`` never scans idle channels and
serves channels with data round-robin, like Flink's ``inputChannelsWithData``.

A task thread reads with the non-blocking ``poll_next()`` and, finding nothing, asks
``notify_when_available(callback)`` to be told (its callback puts a mail into the task's mailbox,
``yarnflink/taskexecutor/mailbox.py``); ``next()`` blocks instead (tests, benchmarks).

Lock order: gate lock -> local channel lock -> queue / partition / registry locks. Listeners (and
registry callbacks) are called outside those locks
and only then take the gate lock, so the order is never inverted.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

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

    def poll(self, now: float) -> Item | None:
        raise NotImplementedError

    def has_more(self) -> bool:
        raise NotImplementedError

    def pending_deadline(self) -> float | None:
        """Monotonic time at which a still-unresolved channel fails; None if resolved."""
        return None

    def close(self) -> None:
        pass

    def _error_for(self, message: str) -> PartitionException:
        return PartitionException(message, self.spec.partition_id, self.spec.address)


class LocalInputChannel(InputChannel):
    """Reads a subpartition of the same environment directly: batches are passed by reference,
    and the producer's queue is the only buffer (so it alone bounds memory).

    The subpartition is claimed as soon as the partition exists (at start, or from the
    registering thread via the registry subscription), not lazily on the first poll: a gate
    closed before it ever polled must still release the subpartition, or the producer would
    block forever on a queue nobody drains.
    """

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
        self._lock = threading.Lock()  # guards _view/_error/_closed; below the gate lock
        self._view: SubpartitionView | None = None
        self._error: PartitionException | None = None
        self._closed = False
        self._unsubscribe: Callable[[], None] | None = None

    def start(self) -> None:
        self._deadline = time.monotonic() + self._request_timeout
        self._unsubscribe = self._registry.subscribe(self.spec.partition_id, self._on_registered)
        self._on_registered()  # the partition may already exist

    def _on_registered(self) -> None:
        self._try_claim()
        self._notify()

    def _try_claim(self) -> None:
        spec = self.spec
        with self._lock:
            if self._view is not None or self._error is not None or self._closed:
                return
            partition = self._registry.lookup(spec.partition_id)
            if partition is None:
                return
            try:
                view = partition.create_view(spec.subpartition)
            except (ValueError, CancelledTransfer) as e:
                self._error = self._error_for(str(e))
                return
            view.set_listener(self._notify)
            self._view = view
        self._cancel_subscription()

    def _cancel_subscription(self) -> None:
        unsubscribe, self._unsubscribe = self._unsubscribe, None
        if unsubscribe is not None:
            unsubscribe()

    def pending_deadline(self) -> float | None:
        if self._view is None and self._error is None and not self.finished:
            return self._deadline
        return None

    def poll(self, now: float) -> Item | None:
        if self._view is None:
            self._try_claim()
        if self._error is not None:
            raise self._error
        view = self._view
        if view is None:
            if now >= self._deadline:
                self._error = self._error_for(
                    f"partition {self.spec.partition_id} not found within {self._request_timeout:g}s"
                )
                raise self._error
            return None
        try:
            return view.poll()
        except CancelledTransfer as e:
            raise self._error_for(f"upstream subpartition unavailable: {e}") from None
        except Exception as e:  # ProducerFailed
            raise self._error_for(str(e)) from None

    def has_more(self) -> bool:
        return self._view is not None and self._view.has_items_or_error()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            view = self._view
        self._cancel_subscription()
        if view is not None:
            view.release()


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

    def poll(self, now: float) -> Item | None:
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
        on_close: Callable[[InputGate], None] | None = None,
    ) -> None:
        self.num_channels = len(specs)
        self._cond = threading.Condition(threading.Lock())
        self._available: deque[int] = deque()
        self._queued = [False] * self.num_channels
        self._num_finished = 0
        self._closed = False
        self._failure: PartitionException | None = None
        self._on_close = on_close
        #: called once when input may be available (``notify_when_available``)
        self._listener: Callable[[], None] | None = None
        #: threads blocked in ``next()`` (only they need the condition notified)
        self._sleepers = 0
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
                    if self._sleepers:  # a task polling with poll_next never sleeps here
                        self._cond.notify()
                listener, self._listener = self._listener, None
            if listener is not None:
                listener()  # outside the gate lock: it takes the task mailbox's lock

        return notify

    def start(self) -> None:
        for ch in self.channels:
            ch.start()

    def next(self, timeout: float | None = None) -> BufferOrEvent | None:
        """Next batch or event of any channel; None once every channel has ended.

        Raises PartitionException if a channel failed (and keeps raising it), CancelledTransfer
        after ``close()``, TimeoutError if nothing arrived within ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                now = time.monotonic()
                item = self._poll_locked(now)
                if item is not None or self._num_finished == self.num_channels:
                    return item
                wait = self._wait_time(now, deadline)
                if wait is not None and wait <= 0:
                    if deadline is not None and now >= deadline:
                        raise TimeoutError(f"no input within {timeout}s")
                    continue  # a pending local channel expired: poll it to raise
                self._sleepers += 1
                try:
                    self._cond.wait(wait)
                finally:
                    self._sleepers -= 1

    def poll_next(self, on_available: Callable[[], None] | None = None) -> BufferOrEvent | None:
        """Next batch or event of any channel without waiting: None if nothing is available now
        (``is_finished`` tells whether every channel has ended). Raises as ``next()``; a local
        channel whose partition did not appear within its request timeout raises here too once
        that time (``pending_deadline()``) has passed. With ``on_available``, returning None also
        registers it as ``notify_when_available`` would, atomically with finding nothing."""
        with self._cond:
            while True:
                now = time.monotonic()
                item = self._poll_locked(now)
                if item is not None or self._num_finished == self.num_channels:
                    return item
                wait = self._wait_time(now, None)
                if wait is None or wait > 0:
                    if on_available is not None:
                        self._listener = on_available
                    return None

    def notify_when_available(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once (from whichever thread makes it so, or from this one at once)
        when ``poll_next()`` may return something or raise: a channel has data or an event, a
        channel failed or ended, or the gate was closed. A later registration replaces an
        earlier one that has not fired."""
        with self._cond:
            ready = self._closed or self._failure is not None or bool(self._available)
            ready = ready or self._num_finished == self.num_channels
            self._listener = None if ready else callback
        if ready:
            callback()

    def pending_deadline(self) -> float | None:
        """Earliest monotonic time at which a still-unresolved local channel fails (None: none)."""
        with self._cond:
            deadlines = [d for ch in self.channels if (d := ch.pending_deadline()) is not None]
        return min(deadlines) if deadlines else None

    def _poll_locked(self, now: float) -> BufferOrEvent | None:
        """The next element of a channel with data, or None if there is none (or every channel
        has ended). Gate lock held."""
        if self._closed:
            raise CancelledTransfer("input gate was closed")
        if self._failure is not None:
            raise self._failure
        if self._num_finished == self.num_channels:
            return None
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
        return None

    def _wait_time(self, now: float, deadline: float | None) -> float | None:
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
            listener, self._listener = self._listener, None
        if listener is not None:
            listener()
        for ch in self.channels:
            ch.close()
        if self._on_close is not None:
            self._on_close(self)

    @property
    def is_finished(self) -> bool:
        return self._num_finished == self.num_channels
