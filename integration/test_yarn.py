"""yarnflink on a real YARN with HDFS (docs/yarn.md, issue 17). Not run by scripts/test.

It starts its own one-node HDFS + YARN on loopback ports from a Hadoop 3 distribution
(``integration/hadoop_cluster.py``), runs the scenarios and stops everything:

    HADOOP_HOME=/opt/hadoop-3.1.2 JAVA_HOME=/usr/lib/jvm/java-17 .venv/bin/pytest -v integration/test_yarn.py

or uses an existing cluster (``HADOOP_CONF_DIR`` with ``fs.defaultFS=hdfs://...`` and
``YARNFLINK_IT_YARN=1``; containers then need yarnflink: ``YARNFLINK_IT_ARCHIVE``, a
venv-pack/conda-pack archive shipped as yarn.ship-archives, or ``YARNFLINK_IT_PYTHON``, an
interpreter with yarnflink on every node; ``YARNFLINK_IT_QUEUE`` picks the queue). The HA scenarios
start a ZooKeeper (tests/zk.py). Without either it skips, saying how to run it.

The scenarios: a TaskExecutor container killed mid-job (exact output from the HDFS checkpoint, no
leaked container); the ApplicationMaster's master process killed with ZooKeeper HA while an
attached ``run -yid`` client rides through (exact output; the next attempt leads promptly: its
ZooKeeper session was closed); per-job attached and detached get their final result every time
(5 runs each); HDFS as checkpoint, savepoint and HA storage (the savepoint path keeps the
namenode's host and port; restored at another parallelism); ``session stop`` leaves no
application, container, ZooKeeper node, HA file or staging directory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.hadoop_cluster import HOW_TO_RUN, SUM_JOB, HadoopCluster
from integration.hadoop_cluster import all_running as _all_running
from integration.hadoop_cluster import app_id_in as _app_id
from integration.hadoop_cluster import hdfs_url as _hdfs
from integration.hadoop_cluster import master_pid as _master_pid
from integration.hadoop_cluster import running_taskexecutors as _running_taskexecutors
from integration.hadoop_cluster import until as _until

EXISTING = bool(os.environ.get("HADOOP_CONF_DIR") and os.environ.get("YARNFLINK_IT_YARN") == "1")
if not EXISTING and not os.environ.get("HADOOP_HOME"):
    pytest.skip(HOW_TO_RUN, allow_module_level=True)

skein = pytest.importorskip("skein")

from tests.ha_jobs import expected_running_sums  # noqa: E402
from tests.oracles import committed  # noqa: E402
from yarnflink.client.rest_client import RestClient  # noqa: E402
from yarnflink.common.config import Configuration  # noqa: E402
from yarnflink.deployment.yarn.client import (  # noqa: E402
    list_clusters,
    rest_url_of,
    skein_client,
    stop_cluster,
    submit_cluster,
)
from yarnflink.deployment.yarn.spec import ClusterRequest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WORDCOUNT = ROOT / "examples" / "wordcount.py"
pytestmark = pytest.mark.timeout(1800)


# ----------------------------------------------------------------------------- the cluster
@pytest.fixture(scope="module")
def hadoop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HadoopCluster | None]:
    """The self-started HDFS + YARN (None: an existing cluster); its client environment is this
    process's (and the CLI subprocesses') for the module."""
    if EXISTING:
        yield None
        return
    cluster = HadoopCluster(tmp_path_factory.mktemp("hadoop")).start()
    with pytest.MonkeyPatch.context() as mp:
        for k, v in cluster.environment().items():
            mp.setenv(k, v)
        try:
            yield cluster
        finally:
            cluster.stop()


@pytest.fixture(scope="module")
def zk_quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tests.zk import start_standalone, zookeeper_or_skip

    server = zookeeper_or_skip(lambda: start_standalone(tmp_path_factory.mktemp("zk")))
    yield server.address
    server.stop()


def _dynamic(extra: dict[str, str] | None = None) -> dict[str, str]:
    conf = {
        "yarn.application.name": f"yarnflink-it-{uuid.uuid4().hex[:8]}",
        "taskmanager.numberOfTaskSlots": "2",
        "taskmanager.memory.process.size": "1024m",
        "jobmanager.memory.process.size": "1024m",
    }
    if EXISTING:
        if os.environ.get("YARNFLINK_IT_ARCHIVE"):
            conf["yarn.ship-archives"] = os.environ["YARNFLINK_IT_ARCHIVE"]
        if os.environ.get("YARNFLINK_IT_PYTHON"):
            conf["yarn.python.executable"] = os.environ["YARNFLINK_IT_PYTHON"]
        if os.environ.get("YARNFLINK_IT_QUEUE"):
            conf["yarn.application.queue"] = os.environ["YARNFLINK_IT_QUEUE"]
    else:  # one node: the containers run this interpreter on this checkout
        conf["yarn.python.executable"] = sys.executable
        for who in ("master", "taskmanager"):
            conf[f"containerized.{who}.env.PYTHONPATH"] = str(ROOT)
    conf.update(extra or {})
    return conf


def _dflags(conf: dict[str, str]) -> list[str]:
    return [x for k, v in conf.items() for x in ("-D", f"{k}={v}")]


@pytest.fixture
def env(tmp_path: Path, hadoop: HadoopCluster | None, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The CLI's environment (its own sessions directory)."""
    monkeypatch.setenv("YARNFLINK_SESSIONS_DIR", str(tmp_path / "sessions"))
    return dict(os.environ, PYTHONPATH=str(ROOT))


@pytest.fixture
def conf(env: dict[str, str]) -> Iterator[dict[str, str]]:
    c = _dynamic()
    yield c
    config = Configuration(c)
    for app in list_clusters(config):  # whatever a failed test leaked
        if app.name == c["yarn.application.name"]:
            skein_client(config).kill_application(app.id)


def _cli(env: dict[str, str], *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "yarnflink.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )


def _state(config: Configuration, app_id: str) -> tuple[str, str]:
    report = skein_client(config).application_report(app_id)
    return str(report.state), str(report.final_status)


def _job_file(tmp_path: Path) -> Path:
    job = tmp_path / "sum_job.py"
    job.write_text(SUM_JOB)
    return job


def _completed_checkpoints(rest: RestClient, job_id: str) -> int:
    return int(rest.get_json(f"/jobs/{job_id}/checkpoints")["counts"]["completed"])


# ----------------------------------------------------------------------------- sessions
def test_session_taskexecutors_are_containers_and_lost_ones_are_replaced_without_leaks(
    conf: dict[str, str],
) -> None:
    config = Configuration(conf)
    cluster = submit_cluster(config, ClusterRequest(taskexecutors=2))
    try:
        assert cluster.app_id.startswith("application_") and cluster.rest_url.startswith("http")
        with RestClient(cluster.rest_url) as rest:
            _until(lambda: len(rest.taskmanagers()) == 2, what="2 TaskExecutors registered")
            running = _running_taskexecutors(config, cluster.app_id)
            assert len(running) == 2
            skein_client(config).connect(cluster.app_id).kill_container(running[0].id)  # as if preempted
            _until(
                lambda: {c.id for c in _running_taskexecutors(config, cluster.app_id)} - {c.id for c in running},
                what="a replacement container",
            )
            _until(lambda: len(rest.taskmanagers()) == 2, what="2 TaskExecutors again")
            time.sleep(5)  # what skein restarting the dead one would have added by now
            assert len(_running_taskexecutors(config, cluster.app_id)) == 2  # no leaked container
    finally:
        stop_cluster(config, cluster.app_id)
    _until(lambda: _state(config, cluster.app_id)[0] == "FINISHED", 60)


def test_taskexecutor_container_killed_mid_job_recovers_from_hdfs_exactly(
    tmp_path: Path, env: dict[str, str], conf: dict[str, str]
) -> None:
    config = Configuration(conf)
    start = _cli(env, "session", "start", "--target", "yarn", "-n", "2", *_dflags(conf))
    assert start.returncode == 0, start.stderr
    app_id = _app_id(start.stdout)
    n, out, flag = 40_000, tmp_path / "out", tmp_path / "slow"
    flag.touch()
    try:
        run = _cli(
            env, "run", "-yid", app_id, "-d", str(_job_file(tmp_path)),
            str(n), str(out), _hdfs(f"/it/{app_id}/checkpoints"), str(flag), "2",
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        job_id = run.stdout.split()[-1]
        with RestClient(rest_url_of(config, app_id)) as rest:
            _until(lambda: _all_running(rest, job_id) and _completed_checkpoints(rest, job_id) > 0, what="checkpoint")
            victim = _running_taskexecutors(config, app_id)[0]
            t0 = time.monotonic()
            skein_client(config).connect(app_id).kill_container(victim.id)
            _until(lambda: rest.job(job_id)["state"] != "RUNNING" or not _all_running(rest, job_id), 60)
            _until(lambda: _all_running(rest, job_id), 180, "tasks RUNNING again")
            print(f"container kill -> all tasks RUNNING after {time.monotonic() - t0:.1f}s")
            flag.unlink()
            _until(lambda: rest.job(job_id)["state"] == "FINISHED", 600, "the job FINISHED")
        assert committed(out) == expected_running_sums(n)
    finally:
        assert _cli(env, "session", "stop", app_id).returncode == 0


def test_application_master_killed_with_ha_the_attached_client_rides_through(
    tmp_path: Path, env: dict[str, str], zk_quorum: str
) -> None:
    from tests.zk import unique_root

    conf = _dynamic(
        {
            "high-availability.type": "zookeeper",
            "high-availability.zookeeper.quorum": zk_quorum,
            "high-availability.zookeeper.path.root": unique_root("yarn-it"),
            "high-availability.storageDir": _hdfs(f"/it/ha-{uuid.uuid4().hex[:8]}"),
            "yarn.application-attempts": "2",
        }
    )
    config = Configuration(conf)
    start = _cli(env, "session", "start", "--target", "yarn", "-n", "2", *_dflags(conf))
    assert start.returncode == 0, start.stderr
    app_id = _app_id(start.stdout)
    n, out, flag = 40_000, tmp_path / "out", tmp_path / "slow"
    flag.touch()
    try:
        client = subprocess.Popen(
            [
                sys.executable, "-m", "yarnflink.cli.main", "run", "-yid", app_id, *_dflags(conf),
                str(_job_file(tmp_path)), str(n), str(out), _hdfs(f"/it/{app_id}/checkpoints"), str(flag), "2",
            ],
            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        with RestClient(rest_url_of(config, app_id)) as rest:
            job_id = _until(lambda: rest.jobs_overview()[0]["jid"], 120, "the job submitted")
            _until(lambda: _all_running(rest, job_id) and _completed_checkpoints(rest, job_id) > 0, what="checkpoint")
            t0 = time.monotonic()
            os.kill(_master_pid(app_id), signal.SIGKILL)  # the ApplicationMaster's master process
            _until(lambda: rest.jobs_overview() and _all_running(rest, job_id), 300, "the job RUNNING after failover")
            took = time.monotonic() - t0
            print(f"master SIGKILL -> job RUNNING in attempt 2 after {took:.1f}s")
            assert took < 60, "the next attempt waited out the ZooKeeper session"
            flag.unlink()
        stdout, stderr = client.communicate(timeout=900)
        assert client.returncode == 0, stderr
        assert committed(out) == expected_running_sums(n)
    finally:
        assert _cli(env, "session", "stop", app_id, *_dflags(conf)).returncode == 0


# ----------------------------------------------------------------------------- per-job
@pytest.mark.parametrize("detached", [False, True])
def test_per_job_clients_get_their_result_every_time(
    detached: bool, tmp_path: Path, env: dict[str, str], conf: dict[str, str]
) -> None:
    config = Configuration(conf)
    for i in range(5):
        out = tmp_path / f"out-{i}"
        run = _cli(
            env, "run", "--per-job", "--target", "yarn", "-n", "1", *(["-d"] if detached else []), *_dflags(conf),
            str(WORDCOUNT), "--lines", "2000", "--output", str(out),
        )  # fmt: skip
        assert run.returncode == 0, run.stdout + run.stderr
        app_id = _app_id(run.stderr)
        _until(lambda app_id=app_id: _state(config, app_id) == ("FINISHED", "SUCCEEDED"), 300, "SUCCEEDED")
        if not detached:
            assert "WordCount finished" in run.stdout
        assert sum(json.loads(line)[1] for p in out.glob("part-*") for line in p.open()) == 20_000  # 10 words a line
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("yarnflink-yarn-*")), "staging directories left"


def test_a_per_job_application_whose_job_fails_ends_failed(
    tmp_path: Path, env: dict[str, str], conf: dict[str, str]
) -> None:
    job = tmp_path / "failing.py"
    job.write_text(
        "from yarnflink import StreamExecutionEnvironment\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "env.from_sequence(1, 10).map(lambda x: 1 // 0).print()\n"
        "env.execute('fails')\n"
    )
    run = _cli(env, "run", "--per-job", "--target", "yarn", "-n", "1", *_dflags(conf), str(job))
    assert run.returncode == 1
    app_id = _app_id(run.stderr)
    _until(lambda: _state(Configuration(conf), app_id) == ("FINISHED", "FAILED"), 300, "FAILED in YARN")


# ----------------------------------------------------------------------------- HDFS and stop
def test_hdfs_checkpoints_savepoints_and_ha_storage_and_a_stop_that_leaves_nothing(
    tmp_path: Path, env: dict[str, str], zk_quorum: str, hadoop: HadoopCluster | None
) -> None:
    from kazoo.client import KazooClient

    from tests.zk import unique_root
    from yarnflink.checkpoint.storage import filesystem_for

    root = unique_root("yarn-it")
    ha_dir = _hdfs(f"/it/ha-{uuid.uuid4().hex[:8]}")
    conf = _dynamic(
        {
            "high-availability.type": "zookeeper",
            "high-availability.zookeeper.quorum": zk_quorum,
            "high-availability.zookeeper.path.root": root,
            "high-availability.storageDir": ha_dir,
        }
    )
    config = Configuration(conf)
    start = _cli(env, "session", "start", "--target", "yarn", "-n", "2", *_dflags(conf))
    assert start.returncode == 0, start.stderr
    app_id = _app_id(start.stdout)
    n, out, flag = 30_000, tmp_path / "out", tmp_path / "slow"
    flag.touch()
    checkpoints = _hdfs(f"/it/{app_id}/checkpoints")
    job = str(_job_file(tmp_path))
    stopped = False
    try:
        run = _cli(env, "run", "-yid", app_id, "-d", job, str(n), str(out), checkpoints, str(flag), "2")
        assert run.returncode == 0, run.stderr
        job_id = run.stdout.split()[-1]
        with RestClient(rest_url_of(config, app_id)) as rest:
            _until(lambda: _completed_checkpoints(rest, job_id) > 0, what="a checkpoint on HDFS")
        target = _hdfs("/it/savepoints")
        stop = _cli(env, "stop", "-yid", app_id, "--savepointPath", target, job_id)
        assert stop.returncode == 0, stop.stderr
        path = stop.stdout.split("Path:")[-1].strip()
        assert path.startswith(target.split("/it/")[0] + "/"), f"host and port dropped: {path}"
        flag.unlink()
        run = _cli(env, "run", "-yid", app_id, "-s", path, job, str(n), str(out), checkpoints, str(flag), "3")
        assert run.returncode == 0, run.stderr
        assert committed(out) == expected_running_sums(n)
        listed = _cli(env, "list", "-yid", app_id)
        assert listed.returncode == 0 and job_id in listed.stdout
        logs = _cli(env, "logs", "-yid", app_id, "-n", "20")
        assert logs.returncode == 0 and logs.stdout, logs.stderr
        stop_session = _cli(env, "session", "stop", app_id)
        assert stop_session.returncode == 0, stop_session.stderr
        stopped = True
        assert _state(config, app_id)[0] == "FINISHED"
        if hadoop is not None:
            _until(lambda: hadoop.running_containers() == 0, 60, "no container left")
        zk = KazooClient(hosts=zk_quorum)
        zk.start(10)
        try:
            assert not zk.exists(f"{root}/{app_id}"), "ZooKeeper nodes left"
        finally:
            zk.stop()
            zk.close()
        fs, base = filesystem_for(ha_dir)
        assert not fs.exists(f"{base}/{app_id}"), "HA files left"
        assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("yarnflink-yarn-*")), "staging directories left"
    finally:
        if not stopped:
            _cli(env, "session", "stop", app_id)


def test_cli_session_run_by_application_id_and_stop(env: dict[str, str], conf: dict[str, str]) -> None:
    start = _cli(env, "session", "start", "--target", "yarn", "-n", "1", "-s", "2", *_dflags(conf))
    assert start.returncode == 0, start.stderr
    app_id = _app_id(start.stdout)
    try:
        run = _cli(env, "run", "-yid", app_id, str(WORDCOUNT), "--lines", "2000", "--output", "/tmp/yarnflink-it-wc")
        assert run.returncode == 0, run.stderr
        listed = _cli(env, "session", "list", "--target", "yarn")
        assert app_id in listed.stdout
    finally:
        assert _cli(env, "session", "stop", app_id).returncode == 0
