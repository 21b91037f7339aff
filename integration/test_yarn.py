"""yarnflink on a real YARN cluster (docs/yarn.md). Runs only with HADOOP_CONF_DIR set and
YARNFLINK_IT_YARN=1; scripts/test collects it and it skips itself without them.

    HADOOP_CONF_DIR=/etc/hadoop/conf YARNFLINK_IT_YARN=1 \\
    YARNFLINK_IT_ARCHIVE=hdfs:///user/$USER/yarnflink-env.tar.gz \\
    .venv/bin/pytest -v integration/test_yarn.py

The containers need yarnflink: ``YARNFLINK_IT_ARCHIVE`` (a venv-pack/conda-pack archive with
yarnflink installed, shipped as yarn.ship-archives) or ``YARNFLINK_IT_PYTHON`` (an interpreter with
yarnflink on every node, yarn.python.executable). ``YARNFLINK_IT_QUEUE`` picks the queue.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

if not (os.environ.get("HADOOP_CONF_DIR") and os.environ.get("YARNFLINK_IT_YARN") == "1"):
    pytest.skip("needs a YARN cluster: set HADOOP_CONF_DIR and YARNFLINK_IT_YARN=1", allow_module_level=True)

skein = pytest.importorskip("skein")

from yarnflink.client.rest_client import RestClient  # noqa: E402
from yarnflink.common.config import Configuration  # noqa: E402
from yarnflink.deployment.yarn.client import list_clusters, skein_client, stop_cluster, submit_cluster  # noqa: E402
from yarnflink.deployment.yarn.spec import ClusterRequest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WORDCOUNT = ROOT / "examples" / "wordcount.py"


def _dynamic() -> dict[str, str]:
    conf = {
        "yarn.application.name": f"yarnflink-it-{uuid.uuid4().hex[:8]}",
        "taskmanager.numberOfTaskSlots": "2",
        "taskmanager.memory.process.size": "1024m",
        "jobmanager.memory.process.size": "1024m",
    }
    if os.environ.get("YARNFLINK_IT_ARCHIVE"):
        conf["yarn.ship-archives"] = os.environ["YARNFLINK_IT_ARCHIVE"]
    if os.environ.get("YARNFLINK_IT_PYTHON"):
        conf["yarn.python.executable"] = os.environ["YARNFLINK_IT_PYTHON"]
    if os.environ.get("YARNFLINK_IT_QUEUE"):
        conf["yarn.application.queue"] = os.environ["YARNFLINK_IT_QUEUE"]
    return conf


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Configuration]:
    monkeypatch.setenv("YARNFLINK_SESSIONS_DIR", str(tmp_path / "sessions"))
    conf = Configuration(_dynamic())
    yield conf
    # clean up whatever a failed test leaked
    for app in list_clusters(conf):
        if app.name == conf.get("yarn.application.name"):
            skein_client(conf).kill_application(app.id)


def _until(cond: Callable[[], Any], timeout: float = 180.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        time.sleep(2)


def _dflags() -> list[str]:
    return [x for k, v in _dynamic().items() for x in ("-D", f"{k}={v}")]


def test_session_taskexecutors_are_containers_and_lost_ones_are_replaced(config: Configuration) -> None:
    cluster = submit_cluster(config, ClusterRequest(taskexecutors=2))
    try:
        assert cluster.app_id.startswith("application_") and cluster.rest_url.startswith("http")
        with RestClient(cluster.rest_url) as rest:
            _until(lambda: len(rest.taskmanagers()) == 2)
            app = skein_client(config).connect(cluster.app_id)
            running = app.get_containers(services=["taskexecutor"], states=["RUNNING"])
            assert len(running) == 2
            app.kill_container(running[0].id)  # as if YARN preempted it
            _until(
                lambda: (
                    {c.id for c in app.get_containers(services=["taskexecutor"], states=["RUNNING"])}
                    - {running[0].id, running[1].id}
                )
            )
            _until(lambda: len(rest.taskmanagers()) == 2)
    finally:
        stop_cluster(config, cluster.app_id)
    _until(lambda: str(skein_client(config).application_report(cluster.app_id).state) == "FINISHED", 60)


def test_cli_session_run_by_application_id_and_stop(tmp_path: Path, config: Configuration) -> None:
    env = {"YARNFLINK_SESSIONS_DIR": str(tmp_path / "sessions")}
    start = subprocess.run(
        [
            sys.executable,
            "-m",
            "yarnflink.cli.main",
            "session",
            "start",
            "--target",
            "yarn",
            "-n",
            "1",
            "-s",
            "2",
            *_dflags(),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, **env),
        cwd=ROOT,
    )
    assert start.returncode == 0, start.stderr
    app_id = next(w for w in start.stdout.split() if w.startswith("application_"))
    try:
        run = subprocess.run(
            [sys.executable, "-m", "yarnflink.cli.main", "run", "-yid", app_id, str(WORDCOUNT)],
            capture_output=True,
            text=True,
            timeout=600,
            env=dict(os.environ, **env),
            cwd=ROOT,
        )
        assert run.returncode == 0, run.stderr
        listed = subprocess.run(
            [sys.executable, "-m", "yarnflink.cli.main", "session", "list", "--target", "yarn"],
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ, **env),
        )
        assert app_id in listed.stdout
    finally:
        stop = subprocess.run(
            [sys.executable, "-m", "yarnflink.cli.main", "session", "stop", app_id],
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ, **env),
        )
        assert stop.returncode == 0, stop.stderr


@pytest.mark.parametrize("mode", ["--per-job", "--application"])
def test_job_clusters_end_with_their_job(mode: str, tmp_path: Path, config: Configuration) -> None:
    env = dict(os.environ, YARNFLINK_SESSIONS_DIR=str(tmp_path / "sessions"))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "yarnflink.cli.main",
            "run",
            mode,
            "--target",
            "yarn",
            "-n",
            "1",
            *_dflags(),
            str(WORDCOUNT),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    app_id = next(w for w in run.stderr.split() if w.startswith("application_"))
    _until(lambda: str(skein_client(config).application_report(app_id).state) in ("FINISHED",), 120)
