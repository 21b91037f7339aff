"""The command-line flags of the cluster's processes, apart from the processes' modules: the
command line (``yarnflink master start``, ``yarnflink taskexecutor start``) parses them without
loading a master or a TaskExecutor (the master alone is ~1.5 s of imports)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from yarnflink.common.config import ConfigError, Configuration, load_configuration
from yarnflink.entrypoint.process import setup_logging
from yarnflink.highavailability.options import HighAvailabilityOptions


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """``--conf FILE`` and ``-D KEY=VALUE`` (repeatable): every command and process takes them."""
    parser.add_argument("--conf", metavar="FILE", help="configuration file (default: conf/yarnflink.yaml)")
    parser.add_argument(
        "-D",
        dest="dynamic",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="configuration override, e.g. -D parallelism.default=4 (repeatable)",
    )


def run_main(
    prog: str,
    name: str,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    run: Callable[[argparse.Namespace], int],
    argv: Sequence[str] | None = None,
) -> int:
    """The ``main`` of process ``name`` (``python -m prog``): parses ``argv`` with
    ``add_arguments``' flags and runs ``run``; a configuration error is printed (exit code 2), an
    interrupt exits with 130."""
    parser = argparse.ArgumentParser(prog=f"python -m {prog}")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except ConfigError as e:
        print(f"yarnflink {name}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def add_taskexecutor_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of a TaskExecutor process (``yarnflink taskexecutor start`` and ``main``)."""
    add_config_arguments(parser)
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
    add_config_arguments(parser)
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


def master_configuration(args: argparse.Namespace) -> Configuration:
    """The configuration the parsed flags of ``add_master_arguments`` give, logging set up first
    (ConfigError for a bad one)."""
    setup_logging(args.log_file)
    config = load_configuration(args.conf, args.dynamic)
    if args.ha is not None:
        config.set(HighAvailabilityOptions.HA_MODE, args.ha.upper())
    return config
