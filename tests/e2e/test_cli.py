"""The yarnflink command line, run as a user runs it (real processes)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]


def yarnflink(*args: str, env: dict, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "yarnflink.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def cli_env(tmp_path: Path) -> dict:
    env = dict(os.environ)
    env["YARNFLINK_SESSIONS_DIR"] = str(tmp_path / "sessions")
    env["YARNFLINK_CONF_DIR"] = str(tmp_path / "conf")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "yarnflink.yaml").write_text(
        "rest.port: 0\njobmanager.rpc.port: 0\ntaskmanager.numberOfTaskSlots: 1\n"
    )
    return env


def write(path: Path, code: str) -> Path:
    path.write_text(textwrap.dedent(code))
    return path


GOOD_JOB = """
    import sys
    from yarnflink import StreamExecutionEnvironment, FileSink
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_sequence(1, 100).map(lambda x: (x % 3, x)).key_by(0).sum(1).sink_to(FileSink(sys.argv[1], format="jsonl"))
    env.execute("cli-job")
"""


def test_run_without_session_uses_a_per_job_local_cluster(tmp_path: Path, cli_env: dict) -> None:
    job = write(tmp_path / "job.py", GOOD_JOB)
    r = yarnflink("run", "-p", "2", str(job), str(tmp_path / "out"), env=cli_env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "per-job local cluster" in r.stderr
    assert "FINISHED" in r.stderr  # progress until the end
    rows = [json.loads(line) for p in sorted((tmp_path / "out").glob("part-*")) for line in p.read_text().splitlines()]
    finals: dict = {}
    for k, v in rows:
        finals[k] = max(finals.get(k, 0), v)
    assert finals == {k: sum(x for x in range(1, 101) if x % 3 == k) for k in range(3)}


def test_failing_job_exits_nonzero_with_traceback(tmp_path: Path, cli_env: dict) -> None:
    job = write(
        tmp_path / "bad.py",
        """
        from yarnflink import StreamExecutionEnvironment
        def boom(x):
            raise RuntimeError(f"boom at {x}")
        env = StreamExecutionEnvironment.get_execution_environment()
        env.from_sequence(1, 10).map(boom).print()
        env.execute("bad")
    """,
    )
    r = yarnflink("run", str(job), env=cli_env, cwd=tmp_path)
    assert r.returncode == 1
    assert "RuntimeError: boom at" in r.stderr and "in boom" in r.stderr


@pytest.mark.parametrize(
    "code,fragment",
    [
        ("x = 1\n", "defined no job"),
        ("def broken(:\n", "SyntaxError"),
        ("raise KeyError('missing-thing')\n", "missing-thing"),
        (
            "from yarnflink import StreamExecutionEnvironment\nStreamExecutionEnvironment.get_execution_environment().execute('e')\n",
            "no operators defined",
        ),
    ],
)
def test_bad_job_files_get_clear_errors(tmp_path: Path, cli_env: dict, code: str, fragment: str) -> None:
    job = write(tmp_path / "job.py", code)
    r = yarnflink("run", "-m", "http://127.0.0.1:9", str(job), env=cli_env, cwd=tmp_path)
    assert r.returncode != 0
    assert fragment in r.stderr, r.stderr


def test_bad_configuration_is_named(tmp_path: Path, cli_env: dict) -> None:
    job = write(tmp_path / "job.py", GOOD_JOB)
    r = yarnflink("run", "-D", "paralelism.default=2", str(job), env=cli_env, cwd=tmp_path)
    assert r.returncode == 2 and "paralelism.default" in r.stderr and "parallelism.default" in r.stderr
    r = yarnflink("run", "-D", "parallelism.default=abc", str(job), env=cli_env, cwd=tmp_path)
    assert r.returncode == 2 and "abc" in r.stderr


def test_info_prints_the_job_graph(tmp_path: Path, cli_env: dict) -> None:
    job = write(tmp_path / "job.py", GOOD_JOB)
    r = yarnflink("info", "-p", "2", str(job), str(tmp_path / "out"), env=cli_env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Source: Sequence -> Map" in r.stdout and "HASH" in r.stdout.upper()
    r = yarnflink("info", "--json", str(job), str(tmp_path / "out"), env=cli_env, cwd=tmp_path)
    plan = json.loads(r.stdout)
    assert len(plan["nodes"]) == 2
    assert plan["nodes"][1]["inputs"][0]["ship_strategy"].upper() == "HASH"
    assert not (tmp_path / "out").exists()  # info runs nothing


def test_session_lifecycle_with_detached_run_list_and_cancel(tmp_path: Path, cli_env: dict) -> None:
    r = yarnflink("session", "start", "--target", "local", "-n", "2", "-s", "2", env=cli_env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    session_id = re.search(r"Session (\S+) started", r.stdout).group(1)
    assert "REST address: http://127.0.0.1:" in r.stdout and f"yarnflink session stop {session_id}" in r.stdout
    try:
        r = yarnflink("session", "list", env=cli_env, cwd=tmp_path)
        assert session_id in r.stdout and "RUNNING" in r.stdout
        job = write(
            tmp_path / "forever.py",
            """
            from yarnflink import StreamExecutionEnvironment
            env = StreamExecutionEnvironment.get_execution_environment()
            env.from_sequence(1, 10**12).filter(lambda x: x < 0).print()
            env.execute("forever")
        """,
        )
        r = yarnflink("run", "-d", str(job), env=cli_env, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        job_id = re.search(r"JobID ([0-9a-f]{32})", r.stdout).group(1)
        r = yarnflink("list", env=cli_env, cwd=tmp_path)
        assert job_id in r.stdout and "forever" in r.stdout
        r = yarnflink("cancel", job_id, env=cli_env, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        r = yarnflink("cancel", "f" * 32, env=cli_env, cwd=tmp_path)
        assert r.returncode == 1 and "not found" in r.stderr
        bad = write(
            tmp_path / "bad.py",
            """
            from yarnflink import StreamExecutionEnvironment
            def check(x):
                raise ValueError(f"unexpected record {x}")
            env = StreamExecutionEnvironment.get_execution_environment()
            env.from_sequence(1, 5).map(check).print()
            env.execute("doomed")
        """,
        )
        r = yarnflink("run", "-d", str(bad), env=cli_env, cwd=tmp_path)
        bad_id = re.search(r"JobID ([0-9a-f]{32})", r.stdout).group(1)
        deadline = time.monotonic() + 60
        while True:  # the failure, with its Python traceback, shows in `yarnflink list`
            r = yarnflink("list", env=cli_env, cwd=tmp_path)
            if f"{bad_id}  FAILED" in r.stdout:
                break
            assert time.monotonic() < deadline, r.stdout
            time.sleep(0.2)
        assert "ValueError: unexpected record" in r.stdout and "in check" in r.stdout
    finally:
        r = yarnflink("session", "stop", session_id, env=cli_env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = yarnflink("session", "list", env=cli_env, cwd=tmp_path)
    assert session_id not in r.stdout
