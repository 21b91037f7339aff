"""A local cluster with ZooKeeper HA: 1+N standalone masters electing a leader, and TaskExecutor
processes of their own that follow the leading ResourceManager through ZooKeeper.

Each process is started in its own session (``start_new_session``), so none dies with another:
killing the leading master leaves the standbys and the TaskExecutors running, one standby takes
over, the TaskExecutors register with it and the jobs restart from their latest checkpoints.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from yarnflink.client.leader import RestLeaderResolver, register_ha
from yarnflink.client.rest_client import RestClient, RestClientError
from yarnflink.common.config import Configuration
from yarnflink.deployment.local.processes import ClusterStartError, stop_process
from yarnflink.dispatcher.options import RestOptions
from yarnflink.highavailability import create_ha_services, ha_enabled
from yarnflink.highavailability.options import HighAvailabilityOptions
from yarnflink.jobmaster.options import JobManagerOptions
from yarnflink.security.client import RestCredentials, register, url_key
from yarnflink.security.material import ensure_cluster_security, private_directory

__all__ = [
    "client_ha_config",
    "prepare_ha_config",
    "registered_processes",
    "start_ha_cluster",
    "start_master",
    "start_taskexecutor",
]

_REQUIRED = (HighAvailabilityOptions.HA_ZOOKEEPER_QUORUM, HighAvailabilityOptions.HA_STORAGE_PATH)


def prepare_ha_config(config: Configuration, cluster_id: str, masters: int) -> Configuration:
    """``config`` for an HA cluster of ``masters`` masters on this machine: ZooKeeper HA on
    (``--standby`` implies it), quorum and storageDir present, cluster-id ``cluster_id`` unless set.
    A ``ValueError`` says what is missing."""
    config = config.copy()
    if not ha_enabled(config):
        if config.contains(HighAvailabilityOptions.HA_MODE):
            raise ValueError(
                "standby masters need high-availability.type: zookeeper, not "
                f"{config.get(HighAvailabilityOptions.HA_MODE)}"
            )
        config.set(HighAvailabilityOptions.HA_MODE, "ZOOKEEPER")
    missing = [o.key for o in _REQUIRED if not config.get(o)]
    if missing:
        raise ValueError(
            "a local session with ZooKeeper HA needs "
            + " and ".join(missing)
            + " (e.g. -D high-availability.zookeeper.quorum=127.0.0.1:2181 "
            "-D high-availability.storageDir=file:///tmp/yarnflink-ha)"
        )
    if not config.contains(HighAvailabilityOptions.HA_CLUSTER_ID):
        config.set(HighAvailabilityOptions.HA_CLUSTER_ID, cluster_id)
    for port in (RestOptions.PORT, JobManagerOptions.PORT):
        if not config.contains(port):
            config.set(port, "0")
        elif masters > 1 and str(config.get(port)) != "0":
            raise ValueError(
                f"{port.key} is {config.get(port)}: {masters} masters on one machine cannot share "
                f"a port (leave it unset or 0)"
            )
    return config


def client_ha_config(config: Configuration) -> dict[str, str]:
    """The keys a client needs to find the leader of this cluster (kept in the session file)."""
    return {
        k: str(v)
        for k, v in config.to_dict().items()
        if k.startswith(("high-availability.", "job-result-store.")) or k == RestOptions.AWAIT_LEADER_TIMEOUT.key
    }


def registered_processes(ha_config: dict[str, str]) -> list[dict[str, Any]]:
    """The masters and TaskExecutors of the cluster announced in its HA store now (every live one,
    however it was started: ``highavailability/zookeeper/processes.py``). Raises
    HighAvailabilityError if ZooKeeper cannot be reached."""
    with create_ha_services(Configuration(ha_config)) as ha:
        return ha.registered_processes()


def _command(module: str, args: list[str], config: Configuration) -> list[str]:
    """``python -m <module>``: a process's own entry module (the flags of ``yarnflink master
    start`` / ``taskexecutor start``), without the command line's imports."""
    cmd = [sys.executable, "-m", module, *args]
    for k, v in config.to_dict().items():
        cmd += ["-D", f"{k}={v}"]
    return cmd


def _popen(cmd: list[str], out_file: Path) -> subprocess.Popen[bytes]:
    with open(out_file, "ab") as out:
        return subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )


def start_master(config: Configuration, workdir: Path, index: int) -> subprocess.Popen[bytes]:
    """A standalone master (no ResourceManager driver) that writes ``master-<index>.json`` once up."""
    (workdir / f"master-{index}.json").unlink(missing_ok=True)
    cmd = _command(
        "yarnflink.entrypoint.master",
        [
            "--info-file",
            str(workdir / f"master-{index}.json"),
            "--workdir",
            str(workdir),
            "--log-file",
            str(workdir / f"master-{index}.log"),
        ],
        config,
    )
    return _popen(cmd, workdir / f"master-{index}.out")


def start_taskexecutor(config: Configuration, workdir: Path, resource_id: str) -> subprocess.Popen[bytes]:
    cmd = _command(
        "yarnflink.entrypoint.taskexecutor",
        ["--resource-id", resource_id, "--log-file", str(workdir / f"{resource_id}.log")],
        config,
    )
    return _popen(cmd, workdir / f"{resource_id}.out")


def start_ha_cluster(
    config: Configuration, *, masters: int, taskexecutors: int, workdir: Path, name: str, timeout: float = 90.0
) -> dict[str, Any]:
    """Starts the masters and TaskExecutors and waits until a leader serves REST with all
    TaskExecutors registered. ``config`` comes from ``prepare_ha_config``. Returns ``master_pids``,
    ``rest_urls``, ``taskexecutor_pids``, ``rest_url`` (the leader's), ``token_file``, ``rest_ca``,
    ``config`` (with the security material). On failure every process started is stopped."""

    def _tail(workdir: Path) -> str:
        return "\n".join(_tail_of(workdir, f"master-{i}") for i in range(masters))

    private_directory(workdir)
    config = ensure_cluster_security(config, workdir / "security")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        masters_ = [start_master(config, workdir, i) for i in range(masters)]
        procs += masters_
        tes = [start_taskexecutor(config, workdir, f"taskexecutor-{i}-{name}") for i in range(taskexecutors)]
        procs += tes
        deadline = time.monotonic() + timeout
        infos: list[dict[str, Any] | None] = [None] * masters
        while not all(infos):
            for i, p in enumerate(masters_):
                f = workdir / f"master-{i}.json"
                if infos[i] is None and f.exists():
                    infos[i] = json.loads(f.read_text())
                elif infos[i] is None and p.poll() is not None:
                    raise ClusterStartError(
                        f"master {i} exited with {p.returncode}:\n{_tail_of(workdir, f'master-{i}')}"
                    )
            if time.monotonic() > deadline:
                raise ClusterStartError(f"the masters did not start within {timeout:.0f}s:\n{_tail(workdir)}")
            time.sleep(0.05)
        rest_urls = [str(i["rest_url"]) for i in infos if i]
        credentials = RestCredentials.from_config(config)
        for url in rest_urls:
            register(url, credentials)
        register_ha(rest_urls, Configuration(client_ha_config(config)))
        resolver = RestLeaderResolver(Configuration(client_ha_config(config)))
        try:
            leader = resolver.wait(max(1.0, deadline - time.monotonic()))
        except TimeoutError:
            resolver.close()
            raise ClusterStartError(f"no master became leader within {timeout:.0f}s:\n{_tail(workdir)}") from None
        register(leader, credentials)
        with RestClient(leader, credentials=credentials, leader_resolver=resolver) as rest:
            while True:
                try:
                    if rest.overview()["taskmanagers"] >= taskexecutors:
                        break
                except RestClientError:
                    pass
                if time.monotonic() > deadline:
                    raise ClusterStartError(
                        f"{taskexecutors} TaskExecutors did not register within {timeout:.0f}s:\n{_tail(workdir)}"
                    )
                time.sleep(0.05)
            leader = rest.base_url
        return {
            "master_pids": [p.pid for p in masters_],
            "rest_urls": rest_urls,
            "taskexecutor_pids": [p.pid for p in tes],
            "rest_url": leader,
            "token_file": credentials.token_file or "",
            "rest_ca": credentials.ca_file or "",
            "config": config,
        }
    except BaseException:
        for p in procs:
            stop_process(p.pid, timeout=5)
        raise


def _tail_of(workdir: Path, stem: str, lines: int = 30) -> str:
    parts = []
    for suffix in (".out", ".log"):
        p = workdir / f"{stem}{suffix}"
        if p.exists():
            parts.append("\n".join(p.read_text(errors="replace").splitlines()[-lines:]))
    return "\n".join(parts)


class LocalHaCluster:
    """A running local HA cluster, for drills and benchmarks: which master leads, killing and
    restarting masters. Masters are numbered; a master that steps down replaces itself in the
    same process (same pid), and writes its ``master-<i>.json`` again."""

    def __init__(
        self,
        config: Configuration,
        workdir: Path,
        *,
        masters: int = 2,
        taskexecutors: int = 2,
        name: str = "ha",
        timeout: float = 120.0,
    ) -> None:
        self.workdir = workdir
        self.config = prepare_ha_config(config, name, masters)
        self.name = name
        self.timeout = timeout
        self.masters = masters
        self.taskexecutors = taskexecutors
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.te_procs: list[subprocess.Popen[bytes]] = []
        self.rest_url = ""
        self.resolver: Any = None
        self.master_pids: dict[int, int] = {}
        self.te_pids: list[int] = []

    def start(self) -> LocalHaCluster:
        info = start_ha_cluster(
            self.config,
            masters=self.masters,
            taskexecutors=self.taskexecutors,
            workdir=self.workdir,
            name=self.name,
            timeout=self.timeout,
        )
        self.config = info["config"]
        self.rest_url = info["rest_url"]
        self.resolver = RestLeaderResolver(Configuration(client_ha_config(self.config)))
        # the Popen objects are gone with start_ha_cluster; keep pids (reaped by stop_process)
        self.master_pids = dict(enumerate(info["master_pids"]))
        self.te_pids = list(info["taskexecutor_pids"])
        return self

    def master_info(self, index: int) -> dict[str, Any] | None:
        f = self.workdir / f"master-{index}.json"
        try:
            return dict(json.loads(f.read_text()))
        except (OSError, ValueError):
            return None

    def leader_url(self, timeout: float | None = None) -> str:
        url = str(self.resolver.wait(timeout))
        self._remember(url)
        return url

    def _remember(self, url: str) -> None:
        """This process's clients find the credentials and HA of ``url`` (a master replaced by a
        step-down serves on new ports)."""
        register(url, RestCredentials.from_config(self.config))
        register_ha([url], Configuration(client_ha_config(self.config)))

    def rest(self, url: str | None = None, timeout: float = 30.0) -> Any:
        """A REST client of this cluster that follows the leader (closed by the caller)."""
        url = url or self.leader_url()
        self._remember(url)
        return RestClient(url, timeout=timeout)

    def leader_index(self, url: str | None = None) -> int | None:
        """The number of the master serving ``url`` (default: the leader ZooKeeper names)."""
        url = url or self.leader_url(10)
        if not url:
            return None
        self._remember(url)
        for i in self.master_pids:
            info = self.master_info(i)
            if info is not None and url_key(str(info["rest_url"])) == url_key(url):
                return i
        return None

    def kill(self, index: int, sig: int) -> None:
        os.kill(self.master_pids[index], sig)

    def restart(self, index: int, wait: bool = True) -> None:
        """Starts master ``index`` again (after a SIGKILL), as a new standby; ``wait``: until it serves."""
        (self.workdir / f"master-{index}.json").unlink(missing_ok=True)
        proc = start_master(self.config, self.workdir, index)
        self.procs[index] = proc
        self.master_pids[index] = proc.pid
        if wait:
            self.wait_started(index)

    def wait_started(self, index: int) -> None:
        proc = self.procs.get(index)
        deadline = time.monotonic() + self.timeout
        while self.master_info(index) is None:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(
                    f"master {index} exited with {proc.returncode}:\n{_tail_of(self.workdir, f'master-{index}')}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"master {index} did not start within {self.timeout:.0f}s")
            time.sleep(0.05)
        self._remember(str(self.master_info(index)["rest_url"]))  # type: ignore[index]

    def stop(self) -> None:
        for pid in self.master_pids.values():
            try:
                os.kill(pid, signal.SIGCONT)  # a stopped process cannot handle SIGTERM
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for pid in [*self.master_pids.values(), *self.te_pids]:
            stop_process(pid, timeout=10)
        for p in self.procs.values():
            p.poll()
        if self.resolver is not None:
            self.resolver.close()
        try:
            create_ha_services(Configuration(client_ha_config(self.config))).close_and_cleanup_all_data()
        except Exception:  # noqa: BLE001 - best effort
            pass
