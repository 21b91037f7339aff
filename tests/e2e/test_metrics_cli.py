"""The command line's monitoring: live progress of an attached ``yarnflink run`` (vertices with
state and records per second, restarts, last checkpoint) and ``yarnflink logs``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import Cluster, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

FOREVER_JOB = """
    from yarnflink import StreamExecutionEnvironment
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.from_sequence(1, 10**12).rebalance().filter(lambda x: x < 0).print()
    env.execute("cli-progress")
"""


@pytest.fixture
def ccluster(monitoring_cluster: Cluster) -> Iterator[Cluster]:
    yield monitoring_cluster


def cli_env(c: Cluster, tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["YARNFLINK_SESSIONS_DIR"] = str(tmp_path / "sessions")
    token_file = c.info.get("token_file")
    if token_file:
        env["YARNFLINK_REST_TOKEN_FILE"] = str(token_file)
    return env


def yarnflink(c: Cluster, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "yarnflink.cli.main", *args],
        capture_output=True,
        text=True,
        env=cli_env(c, tmp_path),
        cwd=tmp_path,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def _rate(value: str, unit: str) -> float:
    return float(value) * {"": 1, "k": 1e3, "M": 1e6, "G": 1e9}[unit]


def test_attached_run_shows_live_progress(ccluster: Cluster, tmp_path: Path) -> None:
    c = ccluster
    job = tmp_path / "forever.py"
    job.write_text(textwrap.dedent(FOREVER_JOB))
    proc = subprocess.Popen(
        [sys.executable, "-m", "yarnflink.cli.main", "run", "-m", c.rest_url, str(job)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(c, tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        source_line = re.compile(r"^\s+Source: Sequence\s+RUNNING\s+2/2\s+in .*out\s+([0-9.]+)([kMG]?)/s")
        sink_line = re.compile(r"^\s+Filter.*RUNNING\s+2/2\s+in\s+([0-9.]+)([kMG]?)/s")

        def progressing() -> bool:
            snapshot = list(lines)
            src = [m for line in snapshot if (m := source_line.match(line))]
            snk = [m for line in snapshot if (m := sink_line.match(line))]
            return any(_rate(*m.groups()) > 0 for m in src) and any(_rate(*m.groups()) > 0 for m in snk)

        wait_until(
            lambda: progressing() or proc.poll() is not None,
            timeout=90,
            interval=0.2,
            message="progress with records per second",
        )
        assert proc.poll() is None, "".join(lines)
        heads = [line for line in lines if line.startswith("Job ") and "cli-progress" in line]
        assert heads and "restarts: 0" in heads[-1] and "last checkpoint: none" in heads[-1], heads
        assert "RUNNING" in heads[-1]
        job_id = next(j["jid"] for j in c.rest.jobs_overview() if j["name"] == "cli-progress")
        c.rest.cancel(job_id)
        assert proc.wait(60) == 1  # attached: a job that did not finish fails the command
        reader.join(10)
        text = "".join(lines)
        assert f"Job {job_id} (cli-progress) CANCELED" in text, text[-3000:]
        assert "The job failed" in text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_logs_command(ccluster: Cluster, tmp_path: Path) -> None:
    c = ccluster
    r = yarnflink(c, tmp_path, "logs", "-m", c.rest_url)
    assert r.returncode == 0, r.stderr
    assert " INFO yarnflink." in r.stdout and "started TaskExecutor process" in r.stdout
    tms = sorted(tm["id"] for tm in c.rest.taskmanagers())
    first = next(t for t in tms if t.startswith("taskexecutor-0"))
    r = yarnflink(c, tmp_path, "logs", "-m", c.rest_url, "-t", "0")  # by number
    assert r.returncode == 0, r.stderr
    assert first in r.stdout
    r = yarnflink(c, tmp_path, "logs", "-m", c.rest_url, "-t", first, "-n", "2")  # by id, last 2 lines
    assert r.returncode == 0, r.stderr
    assert 1 <= len(r.stdout.splitlines()) <= 2
    r = yarnflink(c, tmp_path, "logs", "-m", c.rest_url, "--list")
    assert r.returncode == 0, r.stderr
    assert "master.log" in r.stdout and f"{first}.log" in r.stdout and f"{first}.out" in r.stdout
    r = yarnflink(c, tmp_path, "logs", "-m", c.rest_url, "-t", "nope")
    assert r.returncode == 1 and "no TaskExecutor 'nope'" in r.stderr and first in r.stderr
    # the cluster directory, as for a per-job cluster or a stopped session
    local = yarnflink(c, tmp_path, "logs", "--workdir", str(c.workdir))
    assert local.returncode == 0 and "started TaskExecutor process" in local.stdout
