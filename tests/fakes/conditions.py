"""Waiting on a condition with a deadline, instead of sleeping and hoping. ``eventually`` for a
test that runs the endpoint on its own loop, ``wait_until`` for one whose endpoint runs on a thread."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["eventually", "wait_until"]

#: How often a condition is checked (it is cheap: it reads the endpoint's state or the fakes' calls).
_POLL_S = 0.005


async def eventually(condition: Callable[[], object], timeout: float = 5.0, what: str = "") -> None:
    """Returns once ``condition()`` is true, letting the loop run in between; fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what or getattr(condition, '__name__', condition)}")
        await asyncio.sleep(_POLL_S)


def wait_until(condition: Callable[[], object], timeout: float = 5.0, what: str = "") -> None:
    """Blocks until ``condition()`` is true; fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what or getattr(condition, '__name__', condition)}")
        time.sleep(_POLL_S)
