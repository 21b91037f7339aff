"""Application mode (Flink's ApplicationClusterEntryPoint): the job script runs inside the master,
against the master's own Dispatcher, and the cluster ends with it.

``ApplicationRunner`` runs in the master process: it installs a ``RestClusterExecutor`` for the
master's REST endpoint, runs the script on a thread, waits for every job the script submitted to
end, and then tells the master to shut down (exit status 0 if the script returned and every job
FINISHED). ``run_application_cluster`` is the client side of ``yarnflink run --application``:
it starts such a master on this machine and waits for it (or, detached, returns at once).
"""

from __future__ import annotations

import logging
import runpy
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from yarnflink.api.environment import set_default_executor
from yarnflink.client.executor import RestClusterExecutor
from yarnflink.client.rest_client import TERMINAL_STATES
from yarnflink.common.config import Configuration
from yarnflink.deployment.local.cluster import start_local_cluster
from yarnflink.security.client import RestCredentials, register

log = logging.getLogger(__name__)


class ApplicationRunner:
    def __init__(self, config: Configuration, script: str, args: Sequence[str], poll_interval: float = 0.2) -> None:
        self.config = config
        self.script = script
        self.args = list(args)
        self.poll_interval = poll_interval
        self.done = threading.Event()
        self.succeeded = False
        self.error = ""

    def start(self, rest_url: str, on_done: Callable[[], None]) -> None:
        def run() -> None:
            try:
                self.succeeded = self._run(rest_url)
            except BaseException:  # noqa: BLE001 - whatever the script does, the master must end
                self.error = traceback.format_exc()
                log.error("the application failed:\n%s", self.error)
            finally:
                self.done.set()
                on_done()

        threading.Thread(target=run, name="application", daemon=True).start()

    def _run(self, rest_url: str) -> bool:
        register(rest_url, RestCredentials.from_config(self.config))
        executor = RestClusterExecutor(rest_url, self.config, progress=sys.stderr)
        set_default_executor(executor)
        path = Path(self.script)
        old_argv = sys.argv
        sys.argv = [str(path), *self.args]
        sys.path.insert(0, str(path.parent.resolve()))
        log.info("running application %s %s", path, " ".join(self.args))
        try:
            runpy.run_path(str(path), run_name="__main__")
        except SystemExit as e:
            if e.code not in (None, 0):
                raise
        finally:
            sys.argv = old_argv
            sys.path.pop(0)
            set_default_executor(None)
        if not executor.submitted:
            raise RuntimeError(f"application {path} defined no job: it never called env.execute()")
        states = {}
        for job_id in executor.submitted:  # jobs submitted detached run on until they end
            while (state := executor.rest.job(job_id)["state"]) not in TERMINAL_STATES:
                time.sleep(self.poll_interval)
            states[job_id] = state
        log.info("application %s ended; its jobs: %s", path, states)
        return all(s == "FINISHED" for s in states.values())


def run_application_cluster(
    config: Configuration,
    script: str,
    args: Sequence[str],
    *,
    taskexecutors: int,
    detached: bool,
    workdir: Path | None = None,
) -> int:
    """Starts a local application cluster for ``script`` and waits for it to end (its exit status),
    or returns 0 once it runs (``detached``)."""
    workdir = workdir or Path(tempfile.mkdtemp(prefix="yarnflink-application-"))
    master_args = ["--application", str(Path(script).resolve()), *[f"--application-arg={a}" for a in args]]
    proc, info = start_local_cluster(
        config,
        taskexecutors=taskexecutors,
        workdir=workdir,
        detached=detached,
        inherit_stdout=not detached,
        master_args=master_args,
        wait_for_taskexecutors=False,
    )
    print(f"Application cluster at {info['rest_url']} (logs in {workdir}).", file=sys.stderr)
    if detached:
        return 0
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        try:
            code = proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
    if code != 0:
        log_file = workdir / "master.log"
        lines = log_file.read_text(errors="replace").splitlines()[-40:] if log_file.exists() else []
        print("\n".join(lines), file=sys.stderr)
    return code
