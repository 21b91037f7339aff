"""The console (issue 19, point 4), with a PyFlink program (programs/console_print.py): what user
functions print() appears where the program runs for an attached ``yarnflink run`` on a per-job
local cluster (``python job.py``: test_programs.STANDALONE), the print sink prefixes its lines
with the subtask at parallelism > 1, ``yarnflink logs --stdout`` shows the prints of a session's
jobs, and the program's ``logging.basicConfig(level=logging.INFO)`` shows no HTTP request of the
client."""

from __future__ import annotations

import collections
import os
from pathlib import Path

import pytest

from tests.pyflink_compat.cases import ALL, PROGRAMS, normalize
from tests.pyflink_compat.conftest import Session, run_process, yarnflink_cmd

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

PROGRAM = PROGRAMS / "console_print.py"


def _sink_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if "> " in line and not line.startswith("==>")]


def test_an_attached_per_job_run_shows_what_user_functions_print(tmp_path: Path, cli_env: dict[str, str]) -> None:
    r = run_process(yarnflink_cmd("run", str(PROGRAM)), cli_env, tmp_path)
    assert r.code == 0, r.stderr
    assert "per-job local cluster" in r.stderr
    case = ALL["console_print"]
    assert normalize(case, r.stdout, tmp_path) == case.expected_file.read_text().splitlines()  # as PyFlink
    lines = r.stdout.splitlines()
    # print() lines as they are; the print sink's prefixed "1> " / "2> " (the map is rebalanced over both)
    assert {line.split("> ")[0] for line in _sink_lines(lines)} == {"1", "2"}
    assert lines[-1] == "after execute"  # everything the job printed came before execute() returned
    assert "HTTP Request" not in r.stderr  # the program's logging.basicConfig(level=INFO)


def test_logs_stdout_shows_what_a_session_job_printed(session: Session, tmp_path: Path) -> None:
    env = {**os.environ, "YARNFLINK_REST_TOKEN_FILE": session.token_file}

    def shown() -> collections.Counter[str]:
        logs = run_process(yarnflink_cmd("logs", "-m", session.rest_url, "--stdout"), env, tmp_path)
        assert logs.code == 0, logs.stderr
        return collections.Counter(logs.stdout.splitlines())

    before = shown()  # the session is shared: other tests' jobs may have printed the same lines
    r = session.run(PROGRAM, [], tmp_path)
    assert r.code == 0, r.stderr
    new = list((shown() - before).elements())
    assert sorted(line for line in new if line.startswith("in map")) == [f"in map {i}" for i in range(1, 5)]
    assert sorted(line.split("> ")[1] for line in _sink_lines(new)) == ["10", "20", "30", "40"]
