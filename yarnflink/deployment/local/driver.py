"""Local ResourceManagerDriver: TaskExecutors as child processes of the master on this machine."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Optional

from yarnflink.common.config import Configuration

log = logging.getLogger(__name__)


class LocalProcessDriver:
    def __init__(self, config: Configuration, workdir: Path, *, inherit_stdout: bool = False) -> None:
        self.config = config
        self.workdir = workdir
        self.inherit_stdout = inherit_stdout
        self.workers: dict[int, subprocess.Popen[bytes]] = {}
        self._files: list[IO[bytes]] = []

    def start_worker(self, rm_address: str, index: int) -> subprocess.Popen[bytes]:
        cmd = [sys.executable, "-m", "yarnflink.cli.main", "taskexecutor", "start",
               "--master", rm_address, "--parent-pid", str(os.getpid()),
               "--log-file", str(self.workdir / f"taskexecutor-{index}.log")]
        for k, v in self.config.to_dict().items():
            cmd += ["-D", f"{k}={v}"]
        stdout: Optional[IO[bytes]] = None
        if not self.inherit_stdout:
            out = open(self.workdir / f"taskexecutor-{index}.out", "ab")
            self._files.append(out)
            stdout = out
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.STDOUT if stdout else None,
                                stdin=subprocess.DEVNULL)
        self.workers[index] = proc
        log.info("started TaskExecutor process %d (pid %d)", index, proc.pid)
        return proc

    def check_workers(self) -> None:
        for i, p in list(self.workers.items()):
            if p.poll() is not None:
                log.warning("TaskExecutor process %d (pid %d) exited with %s", i, p.pid, p.returncode)
                del self.workers[i]

    def stop_all(self, timeout: float = 10.0) -> None:
        for p in self.workers.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for p in self.workers.values():
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.workers.clear()
        for f in self._files:
            f.close()
