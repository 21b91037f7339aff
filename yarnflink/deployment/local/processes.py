"""The local deployment's processes: stopping one, and the error of a cluster that did not start
(shared by the single-master cluster and the HA session)."""

from __future__ import annotations

import os
import signal
import time

from yarnflink.client.sessions import pid_alive


class ClusterStartError(Exception):
    pass


def stop_process(pid: int, timeout: float = 15.0) -> bool:
    """SIGTERM, wait, then SIGKILL. Returns True if the process is gone."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return not pid_alive(pid)
