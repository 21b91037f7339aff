"""The master process of a YARN application, watched from inside the ApplicationMaster's
container (with ZooKeeper HA).

skein runs the master as its ApplicationMaster's script; when that process is SIGKILLed (or
crashes) its ZooKeeper session stays open until the session timeout, and YARN's next attempt
waits for it before it can lead. So with HA the script's process (``master start --yarn``) runs
the master as a child (``--yarn-child``) and waits: when the child dies other than by an orderly
stop, it closes the child's ZooKeeper session at once (``session_file``), then exits as the child
did, which ends the attempt as before. SIGTERM/SIGINT (skein stopping the application) are passed
on to the child, which stops in order.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from yarnflink.common.config import Configuration

log = logging.getLogger(__name__)

#: Where the master child records its ZooKeeper session (the container's working directory).
SESSION_FILE = Path("zk-session.json")
CHILD_FLAG = "--yarn-child"


def run_supervised(cmd: Sequence[str], on_died: Callable[[int], None]) -> int:
    """Runs ``cmd``, forwarding SIGTERM/SIGINT to it; ``on_died(returncode)`` when it exits
    non-zero or by a signal. Returns its exit status (128 + signal for a signal, as a shell)."""
    child = subprocess.Popen(list(cmd))

    def forward(signum: int, _frame: Any) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        rc = child.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if rc != 0:
        log.warning("the master process %d ended with %s", child.pid, f"signal {-rc}" if rc < 0 else f"status {rc}")
        on_died(rc)
    return 128 - rc if rc < 0 else rc


def child_command(argv: Sequence[str] | None = None) -> list[str]:
    """This process's command line, as the master child's."""
    args = list(argv if argv is not None else getattr(sys, "orig_argv", sys.argv)[1:])
    return [sys.executable, *args, CHILD_FLAG]


def supervise_master(config: Configuration, session_file: Path = SESSION_FILE) -> int:
    from yarnflink.highavailability.zookeeper.session_file import close_session_of_file  # deferred: kazoo

    session_file.unlink(missing_ok=True)

    def close_session(_rc: int) -> None:
        close_session_of_file(config, session_file)

    return run_supervised(child_command(), close_session)
