"""Which process a pid names: a pid with its start time identifies one process on one host (a
pid alone may be reused once the process is gone), so whoever stops a process it learnt of from
elsewhere (the HA store's process registry) stops that one and no other."""

from __future__ import annotations

import os
import socket
from typing import Any

import psutil

__all__ = ["is_same_process", "this_process"]

#: /proc gives start times in clock ticks (10 ms); psutil's float may differ in its last digits
_START_TOLERANCE_S = 0.05


def this_process() -> dict[str, Any]:
    """``pid``, ``host`` and ``started`` (seconds since the epoch) of this process."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "started": psutil.Process().create_time()}


def is_same_process(entry: dict[str, Any]) -> bool:
    """Whether ``entry`` (from ``this_process``, maybe with more keys) names a process running on
    this host now."""
    if entry.get("host") != socket.gethostname():
        return False
    pid, started = entry.get("pid"), entry.get("started")
    if not isinstance(pid, int) or not isinstance(started, (int, float)):
        return False
    try:
        p = psutil.Process(pid)
        return p.status() != psutil.STATUS_ZOMBIE and abs(p.create_time() - started) < _START_TOLERANCE_S
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
