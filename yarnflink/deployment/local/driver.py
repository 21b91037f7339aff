"""Local ResourceManagerDriver: TaskExecutors as child processes of the master on this machine.

Each worker runs ``yarnflink taskexecutor start --resource-id ID`` with the master's configuration
and the worker's resources; it registers at the ResourceManager under that id. A watcher thread
reports every process that ends (started ones that never registered count as failed starts).
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import IO

from yarnflink.common.config import Configuration
from yarnflink.resourcemanager.driver import ResourceEventHandler
from yarnflink.resourcemanager.resources import WorkerSpec
from yarnflink.taskexecutor.options import TaskManagerOptions

log = logging.getLogger(__name__)


class LocalProcessDriver:
    def __init__(
        self, config: Configuration, workdir: Path, *, inherit_stdout: bool = False, poll_interval: float = 0.1
    ) -> None:
        self.config = config
        self.workdir = workdir
        self.inherit_stdout = inherit_stdout
        self.poll_interval = poll_interval
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self._files: dict[str, IO[bytes]] = {}
        self._lock = threading.Lock()
        self._handler: ResourceEventHandler | None = None
        self._rm_address = ""
        self._counter = itertools.count()
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    # ------------------------------------------------------------------ ResourceManagerDriver
    def initialize(self, handler: ResourceEventHandler, resource_manager_address: str) -> None:
        self._handler = handler
        self._rm_address = resource_manager_address
        self._watcher = threading.Thread(target=self._watch, name="local-driver-watcher", daemon=True)
        self._watcher.start()

    def start_worker(self, spec: WorkerSpec) -> str:
        worker_id = f"taskexecutor-{next(self._counter)}-{uuid.uuid4().hex[:6]}"
        conf = self.config.to_dict()
        conf.update(
            {
                TaskManagerOptions.NUM_TASK_SLOTS.key: str(spec.num_slots),
                TaskManagerOptions.CPU_CORES.key: str(spec.total.cpu_cores),
                TaskManagerOptions.TASK_HEAP_MEMORY.key: f"{spec.total.task_heap_mb} mb",
                TaskManagerOptions.TASK_OFF_HEAP_MEMORY.key: f"{spec.total.task_off_heap_mb} mb",
                TaskManagerOptions.MANAGED_MEMORY_SIZE.key: f"{spec.total.managed_memory_mb} mb",
            }
        )
        cmd = [
            sys.executable,
            "-m",
            "yarnflink.entrypoint.taskexecutor",  # = yarnflink taskexecutor start, without the CLI's imports
            "--master",
            self._rm_address,
            "--parent-pid",
            str(os.getpid()),
            "--resource-id",
            worker_id,
            "--log-file",
            str(self.workdir / f"{worker_id}.log"),
        ]
        for k, v in conf.items():
            cmd += ["-D", f"{k}={v}"]
        stdout: IO[bytes] | None = None
        if not self.inherit_stdout:
            stdout = open(self.workdir / f"{worker_id}.out", "ab")
        try:
            proc = subprocess.Popen(
                cmd, stdout=stdout, stderr=subprocess.STDOUT if stdout else None, stdin=subprocess.DEVNULL
            )
        except BaseException:
            if stdout is not None:
                stdout.close()
            raise
        with self._lock:
            self.workers[worker_id] = proc
            if stdout is not None:
                self._files[worker_id] = stdout
        log.info("started TaskExecutor process %s (pid %d)", worker_id, proc.pid)
        if self._handler is not None:
            self._handler.on_worker_started(worker_id)
        return worker_id

    def stop_worker(self, worker_id: str) -> None:
        with self._lock:
            proc = self.workers.get(worker_id)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # the watcher reports it once it has ended

    def terminate(self, timeout: float = 10.0) -> None:
        self._stop.set()
        with self._lock:
            procs = dict(self.workers)
            self.workers.clear()
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for p in procs.values():
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        with self._lock:
            for f in self._files.values():
                f.close()
            self._files.clear()

    # ------------------------------------------------------------------ internals
    def _watch(self) -> None:
        while not self._stop.wait(self.poll_interval):
            with self._lock:
                ended = [(wid, p) for wid, p in self.workers.items() if p.poll() is not None]
                for wid, _ in ended:
                    del self.workers[wid]
                    f = self._files.pop(wid, None)
                    if f is not None:
                        f.close()
            for wid, p in ended:
                if self._handler is not None and not self._stop.is_set():
                    self._handler.on_worker_terminated(wid, f"exit code {p.returncode}")
