"""The command-line flags of the cluster's processes, apart from the processes' modules: the
command line (``yarnflink master start``, ``yarnflink taskexecutor start``) parses them without
loading a master or a TaskExecutor (the master alone is ~1.5 s of imports)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_taskexecutor_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of a TaskExecutor process (``yarnflink taskexecutor start`` and ``main``)."""
    parser.add_argument("--conf", metavar="FILE", help="configuration file (default: conf/yarnflink.yaml)")
    parser.add_argument(
        "-D",
        dest="dynamic",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="configuration override, e.g. -D parallelism.default=4 (repeatable)",
    )
    parser.add_argument(
        "--master",
        metavar="HOST:PORT",
        help="the master's RPC address (with high-availability.type: zookeeper the leader is "
        "found in ZooKeeper instead)",
    )
    parser.add_argument("--parent-pid", type=int)
    parser.add_argument("--resource-id")
    parser.add_argument("--yarn", action="store_true", help="run in a YARN container (the application's cluster id)")
    parser.add_argument("--log-file", type=Path)


def add_master_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of a master process (``yarnflink master start`` and ``main``)."""
    parser.add_argument("--conf", metavar="FILE", help="configuration file (default: conf/yarnflink.yaml)")
    parser.add_argument(
        "-D",
        dest="dynamic",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="configuration override, e.g. -D parallelism.default=4 (repeatable)",
    )
    parser.add_argument(
        "--local-taskexecutors",
        type=int,
        default=None,
        help="start TaskExecutor processes on demand, N at once (without: standalone)",
    )
    parser.add_argument("--per-job", action="store_true", help="end once the jobs ended and the client is gone")
    parser.add_argument("--client-pid", type=int)
    parser.add_argument("--application", metavar="JOB_FILE", help="run this job file in the master, end with it")
    parser.add_argument("--application-arg", action="append", default=[], metavar="ARG")
    parser.add_argument("--info-file", type=Path)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--log-file", type=Path)
    parser.add_argument("--inherit-stdout", action="store_true")
    parser.add_argument("--yarn", action="store_true", help="run as a skein ApplicationMaster (YARN containers)")
    parser.add_argument("--yarn-standby", action="store_true", help="a standby master of a YARN cluster")
    parser.add_argument(
        "--yarn-child", action="store_true", help="YARN with HA: the master run by the ApplicationMaster's watcher"
    )
    parser.add_argument(
        "--await-client",
        action="store_true",
        help="YARN per-job: once the jobs ended, wait for the attached client to fetch the results",
    )
    parser.add_argument(
        "--ha",
        choices=["zookeeper", "none"],
        type=str.lower,
        help="high availability: zookeeper elects a leader among the masters started so "
        "(short for -D high-availability.type=zookeeper)",
    )
