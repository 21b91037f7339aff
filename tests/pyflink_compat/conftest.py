"""Fixtures of the PyFlink compatibility suite: one local session shared by its programs, PyFlink's examples (downloaded once, see pyflink_examples.py), and running a program
the ways a user does."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.pyflink_compat.pyflink_examples import examples_dir
from yarnflink.client.console import ConsoleForwarder
from yarnflink.common.config import Configuration
from yarnflink.deployment.local.cluster import start_local_cluster, stop_process

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str


class Session:
    """A local cluster (2 TaskExecutors x 2 slots) that runs one program at a time."""

    def __init__(self, workdir: Path) -> None:
        config = Configuration()
        config.set("taskmanager.numberOfTaskSlots", "2")
        config.set("heartbeat.interval", "1 s")
        config.set("heartbeat.timeout", "10 s")
        config.set("slotmanager.number-of-slots.max", "4")
        self.workdir = workdir
        self.proc, info = start_local_cluster(config, taskexecutors=2, workdir=workdir, detached=False)
        self.rest_url = str(info["rest_url"])
        #: for clients in other processes (YARNFLINK_REST_TOKEN_FILE)
        self.token_file = str(info["token_file"])

    def run(self, program: Path, args: list[str], cwd: Path) -> Run:
        """``yarnflink run -m URL program args``, in this process (as the CLI runs it, without
        a new interpreter per program); what the TaskExecutors print joins the captured stdout."""
        from yarnflink.cli.main import main as yarnflink_main

        out, err = io.StringIO(), io.StringIO()
        console = ConsoleForwarder(self.workdir, out).skip_existing()
        old_cwd = os.getcwd()
        os.chdir(cwd)
        try:
            with redirect_stdout(out), redirect_stderr(err):
                code = yarnflink_main(["run", "-m", self.rest_url, str(program), *args])
        finally:
            os.chdir(old_cwd)
            console.stop()
        return Run(code, out.getvalue(), err.getvalue())

    def stop(self) -> None:
        stop_process(self.proc.pid)


@pytest.fixture(scope="session")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    s = Session(tmp_path_factory.mktemp("compat-session"))
    yield s
    s.stop()


@pytest.fixture(scope="session")
def pyflink_examples() -> Path:
    """PyFlink's DataStream examples (a failed download fails the tests that need them)."""
    return examples_dir()


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a user's shell: no session, a configuration with free ports."""
    env = dict(os.environ)
    env["YARNFLINK_SESSIONS_DIR"] = str(tmp_path / "sessions")
    env["YARNFLINK_CONF_DIR"] = str(tmp_path / "conf")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("YARNFLINK_HTTP_LOG", None)
    (tmp_path / "conf").mkdir(exist_ok=True)
    (tmp_path / "conf" / "yarnflink.yaml").write_text(
        "rest.port: 0\njobmanager.rpc.port: 0\ntaskmanager.numberOfTaskSlots: 1\n"
    )
    return env


def run_process(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float = 180) -> Run:
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout, stdin=subprocess.DEVNULL)
    return Run(r.returncode, r.stdout, r.stderr)


def yarnflink_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "yarnflink.cli.main", *args]
