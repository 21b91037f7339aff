"""The processes of an HA cluster in ZooKeeper (issue 22, failure 5): each master and TaskExecutor
announces itself in an ephemeral node, so a client finds every live process of the cluster
however it was started, including after the announcing process's session expired and it
reconnected. Real ZooKeeper (tests/zk.py); the identity of a pid on this host."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient

from tests.fakes.conditions import wait_until
from tests.zk import ZooKeeperServer
from yarnflink.common.process_identity import is_same_process, this_process
from yarnflink.highavailability import StandaloneHaServices
from yarnflink.highavailability.services import announce_process


def _pids(ha: Any) -> list[tuple[str, int]]:
    return [(e["kind"], e["pid"]) for e in ha.registered_processes()]


def test_processes_announced_by_one_client_are_seen_by_another_until_they_close(
    make_ha: Callable[..., Any],
) -> None:
    master, te, client = make_ha(), make_ha(), make_ha()
    announce_process(master, "master", {"rest_url": "http://127.0.0.1:1"})
    te.register_process("taskexecutor", {**this_process(), "pid": 4242, "resource_id": "te-1"})
    entries = client.registered_processes()
    assert [(e["kind"], e["pid"]) for e in entries] == [("master", os.getpid()), ("taskexecutor", 4242)]
    assert entries[0]["rest_url"] == "http://127.0.0.1:1" and is_same_process(entries[0])
    assert not is_same_process(entries[1])  # pid 4242 with this process's start time: not that one
    te.close()  # the process ends: its node goes with its session
    assert _pids(client) == [("master", os.getpid())]


def test_an_announcement_comes_back_after_the_session_expired(
    make_ha: Callable[..., Any], zookeeper: ZooKeeperServer
) -> None:
    master, client = make_ha(), make_ha()
    announce_process(master, "master", {})
    session_id, password = master.client.client_id
    # the classic way to expire a session: another client takes it over and closes it
    thief = KazooClient(hosts=zookeeper.address, client_id=(session_id, password), timeout=10)
    thief.start(10)
    thief.stop()
    thief.close()
    wait_until(lambda: _pids(client) == [("master", os.getpid())], 20, "the announcement again")
    assert master.client.client_id[0] != session_id  # a new session


def test_without_ha_nothing_is_announced() -> None:
    ha = StandaloneHaServices()
    announce_process(ha, "master", {})
    assert ha.registered_processes() == []


def test_a_pid_names_the_same_process_only_with_its_start_time_and_host() -> None:
    me = this_process()
    assert is_same_process(me)
    assert not is_same_process({**me, "started": me["started"] - 5})  # a reused pid
    assert not is_same_process({**me, "host": me["host"] + "-elsewhere"})
    assert not is_same_process({**me, "pid": "1"})
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    started = time.time()
    child.wait(10)  # reaped: gone
    assert not is_same_process({"pid": child.pid, "host": me["host"], "started": started})
