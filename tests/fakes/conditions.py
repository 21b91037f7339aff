"""Waiting on a condition with a deadline, instead of sleeping and hoping: the endpoint under test
runs on its own thread, the test reads its state or its fakes' calls until the condition holds."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["wait_until"]

#: How often a condition is checked (it is cheap: it reads the endpoint's state or the fakes' calls).
_POLL_S = 0.005


def wait_until(condition: Callable[[], object], timeout: float = 10.0, what: str = "") -> None:
    """Returns once ``condition()`` is true; fails after ``timeout`` seconds (generous: the
    machine running the suite may be busy; a passing test never waits that long)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what or getattr(condition, '__name__', condition)}")
        time.sleep(_POLL_S)
