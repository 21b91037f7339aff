"""The master of a local cluster (``python -m yarnflink.entrypoint.local_master``, the flags of
``yarnflink master start``): its ResourceManager, and with it the TaskExecutor processes, start
first; the rest of the master (REST server, Dispatcher) loads while they start. A master that
waited for its own imports before starting them made a local session ~1 s slower on 2 cores (the
TaskExecutors' imports ran after the master's instead of beside them).

Only a master that starts local TaskExecutors and is neither on YARN nor highly available starts
so; any other runs as ``yarnflink.entrypoint.master`` does."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from yarnflink.common.config import ConfigError, Configuration, load_configuration
from yarnflink.entrypoint.flags import add_master_arguments
from yarnflink.entrypoint.process import exit_stopped, setup_logging
from yarnflink.entrypoint.resource_manager import create_resource_manager
from yarnflink.highavailability import ha_enabled
from yarnflink.highavailability.options import HighAvailabilityOptions
from yarnflink.resourcemanager.resourcemanager import ResourceManager
from yarnflink.security import prepare_master


def starts_early(args: argparse.Namespace, config: Configuration) -> bool:
    """Pure: whether this master starts its ResourceManager before loading the rest."""
    return args.local_taskexecutors is not None and not args.yarn and not ha_enabled(config)


def run(args: argparse.Namespace) -> int:
    setup_logging(args.log_file)
    config = load_configuration(args.conf, args.dynamic)
    if args.ha is not None:
        config.set(HighAvailabilityOptions.HA_MODE, args.ha.upper())
    rm: ResourceManager | None = None
    if starts_early(args, config):
        config = prepare_master(config, args.workdir or Path.cwd())  # the RPC server's TLS material
        rm = create_resource_manager(
            config,
            local_taskexecutors=args.local_taskexecutors,
            workdir=args.workdir,
            inherit_stdout=args.inherit_stdout,
        )
        rm.start()  # the TaskExecutor processes start now, while the rest of the master loads
    # deferred: the rest of the master (REST server, Dispatcher) loads while the TaskExecutors start
    from yarnflink.entrypoint.master import run_master

    return run_master(
        config,
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
        resource_manager=rm,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m yarnflink.entrypoint.local_master")
    add_master_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except ConfigError as e:
        print(f"yarnflink master: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    exit_stopped(main())  # stopped in order (or not started): no interpreter teardown to wait for
