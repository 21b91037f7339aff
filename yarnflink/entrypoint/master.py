"""The master process (Flink's ClusterEntrypoint; the ApplicationMaster on YARN): a
ResourceManager and a Dispatcher, which starts a JobMaster per job. Optionally starts local
TaskExecutor processes through the local ResourceManagerDriver.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from pathlib import Path
from typing import Optional

from yarnflink.common.config import Configuration
from yarnflink.deployment.local.driver import LocalProcessDriver
from yarnflink.dispatcher.dispatcher import Dispatcher
from yarnflink.resourcemanager.resourcemanager import ResourceManager

log = logging.getLogger(__name__)


class MasterProcess:
    def __init__(self, config: Configuration, *, local_taskexecutors: int = 0,
                 workdir: Optional[Path] = None, inherit_stdout: bool = False) -> None:
        self.config = config
        self._stop = threading.Event()
        host = config.get("jobmanager.rpc.address") or "127.0.0.1"
        if host == "localhost":
            host = "127.0.0.1"
        self.rm = ResourceManager(
            host, int(config.get("jobmanager.rpc.port")),
            heartbeat_interval_s=config.get_seconds("heartbeat.interval") or 10.0,
            heartbeat_timeout_s=config.get_seconds("heartbeat.timeout") or 50.0,
            evenly_spread_out_slots=bool(config.get("cluster.evenly-spread-out-slots")),
        )
        rest_host = config.get("rest.bind-address") or config.get("rest.address") or "127.0.0.1"
        if rest_host == "localhost":
            rest_host = "127.0.0.1"
        self.dispatcher = Dispatcher(config, self.rm, rest_host=rest_host,
                                     rest_port=int(config.get("rest.port")),
                                     on_shutdown_request=self._stop.set)
        self.workdir = workdir
        self.driver = LocalProcessDriver(config, workdir or Path.cwd(), inherit_stdout=inherit_stdout)
        self.local_taskexecutors = local_taskexecutors

    def start(self) -> dict[str, object]:
        self.rm.start()
        self.dispatcher.start()
        for i in range(self.local_taskexecutors):
            self.driver.start_worker(self.rm.address, i)
        return {
            "pid": os.getpid(),
            "rest_url": self.dispatcher.rest_url,
            "rpc_address": self.rm.address,
            "taskexecutors": self.local_taskexecutors,
        }

    def wait(self) -> None:
        while not self._stop.wait(0.5):
            self.driver.check_workers()

    def request_stop(self) -> None:
        self._stop.set()

    def stop(self) -> None:
        self.dispatcher.stop()
        self.driver.stop_all()
        self.rm.stop()


def run_master(config: Configuration, *, local_taskexecutors: int, info_file: Optional[Path],
               workdir: Optional[Path], inherit_stdout: bool = False) -> int:
    master = MasterProcess(config, local_taskexecutors=local_taskexecutors, workdir=workdir,
                           inherit_stdout=inherit_stdout)
    signal.signal(signal.SIGTERM, lambda *_: master.request_stop())
    signal.signal(signal.SIGINT, lambda *_: master.request_stop())
    info = master.start()
    log.info("master started: %s", info)
    if info_file is not None:
        tmp = info_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(info))
        os.replace(tmp, info_file)  # atomic: a reader never sees half a file
    try:
        master.wait()
    finally:
        master.stop()
    return 0
