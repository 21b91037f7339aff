"""A job program calling ``logging.basicConfig(level=logging.INFO)`` does not see the REST
client's ``HTTP Request: GET ...`` lines, unless YARNFLINK_HTTP_LOG=1 asks for them."""

from __future__ import annotations

import os
import subprocess
import sys

PROGRAM = """
import logging
logging.basicConfig(level=logging.INFO)
import httpx
import yarnflink.client.rest_client  # what `yarnflink run` and the pyflink environment import
client = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(200, json={})))
client.get("http://127.0.0.1:8081/jobs/overview")
logging.getLogger("job").info("the program's own line")
"""


def _run(extra_env: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if k != "YARNFLINK_HTTP_LOG"}
    env.update(extra_env)
    r = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stderr


def test_http_requests_are_not_logged_at_info() -> None:
    err = _run({})
    assert "the program's own line" in err
    assert "HTTP Request" not in err


def test_yarnflink_http_log_shows_them() -> None:
    assert "HTTP Request: GET http://127.0.0.1:8081/jobs/overview" in _run({"YARNFLINK_HTTP_LOG": "1"})
