"""``yarnflink session start|list|stop`` and ``yarnflink run --per-job|--application`` with
``--target yarn`` (called by ``yarnflink.cli.main``)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from yarnflink.common.config import Configuration, load_configuration
from yarnflink.deployment.local.options import LocalClusterOptions
from yarnflink.deployment.yarn import YarnDeploymentError
from yarnflink.deployment.yarn.client import (
    ClientFactory,
    _factory,
    last_session,
    list_clusters,
    stop_cluster,
    submit_cluster,
)
from yarnflink.deployment.yarn.logs import ContainerLog, aggregated, container_logs, http_get, read_log
from yarnflink.deployment.yarn.options import YarnConfigOptions
from yarnflink.deployment.yarn.spec import STANDBY_REFUSED, TASKEXECUTOR_SERVICE, ClusterRequest
from yarnflink.jobmaster.options import JobManagerOptions
from yarnflink.taskexecutor.options import TaskManagerOptions


def add_yarn_target_arguments(p: argparse.ArgumentParser) -> None:
    """``--target yarn`` / ``-yid APPID`` for the commands that talk to a running cluster."""
    p.add_argument(
        "--target",
        choices=["local", "yarn"],
        default="local",
        help="yarn: the last YARN session started (or -yid)",
    )
    p.add_argument("-yid", "--application-id", metavar="APPID", help="the cluster of this YARN application")


def cmd_yarn_logs(
    args: argparse.Namespace,
    client_factory: ClientFactory | None = None,
    fetch: Callable[[str], str] = http_get,
    read_aggregated: Callable[[str, ContainerLog], str] = aggregated,
) -> int:
    """``yarnflink logs -yid APPID [-t N|taskexecutor_N] [-n LINES] [--list]`` (a container's
    stdout and log are one file on YARN, so ``--stdout`` changes nothing)."""
    config = load_configuration(args.conf, args.dynamic)
    app_id = args.application_id
    if app_id is None:
        last = last_session()
        if last is None:
            raise YarnDeploymentError("no YARN session: pass -yid APPLICATION_ID")
        app_id = last.app_id
    logs = container_logs(_factory(client_factory)(config), app_id)
    if args.list:
        for log in logs:
            print(f"{log.name:<16} {log.container_id:<40} {log.file}")
        return 0
    wanted = args.taskexecutor
    if wanted is None:
        chosen = [log for log in logs if log.name == "master"]
    else:
        name = f"{TASKEXECUTOR_SERVICE}_{wanted}" if wanted.isdigit() else wanted
        chosen = [log for log in logs if name in (log.name, log.container_id)]
    if not chosen:
        known = ", ".join(log.name for log in logs) or "none"
        raise YarnDeploymentError(f"no log of {wanted or 'the master'} in {app_id}; the containers are: {known}")
    text = read_log(app_id, chosen[0], fetch, read_aggregated)
    lines = text.splitlines(keepends=True)
    print("".join(lines[-args.lines :] if args.lines else lines), end="")
    return 0


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise YarnDeploymentError(f"{name} must be a positive integer, got {value}")


def session_config(args: argparse.Namespace, config: Configuration) -> Configuration:
    """The session's configuration with the command line's YARN options applied."""
    config = config.copy()
    if args.slots:
        config.set(TaskManagerOptions.NUM_TASK_SLOTS, str(args.slots))
    if args.jm_memory:
        config.set(JobManagerOptions.TOTAL_PROCESS_MEMORY, f"{args.jm_memory}m")
    if args.tm_memory:
        config.set(TaskManagerOptions.TOTAL_PROCESS_MEMORY, f"{args.tm_memory}m")
    if args.queue:
        config.set(YarnConfigOptions.APPLICATION_QUEUE, args.queue)
    if args.name:
        config.set(YarnConfigOptions.APPLICATION_NAME, args.name)
    return config


def cmd_yarn_session(args: argparse.Namespace, client_factory: ClientFactory | None = None) -> int:
    config = load_configuration(args.conf, args.dynamic)
    if args.session_command == "start":
        for name, value in (
            ("-n/--taskexecutors", args.taskexecutors),
            ("-s/--slots", args.slots),
            ("--jm-memory", args.jm_memory),
            ("--tm-memory", args.tm_memory),
        ):
            _positive(name, value)
        if args.standby < 0:
            raise YarnDeploymentError(f"--standby must be 0 or more, got {args.standby}")
        if args.standby > 0:
            raise YarnDeploymentError(STANDBY_REFUSED)
        config = session_config(args, config)
        n = args.taskexecutors or int(config.get(LocalClusterOptions.NUMBER_TASKMANAGER))
        request = ClusterRequest(mode="session", taskexecutors=n, standby=args.standby)
        cluster = submit_cluster(config, request, client_factory=client_factory, wait_rest=not args.detached)
        print(
            f"YARN application {cluster.app_id} submitted: session with {n} TaskExecutors "
            f"({config.get(TaskManagerOptions.NUM_TASK_SLOTS)} slots each)."
        )
        if cluster.rest_url:
            print(f"REST address: {cluster.rest_url}")
        print(f"Run jobs with: yarnflink run -yid {cluster.app_id} job.py")
        print(f"Stop it with: yarnflink session stop {cluster.app_id}")
        return 0
    if args.session_command == "list":
        apps = list_clusters(config, client_factory=client_factory)
        if not apps:
            print("No YARN sessions.")
        for a in apps:
            print(f"{a.id}  {str(a.state):<9} {a.name}  queue {a.queue}  {a.tracking_url or ''}")
        return 0
    stop_cluster(config, args.session_id, client_factory=client_factory)
    print(f"YARN application {args.session_id} stopped.")
    return 0


def submit_job_cluster(
    args: argparse.Namespace, config: Configuration, client_factory: ClientFactory | None = None
) -> tuple[int | None, str | None, str | None]:
    """Per-job: starts the application and returns (None, its REST URL, its id): the caller runs the
    job file against it (and stops it if no job was submitted); the master ends when the job has
    ended. Application: the job file runs in the ApplicationMaster; returns (exit code, None, None)
    once it is submitted (-d) or has ended."""
    n = args.taskexecutors or int(config.get(LocalClusterOptions.NUMBER_TASKMANAGER))
    if args.application:
        request = ClusterRequest(mode="application", taskexecutors=n, job_file=args.job, job_args=list(args.args))
        cluster = submit_cluster(config, request, client_factory=client_factory, wait_rest=False)
        print(f"YARN application {cluster.app_id} submitted (application mode).", file=sys.stderr)
        if args.detached:
            return 0, None, None
        state, final, diagnostics = wait_for_application(_factory(client_factory)(config), cluster.app_id)
        print(
            f"YARN application {cluster.app_id} {state} ({final}){': ' + diagnostics if diagnostics else ''}",
            file=sys.stderr,
        )
        return (0 if final == "SUCCEEDED" else 1), None, None
    request = ClusterRequest(mode="per-job", taskexecutors=n, attached=not args.detached)
    cluster = submit_cluster(config, request, client_factory=client_factory)
    print(f"YARN application {cluster.app_id} started for this job; REST address {cluster.rest_url}", file=sys.stderr)
    return None, cluster.rest_url, cluster.app_id


def wait_for_application(client: Any, app_id: str, poll: float = 2.0) -> tuple[str, str, str]:
    while True:
        report = client.application_report(app_id)
        if str(report.state) in ("FINISHED", "FAILED", "KILLED"):
            return str(report.state), str(report.final_status), report.diagnostics or ""
        time.sleep(poll)
