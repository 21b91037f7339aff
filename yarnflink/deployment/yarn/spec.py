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
import re
import shlex
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from yarnflink.common.config import ConfigOption, Configuration
from yarnflink.deployment.yarn import YarnDeploymentError, import_skein
from yarnflink.deployment.yarn.options import (
    CONTAINERIZED_MASTER_ENV_PREFIX,
    CONTAINERIZED_TASKMANAGER_ENV_PREFIX,
    YarnConfigOptions,
)
from yarnflink.jobmaster.options import JobManagerOptions
from yarnflink.security.options import SecurityOptions
from yarnflink.taskexecutor.options import TaskManagerOptions

TASKEXECUTOR_SERVICE = "taskexecutor"
STANDBY_SERVICE = "standby-master"
CONF_FILE = "yarnflink-conf.yaml"
REST_URL_KEY = "yarnflink.rest_url"  # skein key-value entry where the master publishes its REST address
START_ERROR_KEY = "yarnflink.start_error"  # why the master did not start
CLIENT_DONE_KEY = "yarnflink.client_done"  # per-job: the attached client has its results
MASTER_CONTAINER_KEY = "yarnflink.master_container"  # the master's container and NodeManager (its log)
MODES = ("session", "per-job", "application")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
STANDBY_REFUSED = (
    "--standby is not supported on YARN: the ApplicationMaster's attempt ends with its master "
    "process, and YARN then stops every container of the attempt, standbys included. YARN's next "
    "attempt is the standby there: set yarn.application-attempts (at most the ResourceManager's "
    "yarn.resourcemanager.am.max-attempts) with ZooKeeper HA (high-availability.type: zookeeper)"
)
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
    attached: bool = True  # per-job: the client waits for the result (the master waits for the client)
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
        if request.attached:
            cmd.append("--await-client")
    if request.mode == "application":
        if not request.job_file:
            raise YarnDeploymentError("application mode needs a job file")
        cmd += ["--application", Path(request.job_file).name]
        for a in request.job_args:
            cmd += ["--application-arg", a]
    # each component logs to its container's stdout/stderr (YARN's log aggregation collects them)
    return HADOOP_CLASSPATH_PRELUDE + "exec " + " ".join(shlex.quote(c) for c in cmd)


def taskexecutor_script(config: Configuration) -> str:
    py = shlex.quote(python_command(config))
    return HADOOP_CLASSPATH_PRELUDE + (
        f"exec {py} -m yarnflink.cli.main taskexecutor start --yarn --conf {CONF_FILE} "
        f'--master "$YARNFLINK_RM_ADDRESS" --resource-id "$YARNFLINK_RESOURCE_ID"'
    )


#: The first lines of every container's script: the Hadoop client's CLASSPATH (pyarrow's
#: HadoopFileSystem needs it for hdfs://). skein removes CLASSPATH from the ApplicationMaster's
#: script and YARN gives containers none, so it comes from ``containerized.*.env.CLASSPATH``
#: (shipped as YARNFLINK_CLASSPATH) or, as YARN's own applications get it, from the node's
#: ``hadoop classpath --glob``; HADOOP_HOME (where pyarrow looks for libhdfs) defaults to the
#: HADOOP_COMMON_HOME the NodeManager passes on.
HADOOP_CLASSPATH_PRELUDE = """\
if [ -z "${HADOOP_HOME:-}" ] && [ -n "${HADOOP_COMMON_HOME:-}" ]; then export HADOOP_HOME="$HADOOP_COMMON_HOME"; fi
if [ -n "${YARNFLINK_CLASSPATH:-}" ]; then
  export CLASSPATH="$YARNFLINK_CLASSPATH"
elif [ -z "${CLASSPATH:-}" ]; then
  _hadoop="$(command -v hadoop || true)"
  if [ -z "$_hadoop" ] && [ -x "${HADOOP_HOME:-}/bin/hadoop" ]; then _hadoop="$HADOOP_HOME/bin/hadoop"; fi
  if [ -n "$_hadoop" ]; then export CLASSPATH="$("$_hadoop" classpath --glob 2>/dev/null || true)"; fi
fi
"""


def container_env(config: Configuration, prefix: str) -> dict[str, str]:
    """The environment of a container: ``PYTHONUNBUFFERED`` and the ``<prefix>NAME: value`` keys
    (Flink's ``containerized.master.env.*`` / ``containerized.taskmanager.env.*``); a CLASSPATH given
    so travels as YARNFLINK_CLASSPATH (skein would drop it from the ApplicationMaster's script)."""
    env = {"PYTHONUNBUFFERED": "1"}
    for key, value in config.items():
        if not key.startswith(prefix):
            continue
        name = key[len(prefix) :]
        if not _ENV_NAME.fullmatch(name):
            raise YarnDeploymentError(f"{key}: {name!r} is not an environment variable name")
        env["YARNFLINK_CLASSPATH" if name == "CLASSPATH" else name] = str(value)
    return env


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
    master_env = container_env(config, CONTAINERIZED_MASTER_ENV_PREFIX)
    te_env = container_env(config, CONTAINERIZED_TASKMANAGER_ENV_PREFIX)
    jm_vcores = max(1, int(config.get(YarnConfigOptions.VCORES) or 1))
    master = skein.Master(
        resources=skein.Resources(memory=memory_mb(config, JobManagerOptions.TOTAL_PROCESS_MEMORY), vcores=jm_vcores),
        script=master_script(config, request),
        files=shipped,
        env=master_env,
    )
    tm_mb, tm_vcores = taskexecutor_resources(config)
    services = {
        TASKEXECUTOR_SERVICE: skein.Service(
            resources=skein.Resources(memory=tm_mb, vcores=tm_vcores),
            script=taskexecutor_script(config),
            instances=0,
            files=shipped,
            env=te_env,
            # the ResourceManager replaces a dead TaskExecutor itself: a container skein restarted
            # too would register under the dead worker's id, untracked (a leak)
            max_restarts=0,
            allow_failures=True,
        )
    }
    if request.standby > 0:
        raise YarnDeploymentError(STANDBY_REFUSED)
    name = config.get(YarnConfigOptions.APPLICATION_NAME) or f"yarnflink {request.mode}"
    return skein.ApplicationSpec(
        name=name,
        queue=config.get(YarnConfigOptions.APPLICATION_QUEUE) or "default",
        master=master,
        services=services,
        tags={"yarnflink", f"yarnflink-{request.mode}"},
        max_attempts=int(config.get(YarnConfigOptions.APPLICATION_ATTEMPTS)),
    )


def hadoop_property(hadoop_conf_dir: str | None, site: str, names: Sequence[str]) -> str | None:
    """The value of the first of ``names`` in ``$HADOOP_CONF_DIR/<site>`` (None when unknown)."""
    if not hadoop_conf_dir:
        return None
    path = Path(hadoop_conf_dir) / site
    if not path.is_file():
        return None
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return None
    for prop in root.iter("property"):
        if (prop.findtext("name") or "").strip() in names:
            return (prop.findtext("value") or "").strip()
    return None


def default_filesystem(hadoop_conf_dir: str | None) -> str | None:
    """``fs.defaultFS`` of the Hadoop client configuration (None when unknown)."""
    if not hadoop_conf_dir or not (Path(hadoop_conf_dir) / "core-site.xml").is_file():
        return None
    fs = hadoop_property(hadoop_conf_dir, "core-site.xml", ("fs.defaultFS", "fs.default.name"))
    return fs if fs is not None else "file:///"  # Hadoop's default


#: YARN's default of yarn.resourcemanager.am.max-attempts
YARN_DEFAULT_AM_MAX_ATTEMPTS = 2


def attempts_warning(config: Configuration, hadoop_conf_dir: str | None) -> str | None:
    """The warning for ``yarn.application-attempts`` above the ResourceManager's maximum (read
    from the client's yarn-site.xml, YARN's default 2 without one; skein exposes no RM setting):
    YARN would cap it without a word."""
    wanted = int(config.get(YarnConfigOptions.APPLICATION_ATTEMPTS))
    value = hadoop_property(hadoop_conf_dir, "yarn-site.xml", ("yarn.resourcemanager.am.max-attempts",))
    try:
        cap = int(value) if value else YARN_DEFAULT_AM_MAX_ATTEMPTS
    except ValueError:
        return None
    if wanted <= cap:
        return None
    where = f"{hadoop_conf_dir}/yarn-site.xml" if value else "YARN's default"
    return (
        f"yarn.application-attempts is {wanted} but yarn.resourcemanager.am.max-attempts is {cap} ({where}): "
        f"YARN starts the ApplicationMaster at most {cap} times"
    )


def check_staging_filesystem(hadoop_conf_dir: str | None) -> None:
    """skein 0.8.2 stages files to the default filesystem and fails on ``file:///``: say so early."""
    fs = default_filesystem(hadoop_conf_dir)
    if fs is not None and fs.startswith("file:"):
        raise YarnDeploymentError(
            f"fs.defaultFS is {fs} in {hadoop_conf_dir}/core-site.xml: skein stages the application's "
            f"files there and needs a distributed filesystem (hdfs://...)"
        )
