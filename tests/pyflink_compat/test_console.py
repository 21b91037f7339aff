"""The console (issue 19, point 4): print() in user functions appears where the program runs for
an attached run on a per-job local cluster, the print sink prefixes its lines with the subtask at
parallelism > 1, ``yarnflink logs --stdout`` shows the prints of a session's jobs, and a program's
``logging.basicConfig(level=logging.INFO)`` does not show the client's HTTP requests."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from tests.pyflink_compat.conftest import Session, run_process, yarnflink_cmd

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

PROGRAM = """
    import logging
    from yarnflink import StreamExecutionEnvironment

    logging.basicConfig(level=logging.INFO)


    def tag(x):
        print("in map %d" % x)
        return x * 10


    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.from_collection([1, 2, 3, 4]).rebalance().map(tag).print()
    env.execute("console")
    print("after execute")
"""


def _write(tmp_path: Path) -> Path:
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent(PROGRAM))
    return job


def test_an_attached_per_job_run_shows_what_user_functions_print(tmp_path: Path, cli_env: dict[str, str]) -> None:
    r = run_process(yarnflink_cmd("run", str(_write(tmp_path))), cli_env, tmp_path)
    assert r.code == 0, r.stderr
    assert "per-job local cluster" in r.stderr
    lines = r.stdout.splitlines()
    # as PyFlink: print() lines as they are; the print sink's lines prefixed "1> " / "2> "
    assert sorted(line for line in lines if line.startswith("in map")) == [f"in map {i}" for i in range(1, 5)]
    sink = sorted(line for line in lines if "> " in line)
    assert sorted(line.split("> ")[1] for line in sink) == ["10", "20", "30", "40"]
    assert {line.split("> ")[0] for line in sink} == {"1", "2"}  # rebalanced over both subtasks
    assert lines[-1] == "after execute"  # everything the job printed came before execute() returned
    assert len(lines) == 9, r.stdout
    # the program's logging.basicConfig(level=INFO) shows no HTTP request of the client
    assert "HTTP Request" not in r.stderr


def test_logs_stdout_shows_what_a_session_job_printed(session: Session, tmp_path: Path) -> None:
    r = session.run(_write(tmp_path), [], tmp_path)
    assert r.code == 0, r.stderr
    env = {**os.environ, "YARNFLINK_REST_TOKEN_FILE": session.token_file}
    logs = run_process(yarnflink_cmd("logs", "-m", session.rest_url, "--stdout"), env, tmp_path)
    assert logs.code == 0, logs.stderr
    shown = logs.stdout.splitlines()
    assert sorted(line for line in shown if line.startswith("in map")) == [f"in map {i}" for i in range(1, 5)]
    sink = [line for line in shown if "> " in line and not line.startswith("==>")]
    assert sorted(line.split("> ")[1] for line in sink) == ["10", "20", "30", "40"]
