"""A one-node HDFS + YARN on loopback ports, started from a Hadoop 3 distribution
(``HADOOP_HOME``) for ``integration/test_yarn.py``; nothing of Hadoop is in this repository.

``HadoopCluster(workdir).start()`` writes a configuration directory (core-, hdfs-, yarn-site.xml
with free 127.0.0.1 ports), formats the NameNode, starts NameNode, DataNode, ResourceManager and
NodeManager in the foreground as child processes (they die with the test process), and returns
once HDFS has left safe mode and the ResourceManager counts one live NodeManager. Java 17 needs
``--add-opens=java.base/java.lang=ALL-UNNAMED`` for the ResourceManager and the NodeManager;
skein needs ``fs.defaultFS=hdfs://...`` (it stages files there). ``environment()`` is what a
client (and pyarrow's HadoopFileSystem) needs: HADOOP_CONF_DIR, CLASSPATH, ARROW_LIBHDFS_DIR.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape

from tests.zk import die_with_parent, free_ports

if TYPE_CHECKING:
    from yarnflink.client.rest_client import RestClient
    from yarnflink.common.config import Configuration

JAVA17_OPENS = "--add-opens=java.base/java.lang=ALL-UNNAMED"
HOW_TO_RUN = (
    "needs Hadoop: HADOOP_HOME=/path/to/hadoop-3.x JAVA_HOME=/path/to/jdk .venv/bin/pytest -v integration/test_yarn.py "
    "(or an existing cluster: HADOOP_CONF_DIR=... YARNFLINK_IT_YARN=1)"
)


def java_major() -> int:
    """The major version of the java Hadoop runs (JAVA_HOME's, else the PATH's)."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else (shutil.which("java") or "java")
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    version = out.split('"')[1] if '"' in out else "0"
    parts = version.split(".")
    return int(parts[1]) if parts[0] == "1" and len(parts) > 1 else int(parts[0].split("-")[0] or 0)


def _site(props: dict[str, str]) -> str:
    body = "".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n" for k, v in props.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n'


class HadoopCluster:
    def __init__(self, workdir: Path, hadoop_home: str | None = None) -> None:
        self.home = Path(hadoop_home or os.environ["HADOOP_HOME"])
        self.workdir = workdir
        self.conf_dir = workdir / "conf"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        (
            self.nn_port,
            self.nn_http,
            self.dn_port,
            self.dn_http,
            self.dn_ipc,
            self.rm_port,
            self.rm_scheduler,
            self.rm_tracker,
            self.rm_admin,
            self.rm_web,
            self.nm_port,
            self.nm_localizer,
            self.nm_web,
        ) = free_ports(13)

    @property
    def default_fs(self) -> str:
        return f"hdfs://127.0.0.1:{self.nn_port}"

    def _bin(self, name: str) -> str:
        return str(self.home / "bin" / name)

    def write_configuration(self) -> None:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        for name in ("capacity-scheduler.xml", "log4j.properties"):
            src = self.home / "etc" / "hadoop" / name
            if src.is_file():
                shutil.copy(src, self.conf_dir / name)
        d = self.workdir
        (self.conf_dir / "core-site.xml").write_text(
            _site({"fs.defaultFS": self.default_fs, "hadoop.tmp.dir": str(d / "tmp")})
        )
        (self.conf_dir / "hdfs-site.xml").write_text(
            _site(
                {
                    "dfs.replication": "1",
                    "dfs.permissions.enabled": "false",
                    "dfs.namenode.name.dir": str(d / "name"),
                    "dfs.datanode.data.dir": str(d / "data"),
                    "dfs.namenode.http-address": f"127.0.0.1:{self.nn_http}",
                    "dfs.datanode.address": f"127.0.0.1:{self.dn_port}",
                    "dfs.datanode.http.address": f"127.0.0.1:{self.dn_http}",
                    "dfs.datanode.ipc.address": f"127.0.0.1:{self.dn_ipc}",
                }
            )
        )
        rm = "127.0.0.1"
        (self.conf_dir / "yarn-site.xml").write_text(
            _site(
                {
                    "yarn.resourcemanager.hostname": rm,
                    "yarn.resourcemanager.address": f"{rm}:{self.rm_port}",
                    "yarn.resourcemanager.scheduler.address": f"{rm}:{self.rm_scheduler}",
                    "yarn.resourcemanager.resource-tracker.address": f"{rm}:{self.rm_tracker}",
                    "yarn.resourcemanager.admin.address": f"{rm}:{self.rm_admin}",
                    "yarn.resourcemanager.webapp.address": f"{rm}:{self.rm_web}",
                    "yarn.resourcemanager.am.max-attempts": "2",
                    "yarn.nodemanager.hostname": "127.0.0.1",
                    "yarn.nodemanager.address": f"127.0.0.1:{self.nm_port}",
                    "yarn.nodemanager.localizer.address": f"127.0.0.1:{self.nm_localizer}",
                    "yarn.nodemanager.webapp.address": f"127.0.0.1:{self.nm_web}",
                    "yarn.nodemanager.resource.memory-mb": "12288",
                    "yarn.nodemanager.resource.cpu-vcores": "16",
                    "yarn.scheduler.minimum-allocation-mb": "128",
                    "yarn.nodemanager.vmem-check-enabled": "false",
                    "yarn.nodemanager.pmem-check-enabled": "false",
                    "yarn.nodemanager.local-dirs": str(d / "nm-local"),
                    "yarn.nodemanager.log-dirs": str(d / "nm-logs"),
                    "yarn.log-aggregation-enable": "true",
                    "yarn.nodemanager.remote-app-log-dir": "/tmp/yarn-logs",
                    "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage": "99",
                }
            )
        )

    def environment(self) -> dict[str, str]:
        env = {"HADOOP_HOME": str(self.home), "HADOOP_CONF_DIR": str(self.conf_dir)}
        env["ARROW_LIBHDFS_DIR"] = str(self.home / "lib" / "native")
        out = subprocess.run(
            [self._bin("hadoop"), "classpath", "--glob"],
            capture_output=True,
            text=True,
            env=dict(os.environ, **env),
            check=True,
        )
        env["CLASSPATH"] = f"{self.conf_dir}:{out.stdout.strip()}"
        return env

    def _env(self, opts: str = "") -> dict[str, str]:
        env = dict(os.environ, HADOOP_CONF_DIR=str(self.conf_dir), HADOOP_LOG_DIR=str(self.workdir / "logs"))
        env.pop("CLASSPATH", None)
        if opts:
            env["YARN_RESOURCEMANAGER_OPTS"] = env["YARN_NODEMANAGER_OPTS"] = opts
        return env

    def _launch(self, name: str, cmd: list[str], opts: str = "") -> None:
        with open(self.workdir / f"{name}.out", "ab") as out:
            self.procs[name] = subprocess.Popen(
                die_with_parent(cmd), stdout=out, stderr=subprocess.STDOUT, env=self._env(opts)
            )

    def start(self, timeout: float = 240.0) -> HadoopCluster:
        self.write_configuration()
        subprocess.run(
            [self._bin("hdfs"), "namenode", "-format", "-force", "-nonInteractive"],
            env=self._env(),
            check=True,
            capture_output=True,
        )
        self._launch("namenode", [self._bin("hdfs"), "namenode"])
        self._launch("datanode", [self._bin("hdfs"), "datanode"])
        opens = JAVA17_OPENS if java_major() >= 9 else ""  # Java 8 refuses the flag
        self._launch("resourcemanager", [self._bin("yarn"), "resourcemanager"], opens)
        self._launch("nodemanager", [self._bin("yarn"), "nodemanager"], opens)
        deadline = time.monotonic() + timeout
        while "OFF" not in self._safemode():
            self._check_alive()
            if time.monotonic() > deadline:
                raise TimeoutError("HDFS did not leave safe mode")
            time.sleep(1.0)
        while self.active_nodes() < 1:
            self._check_alive()
            if time.monotonic() > deadline:
                raise TimeoutError("no NodeManager registered with the ResourceManager")
            time.sleep(0.5)
        return self

    def _safemode(self) -> str:
        out = subprocess.run(
            [self._bin("hdfs"), "dfsadmin", "-safemode", "get"], env=self._env(), capture_output=True, text=True
        )
        return out.stdout

    def _check_alive(self) -> None:
        for name, p in self.procs.items():
            if p.poll() is not None:
                raise RuntimeError(f"{name} exited ({p.returncode}); see {self.workdir / (name + '.out')}")

    def rm_rest(self, path: str) -> dict:  # type: ignore[type-arg]
        with urllib.request.urlopen(f"http://127.0.0.1:{self.rm_web}/ws/v1/cluster/{path}", timeout=10) as r:
            return json.loads(r.read())  # type: ignore[no-any-return]

    def active_nodes(self) -> int:
        try:
            return int(self.rm_rest("metrics")["clusterMetrics"]["activeNodes"])
        except OSError:
            return 0

    def running_containers(self) -> int:
        return int(self.rm_rest("metrics")["clusterMetrics"]["containersAllocated"])

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


# ----------------------------------------------------------------------------- shared by integration/test_yarn.py and benchmarks/yarn.py
#: The keyed running sum of the HA drills as a job file for the CLI (attached unless -d): its
#: functions come from tests.ha_jobs (pickled by value), checkpoints where argv says.
SUM_JOB = """\
import sys
from tests.ha_jobs import SlowWhile, add, key_of, to_key
from yarnflink import FileSink, StreamExecutionEnvironment

n, out, checkpoints, flag, parallelism = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(parallelism)
for k, v in {
    "execution.checkpointing.interval": "300 ms",
    "execution.checkpointing.dir": checkpoints,
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": "1000",
    "restart-strategy.fixed-delay.delay": "0 ms",
}.items():
    env.get_config().set(k, v)
(
    env.from_sequence(0, n - 1)
    .map(SlowWhile(flag, 0.0003))
    .map(to_key)
    .key_by(key_of)
    .reduce(add)
    .sink_to(FileSink(out, format="jsonl"))
)
env.execute("yarn it sum")
"""


def until(cond: Callable[[], Any], timeout: float = 180.0, what: str = "condition") -> Any:
    """``cond()``'s first truthy value, polled every 0.5 s (errors count as not yet)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = cond()
        except Exception:  # noqa: BLE001 - a cluster between states
            value = None
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def app_id_in(text: str) -> str:
    return next(w.rstrip(".:,") for w in text.split() if w.startswith("application_"))


def running_taskexecutors(config: Configuration, app_id: str) -> list[Any]:
    from yarnflink.deployment.yarn.client import skein_client  # skein only where a cluster is

    app = skein_client(config).connect(app_id)
    return list(app.get_containers(services=["taskexecutor"], states=["RUNNING"]))


def all_running(rest: RestClient, job_id: str) -> bool:
    d = rest.job(job_id)
    return d["state"] == "RUNNING" and all(s["status"] == "RUNNING" for v in d["vertices"] for s in v["subtasks"])


def hdfs_url(path: str) -> str:
    fs = os.environ.get("YARNFLINK_IT_HDFS") or ""
    if not fs:
        from yarnflink.deployment.yarn.spec import default_filesystem

        fs = default_filesystem(os.environ.get("HADOOP_CONF_DIR")) or "hdfs://"
    return fs.rstrip("/") + "/" + path.lstrip("/")


def master_pid(app_id: str) -> int:
    """The yarnflink master process of ``app_id`` on this node (the watched child with HA)."""
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().split(b"\0")
            environ = (p / "environ").read_bytes()
        except OSError:
            continue
        if b"--yarn-child" in cmd and f"SKEIN_APPLICATION_ID={app_id}".encode() in environ:
            return int(p.name)
    raise AssertionError(f"no master process of {app_id} on this node")
