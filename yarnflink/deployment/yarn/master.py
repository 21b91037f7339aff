"""The ApplicationMaster side: what ``yarnflink master start --yarn`` changes when the master runs
as a skein ``Master`` script (``yarnflink.entrypoint.master.run_master`` calls ``prepare``).

It binds RPC and REST to this host (not loopback), takes free ports, defaults
``high-availability.cluster-id`` to the YARN application id, builds the YARN driver on the
ApplicationMaster's skein client and, once the master runs, publishes the REST address in the
application's key-value store (``spec.REST_URL_KEY``), where clients read it.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from yarnflink.common.config import Configuration
from yarnflink.deployment.yarn import import_skein
from yarnflink.deployment.yarn.driver import YarnResourceManagerDriver
from yarnflink.deployment.yarn.logs import master_container_info
from yarnflink.deployment.yarn.spec import CLIENT_DONE_KEY, MASTER_CONTAINER_KEY, REST_URL_KEY, START_ERROR_KEY
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


@dataclass
class YarnMasterSide:
    """What the master process does differently as a skein ApplicationMaster script."""

    config: Configuration
    driver: YarnResourceManagerDriver
    app_client: Any
    app_id: str
    standby: bool = False
    env: Mapping[str, str] = field(default_factory=dict)

    def publish(self, info: dict[str, object]) -> None:
        """The started master's REST address, where clients read it (a standby publishes nothing)."""
        if self.standby:
            return
        self.app_client.kv[MASTER_CONTAINER_KEY] = json.dumps(master_container_info(self.env)).encode()
        self.app_client.kv[REST_URL_KEY] = str(info["rest_url"]).encode()
        log.info("published the REST address %s for YARN application %s", info["rest_url"], self.app_id)

    def publish_error(self, message: str) -> None:
        """Why the master did not start, where the client reads it: the key-value store, and the
        application's diagnostics (the ApplicationMaster shuts down FAILED with it; YARN keeps it
        after the ApplicationMaster is gone)."""
        for what, act in (
            ("publish", lambda: self.app_client.kv.__setitem__(START_ERROR_KEY, message.encode())),
            (
                "report",
                lambda: self.app_client.shutdown("FAILED", diagnostics=f"yarnflink master not started: {message}"),
            ),
        ):
            try:
                act()
            except Exception as e:  # noqa: BLE001 - the message is in the log anyway
                log.warning("cannot %s the start error: %s", what, e)

    def client_gone(self) -> bool:
        """Per-job: the attached client said it has every result it wanted (``CLIENT_DONE_KEY``)."""
        try:
            return bool(self.app_client.kv.get(CLIENT_DONE_KEY))
        except Exception as e:  # noqa: BLE001 - the ApplicationMaster is going: so is the client's cluster
            log.info("cannot read the client's state: %s", e)
            return True


def prepare(
    config: Configuration, *, standby: bool = False, app_client: Any = None, env: Mapping[str, str] | None = None
) -> YarnMasterSide:
    """The master's configuration, its YARN driver and its hooks into the application."""
    env = os.environ if env is None else env
    if app_client is None:
        app_client = import_skein().ApplicationClient.from_current()
    config = yarn_master_config(config, env, socket.getfqdn())
    return YarnMasterSide(
        config, YarnResourceManagerDriver(app_client), app_client, env.get("SKEIN_APPLICATION_ID", ""), standby, env
    )
