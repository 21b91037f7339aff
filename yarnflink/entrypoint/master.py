"""The master process (Flink's ClusterEntrypoint; the ApplicationMaster on YARN): a
ResourceManager and a Dispatcher, which starts a JobMaster per job.

With ``local_taskexecutors`` (``--local-taskexecutors N``) the ResourceManager is active: it starts
TaskExecutor processes through the local ResourceManagerDriver, N at once (kept as the minimum,
``slotmanager.number-of-slots.min`` = N x slots unless set), more on demand. Without it the master is
standalone and uses the TaskExecutors that register by themselves.

Deployment modes: a session master runs until it is told to stop; a per-job master
(``per_job``) ends once every job it ran has ended and its client process is gone; an application
master (``application``) runs the job script itself and ends with it (``yarnflink.entrypoint.application``).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from pathlib import Path
from typing import Optional, Sequence

from yarnflink.common.config import Configuration
from yarnflink.deployment.local.driver import LocalProcessDriver
from yarnflink.dispatcher.dispatcher import Dispatcher
from yarnflink.entrypoint.application import ApplicationRunner
from yarnflink.resourcemanager.driver import ResourceManagerDriver
from yarnflink.resourcemanager.resourcemanager import ResourceManager
from yarnflink.security import prepare_master

log = logging.getLogger(__name__)


class MasterProcess:
    def __init__(self, config: Configuration, *, local_taskexecutors: Optional[int] = None,
                 workdir: Optional[Path] = None, inherit_stdout: bool = False, per_job: bool = False,
                 client_pid: Optional[int] = None, application: Optional[Sequence[str]] = None,
                 driver: Optional[ResourceManagerDriver] = None) -> None:
        self.config = config
        self._stop = threading.Event()
        host = config.get("jobmanager.rpc.address") or "127.0.0.1"
        if host == "localhost":
            host = "127.0.0.1"
        self.driver = driver if driver is not None else (  # a given driver: YARN containers
            LocalProcessDriver(config, workdir or Path.cwd(), inherit_stdout=inherit_stdout)
            if local_taskexecutors is not None else None)
        min_slots = None
        if local_taskexecutors is not None and not config.contains("slotmanager.number-of-slots.min"):
            min_slots = local_taskexecutors * int(config.get("taskmanager.numberOfTaskSlots"))
        self.rm = ResourceManager(host, int(config.get("jobmanager.rpc.port")), config=config,
                                  driver=self.driver, min_slots=min_slots)
        rest_host = config.get("rest.bind-address") or config.get("rest.address") or "127.0.0.1"
        if rest_host == "localhost":
            rest_host = "127.0.0.1"
        self.dispatcher = Dispatcher(config, self.rm, rest_host=rest_host,
                                     rest_port=int(config.get("rest.port")),
                                     on_shutdown_request=self._stop.set)
        self.workdir = workdir
        self.local_taskexecutors = local_taskexecutors
        self.per_job = per_job
        self.client_pid = client_pid
        self.application: Optional[ApplicationRunner] = None
        if application:
            self.application = ApplicationRunner(config, application[0], list(application[1:]))
        self.exit_code = 0

    def start(self) -> dict[str, object]:
        self.rm.start()
        self.dispatcher.start()
        if self.application is not None:
            self.application.start(self.dispatcher.rest_url, on_done=self._stop.set)
        return {
            "pid": os.getpid(),
            "rest_url": self.dispatcher.rest_url,
            "rpc_address": self.rm.address,
            "taskexecutors": self.local_taskexecutors or 0,
            "mode": "application" if self.application else "per-job" if self.per_job else "session",
        }

    def wait(self) -> None:
        while not self._stop.wait(0.2):
            if self.per_job and self._job_cluster_done():
                log.info("the per-job cluster's job has ended and its client is gone: shutting down")
                break
        if self.application is not None and self.application.done.is_set():
            self.exit_code = 0 if self.application.succeeded else 1

    def _job_cluster_done(self) -> bool:
        """Every job ended and the client is gone (or it went away without submitting one)."""
        if self.client_pid is not None and _pid_alive(self.client_pid):
            return False

        async def ended() -> Optional[bool]:
            entries = list(self.dispatcher.jobs.values())
            return all(e.archive is not None for e in entries) if entries else None

        state = self.dispatcher.call(ended)
        if state is None:  # no job yet: only a client that went away will never submit one
            return self.client_pid is not None
        return state

    def request_stop(self) -> None:
        self._stop.set()

    def stop(self) -> None:
        self.dispatcher.stop()
        self.rm.stop()  # stops the driver's TaskExecutors too


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def run_master(config: Configuration, *, local_taskexecutors: Optional[int], info_file: Optional[Path],
               workdir: Optional[Path], inherit_stdout: bool = False, per_job: bool = False,
               client_pid: Optional[int] = None, application: Optional[Sequence[str]] = None,
               yarn: bool = False, yarn_standby: bool = False) -> int:
    driver: Optional[ResourceManagerDriver] = None
    publish = None
    if yarn:  # inside a skein ApplicationMaster: TaskExecutors are YARN containers
        from yarnflink.deployment.yarn.master import prepare as prepare_yarn

        config, driver, publish = prepare_yarn(config, standby=yarn_standby)
    config = prepare_master(config, workdir or Path.cwd())  # the cluster's TLS material and REST token
    master = MasterProcess(config, local_taskexecutors=local_taskexecutors, workdir=workdir,
                           inherit_stdout=inherit_stdout, per_job=per_job, client_pid=client_pid,
                           application=application, driver=driver)
    signal.signal(signal.SIGTERM, lambda *_: master.request_stop())
    signal.signal(signal.SIGINT, lambda *_: master.request_stop())
    info = master.start()
    if publish is not None:
        publish(info)  # the REST address, in the YARN application's key-value store
    log.info("master started: %s", info)
    if info_file is not None:
        tmp = info_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(info))
        os.replace(tmp, info_file)  # atomic: a reader never sees half a file
    try:
        master.wait()
    finally:
        master.stop()
    return master.exit_code
