"""The executor of a job file started as ``python job.py`` (not by ``yarnflink run``): as
``yarnflink run`` does, it submits to the newest running local session, else to a per-job local
cluster it starts at the first ``execute()`` and stops when the program exits.

``pyflink`` (yarnflink's PyFlink namespace) installs it as the environment's fallback, so a PyFlink
program runs with ``python job.py`` as it does with PyFlink's embedded mini cluster; a program
written against ``yarnflink.api`` calls ``use_embedded_cluster()`` for the same.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from yarnflink.api.common import JobClient, JobExecutionResult
from yarnflink.api.environment import set_fallback_executor_factory
from yarnflink.client.console import ConsoleForwarder
from yarnflink.client.executor import RestClusterExecutor
from yarnflink.client.sessions import find_session
from yarnflink.common.config import Configuration, load_configuration
from yarnflink.deployment.local.cluster import start_local_cluster
from yarnflink.deployment.local.options import LocalClusterOptions
from yarnflink.deployment.local.processes import stop_process
from yarnflink.jobgraph.jobgraph import JobGraph


class EmbeddedClusterExecutor:
    """Starts (or finds) the cluster lazily: creating it costs nothing until a job runs."""

    def __init__(self, configuration: Configuration | None = None):
        self.configuration = configuration if configuration is not None else load_configuration()
        self._lock = threading.Lock()
        self._delegate: RestClusterExecutor | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._console: ConsoleForwarder | None = None

    def _executor(self) -> RestClusterExecutor:
        with self._lock:
            if self._delegate is None:
                url = self._cluster_url()
                self._delegate = RestClusterExecutor(url, self.configuration, console=self._console)
            return self._delegate

    def _cluster_url(self) -> str:
        session = find_session(None)
        if session is not None and session.alive:
            return session.rest_url
        n = int(self.configuration.get(LocalClusterOptions.NUMBER_TASKMANAGER))
        workdir = Path(tempfile.mkdtemp(prefix="yarnflink-embedded-"))
        # a per-job cluster: it also ends by itself once its jobs ended and this process is gone
        self._process, info = start_local_cluster(
            self.configuration,
            taskexecutors=n,
            workdir=workdir,
            detached=False,
            master_args=["--per-job", "--client-pid", str(os.getpid())],
        )
        self._console = ConsoleForwarder(workdir).start()  # what user functions print appears here
        atexit.register(self.close)
        return str(info["rest_url"])

    @property
    def submitted(self) -> list[str]:
        return self._delegate.submitted if self._delegate is not None else []

    def execute(self, job_graph: JobGraph, attached: bool) -> JobExecutionResult:
        return self._executor().execute(job_graph, attached)

    def execute_async(self, job_graph: JobGraph) -> JobClient:
        return self._executor().execute_async(job_graph)

    def execute_and_collect(self, job_graph: JobGraph) -> Iterator[Any]:
        return self._executor().execute_and_collect(job_graph)

    def close(self) -> None:
        """Stops the per-job cluster this executor started (a session is left running)."""
        process, self._process = self._process, None
        console, self._console = self._console, None
        if console is not None:
            console.stop()
        if process is not None:
            sys.stdout.flush()
            stop_process(process.pid)


def use_embedded_cluster() -> None:
    """Environments without an executor (a script not started by ``yarnflink run``) run their
    jobs on an ``EmbeddedClusterExecutor``."""
    set_fallback_executor_factory(EmbeddedClusterExecutor)
