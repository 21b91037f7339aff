"""``yarnflink`` in a subprocess against a test cluster, for one test's job file: the runner the
savepoint, stop-with-savepoint and S3 end-to-end tests share."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from .conftest import Cluster


class JobCli:
    """The CLI with the cluster's REST token and a private sessions directory; ``job`` is the job
    file's source, written to ``tmp_path/job.py``; ``flag`` a file whose presence slows the job."""

    timeout = 240.0

    def __init__(self, cluster: Cluster, tmp_path: Path, job: str) -> None:
        self.cluster = cluster
        self.tmp = tmp_path
        self.env = dict(os.environ)
        self.env["YARNFLINK_SESSIONS_DIR"] = str(tmp_path / "sessions")
        self.env["YARNFLINK_REST_TOKEN"] = cluster.rest.headers["authorization"].split(" ", 1)[1]
        self.job = tmp_path / "job.py"
        self.job.write_text(textwrap.dedent(job))
        self.flag = tmp_path / "slow"
        self.flag.touch()
        self.out = tmp_path / "out"
        self.checkpoints = f"file://{tmp_path / 'checkpoints'}"

    def __call__(self, *args: str, timeout: float | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "yarnflink.cli.main", *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.tmp,
            timeout=timeout or self.timeout,
            stdin=subprocess.DEVNULL,
        )

    def submit(self, flags: tuple[str, ...], job_args: tuple[str, ...]) -> str:
        """``yarnflink run -d [flags] job.py OUT CHECKPOINTS FLAG [job_args]``: the JobID."""
        r = self(
            "run",
            "-m",
            self.cluster.rest_url,
            "-d",
            *flags,
            str(self.job),
            str(self.out),
            self.checkpoints,
            str(self.flag),
            *job_args,
        )
        assert r.returncode == 0, r.stderr
        m = re.search(r"JobID ([0-9a-f]{32})", r.stdout)
        assert m, r.stdout
        return m.group(1)

    @staticmethod
    def savepoint_path(r: subprocess.CompletedProcess) -> str:
        """The path ``yarnflink savepoint`` / ``stop`` printed."""
        assert r.returncode == 0, r.stderr
        m = re.search(r"Savepoint completed\. Path: (\S+)", r.stdout)
        assert m, r.stdout
        return m.group(1)
