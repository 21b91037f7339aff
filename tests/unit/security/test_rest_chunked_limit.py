"""Request bodies without a declared length (``Transfer-Encoding: chunked``) are limited while
they are read (issue 22, item 3): past ``rest.server.max-content-length`` the Dispatcher's REST
API answers 413 with ``{"errors": [...]}`` (not a 500 with an ExceptionGroup) and keeps nothing of
the body. A real master serves its REST API with uvicorn on loopback, in a process of its own so
that its memory can be measured."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

MiB = 1 << 20
LIMIT = 24 * MiB

#: a master in a process of its own; it prints its REST URL and runs until its stdin closes
_SERVE = """
import sys
from yarnflink.common.config import Configuration
from yarnflink.entrypoint.master import MasterProcess

master = MasterProcess(Configuration({
    "rest.port": "0", "jobmanager.rpc.port": "0", "security.rest.authentication": "none",
    "security.ssl.internal.enabled": "false", "rest.server.max-content-length": sys.argv[1],
}))
master.start()
print(master.dispatcher.rest_url, flush=True)
sys.stdin.read()
master.stop()
"""


@pytest.fixture
def master_url() -> Iterator[tuple[str, psutil.Process]]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVE, str(LIMIT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()  # blocks until the master serves (or has died)
        assert url.startswith("http://"), f"the master did not start (exit code {proc.poll()})"
        yield url, psutil.Process(proc.pid)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _chunked(total: int, chunk: int = MiB) -> Iterator[bytes]:
    """A body of ``total`` bytes sent without Content-Length (httpx chunks a generator)."""
    for _ in range(total // chunk):
        yield b"x" * chunk


def test_an_oversized_chunked_body_gets_413_and_the_master_keeps_no_memory(
    master_url: tuple[str, psutil.Process],
) -> None:
    url, master = master_url
    with httpx.Client(base_url=url, timeout=60, trust_env=False) as client:
        r = client.post("/jobs", content=_chunked(LIMIT + 8 * MiB))
        assert r.status_code == 413, r.text[:300]
        assert r.json() == {"errors": [f"request body exceeds rest.server.max-content-length ({LIMIT} bytes)"]}
        assert client.get("/overview").status_code == 200  # the connection and the master serve on
        # the allocator keeps one body's worth for the next request: measure from there on
        assert client.post("/jobs", content=_chunked(2 * LIMIT)).status_code == 413
        baseline = master.memory_info().rss
        for _ in range(5):
            r = client.post("/jobs", content=_chunked(2 * LIMIT))
            assert r.status_code == 413, r.text[:300]
        grown = master.memory_info().rss - baseline
    # a body is read up to the limit at most and let go once answered: five more requests hold
    # less than one more body's worth (bodies kept until the garbage collector runs: up to five)
    assert grown < LIMIT, f"the master's RSS grew by {grown / MiB:.0f} MiB over 5 oversized requests"
