"""The chaos injectors: thin drivers that turn a scheduled fault's begin and end into signals,
process starts, a stopped TCP endpoint and the checkpoint disk's control file. Each ``begin``
returns what it did (which pid, which server), for the event log.

Roles are resolved when the fault begins: ``leader`` is the master (or ZooKeeper server) leading
right then, ``standby`` a master that does not lead; a role whose process is already under a fault
falls to another one that is not. ZooKeeper servers are started from the calling thread, which must
be the main one: tests/zk.py has them die with the thread that started them (PR_SET_PDEATHSIG, set by setpriv).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from integration.chaos.disk import CheckpointDisk
from integration.chaos.schedule import Fault, FaultKind
from integration.chaos.tcpproxy import TcpProxy

__all__ = ["Injectors", "SLOW_IO_DELAY_S"]

#: how long every checkpoint-disk operation waits during a slow-io fault
SLOW_IO_DELAY_S = 0.3


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _reap(pid: int) -> None:
    """A SIGKILLed child of ours stays a zombie until waited for."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


@dataclass
class Injectors:
    """Faults on one chaos setup: ``cluster`` (LocalHaCluster), ``ensemble`` (tests.zk
    ZooKeeperEnsemble), ``s3`` (the TcpProxy in front of moto), ``disk`` (the CheckpointDisk)."""

    cluster: Any
    ensemble: Any
    s3: TcpProxy
    disk: CheckpointDisk
    #: every pid this setup started (cluster, replacements), for the leak check
    started_pids: set[int] = field(default_factory=set)
    _te_restarts: int = 0
    _resolved: dict[int, Any] = field(default_factory=dict)
    _group_of: dict[int, str] = field(default_factory=dict)
    #: per group, the waits for processes started again to serve: the group's next fault waits
    #: for them (another may go only once this one is back), other groups' faults do not
    _pending: dict[str, list[Callable[[], None]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.started_pids |= set(self.cluster.master_pids.values()) | set(self.cluster.te_pids)
        self.te_slots: list[int] = list(self.cluster.te_pids)

    # ------------------------------------------------------------------ resolving roles
    def _faulted(self, group: str) -> set[Any]:
        return {v for f_id, v in self._resolved.items() if v is not None and self._group_of.get(f_id) == group}

    def _master(self, role: str) -> int | None:
        busy = self._faulted("master")
        alive = [i for i in sorted(self.cluster.master_pids) if i not in busy]
        if not alive:
            return None
        leader = None
        try:
            url = self.cluster.resolver.current()
            leader = self.cluster.leader_index(url) if url else None
        except Exception:  # noqa: BLE001 - no leader right now: any master will do
            leader = None
        if role == "leader" and leader in alive:
            return leader
        standbys = [i for i in alive if i != leader]
        return standbys[0] if standbys else alive[0]

    def _zookeeper(self, role: str) -> Any:
        busy = self._faulted("zookeeper")
        servers = [s for s in self.ensemble.servers if s not in busy and s.is_running()]
        modes = {id(s): s.mode() for s in servers}
        wanted = [s for s in servers if modes[id(s)] == role]
        return (wanted or servers or [None])[0]

    # ------------------------------------------------------------------ begin and end
    def ready(self, group: str) -> None:
        """Waits until the processes of ``group`` started again serve."""
        for wait in self._pending.pop(group, []):
            wait()

    def begin(self, fault: Fault) -> str:
        k = fault.kind
        self.ready(k.group)
        self._group_of[fault.id] = k.group
        if k.group == "master":
            i = self._master(fault.target)
            self._resolved[fault.id] = i
            if i is None:
                return "skipped: no master free"
            pid = self.cluster.master_pids[i]
            _signal(pid, signal.SIGKILL if k is FaultKind.MASTER_KILL else signal.SIGSTOP)
            return f"master {i} (pid {pid})"
        if k.group == "taskexecutor":
            slot = int(fault.target.rsplit("-", 1)[1])
            self._resolved[fault.id] = slot
            pid = self.te_slots[slot]
            _signal(pid, signal.SIGKILL if k is FaultKind.TASKEXECUTOR_KILL else signal.SIGSTOP)
            return f"taskexecutor slot {slot} (pid {pid})"
        if k.group == "zookeeper":
            server = self._zookeeper(fault.target)
            self._resolved[fault.id] = server
            if server is None:
                return "skipped: no ZooKeeper server free"
            what = f"ZooKeeper server {server.server_id} (port {server.client_port}, {fault.target})"
            if k is FaultKind.ZOOKEEPER_STOP:
                _signal(server.proc.pid, signal.SIGSTOP)
            else:
                server.kill()
                if k is FaultKind.ZOOKEEPER_RESTART:
                    server.launch()
            return what
        if k is FaultKind.S3_OUTAGE:
            self.s3.stop()
            return f"S3 endpoint {self.s3.address} refuses connections"
        if k is FaultKind.DISK_FULL:
            return self.disk.full()
        if k is FaultKind.DISK_READONLY:
            return self.disk.readonly()
        if k is FaultKind.SLOW_IO:
            return self.disk.slow(SLOW_IO_DELAY_S)
        raise ValueError(f"no injector for {k}")

    def end(self, fault: Fault) -> str:
        k = fault.kind
        target = self._resolved.pop(fault.id, None)
        if k.group == "master":
            if target is None:
                return "nothing to undo"
            if k is FaultKind.MASTER_KILL:
                _reap(self.cluster.master_pids[target])
                self.cluster.restart(target, wait=False)  # a new standby
                pid = self.cluster.master_pids[target]
                self.started_pids.add(pid)
                self._pending.setdefault("master", []).append(lambda: self.cluster.wait_started(target))
                return f"master {target} started again (pid {pid})"
            _signal(self.cluster.master_pids[target], signal.SIGCONT)
            return f"master {target} resumed"
        if k.group == "taskexecutor":
            old = self.te_slots[target]
            if k is FaultKind.TASKEXECUTOR_KILL:
                from yarnflink.deployment.local.ha_session import start_taskexecutor

                _reap(old)
                self._te_restarts += 1
                rid = f"taskexecutor-{target}-r{self._te_restarts}-{self.cluster.name}"
                proc: subprocess.Popen[bytes] = start_taskexecutor(self.cluster.config, self.cluster.workdir, rid)
                self.te_slots[target] = proc.pid
                self.cluster.te_pids.append(proc.pid)
                self.started_pids.add(proc.pid)
                return f"taskexecutor slot {target} replaced by {rid} (pid {proc.pid})"
            _signal(old, signal.SIGCONT)
            return f"taskexecutor slot {target} resumed"
        if k.group == "zookeeper":
            if target is None:
                return "nothing to undo"
            if k is FaultKind.ZOOKEEPER_STOP:
                _signal(target.proc.pid, signal.SIGCONT)
            elif k is FaultKind.ZOOKEEPER_KILL:
                target.launch()
            self._pending.setdefault("zookeeper", []).append(lambda: target.wait_serving(120))
            return (
                f"ZooKeeper server {target.server_id} {'resumed' if k is FaultKind.ZOOKEEPER_STOP else 'started again'}"
            )
        if k is FaultKind.S3_OUTAGE:
            self.s3.start()
            return "S3 endpoint back"
        return self.disk.heal()

    def heal_all(self) -> None:
        """At the end, or when a run is interrupted: nothing stays stopped, killed or broken."""
        self.disk.heal()
        self.s3.start()
        for pid in [*self.cluster.master_pids.values(), *self.te_slots]:
            _signal(pid, signal.SIGCONT)
        for s in self.ensemble.servers:
            if s.proc is not None:
                _signal(s.proc.pid, signal.SIGCONT)
            elif not s.is_running():
                s.launch()
        self._resolved.clear()

    def wait_whole(self, timeout: float = 120.0) -> None:
        """Every ZooKeeper server serves and every master has started (after the faults)."""
        deadline = time.monotonic() + timeout
        self._pending.clear()
        for s in self.ensemble.servers:
            s.wait_serving(max(1.0, deadline - time.monotonic()))
        for i in self.cluster.master_pids:
            while self.cluster.master_info(i) is None and time.monotonic() < deadline:
                time.sleep(0.1)


def read_log_tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "<no log>"
