"""Helpers of the network tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa


def wait_until(condition: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """Poll ``condition`` until true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.002)


def make_batch(start: int, rows: int = 100, cols: int = 2) -> pa.RecordBatch:
    data = np.arange(start, start + rows, dtype=np.int64)
    return pa.record_batch({f"c{i}": pa.array(data * (i + 1)) for i in range(cols)})


def net_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("yf-net-")]


class Runner:
    """Runs a function in a thread and keeps its result or exception."""

    def __init__(self, fn: Callable[..., object], *args: object) -> None:
        self.result: object = None
        self.error: BaseException | None = None
        self.started = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(fn, args), daemon=True)
        self._fn = fn
        self.thread.start()

    def _run(self, fn: Callable[..., object], args: tuple) -> None:
        self.started.set()
        try:
            self.result = fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            self.error = e

    def join(self, timeout: float = 20.0) -> object:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"{self._fn.__name__} did not finish in {timeout}s"
        return self.result
