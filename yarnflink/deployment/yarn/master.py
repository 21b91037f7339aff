"""The ApplicationMaster side: what ``yarnflink master start --yarn`` changes when the master runs
as a skein ``Master`` script (``yarnflink.entrypoint.master.run_master`` calls ``prepare``).

It binds RPC and REST to this host (not loopback), takes free ports, defaults
``high-availability.cluster-id`` to the YARN application id, builds the YARN driver on the
ApplicationMaster's skein client and, once the master runs, publishes the REST address in the
application's key-value store (``spec.REST_URL_KEY``), where clients read it.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Mapping
from typing import Any

from yarnflink.common.config import Configuration
from yarnflink.deployment.yarn import import_skein
from yarnflink.deployment.yarn.driver import YarnResourceManagerDriver
from yarnflink.deployment.yarn.spec import REST_URL_KEY
from yarnflink.dispatcher.options import RestOptions
from yarnflink.highavailability.options import HighAvailabilityOptions
from yarnflink.jobmaster.options import JobManagerOptions
from yarnflink.taskexecutor.options import TaskManagerOptions

log = logging.getLogger(__name__)


def yarn_master_config(config: Configuration, env: Mapping[str, str], host: str) -> Configuration:
    """Pure: the master's configuration inside a container of application ``SKEIN_APPLICATION_ID``."""
    config = config.copy()
    if not config.contains(JobManagerOptions.ADDRESS):
        config.set(JobManagerOptions.ADDRESS, host)
    if not config.contains(RestOptions.ADDRESS):
        config.set(RestOptions.ADDRESS, host)
    if not config.contains(RestOptions.BIND_ADDRESS):
        config.set(RestOptions.BIND_ADDRESS, host)
    for port in (RestOptions.PORT, JobManagerOptions.PORT):
        if not config.contains(port):
            config.set(port, "0")  # many masters share a node: take free ports
    return with_application_cluster_id(config, env)


def with_application_cluster_id(config: Configuration, env: Mapping[str, str]) -> Configuration:
    """Pure: ``high-availability.cluster-id`` defaults to the YARN application id, in every process
    of the application (master and TaskExecutor containers alike: one id, or no TaskExecutor finds
    the leader)."""
    app_id = env.get("SKEIN_APPLICATION_ID")
    if app_id and not config.contains(HighAvailabilityOptions.HA_CLUSTER_ID):
        config = config.copy()
        config.set(HighAvailabilityOptions.HA_CLUSTER_ID, app_id)
    return config


def yarn_taskexecutor_config(config: Configuration, env: Mapping[str, str], host: str) -> Configuration:
    """Pure: a TaskExecutor's configuration inside a container of application ``SKEIN_APPLICATION_ID``:
    the application's cluster id and this node's name as its address (not loopback)."""
    config = with_application_cluster_id(config, env).copy()
    if not config.contains(TaskManagerOptions.HOST):
        config.set(TaskManagerOptions.HOST, host)
    return config


def prepare(
    config: Configuration, *, standby: bool = False, app_client: Any = None, env: Mapping[str, str] | None = None
) -> tuple[Configuration, YarnResourceManagerDriver, Callable[[dict[str, object]], None]]:
    """The master's configuration, its YARN driver, and the hook that publishes the started
    master's info (a standby master publishes nothing until the HA wiring makes it leader)."""
    env = os.environ if env is None else env
    if app_client is None:
        app_client = import_skein().ApplicationClient.from_current()
    config = yarn_master_config(config, env, socket.getfqdn())
    driver = YarnResourceManagerDriver(app_client)

    def publish(info: dict[str, object]) -> None:
        if standby:
            return
        app_client.kv[REST_URL_KEY] = str(info["rest_url"]).encode()
        log.info(
            "published the REST address %s for YARN application %s", info["rest_url"], env.get("SKEIN_APPLICATION_ID")
        )

    return config, driver, publish
