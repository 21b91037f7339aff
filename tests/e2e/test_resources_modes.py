"""Deployment modes through the command line: a detached per-job cluster ends with its job; in
application mode the job script runs inside the master, which ends with it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from yarnflink.client.sessions import pid_alive as _pid_alive

from .conftest import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

JOB = """
    import os, sys
    from pathlib import Path
    from yarnflink import StreamExecutionEnvironment, FileSink
    Path(sys.argv[1]).mkdir(parents=True, exist_ok=True)
    (Path(sys.argv[1]) / "pid").write_text(str(os.getpid()))
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_sequence(1, 100).map(lambda x: (x % 3, x)).key_by(0).sum(1).sink_to(
        FileSink(str(Path(sys.argv[1]) / "rows"), format="jsonl"))
    env.execute("mode-job")
"""


@pytest.fixture
def cli_env(tmp_path: Path) -> dict:
    env = dict(os.environ)
    env["YARNFLINK_SESSIONS_DIR"] = str(tmp_path / "sessions")
    env["YARNFLINK_CONF_DIR"] = str(tmp_path / "conf")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "yarnflink.yaml").write_text(
        "rest.port: 0\njobmanager.rpc.port: 0\ntaskmanager.numberOfTaskSlots: 1\nheartbeat.interval: 500 ms\n"
    )
    return env


def yarnflink(*args: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "yarnflink.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=150,
        stdin=subprocess.DEVNULL,
    )


def finals(out: Path) -> dict:
    rows = [json.loads(line) for p in sorted((out / "rows").glob("part-*")) for line in p.read_text().splitlines()]
    result: dict = {}
    for k, v in rows:
        result[k] = max(result.get(k, 0), v)
    return result


EXPECTED = {k: sum(x for x in range(1, 101) if x % 3 == k) for k in range(3)}


def test_detached_per_job_cluster_ends_with_its_job(tmp_path: Path, cli_env: dict) -> None:
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent(JOB))
    r = yarnflink("run", "-d", "-n", "1", str(job), str(tmp_path / "out"), env=cli_env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert re.search(r"JobID [0-9a-f]{32}", r.stdout)
    workdir = Path(re.search(r"logs in (\S+)\)", r.stderr).group(1))
    master = json.loads((workdir / "master.json").read_text())["pid"]
    # the client is gone; the cluster goes once its job has ended
    wait_until(lambda: not _pid_alive(master), timeout=120, message="the per-job cluster ended")
    assert finals(tmp_path / "out") == EXPECTED
    assert "per-job cluster's job has ended" in (workdir / "master.log").read_text()


def test_application_mode_runs_the_script_in_the_master_and_ends_with_it(tmp_path: Path, cli_env: dict) -> None:
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent(JOB))
    r = yarnflink("run", "--application", "-n", "1", str(job), str(tmp_path / "out"), env=cli_env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    workdir = Path(re.search(r"logs in (\S+)\)", r.stderr).group(1))
    master = json.loads((workdir / "master.json").read_text())
    assert master["mode"] == "application"
    # the script ran inside the master process, which has ended with it
    assert int((tmp_path / "out" / "pid").read_text()) == master["pid"]
    assert not _pid_alive(master["pid"])
    assert finals(tmp_path / "out") == EXPECTED

    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('application broke')\n")
    r = yarnflink("run", "--application", "-n", "1", str(bad), env=cli_env, cwd=tmp_path)
    assert r.returncode == 1 and "application broke" in r.stderr
