"""``yarnflink logs -yid APPID``: the logs of a YARN cluster's master and TaskExecutor containers.

Each process logs to its container's log directory (skein: the master's script to
``application.driver.log``, a service's to ``<service>.log``). While a container runs its
NodeManager serves the file (``/ws/v1/node/containerlogs/<container>/<file>``); once it ended and
YARN aggregated the logs, ``yarn logs`` reads them. The master publishes its own container and
NodeManager in the application's key-value store (``MASTER_CONTAINER_KEY``); the TaskExecutor
containers are skein's ``taskexecutor`` service.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from yarnflink.deployment.yarn import YarnDeploymentError
from yarnflink.deployment.yarn.spec import MASTER_CONTAINER_KEY, TASKEXECUTOR_SERVICE

MASTER_LOG = "application.driver.log"
TASKEXECUTOR_LOG = f"{TASKEXECUTOR_SERVICE}.log"


@dataclass(frozen=True)
class ContainerLog:
    name: str  # "master", or the skein container id ("taskexecutor_3")
    container_id: str  # YARN's container id
    node_http_address: str  # the NodeManager's web address ("" when unknown)
    file: str

    @property
    def url(self) -> str:
        return f"http://{self.node_http_address}/ws/v1/node/containerlogs/{self.container_id}/{self.file}"


def master_container_info(env: Mapping[str, str]) -> dict[str, str]:
    """Pure: the master's container as its environment names it (YARN sets these in every container)."""
    host, port = env.get("NM_HOST", ""), env.get("NM_HTTP_PORT", "")
    return {
        "container_id": env.get("CONTAINER_ID", ""),
        "node_http_address": f"{host}:{port}" if host and port else "",
    }


def container_logs(client: Any, app_id: str) -> list[ContainerLog]:
    """The master's log and every TaskExecutor container's, running or ended."""
    try:
        app = client.connect(app_id, wait=False)
        raw = app.kv.get(MASTER_CONTAINER_KEY)
        containers = app.get_containers(
            services=[TASKEXECUTOR_SERVICE], states=["WAITING", "REQUESTED", "RUNNING", "SUCCEEDED", "FAILED", "KILLED"]
        )
    except (ConnectionError, OSError) as e:
        raise YarnDeploymentError(
            f"YARN application {app_id} does not answer ({e}); once it ended: yarn logs -applicationId {app_id}"
        ) from None
    logs = []
    if raw:
        info = json.loads(raw.decode() if isinstance(raw, bytes) else str(raw))
        logs.append(ContainerLog("master", info["container_id"], info["node_http_address"], MASTER_LOG))
    for c in sorted(containers, key=lambda c: c.instance):
        logs.append(ContainerLog(c.id, c.yarn_container_id or "", c.yarn_node_http_address or "", TASKEXECUTOR_LOG))
    return logs


def http_get(url: str) -> str:
    import httpx  # the client's HTTP library

    resp = httpx.get(url, timeout=30, trust_env=False, follow_redirects=True)
    resp.raise_for_status()
    return resp.text


def aggregated(app_id: str, log: ContainerLog) -> str:
    """A log YARN aggregated (the container ended) through ``yarn logs``."""
    yarn = shutil.which("yarn")
    if yarn is None:
        raise YarnDeploymentError(f"the log of {log.name} needs 'yarn logs' (no yarn command on PATH)")
    out = subprocess.run(
        [yarn, "logs", "-applicationId", app_id, "-containerId", log.container_id, "-log_files", log.file],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if out.returncode != 0:
        raise YarnDeploymentError(f"yarn logs failed for {log.container_id}: {out.stderr.strip()}")
    return out.stdout


def read_log(
    app_id: str,
    log: ContainerLog,
    fetch: Callable[[str], str] = http_get,
    read_aggregated: Callable[[str, ContainerLog], str] = aggregated,
) -> str:
    """From the NodeManager while the container lives, else YARN's aggregated logs."""
    if log.node_http_address and log.container_id:
        try:
            return fetch(log.url)
        except Exception:  # noqa: BLE001 - the container (or its node) is gone: aggregated logs
            pass
    return read_aggregated(app_id, log)
