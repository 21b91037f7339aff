"""The TaskExecutor process (Flink's TaskManagerRunner).

Without HA it registers at the ResourceManager at ``master_address``. With
``high-availability.type: zookeeper`` it finds the ResourceManager's leader in ZooKeeper and follows
it from leader to leader (``master_address`` is then ignored).

``python -m yarnflink.entrypoint.taskexecutor`` takes the flags of ``yarnflink taskexecutor start``
(``yarnflink.entrypoint.flags``): the local deployment starts its TaskExecutors so, without loading the
command line's modules (client, deployments, DataStream API), which a TaskExecutor never uses.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import threading
from collections.abc import Sequence

from yarnflink.common.config import ConfigError, Configuration, load_configuration
from yarnflink.entrypoint.flags import add_taskexecutor_arguments, run_main
from yarnflink.entrypoint.process import exit_stopped, setup_logging
from yarnflink.highavailability import create_ha_services, ha_enabled
from yarnflink.highavailability.services import announce_process
from yarnflink.jobgraph.options import ExecutionOptions
from yarnflink.metrics.prometheus import start_reporter, stop_reporter
from yarnflink.metrics.taskexecutor import prometheus_samples
from yarnflink.network.options import NettyShuffleEnvironmentOptions
from yarnflink.operators.memory import tune_allocator
from yarnflink.resourcemanager.options import HeartbeatManagerOptions
from yarnflink.resourcemanager.resources import worker_spec_from_config
from yarnflink.security import prepare_taskexecutor
from yarnflink.spark.session import holder as spark_sessions
from yarnflink.taskexecutor.cancellation import CancellationSettings
from yarnflink.taskexecutor.options import TaskManagerOptions
from yarnflink.taskexecutor.stdout import install_line_stdout
from yarnflink.taskexecutor.taskexecutor import TaskExecutor

log = logging.getLogger(__name__)

#: The exit code of a TaskExecutor that failed fatally (a cancelled task's thread did not end
#: within task.cancellation.timeout); its driver (the ResourceManager's) starts a new one.
FATAL_ERROR_EXIT_CODE = 2


def exit_fatally(reason: str) -> None:
    """The process ends now, whatever its threads do: a task thread that ignores cancellation
    would keep a clean shutdown waiting forever."""
    log.critical("TaskExecutor exits with code %d: %s", FATAL_ERROR_EXIT_CODE, reason)
    for handler in logging.getLogger().handlers:
        try:
            handler.flush()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass
    os._exit(FATAL_ERROR_EXIT_CODE)


def run_taskexecutor(
    config: Configuration,
    master_address: str | None,
    *,
    resource_id: str | None = None,
    parent_pid: int | None = None,
    yarn: bool = False,
) -> int:
    if yarn:  # a container of a YARN application: its cluster id and this node's address
        from yarnflink.deployment.yarn.master import yarn_taskexecutor_config  # deferred: YARN only

        config = yarn_taskexecutor_config(config, os.environ, socket.getfqdn())
    if not master_address and not ha_enabled(config):
        raise ConfigError(
            "a TaskExecutor needs --master HOST:PORT (the ResourceManager's address) "
            "unless high-availability.type is ZOOKEEPER"
        )
    install_line_stdout()  # print() in user functions: whole lines, at once, in <id>.out
    # fewer page faults for the large temporary Arrow buffers of vectorized operators
    tune_allocator()
    prepare_taskexecutor(config)  # mutual TLS with the cluster's CA (security.ssl.internal.*)

    spark_sessions.set_process_config(config.to_dict())  # its spark.* keys reach its SparkSession
    cancellation = CancellationSettings.from_config(config)  # ConfigError names a bad value
    host = config.get(TaskManagerOptions.HOST) or "127.0.0.1"
    ha = None
    retriever = None
    job_leaders = None
    if ha_enabled(config):
        ha = create_ha_services(config)  # ConfigError / HighAvailabilityError name what is wrong
        retriever = ha.resource_manager_leader_retriever()
        job_leaders = ha.job_master_leader_retriever  # a job's tasks outlive its JobMaster leader
        if master_address:
            log.info(
                "high availability is on: the ResourceManager's leader comes from ZooKeeper, not from --master %s",
                master_address,
            )
        master_address = None
    te = TaskExecutor(
        master_address,
        host=host,
        rm_leader_retriever=retriever,
        rpc_port=int(config.get(TaskManagerOptions.RPC_PORT)),
        data_port=int(config.get(NettyShuffleEnvironmentOptions.DATA_PORT)),
        num_slots=int(config.get(TaskManagerOptions.NUM_TASK_SLOTS)),
        resource_id=resource_id,
        buffer_timeout_s=config.get_seconds(ExecutionOptions.BUFFER_TIMEOUT) or 0.1,
        max_buffers_per_channel=int(config.get(NettyShuffleEnvironmentOptions.NETWORK_BUFFERS_PER_CHANNEL)),
        max_bytes_per_channel=int(config.get(NettyShuffleEnvironmentOptions.NETWORK_MAX_BYTES_PER_CHANNEL)),
        total_resources=worker_spec_from_config(config).total,
        heartbeat_interval_s=config.get_seconds(HeartbeatManagerOptions.HEARTBEAT_INTERVAL) or 10.0,
        heartbeat_timeout_s=config.get_seconds(HeartbeatManagerOptions.HEARTBEAT_TIMEOUT) or 50.0,
        rpc_failure_threshold=int(config.get(HeartbeatManagerOptions.HEARTBEAT_RPC_FAILURE_THRESHOLD)),
        cancellation=cancellation,
        fatal_error=exit_fatally,
        job_leader_retrievers=job_leaders,
        jobmaster_reconnect_timeout_s=config.get_seconds(TaskManagerOptions.JOBMASTER_RECONNECT_TIMEOUT) or 60.0,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    te.start()
    if ha is not None:  # clients find (and `session stop` stops) every TaskExecutor of the cluster
        announce_process(ha, "taskexecutor", {"resource_id": te.resource_id, "rpc_address": te.address})
    reporter = start_reporter(config, lambda: prometheus_samples(te))  # metrics.reporter.prom.*
    log.info("TaskExecutor %s serving at %s, data at %s", te.resource_id, te.address, te.shuffle.address)
    while not stop.wait(0.5):
        # a TaskExecutor started by a master goes when that master goes, even after kill -9
        if parent_pid is not None and os.getppid() != parent_pid:
            log.warning("parent process %d is gone; stopping", parent_pid)
            break
    log.info("TaskExecutor %s stopping", te.resource_id)
    stop_reporter(reporter)
    te.stop()
    if ha is not None:
        ha.close()
    log.info("TaskExecutor %s stopped", te.resource_id)
    return 0


def _run_from_args(args: argparse.Namespace) -> int:
    setup_logging(args.log_file)
    config = load_configuration(args.conf, args.dynamic)
    return run_taskexecutor(
        config, args.master, resource_id=args.resource_id, parent_pid=args.parent_pid, yarn=args.yarn
    )


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(
        "yarnflink.entrypoint.taskexecutor", "taskexecutor", add_taskexecutor_arguments, _run_from_args, argv
    )


if __name__ == "__main__":
    exit_stopped(main())  # stopped in order (or not started): no interpreter teardown to wait for
