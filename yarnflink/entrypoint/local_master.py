"""The master of a local cluster (``python -m yarnflink.entrypoint.local_master``, the flags of
``yarnflink master start``): its ResourceManager, and with it the TaskExecutor processes, start
first; the rest of the master (REST server, Dispatcher) loads while they start. A master that
waited for its own imports before starting them made a local session ~1 s slower on 2 cores (the
TaskExecutors' imports ran after the master's instead of beside them).

Only a master that starts local TaskExecutors and is neither on YARN nor highly available starts
so; any other runs as ``yarnflink.entrypoint.master`` does."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from yarnflink.common.config import Configuration
from yarnflink.entrypoint.flags import add_master_arguments, master_configuration, run_main
from yarnflink.entrypoint.process import exit_stopped
from yarnflink.entrypoint.resource_manager import create_resource_manager
from yarnflink.highavailability import ha_enabled
from yarnflink.resourcemanager.resourcemanager import ResourceManager
from yarnflink.security import prepare_master


def starts_early(args: argparse.Namespace, config: Configuration) -> bool:
    """Pure: whether this master starts its ResourceManager before loading the rest."""
    return args.local_taskexecutors is not None and not args.yarn and not ha_enabled(config)


def run(args: argparse.Namespace) -> int:
    config = master_configuration(args)
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
    from yarnflink.entrypoint.master import run_master_from_args

    return run_master_from_args(args, config, resource_manager=rm)


def main(argv: Sequence[str] | None = None) -> int:
    return run_main("yarnflink.entrypoint.local_master", "master", add_master_arguments, run, argv)


if __name__ == "__main__":
    exit_stopped(main())  # stopped in order (or not started): no interpreter teardown to wait for
