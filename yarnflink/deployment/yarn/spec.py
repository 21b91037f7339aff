"""The skein ApplicationSpec of a yarnflink cluster. Builds objects, starts nothing.

The ApplicationMaster runs the yarnflink master as a ``skein.Master`` script (so the application
lives as long as the master, not as long as its last container); TaskExecutors are the
``taskexecutor`` service with no instances, added one by one by the YARN driver; with ``standby``
masters a ``standby-master`` service runs them (they join the ZooKeeper election). The
configuration, the cluster's security material, the job file with its local modules and packed
Python environments travel as skein file resources.
"""

from __future__ import annotations

import os
import shlex
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from yarnflink.common.config import ConfigOption, Configuration
from yarnflink.deployment.yarn import YarnDeploymentError, import_skein
from yarnflink.deployment.yarn.options import YarnConfigOptions
from yarnflink.highavailability.options import HighAvailabilityOptions
from yarnflink.jobmaster.options import JobManagerOptions
from yarnflink.security.options import SecurityOptions
from yarnflink.taskexecutor.options import TaskManagerOptions

TASKEXECUTOR_SERVICE = "taskexecutor"
STANDBY_SERVICE = "standby-master"
CONF_FILE = "yarnflink-conf.yaml"
REST_URL_KEY = "yarnflink.rest_url"  # skein key-value entry where the master publishes its REST address
MODES = ("session", "per-job", "application")
_SECURITY_OPTIONS = (
    SecurityOptions.REST_TOKEN_FILE,
    SecurityOptions.SSL_INTERNAL_CA,
    SecurityOptions.SSL_INTERNAL_CERT,
    SecurityOptions.SSL_INTERNAL_KEY,
    SecurityOptions.SSL_REST_CERT,
    SecurityOptions.SSL_REST_KEY,
)
_MB = 1 << 20


@dataclass
class ClusterRequest:
    mode: str = "session"
    taskexecutors: int = 1
    standby: int = 0
    job_file: str | None = None  # application mode: run in the ApplicationMaster
    job_args: Sequence[str] = ()
    extra_files: dict[str, str] = field(default_factory=dict)  # name in the container -> local path


def memory_mb(config: Configuration, option: ConfigOption) -> int:
    return max(1, int(config.get(option)) // _MB)


def python_command(config: Configuration) -> str:
    exe = config.get(YarnConfigOptions.PYTHON_EXECUTABLE)
    if exe:
        return str(exe)
    archives = archive_names(config)
    return f"./{archives[0]}/bin/python" if archives else "python3"


def archive_names(config: Configuration) -> list[str]:
    """Container-side names of ``yarn.ship-archives`` (the basename without .tar.gz/.zip/...)."""
    names = []
    for a in _split(config.get(YarnConfigOptions.SHIP_ARCHIVES)):
        base = os.path.basename(a.rstrip("/"))
        for suffix in (".tar.gz", ".tgz", ".tar", ".zip"):
            if base.endswith(suffix):
                base = base[: -len(suffix)]
                break
        names.append(base)
    return names


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def job_files(job_file: str) -> dict[str, str]:
    """The job file and its local modules (the ``*.py`` files next to it), by container name."""
    path = Path(job_file).resolve()
    if not path.is_file():
        raise YarnDeploymentError(f"job file {job_file} does not exist")
    files = {p.name: str(p) for p in sorted(path.parent.glob("*.py"))}
    files[path.name] = str(path)
    return files


def ship_configuration(config: Configuration, staging: Path) -> tuple[Configuration, dict[str, str]]:
    """The configuration as containers see it (security files renamed to ``security-<name>``,
    relative to the container's directory) and the files to ship for it, including the config file."""
    shipped = config.copy()
    files: dict[str, str] = {}
    for opt in _SECURITY_OPTIONS:
        value = config.get(opt, None)
        if value and Path(str(value)).is_file():
            name = f"security-{Path(str(value)).name}"  # skein: file names, no directories
            files[name] = str(value)
            shipped.set(opt, name)
    staging.mkdir(parents=True, exist_ok=True)
    conf_path = staging / CONF_FILE
    conf_path.write_text(yaml.safe_dump(shipped.to_dict(), default_flow_style=False))
    os.chmod(conf_path, 0o600)
    files[CONF_FILE] = str(conf_path)
    return shipped, files


def master_script(config: Configuration, request: ClusterRequest, *, standby: bool = False) -> str:
    cmd = [
        python_command(config),
        "-m",
        "yarnflink.cli.main",
        "master",
        "start",
        "--yarn",
        "--conf",
        CONF_FILE,
        "--local-taskexecutors",
        str(request.taskexecutors),
    ]
    if standby:
        cmd.append("--yarn-standby")
    if request.mode == "per-job":
        cmd.append("--per-job")
    if request.mode == "application":
        if not request.job_file:
            raise YarnDeploymentError("application mode needs a job file")
        cmd += ["--application", Path(request.job_file).name]
        for a in request.job_args:
            cmd += ["--application-arg", a]
    # each component logs to its container's stdout/stderr (YARN's log aggregation collects them)
    return " ".join(shlex.quote(c) for c in cmd)


def taskexecutor_script(config: Configuration) -> str:
    py = shlex.quote(python_command(config))
    return (
        f"{py} -m yarnflink.cli.main taskexecutor start --conf {CONF_FILE} "
        f'--master "$YARNFLINK_RM_ADDRESS" --resource-id "$YARNFLINK_RESOURCE_ID"'
    )


def taskexecutor_resources(config: Configuration) -> tuple[int, int]:
    vcores = config.get(YarnConfigOptions.VCORES) or int(config.get(TaskManagerOptions.NUM_TASK_SLOTS))
    return memory_mb(config, TaskManagerOptions.TOTAL_PROCESS_MEMORY), int(vcores)


def build_application_spec(config: Configuration, request: ClusterRequest, files: dict[str, str]) -> Any:
    """``files``: container name -> local path (configuration, security material, job files)."""
    skein = import_skein()
    if request.mode not in MODES:
        raise YarnDeploymentError(f"unknown mode {request.mode!r}; one of {', '.join(MODES)}")
    shipped: dict[str, Any] = {name: skein.File(source=path) for name, path in files.items()}
    for src, name in zip(_split(config.get(YarnConfigOptions.SHIP_ARCHIVES)), archive_names(config)):
        shipped[name] = skein.File(source=src, type="archive")
    shipped.update({name: skein.File(source=path) for name, path in request.extra_files.items()})
    env = {"PYTHONUNBUFFERED": "1"}
    jm_vcores = max(1, int(config.get(YarnConfigOptions.VCORES) or 1))
    master = skein.Master(
        resources=skein.Resources(memory=memory_mb(config, JobManagerOptions.TOTAL_PROCESS_MEMORY), vcores=jm_vcores),
        script=master_script(config, request),
        files=shipped,
        env=env,
    )
    tm_mb, tm_vcores = taskexecutor_resources(config)
    services = {
        TASKEXECUTOR_SERVICE: skein.Service(
            resources=skein.Resources(memory=tm_mb, vcores=tm_vcores),
            script=taskexecutor_script(config),
            instances=0,
            files=shipped,
            env=env,
            max_restarts=-1,
            allow_failures=True,
        )
    }
    if request.standby > 0:
        if str(config.get(HighAvailabilityOptions.HA_MODE)).lower() != "zookeeper":
            raise YarnDeploymentError("--standby needs ZooKeeper HA: -D high-availability.type=zookeeper")
        services[STANDBY_SERVICE] = skein.Service(
            resources=master.resources,
            script=master_script(config, request, standby=True),
            instances=request.standby,
            files=shipped,
            env=env,
            max_restarts=-1,
            allow_failures=True,
        )
    name = config.get(YarnConfigOptions.APPLICATION_NAME) or f"yarnflink {request.mode}"
    return skein.ApplicationSpec(
        name=name,
        queue=config.get(YarnConfigOptions.APPLICATION_QUEUE) or "default",
        master=master,
        services=services,
        tags={"yarnflink", f"yarnflink-{request.mode}"},
        max_attempts=int(config.get(YarnConfigOptions.APPLICATION_ATTEMPTS)),
    )


def default_filesystem(hadoop_conf_dir: str | None) -> str | None:
    """``fs.defaultFS`` of the Hadoop client configuration (None when unknown)."""
    if not hadoop_conf_dir:
        return None
    site = Path(hadoop_conf_dir) / "core-site.xml"
    if not site.is_file():
        return None
    try:
        root = ET.parse(site).getroot()
    except ET.ParseError:
        return None
    for prop in root.iter("property"):
        if (prop.findtext("name") or "").strip() in ("fs.defaultFS", "fs.default.name"):
            return (prop.findtext("value") or "").strip()
    return "file:///"  # Hadoop's default


def check_staging_filesystem(hadoop_conf_dir: str | None) -> None:
    """skein 0.8.2 stages files to the default filesystem and fails on ``file:///``: say so early."""
    fs = default_filesystem(hadoop_conf_dir)
    if fs is not None and fs.startswith("file:"):
        raise YarnDeploymentError(
            f"fs.defaultFS is {fs} in {hadoop_conf_dir}/core-site.xml: skein stages the application's "
            f"files there and needs a distributed filesystem (hdfs://...)"
        )
