"""A killed master ends its ZooKeeper session promptly (issue 17): on YARN with HA the
ApplicationMaster's script watches the master process; when it dies by a signal (or crashes), the
watcher closes its ZooKeeper session with the recorded session id and password, so the next
attempt does not wait out the session timeout."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from tests.fakes.conditions import wait_until
from tests.zk import ZooKeeperServer
from yarnflink.common.config import Configuration
from yarnflink.deployment.yarn.supervisor import CHILD_FLAG, child_command, run_supervised


def test_a_master_killed_by_a_signal_is_reported_and_its_status_kept() -> None:
    died: list[int] = []
    code = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    assert run_supervised([sys.executable, "-c", code], died.append) == 128 + 9
    assert died == [-9]


def test_an_orderly_exit_closes_nothing() -> None:
    died: list[int] = []
    assert run_supervised([sys.executable, "-c", "pass"], died.append) == 0
    assert died == []


def test_sigterm_reaches_the_master_which_stops_in_order(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    code = (
        "import signal, sys, time, pathlib\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
        f"pathlib.Path({str(ready)!r}).touch()\n"
        "time.sleep(60)\n"
    )

    def skein_stops_the_application() -> None:
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=skein_stops_the_application, daemon=True).start()
    died: list[int] = []
    assert run_supervised([sys.executable, "-c", code], died.append) == 0
    assert died == []


def test_the_child_runs_this_command_line_as_the_master() -> None:
    cmd = child_command(["-m", "yarnflink.cli.main", "master", "start", "--yarn"])
    assert cmd[1:] == ["-m", "yarnflink.cli.main", "master", "start", "--yarn", CHILD_FLAG]


def test_the_dead_masters_zookeeper_session_is_closed_at_once(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    from kazoo.client import KazooClient

    from yarnflink.highavailability.zookeeper.session_file import close_session_of_file, write_session_file

    config = Configuration(
        {
            "high-availability.type": "zookeeper",
            "high-availability.zookeeper.quorum": zookeeper.address,
            "high-availability.zookeeper.client.session-timeout": "30 s",
        }
    )
    master = KazooClient(hosts=zookeeper.address, timeout=30)  # the master's session: 30 s timeout
    master.start(10)
    watcher = KazooClient(hosts=zookeeper.address, timeout=10)
    watcher.start(10)
    path = f"/yarnfix-{os.getpid()}-{time.monotonic_ns()}"
    try:
        master.create(path, b"leader", ephemeral=True)
        session_file = tmp_path / "zk-session.json"
        write_session_file(master, session_file)
        assert oct(session_file.stat().st_mode & 0o777) == "0o600"
        assert close_session_of_file(config, session_file)
        wait_until(lambda: watcher.exists(path) is None, timeout=5, what="the ephemeral node gone")  # not 30 s
        assert not session_file.exists()
        assert not close_session_of_file(config, session_file)  # nothing left to close
    finally:
        master.stop()
        master.close()
        watcher.stop()
        watcher.close()
