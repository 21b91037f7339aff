"""The ``yarnflink`` command line, with Flink's flags where they fit.

yarnflink run [-p N] [-d] [-D key=value]... [-m URL] job.py [args]
yarnflink run --application [-d] [-n N] job.py [args]   (the script runs in the cluster's master)
yarnflink info [--json] job.py [args]
yarnflink list | cancel JOBID
yarnflink savepoint JOBID [DIR] | stop [--savepointPath DIR] [--drain] JOBID
yarnflink run -s PATH [--allowNonRestoredState] job.py    (start from a savepoint, docs/SAVEPOINTS.md)
yarnflink logs [-t TASKEXECUTOR] [--stdout] [-n LINES] [--list]
yarnflink session start --target local [-n N] [-s SLOTS] | session list | session stop ID
yarnflink session start --target yarn ... | run -yid APPID | run --per-job --target yarn  (docs/yarn.md)
yarnflink master start ...           (the master process; used by the deployments)
yarnflink taskexecutor start --master HOST:PORT
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import runpy
import sys
import tempfile
import threading
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from yarnflink.api.common import ProgramAbortException
from yarnflink.api.options import DeploymentOptions
from yarnflink.api.pyflink_conflict import install_guard as install_pyflink_guard
from yarnflink.api.pyflink_conflict import remove_guard as remove_pyflink_guard
from yarnflink.checkpoint.options import SavepointConfigOptions
from yarnflink.client.console import ConsoleForwarder
from yarnflink.client.leader import RestLeaderResolver, register_ha
from yarnflink.client.logs import LogsError, run_logs
from yarnflink.client.rest_client import RestClient, RestClientError
from yarnflink.client.sessions import LocalSession, find_session, list_sessions
from yarnflink.common.config import ConfigError, Configuration, load_configuration
from yarnflink.deployment.local.cluster import (
    ClusterStartError,
    start_local_cluster,
    start_session,
    stop_process,
    stop_session,
)
from yarnflink.deployment.local.options import LocalClusterOptions
from yarnflink.deployment.yarn import YarnDeploymentError
from yarnflink.deployment.yarn.cli import (
    add_yarn_target_arguments,
    cmd_yarn_logs,
    cmd_yarn_session,
    submit_job_cluster,
)
from yarnflink.deployment.yarn.client import (
    register_credentials_by_url,
    release_job_cluster,
    rest_url_of,
    stop_cluster,
)
from yarnflink.entrypoint.flags import add_config_arguments, add_master_arguments, add_taskexecutor_arguments
from yarnflink.entrypoint.process import setup_logging
from yarnflink.highavailability import HighAvailabilityError, ha_enabled
from yarnflink.highavailability.options import HighAvailabilityOptions
from yarnflink.jobgraph.options import CoreOptions
from yarnflink.security.client import RestCredentials, register
from yarnflink.streaming.describe import describe_job_graph, job_graph_summary_json
from yarnflink.taskexecutor.options import TaskManagerOptions

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class CliError(Exception):
    """A problem the user can fix; printed without a traceback."""


def _common(p: argparse.ArgumentParser) -> None:
    add_config_arguments(p)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="yarnflink", description="Apache Flink's runtime, in Python, on YARN.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run a job file on a cluster")
    _common(run)
    run.add_argument("-p", "--parallelism", type=int, help="default parallelism of the job")
    run.add_argument("-d", "--detached", action="store_true", help="submit and return the job id")
    run.add_argument(
        "-m", "--jobmanager", metavar="URL", help="REST address of the cluster (default: the running session)"
    )
    run.add_argument("--session", metavar="ID", help="run on this session")
    run.add_argument(
        "-n",
        "--taskexecutors",
        type=int,
        default=None,
        help="TaskExecutors of the per-job local cluster (default: local.number-taskmanager)",
    )
    run.add_argument(
        "--application",
        action="store_true",
        help="application mode: start a local cluster whose master runs the job file and ends with it",
    )
    run.add_argument(
        "--target",
        choices=["local", "yarn"],
        default="local",
        help="where --per-job / --application clusters start, and -yid sessions live",
    )
    run.add_argument(
        "-yid",
        "--application-id",
        metavar="APPID",
        help="run on this YARN session (default with --target yarn: the last one started)",
    )
    run.add_argument(
        "--per-job",
        action="store_true",
        help="start a cluster for this job alone (with --target yarn: a YARN application)",
    )
    run.add_argument(
        "-s",
        "--fromSavepoint",
        dest="from_savepoint",
        metavar="PATH",
        help="start from this savepoint or retained checkpoint (execution.savepoint.path)",
    )
    run.add_argument(
        "--allowNonRestoredState",
        dest="allow_non_restored_state",
        action="store_true",
        help="skip state of operators the job no longer has (execution.savepoint.ignore-unclaimed-state)",
    )
    run.add_argument("job", help="the job file (a Python script calling env.execute())")
    run.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the job file")

    info = sub.add_parser("info", help="print the JobGraph of a job file")
    _common(info)
    info.add_argument("-p", "--parallelism", type=int)
    info.add_argument("--json", action="store_true", help="print JSON (Flink's /jobs/:id/plan shape)")
    info.add_argument("job")
    info.add_argument("args", nargs=argparse.REMAINDER)

    lst = sub.add_parser("list", help="list the jobs of the cluster")
    _common(lst)
    lst.add_argument("-m", "--jobmanager", metavar="URL")
    lst.add_argument("--session", metavar="ID")
    add_yarn_target_arguments(lst)

    cancel = sub.add_parser("cancel", help="cancel a job")
    _common(cancel)
    cancel.add_argument("-m", "--jobmanager", metavar="URL")
    cancel.add_argument("--session", metavar="ID")
    add_yarn_target_arguments(cancel)
    cancel.add_argument("job_id")

    savepoint = sub.add_parser("savepoint", help="trigger a savepoint of a running job and print its path")
    _common(savepoint)
    savepoint.add_argument("-m", "--jobmanager", metavar="URL")
    savepoint.add_argument("--session", metavar="ID")
    add_yarn_target_arguments(savepoint)
    savepoint.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="how long to wait for the savepoint (default 600)",
    )
    savepoint.add_argument("job_id")
    savepoint.add_argument(
        "target_directory", nargs="?", metavar="DIR", help="where to (default: execution.checkpointing.savepoint-dir)"
    )

    stop = sub.add_parser("stop", help="stop a job with a savepoint (the job ends FINISHED)")
    _common(stop)
    stop.add_argument("-m", "--jobmanager", metavar="URL")
    stop.add_argument("--session", metavar="ID")
    add_yarn_target_arguments(stop)
    stop.add_argument(
        "-p",
        "--savepointPath",
        dest="savepoint_path",
        metavar="DIR",
        help="where to (default: execution.checkpointing.savepoint-dir)",
    )
    stop.add_argument(
        "-d",
        "--drain",
        action="store_true",
        help="emit MAX_WATERMARK before the savepoint: every event-time timer and window fires "
        "(for a job that will not be resumed)",
    )
    stop.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="how long to wait for the savepoint and the job's end (default 600)",
    )
    stop.add_argument("job_id")

    logs = sub.add_parser("logs", help="show the log of the master or of a TaskExecutor")
    _common(logs)
    logs.add_argument("-m", "--jobmanager", metavar="URL")
    logs.add_argument("--session", metavar="ID", help="this session's logs (also after it stopped)")
    logs.add_argument(
        "--workdir",
        type=Path,
        metavar="DIR",
        help="read the log files in this cluster directory (e.g. a per-job cluster's)",
    )
    logs.add_argument(
        "-t",
        "--taskexecutor",
        metavar="ID|N",
        help="a TaskExecutor's log instead of the master's: its id, a unique prefix, or its number",
    )
    logs.add_argument("--stdout", action="store_true", help="the process's stdout/stderr (.out) instead of its log")
    logs.add_argument("-n", "--lines", type=int, metavar="N", help="only the last N lines")
    logs.add_argument("--list", action="store_true", help="list the log files")
    add_yarn_target_arguments(logs)

    session = sub.add_parser("session", help="start, list and stop session clusters")
    ssub = session.add_subparsers(dest="session_command", required=True, metavar="ACTION")
    start = ssub.add_parser("start", help="start a session cluster in the background")
    _common(start)
    start.add_argument("--target", choices=["local", "yarn"], default="local")
    start.add_argument("-n", "--taskexecutors", type=int, default=None)
    start.add_argument("-s", "--slots", type=int, default=None, help="slots per TaskExecutor")
    start.add_argument("--jm-memory", type=int, metavar="MB", help="YARN: master container memory")
    start.add_argument("--tm-memory", type=int, metavar="MB", help="YARN: TaskExecutor container memory")
    start.add_argument("--queue", help="YARN queue")
    start.add_argument("--name", help="YARN application name")
    start.add_argument(
        "--standby",
        type=int,
        default=0,
        metavar="N",
        help="standby masters beside the leader (ZooKeeper HA: needs high-availability.* in the configuration)",
    )
    start.add_argument(
        "-d",
        "--detached",
        action="store_true",
        help="YARN: return once submitted, without waiting for the REST address",
    )
    slist = ssub.add_parser("list", help="list sessions")
    slist.add_argument("--target", choices=["local", "yarn"], default="local")
    _common(slist)
    stop = ssub.add_parser("stop", help="stop a session (a YARN one by its application id)")
    _common(stop)
    stop.add_argument("session_id")

    master = sub.add_parser("master", help="run a master process (Dispatcher, ResourceManager, JobMasters)")
    msub = master.add_subparsers(dest="master_command", required=True, metavar="ACTION")
    add_master_arguments(msub.add_parser("start"))

    te = sub.add_parser("taskexecutor", help="run a TaskExecutor process")
    tsub = te.add_subparsers(dest="te_command", required=True, metavar="ACTION")
    add_taskexecutor_arguments(tsub.add_parser("start"))
    return parser


def _config(args: argparse.Namespace) -> Configuration:
    return load_configuration(args.conf, args.dynamic)


def _validate_positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise CliError(f"{name} must be a positive integer, got {value}")


# ---------------------------------------------------------------------- commands
def _cluster_url(args: argparse.Namespace, config: Configuration) -> str | None:
    if getattr(args, "jobmanager", None):
        url = args.jobmanager
        url = url if url.startswith("http") else f"http://{url}"
        register_credentials_by_url(url)  # a YARN session's token, without YARNFLINK_REST_TOKEN_FILE
        return _follow_ha_leader(config, url)
    if (
        not getattr(args, "session", None)
        and not getattr(args, "application_id", None)
        and getattr(args, "target", "local") != "yarn"
        and str(config.get(HighAvailabilityOptions.HA_MODE)) != "NONE"
    ):
        return _follow_ha_leader(config, None)  # the cluster of the configuration, found in ZooKeeper
    if getattr(args, "application_id", None) or getattr(args, "target", "local") == "yarn":
        return rest_url_of(config, getattr(args, "application_id", None))
    session = find_session(getattr(args, "session", None))
    if getattr(args, "session", None) and session is None:
        raise CliError(f"no session {args.session!r}; see 'yarnflink session list'")
    if session is not None and session.alive:
        return session.rest_url
    if session is not None and session.ha_config and getattr(args, "session", None):
        return _leader_of_replaced_session(session)
    return None


def _leader_of_replaced_session(session: LocalSession) -> str:
    """Every master the session file records is gone, but the cluster may live on in masters
    started to replace them: its leader comes from ZooKeeper, with the HA keys and the REST
    credentials the session file records (all masters of a cluster share them)."""
    config = Configuration(session.ha_config)
    try:
        url = _follow_ha_leader(config, None)
    except CliError as e:
        raise CliError(
            f"session {session.id}: none of the masters it started runs, and no leader was found in "
            f"ZooKeeper either: {e}"
        ) from None
    assert url is not None  # HA is on in a session's ha_config
    register(url, RestCredentials(session.token_file or None, session.rest_ca or None))
    return url


def _follow_ha_leader(config: Configuration, url: str | None) -> str | None:
    """With ZooKeeper HA in ``config``: the REST clients of this process follow the cluster's
    leader (from ``url`` on, or from the leader ZooKeeper names now)."""
    if not ha_enabled(config):
        return url

    if url is None:
        resolver = RestLeaderResolver(config)
        try:
            url = resolver.wait()
        except (TimeoutError, HighAvailabilityError) as e:
            raise CliError(
                f"high availability: {e} (high-availability.zookeeper.quorum "
                f"{config.get(HighAvailabilityOptions.HA_ZOOKEEPER_QUORUM)})"
            ) from None
        finally:
            resolver.close()
    register_ha([url], config)
    return url


def _run_job_file(job: str, job_args: Sequence[str]) -> None:
    path = Path(job)
    if not path.is_file():
        raise CliError(f"job file {job} does not exist")
    old_argv = sys.argv
    sys.argv = [str(path), *job_args]
    sys.path.insert(0, str(path.parent.resolve()))
    # apache-flink in this environment: `import pyflink` fails naming both (docs/PYFLINK.md)
    guard = install_pyflink_guard()
    try:
        runpy.run_path(str(path), run_name="__main__")
    finally:
        remove_pyflink_guard(guard)
        sys.argv = old_argv
        sys.path.pop(0)


#: What ``yarnflink run`` needs only once its cluster is up: the DataStream API (and with it
#: pyarrow and numpy) and the job executor, ~0.7 s of imports, loaded on a thread while a per-job
#: cluster starts (``_ModulesLoading``).
RUN_MODULES = ("yarnflink.api.environment", "yarnflink.client.executor")


class _ModulesLoading:
    """Imports modules on a thread while this one waits for something else (a cluster to start)."""

    def __init__(self, modules: Sequence[str]) -> None:
        self._thread = threading.Thread(target=self._load, args=(modules,), name="import", daemon=True)
        self._thread.start()

    @staticmethod
    def _load(modules: Sequence[str]) -> None:
        for m in modules:
            try:
                importlib.import_module(m)
            except Exception:  # noqa: BLE001 - the import below raises it again, where it is reported
                return

    def join(self) -> None:
        self._thread.join()


def cmd_run(args: argparse.Namespace) -> int:
    _validate_positive("-p/--parallelism", args.parallelism)
    _validate_positive("-n/--taskexecutors", args.taskexecutors)
    config = _config(args)
    if args.parallelism is not None:
        config.set(CoreOptions.DEFAULT_PARALLELISM, str(args.parallelism))
    if args.from_savepoint is not None:
        if not args.from_savepoint.strip():
            raise CliError("-s/--fromSavepoint needs a path")
        path = args.from_savepoint.strip()
        config.set(SavepointConfigOptions.SAVEPOINT_PATH, path if "://" in path else os.path.abspath(path))
    if args.allow_non_restored_state:
        config.set(SavepointConfigOptions.SAVEPOINT_IGNORE_UNCLAIMED_STATE, "true")
    yarn_app_id = None  # a per-job YARN application, stopped if this client submits no job to it
    if args.target == "yarn" and (args.application or args.per_job):
        code, url, yarn_app_id = submit_job_cluster(args, config)
        if code is not None:
            return code
    elif args.application:
        return _run_application(args, config)
    else:
        url = _cluster_url(args, config)
    cluster_proc = None
    console: ConsoleForwarder | None = None
    if url is None:
        n = args.taskexecutors or int(config.get(LocalClusterOptions.NUMBER_TASKMANAGER))
        slots = int(config.get(TaskManagerOptions.NUM_TASK_SLOTS))
        print(
            f"No session running: starting a per-job local cluster with {n} TaskExecutors "
            f"({slots} slot{'s' if slots != 1 else ''} each).",
            file=sys.stderr,
        )
        workdir = Path(tempfile.mkdtemp(prefix="yarnflink-perjob-"))
        loading = _ModulesLoading(RUN_MODULES)  # while the cluster starts (its processes wait on I/O at first)
        # a per-job cluster: it ends once its jobs ended and this client is gone (detached: at once)
        cluster_proc, info = start_local_cluster(
            config,
            taskexecutors=n,
            workdir=workdir,
            detached=args.detached,
            master_args=["--per-job", "--client-pid", str(os.getpid())],
        )
        loading.join()
        if args.detached:
            cluster_proc = None  # it stops by itself when its job ends
        url = str(info["rest_url"])
        print(f"Local cluster at {url} (logs in {workdir}).", file=sys.stderr)
        if not args.detached:  # what user functions print appears here, as with PyFlink
            console = ConsoleForwarder(workdir).start()
    if args.detached:
        config.set(DeploymentOptions.ATTACHED, "false")
    # deferred: RUN_MODULES (loaded already if this run started a per-job cluster)
    from yarnflink.api.environment import set_default_executor
    from yarnflink.client.executor import JobExecutionException, RestClusterExecutor

    executor = RestClusterExecutor(url, config, progress=None if args.detached else sys.stderr, console=console)
    set_default_executor(executor)
    try:
        try:
            _run_job_file(args.job, args.args)
        except JobExecutionException as e:
            print(f"The job failed:\n{e}", file=sys.stderr)
            return EXIT_FAILED
        except RestClientError as e:
            raise CliError(f"the cluster rejected the job: {e}") from None
        except SystemExit as e:
            if e.code not in (None, 0):
                raise CliError(f"job file {args.job} exited with status {e.code}") from None
        except (CliError, ConfigError):
            raise
        except Exception:
            tb = traceback.format_exc()
            raise CliError(f"job file {args.job} failed:\n{tb}") from None
        if not executor.submitted:
            raise CliError(
                f"job file {args.job} defined no job: it never called env.execute() "
                f"(or execute_async / execute_and_collect)"
            )
        if args.detached:
            for job_id in executor.submitted:
                print(f"Job has been submitted with JobID {job_id}")
        return EXIT_OK
    finally:
        set_default_executor(None)
        if console is not None:
            console.stop()
        if cluster_proc is not None:
            stop_process(cluster_proc.pid)
        if yarn_app_id is not None and not executor.submitted:
            stop_cluster(config, yarn_app_id)
        elif yarn_app_id is not None:  # attached: its master waited for this client's results
            release_job_cluster(config, yarn_app_id, attached=not args.detached)


def _run_application(args: argparse.Namespace, config: Configuration) -> int:
    if not Path(args.job).is_file():
        raise CliError(f"job file {args.job} does not exist")
    n = args.taskexecutors or int(config.get(LocalClusterOptions.NUMBER_TASKMANAGER))
    from yarnflink.entrypoint.application import run_application_cluster  # deferred: RUN_MODULES

    code = run_application_cluster(config, args.job, args.args, taskexecutors=n, detached=args.detached)
    if code != 0:
        print(f"The application failed (master exit status {code}).", file=sys.stderr)
    return EXIT_OK if code == 0 else EXIT_FAILED


def cmd_info(args: argparse.Namespace) -> int:
    config = _config(args)
    if args.parallelism is not None:
        _validate_positive("-p/--parallelism", args.parallelism)
        config.set(CoreOptions.DEFAULT_PARALLELISM, str(args.parallelism))
    from yarnflink.api.environment import PlanCaptureExecutor, set_default_executor  # deferred: RUN_MODULES

    capture = PlanCaptureExecutor(config)
    set_default_executor(capture)
    try:
        try:
            _run_job_file(args.job, args.args)
        except ProgramAbortException:
            pass
        except (CliError, ConfigError):
            raise
        except Exception:
            raise CliError(f"job file {args.job} failed:\n{traceback.format_exc()}") from None
    finally:
        set_default_executor(None)
    jg = capture.job_graph
    if jg is None:
        raise CliError(f"job file {args.job} defined no job: it never called env.execute()")
    print(json.dumps(job_graph_summary_json(jg), indent=2) if args.json else describe_job_graph(jg))
    return EXIT_OK


def _rest(args: argparse.Namespace) -> Any:
    url = _cluster_url(args, _config(args))
    if url is None:
        raise CliError("no cluster: start one with 'yarnflink session start' or pass -m URL")
    return RestClient(url)


def cmd_list(args: argparse.Namespace) -> int:
    with _rest(args) as rest:
        jobs = rest.jobs_overview()
        if not jobs:
            print("No jobs.")
        for j in sorted(jobs, key=lambda j: j["start-time"]):
            print(f"{j['jid']}  {j['state']:<10}  {j['name']}")
            if j["state"] == "FAILED":
                root = rest.exceptions(j["jid"]).get("root-exception")
                if root:
                    print("    " + root.rstrip().replace("\n", "\n    "))
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace) -> int:
    with _rest(args) as rest:
        try:
            rest.cancel(args.job_id)
        except RestClientError as e:
            raise CliError(str(e)) from None
    print(f"Cancelled job {args.job_id}.")
    return EXIT_OK


def _savepoint(args: argparse.Namespace, target: str | None, stop: bool) -> int:
    if args.timeout <= 0:
        raise CliError(f"--timeout must be positive, got {args.timeout}")
    if target is not None and "://" not in target:
        target = os.path.abspath(target)  # the master may run elsewhere: never relative
    with _rest(args) as rest:
        try:
            trigger = rest.trigger_savepoint(args.job_id, target, stop=stop, drain=getattr(args, "drain", False))
            drain = bool(getattr(args, "drain", False))
            print(
                f"Triggering savepoint for job {args.job_id}."
                if not stop
                else f"{'Draining' if drain else 'Suspending'} job {args.job_id} with a savepoint (trigger {trigger}).",
                file=sys.stderr,
                flush=True,
            )
            location = rest.wait_for_savepoint(args.job_id, trigger, timeout=args.timeout)
        except RestClientError as e:
            raise CliError(str(e)) from None
    print(f"Savepoint completed. Path: {location}")
    return EXIT_OK


def cmd_savepoint(args: argparse.Namespace) -> int:
    return _savepoint(args, args.target_directory, stop=False)


def cmd_stop(args: argparse.Namespace) -> int:
    return _savepoint(args, args.savepoint_path, stop=True)


def cmd_logs(args: argparse.Namespace) -> int:
    if args.application_id or args.target == "yarn":
        return cmd_yarn_logs(args)
    url = args.jobmanager if args.jobmanager else None
    if url and not url.startswith("http"):
        url = f"http://{url}"
    try:
        run_logs(args, url)
    except LogsError as e:
        raise CliError(str(e)) from None
    return EXIT_OK


def cmd_session(args: argparse.Namespace) -> int:
    if (
        args.session_command == "start"
        and args.target == "yarn"
        or args.session_command == "list"
        and args.target == "yarn"
        or args.session_command == "stop"
        and args.session_id.startswith("application_")
    ):
        return cmd_yarn_session(args)
    if args.session_command == "start":
        _validate_positive("-n/--taskexecutors", args.taskexecutors)
        _validate_positive("-s/--slots", args.slots)
        config = _config(args)
        n = args.taskexecutors or int(config.get(LocalClusterOptions.NUMBER_TASKMANAGER))
        slots = args.slots or int(config.get(TaskManagerOptions.NUM_TASK_SLOTS))
        if args.standby < 0:
            raise CliError(f"--standby must be 0 or more, got {args.standby}")
        s = start_session(config, n, slots, standby=args.standby)
        print(f"Session {s.id} started: {n} TaskExecutors with {slots} slots each.")
        if s.master_pids:
            print(
                f"High availability: {len(s.master_pids)} masters (1 leader, {s.standby} standby) elected "
                f"in ZooKeeper {HighAvailabilityOptions.HA_ZOOKEEPER_QUORUM.read(s.ha_config)}, cluster id "
                f"{HighAvailabilityOptions.HA_CLUSTER_ID.read(s.ha_config)}; clients follow the leader."
            )
        print(f"REST address: {s.rest_url}")
        if s.token_file:  # the CLI finds it by itself; the dashboard asks for it once
            print(f"REST token: in {s.token_file} (readable only by you)")
        print(f"Logs: {s.workdir}")
        print(f"Stop it with: yarnflink session stop {s.id}")
        return EXIT_OK
    if args.session_command == "list":
        sessions = list_sessions()
        if not sessions:
            print("No sessions.")
        for s in sessions:
            pids = f"pids {','.join(map(str, s.master_pids))} (HA)" if s.master_pids else f"pid {s.pid}"
            print(
                f"{s.id}  {'RUNNING' if s.alive else 'GONE':<8} {s.target:<6} {s.rest_url}  "
                f"{s.taskexecutors}x{s.slots} slots  {pids}"
            )
        return EXIT_OK
    session = find_session(args.session_id)
    if session is None:
        raise CliError(f"no session {args.session_id!r}; see 'yarnflink session list'")
    stop_session(session)
    print(f"Session {session.id} stopped.")
    return EXIT_OK


def cmd_master(args: argparse.Namespace) -> int:
    # deferred: a master's modules (REST server, JobMaster; ~1.5 s) load only in a master process
    from yarnflink.entrypoint.master import run_master_from_args

    return run_master_from_args(args)


def cmd_taskexecutor(args: argparse.Namespace) -> int:
    # deferred: a TaskExecutor's modules load only in a TaskExecutor process
    from yarnflink.entrypoint.taskexecutor import run_taskexecutor

    setup_logging(args.log_file)
    return run_taskexecutor(
        _config(args), args.master, resource_id=args.resource_id, parent_pid=args.parent_pid, yarn=args.yarn
    )


COMMANDS = {
    "run": cmd_run,
    "info": cmd_info,
    "list": cmd_list,
    "cancel": cmd_cancel,
    "logs": cmd_logs,
    "savepoint": cmd_savepoint,
    "stop": cmd_stop,
    "session": cmd_session,
    "master": cmd_master,
    "taskexecutor": cmd_taskexecutor,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (CliError, ConfigError, ClusterStartError, RestClientError, YarnDeploymentError) as e:
        print(f"yarnflink {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE if isinstance(e, ConfigError) else EXIT_FAILED
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
