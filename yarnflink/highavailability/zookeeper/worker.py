"""A single daemon worker thread running submitted calls in order.

The drivers' ZooKeeper calls can block for as long as the connection is down; a daemon thread
never holds up the interpreter's exit (``ThreadPoolExecutor`` threads are joined at exit).
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class SerialWorker:
    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[
            tuple[concurrent.futures.Future[Any], Callable[..., Any], tuple[Any, ...]] | None
        ] = queue.SimpleQueue()
        self._shutdown = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]:
        if self._shutdown:
            raise RuntimeError("worker is shut down")
        f: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._queue.put((f, fn, args))
        return f

    def shutdown(self) -> None:
        """No more calls are accepted; the thread ends after the calls already queued."""
        self._shutdown = True
        self._queue.put(None)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            f, fn, args = item
            if not f.set_running_or_notify_cancel():
                continue
            try:
                f.set_result(fn(*args))
            except BaseException as e:  # delivered to whoever waits on the future
                f.set_exception(e)
