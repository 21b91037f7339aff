"""Byte- and count-bounded blocking queue: the single place where backpressure happens.

Every buffer of the shuffle stack (a producer's subpartition, a consumer's remote input channel)
is one ``BoundedQueue``. Bounding both the number of items and their bytes keeps memory bounded
whatever the batch size; a single item larger than the byte bound is still admitted when the
queue is empty, otherwise an oversized batch could never pass.

The queue has one terminal transition, ``abort(exc)``: buffered items are dropped (their memory
is released at once), blocked producers raise ``CancelledTransfer`` and the reader gets ``exc``.
That models release, cancellation, producer failure and lost connections alike.

A *listener* is invoked (outside the queue's lock) after every put and on abort. The input gate
uses it to learn which channels have data without polling all of them, and so that one gate
thread can wait on many queues at once.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from yarnflink.network.errors import CancelledTransfer


class MemoryAccount:
    """Bytes buffered in all queues of one ShuffleEnvironment (``memory_in_use()``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bytes = 0

    def add(self, nbytes: int) -> None:
        with self._lock:
            self._bytes += nbytes

    @property
    def bytes(self) -> int:
        return self._bytes


class BoundedQueue:
    """FIFO with blocking ``put`` bounded by ``max_items`` and ``max_bytes``.

    ``put`` returns the nanoseconds it spent blocked, which callers add up as backpressure time.
    ``force=True`` bypasses the bounds; it is used only for the single terminal END marker so that
    ``finish()`` never blocks behind a slow consumer.
    """

    def __init__(
        self,
        max_items: int,
        max_bytes: int,
        account: MemoryAccount | None = None,
    ) -> None:
        if max_items < 1 or max_bytes < 1:
            raise ValueError("queue bounds must be positive")
        self._max_items = max_items
        self._max_bytes = max_bytes
        self._account = account
        self._lock = threading.Lock()
        self._not_full = threading.Condition(self._lock)
        self._not_empty = threading.Condition(self._lock)
        self._items: deque[tuple[Any, int]] = deque()
        self._bytes = 0
        self._error: BaseException | None = None
        self._listener: Callable[[], None] | None = None

    # -- state -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._items)

    @property
    def nbytes(self) -> int:
        return self._bytes

    @property
    def error(self) -> BaseException | None:
        return self._error

    def has_items_or_error(self) -> bool:
        """True when a ``poll()`` would return an item or raise (used to re-arm availability)."""
        return bool(self._items) or self._error is not None

    def set_listener(self, listener: Callable[[], None] | None) -> None:
        with self._lock:
            self._listener = listener

    def _full(self, nbytes: int) -> bool:
        items = len(self._items)
        return items >= self._max_items or (items > 0 and self._bytes + nbytes > self._max_bytes)

    # -- producer side -----------------------------------------------------------------------
    def put(self, item: Any, nbytes: int, *, force: bool = False) -> int:
        """Append ``item`` accounting ``nbytes``; block while full. Raises CancelledTransfer
        once aborted (also when the abort happens while blocked)."""
        blocked_ns = 0
        with self._lock:
            if self._error is None and not force and self._full(nbytes):
                start = time.perf_counter_ns()
                while self._error is None and self._full(nbytes):
                    self._not_full.wait()
                blocked_ns = time.perf_counter_ns() - start
            if self._error is not None:
                raise CancelledTransfer(f"transfer aborted: {self._error}")
            self._items.append((item, nbytes))
            self._bytes += nbytes
            if self._account is not None:
                self._account.add(nbytes)
            self._not_empty.notify()
            listener = self._listener
        if listener is not None:
            listener()
        return blocked_ns

    # -- consumer side -----------------------------------------------------------------------
    def _pop_locked(self) -> Any:
        item, nbytes = self._items.popleft()
        self._bytes -= nbytes
        if self._account is not None:
            self._account.add(-nbytes)
        self._not_full.notify()
        return item

    def poll(self) -> Any:
        """Next item, or None if empty; raises the abort exception once aborted."""
        with self._lock:
            if self._error is not None:
                raise self._error
            if not self._items:
                return None
            return self._pop_locked()

    def get(self, timeout: float | None = None) -> Any:
        """Blocking ``poll``; raises TimeoutError after ``timeout`` seconds."""
        with self._lock:
            if timeout is None:
                while not self._items and self._error is None:
                    self._not_empty.wait()
            elif not self._not_empty.wait_for(lambda: self._items or self._error is not None, timeout):
                raise TimeoutError("queue get timed out")
            if self._error is not None:
                raise self._error
            return self._pop_locked()

    # -- terminal ----------------------------------------------------------------------------
    def abort(self, exc: BaseException) -> bool:
        """Drop everything buffered and make both sides fail from now on.

        Returns False if the queue was already aborted (the first cause wins)."""
        with self._lock:
            if self._error is not None:
                return False
            self._error = exc
            if self._account is not None and self._bytes:
                self._account.add(-self._bytes)
            self._items.clear()
            self._bytes = 0
            self._not_full.notify_all()
            self._not_empty.notify_all()
            listener = self._listener
        if listener is not None:
            listener()
        return True
