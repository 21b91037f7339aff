"""The master process (Flink's ClusterEntrypoint; the ApplicationMaster on YARN): a
ResourceManager and a Dispatcher, which starts a JobMaster per job.

With ``local_taskexecutors`` (``--local-taskexecutors N``) the ResourceManager is active: it starts
TaskExecutor processes through the local ResourceManagerDriver, N at once (kept as the minimum,
``slotmanager.number-of-slots.min`` = N x slots unless set), more on demand. Without it the master is
standalone and uses the TaskExecutors that register by themselves.

Deployment modes: a session master runs until it is told to stop; a per-job master
(``per_job``) ends once every job it ran has ended and its client process is gone; an application
master (``application``) runs the job script itself and ends with it (``yarnflink.entrypoint.application``).

High availability (``high-availability.type: zookeeper``, docs/HA.md): the process serves its
endpoints at once but acts only as leader (``yarnflink.dispatcher.leadership``). A leader that
loses its leadership steps down (``step_down``): it stops acting, then replaces itself with a
fresh process (the same command line, ``os.execv``) that rejoins the election as a standby.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from yarnflink.checkpoint.options import CheckpointingOptions
from yarnflink.checkpoint.storage import FsCheckpointStorage
from yarnflink.client.sessions import pid_alive
from yarnflink.common.config import Configuration
from yarnflink.deployment.yarn.options import YarnConfigOptions
from yarnflink.deployment.yarn.supervisor import SESSION_FILE, supervise_master
from yarnflink.dispatcher.dispatcher import Dispatcher
from yarnflink.dispatcher.leadership import DispatcherLeadership
from yarnflink.dispatcher.options import RestOptions
from yarnflink.entrypoint.flags import add_master_arguments, master_configuration, run_main
from yarnflink.entrypoint.process import exit_stopped
from yarnflink.entrypoint.resource_manager import create_resource_manager
from yarnflink.entrypoint.storage_check import StorageCheckError, check_master_storage
from yarnflink.highavailability.errors import HighAvailabilityError
from yarnflink.highavailability.services import (
    HighAvailabilityServices,
    announce_process,
    create_ha_services,
    ha_enabled,
)
from yarnflink.resourcemanager.driver import ResourceManagerDriver
from yarnflink.resourcemanager.local_gateway import LocalResourceManagerGateway
from yarnflink.resourcemanager.resourcemanager import ResourceManager
from yarnflink.security import prepare_master

if TYPE_CHECKING:  # loaded where used: an application master or a YARN master only
    from yarnflink.deployment.yarn.master import YarnMasterSide
    from yarnflink.entrypoint.application import ApplicationRunner

log = logging.getLogger(__name__)


class MasterProcess:
    def __init__(
        self,
        config: Configuration,
        *,
        local_taskexecutors: int | None = None,
        workdir: Path | None = None,
        inherit_stdout: bool = False,
        per_job: bool = False,
        client_pid: int | None = None,
        application: Sequence[str] | None = None,
        driver: ResourceManagerDriver | None = None,
        ha_services: HighAvailabilityServices | None = None,
        client_gone: Callable[[], bool] | None = None,
        client_wait_s: float = 300.0,
        resource_manager: ResourceManager | None = None,
    ) -> None:
        """``ha_services``: given HA services (tests: ``EmbeddedHaServices``) instead of the ones
        ``high-availability.*`` asks for. ``client_gone`` (a per-job cluster whose client runs on
        another host, YARN): whether the attached client said it has its results; once every job
        ended the master waits for that at most ``client_wait_s``. ``resource_manager``: one
        ``create_resource_manager`` made and started already (``yarnflink.entrypoint.local_master``:
        its TaskExecutors start while this module loads)."""
        self.config = config
        self._stop = threading.Event()
        #: HA services (ZooKeeper; connecting may fail with a clear error); None without HA
        self.ha: HighAvailabilityServices | None = (
            ha_services if ha_services is not None else (create_ha_services(config) if ha_enabled(config) else None)
        )
        self.leadership: DispatcherLeadership | None = None
        self._step_down_lock = threading.Lock()
        self.stepping_down = False
        self.rm = resource_manager or create_resource_manager(
            config,
            local_taskexecutors=local_taskexecutors,
            workdir=workdir,
            inherit_stdout=inherit_stdout,
            driver=driver,
            high_availability=self.ha is not None,
        )
        self.driver = self.rm.driver
        self._rm_started = resource_manager is not None
        rest_host = config.get(RestOptions.BIND_ADDRESS) or config.get(RestOptions.ADDRESS) or "127.0.0.1"
        if rest_host == "localhost":
            rest_host = "127.0.0.1"
        self.dispatcher = Dispatcher(
            config,
            LocalResourceManagerGateway(self.rm),
            rest_host=rest_host,
            rest_port=int(config.get(RestOptions.PORT)),
            on_shutdown_request=self._stop.set,
        )
        self.workdir = workdir
        self.local_taskexecutors = local_taskexecutors
        self.per_job = per_job
        self.client_pid = client_pid
        self.client_gone = client_gone
        self.client_wait_s = client_wait_s
        self._jobs_ended_at: float | None = None
        self._started_at = time.monotonic()
        self._swept = False  # a job cluster's unfinished checkpoints, deleted once at its stop
        self.application: ApplicationRunner | None = None
        if application:
            # deferred: the client and the DataStream API (httpx, ~0.3 s), for application mode only
            from yarnflink.entrypoint.application import ApplicationRunner

            self.application = ApplicationRunner(config, application[0], list(application[1:]))
        self.exit_code = 0

    def start(self) -> dict[str, object]:
        if not self._rm_started:
            self._rm_started = True
            self.rm.start()
        self.dispatcher.start()
        if self.ha is not None:  # serving already: a grant may come at once
            self.leadership = DispatcherLeadership(self.ha, self.dispatcher, self.rm, step_down=self.step_down)
            self.dispatcher.leadership = self.leadership
            self.leadership.start()
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
                log.info("the per-job cluster's job has ended and its client is gone (or done): shutting down")
                break
        if self.application is not None and self.application.done.is_set():
            self.exit_code = 0 if self.application.succeeded else 1
        elif self.per_job and self._job_states() and set(self._job_states()) != {"FINISHED"}:
            self.exit_code = 1  # YARN: the application ends FAILED, not SUCCEEDED

    def _job_states(self) -> list[str]:
        async def states() -> list[str]:
            return [str(e.archive["details"]["state"]) for e in self.dispatcher.jobs.values() if e.archive is not None]

        try:
            return self.dispatcher.call(states)
        except Exception:  # noqa: BLE001 - the dispatcher is gone: nothing known
            return []

    def _job_cluster_done(self) -> bool:
        """Every job ended and the client is gone (or it went away without submitting one)."""
        if self.client_pid is not None and pid_alive(self.client_pid):
            return False

        async def ended() -> bool | None:
            entries = list(self.dispatcher.jobs.values())
            return all(e.archive is not None for e in entries) if entries else None

        state = self.dispatcher.call(ended)
        if state is None:  # no job yet: only a client that went away will never submit one
            if self.client_gone is not None:  # a remote client: gone when it says so, or silent too long
                return self.client_gone() or time.monotonic() - self._started_at >= self.client_wait_s
            return self.client_pid is not None
        if not state:
            self._jobs_ended_at = None
            return False
        if self.client_gone is None:
            return True
        now = time.monotonic()
        if self._jobs_ended_at is None:
            self._jobs_ended_at = now
        return job_cluster_done_for_remote_client(self.client_gone(), now - self._jobs_ended_at, self.client_wait_s)

    def request_stop(self) -> None:
        self.rm.begin_stop()  # from the signal on: TaskExecutors that end are not replaced
        self._stop.set()

    def stop(self) -> None:
        self.rm.begin_stop()
        if (self.per_job or self.application is not None) and not self._swept:
            self._swept = True
            self._discard_unfinished_checkpoints()
        if self.leadership is not None:
            self.leadership.close()  # an orderly stop: the jobs' HA data stays for the next leader
        self.dispatcher.stop()
        if self.ha is not None:
            self.ha.close()  # leaves the election
        self.rm.stop()  # stops the driver's TaskExecutors too

    def _discard_unfinished_checkpoints(self) -> None:
        """A job cluster ends with its jobs: what their checkpoints in flight left goes (the
        completed ones stay: retained checkpoints)."""

        async def ended() -> list[tuple[str, str]]:
            dirs = []
            for e in self.dispatcher.jobs.values():
                user = (e.job_config.get("execution-config") or {}).get("user-config") or {}
                directory = user.get(CheckpointingOptions.CHECKPOINTS_DIRECTORY.key) or self.config.get(
                    CheckpointingOptions.CHECKPOINTS_DIRECTORY
                )
                if e.archive is not None and directory:
                    dirs.append((str(directory), e.job_id))
            return dirs

        try:
            jobs = self.dispatcher.call(ended)
        except Exception:  # noqa: BLE001 - the dispatcher is gone: nothing known
            return
        for directory, job_id in jobs:
            try:
                for url in FsCheckpointStorage(directory, job_id).discard_unfinished():
                    log.info("job %s: deleted %s (a checkpoint in flight when the job ended)", job_id, url)
            except Exception as e:  # noqa: BLE001 - leftovers are harmless; say so
                log.warning("job %s: cannot clean its unfinished checkpoints in %s: %s", job_id, directory, e)

    # ------------------------------------------------------------------ HA
    def step_down(self, reason: str) -> None:
        """Leadership lost (revoked, ZooKeeper session LOST, connection SUSPENDED unless
        tolerated): stop acting, then replace this process by a fresh one that rejoins the
        election as a standby. The ResourceManager and every JobMaster refuse every RPC from the
        first line on; JobMasters are suspended (their slots freed, so their tasks are cancelled;
        the jobs' HA data stays); the ZooKeeper session is closed (bounded), which frees this
        process's latch at once; then ``os.execv`` with the original command line. Runs at most once."""
        with self._step_down_lock:
            if self.stepping_down or self._stop.is_set():
                return
            self.stepping_down = True
        log.warning("lost leadership: %s", reason)
        self.rm.revoke_leadership()
        self.dispatcher.fence_job_masters()
        self.dispatcher.suspend_jobs(f"the master lost its leadership: {reason}")
        if self.ha is not None:
            closer = threading.Thread(target=self.ha.close, name="ha-close", daemon=True)
            closer.start()
            closer.join(2.0)
        self._replace_process()

    def _replace_process(self) -> None:
        argv = [sys.executable] + list(getattr(sys, "orig_argv", sys.argv)[1:])
        log.warning("stepping down: restarting as a standby (%s)", " ".join(argv[:6]))
        for handler in logging.getLogger().handlers:
            try:
                handler.flush()
            except Exception:  # noqa: BLE001
                pass
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, argv)


def job_cluster_done_for_remote_client(client_gone: bool, ended_for_s: float, client_wait_s: float) -> bool:
    """Pure: a per-job cluster whose every job ended ends once its client has the results (it says
    so), or after ``client_wait_s`` (a client that went away must not keep the cluster)."""
    if client_gone:
        return True
    if ended_for_s >= client_wait_s:
        log.warning("the client did not fetch its result within %.0fs: shutting down", client_wait_s)
        return True
    return False


def _record_zookeeper_session(master: MasterProcess) -> None:
    """For the watching process: this master's ZooKeeper session, closed by it if we die."""
    client = getattr(master.ha, "client", None)
    if client is None:
        return
    from yarnflink.highavailability.zookeeper.session_file import write_session_file  # deferred: kazoo

    try:
        write_session_file(client, SESSION_FILE)
    except OSError as e:  # the session then ends by its timeout, as without the watcher
        log.warning("cannot record the ZooKeeper session in %s: %s", SESSION_FILE, e)


def _not_started(message: str, yarn_side: YarnMasterSide | None) -> int:
    log.error("master not started: %s", message)
    print(f"yarnflink master: error: {message}", file=sys.stderr)
    if yarn_side is not None:
        yarn_side.publish_error(message)
    return 1


def run_master(
    config: Configuration,
    *,
    local_taskexecutors: int | None,
    info_file: Path | None,
    workdir: Path | None,
    inherit_stdout: bool = False,
    per_job: bool = False,
    client_pid: int | None = None,
    application: Sequence[str] | None = None,
    yarn: bool = False,
    yarn_standby: bool = False,
    await_client: bool = False,
    yarn_child: bool = False,
    resource_manager: ResourceManager | None = None,
) -> int:
    """``await_client`` (YARN per-job, attached): once its jobs ended the master waits for the
    client to say it has the results (at most ``yarn.per-job.result-timeout``). On YARN with
    ZooKeeper HA the ApplicationMaster's script runs the master as a watched child (``yarn_child``:
    ``yarnflink.deployment.yarn.supervisor``), which ends a dead master's ZooKeeper session at once.
    ``resource_manager``: started already, with its local TaskExecutors (``local_master.py``);
    stopped here if the master does not start."""
    if yarn and not yarn_child and ha_enabled(config):
        return supervise_master(config)
    driver: ResourceManagerDriver | None = None
    yarn_side = None
    if yarn:  # inside a skein ApplicationMaster: TaskExecutors are YARN containers
        from yarnflink.deployment.yarn.master import prepare as prepare_yarn  # deferred: YARN only

        yarn_side = prepare_yarn(config, standby=yarn_standby)
        config, driver = yarn_side.config, yarn_side.driver
    config = prepare_master(config, workdir or Path.cwd())  # the cluster's TLS material and REST token
    try:
        check_master_storage(config)  # an unreachable HA/checkpoint storage: one clear error naming it
        master = MasterProcess(
            config,
            local_taskexecutors=local_taskexecutors,
            workdir=workdir,
            inherit_stdout=inherit_stdout,
            per_job=per_job,
            client_pid=client_pid,
            application=application,
            driver=driver,
            client_gone=yarn_side.client_gone if yarn_side is not None and per_job and await_client else None,
            client_wait_s=config.get_seconds(YarnConfigOptions.PER_JOB_RESULT_TIMEOUT) or 300.0,
            resource_manager=resource_manager,
        )
    except (HighAvailabilityError, StorageCheckError, OSError) as e:  # a clear message, no traceback
        if resource_manager is not None:
            resource_manager.stop()  # and its TaskExecutors
        return _not_started(str(e), yarn_side)
    except Exception as e:  # YARN: whatever it is, the client hears it (not a dead ApplicationMaster)
        if resource_manager is not None:
            resource_manager.stop()
        if yarn_side is None:
            raise
        log.exception("master not started")
        return _not_started(f"{type(e).__name__}: {e}", yarn_side)
    if yarn_child:
        _record_zookeeper_session(master)
    signal.signal(signal.SIGTERM, lambda *_: master.request_stop())
    signal.signal(signal.SIGINT, lambda *_: master.request_stop())
    info = master.start()
    if master.ha is not None:  # clients find (and `session stop` stops) every master of the cluster
        announce_process(master.ha, "master", {"rest_url": info["rest_url"], "rpc_address": info["rpc_address"]})
    if yarn_side is not None:
        yarn_side.publish(info)  # the REST address, in the YARN application's key-value store
    if info_file is not None:  # before the log line: whoever reads the log may read the file next
        tmp = info_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(info))
        os.replace(tmp, info_file)  # atomic: a reader never sees half a file
    log.info("master started: %s", info)
    try:
        master.wait()
    finally:
        log.info("master stopping")
        master.stop()
        log.info("master stopped")
        if yarn_child:  # an orderly stop closed the session: nothing for the watcher to close
            SESSION_FILE.unlink(missing_ok=True)
    return master.exit_code


def run_master_from_args(
    args: argparse.Namespace, config: Configuration | None = None, resource_manager: ResourceManager | None = None
) -> int:
    """Runs the master the parsed flags of ``add_master_arguments`` describe (ConfigError for a
    bad configuration); ``config``: already loaded (``master_configuration``), ``resource_manager``:
    already started (``entrypoint/local_master.py``)."""
    return run_master(
        master_configuration(args) if config is None else config,
        local_taskexecutors=args.local_taskexecutors,
        info_file=args.info_file,
        workdir=args.workdir,
        inherit_stdout=args.inherit_stdout,
        per_job=args.per_job,
        client_pid=args.client_pid,
        application=[args.application, *args.application_arg] if args.application else None,
        yarn=args.yarn,
        yarn_standby=args.yarn_standby,
        await_client=args.await_client,
        yarn_child=args.yarn_child,
        resource_manager=resource_manager,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m yarnflink.entrypoint.master`` takes the flags of ``yarnflink master start``: the
    local deployment starts its master so, without loading the command line's modules (client,
    deployments, DataStream API), which a master does not use."""
    return run_main("yarnflink.entrypoint.master", "master", add_master_arguments, run_master_from_args, argv)


if __name__ == "__main__":
    exit_stopped(main())  # stopped in order (or not started): no interpreter teardown to wait for
