"""The client of a YARN cluster (issue 17): ``list``/``cancel``/``savepoint``/``stop`` take
``-yid``/``--target yarn`` like ``run``; ``-m URL`` of a YARN session this machine started finds its
REST token by itself; a client follows the application's master to the address YARN's next
attempt publishes after an ApplicationMaster failover."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.unit.yarn.fake_skein import FakeSkeinClient
from yarnflink.cli import main as cli_main
from yarnflink.client.rest_client import RestClient, find_credentials
from yarnflink.common.config import Configuration
from yarnflink.deployment.yarn import client as yarn_client
from yarnflink.deployment.yarn.client import rest_url_of, submit_cluster
from yarnflink.deployment.yarn.spec import REST_URL_KEY, ClusterRequest


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YARNFLINK_SESSIONS_DIR", str(tmp_path / "sessions"))
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.delenv("YARNFLINK_REST_TOKEN_FILE", raising=False)


@pytest.mark.parametrize(
    "argv",
    [
        ["list", "-yid", "APP"],
        ["cancel", "-yid", "APP", "a" * 32],
        ["savepoint", "--application-id", "APP", "a" * 32, "hdfs://nn:8020/sp"],
        ["stop", "-yid", "APP", "a" * 32],
    ],
)
def test_job_commands_find_the_cluster_by_application_id(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> None:
    fake = FakeSkeinClient(publish="http://node7:40123")
    monkeypatch.setattr(yarn_client, "skein_client", fake)
    app_id = fake.submit(type("Spec", (), {"tags": {"yarnflink"}})())
    args = cli_main.build_parser().parse_args([app_id if a == "APP" else a for a in argv])
    assert cli_main._cluster_url(args, Configuration()) == "http://node7:40123"


def test_job_commands_take_the_last_yarn_session_with_target_yarn(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = FakeSkeinClient(publish="http://node7:40123")
    monkeypatch.setattr(yarn_client, "skein_client", fake)
    submit_cluster(Configuration(), ClusterRequest(), client_factory=fake, staging=tmp_path / "s")
    args = cli_main.build_parser().parse_args(["list", "--target", "yarn"])
    assert cli_main._cluster_url(args, Configuration()) == "http://node7:40123"


def test_dash_m_finds_the_rest_token_of_a_yarn_session_started_here(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = FakeSkeinClient(publish="http://node8:40999")
    cluster = submit_cluster(Configuration(), ClusterRequest(), client_factory=fake, staging=tmp_path / "s")
    assert cluster.token_file
    token = Path(cluster.token_file).read_text().strip()
    from yarnflink.security.client import unregister

    unregister("http://node8:40999")  # as in a new process: nothing registered
    assert find_credentials("http://node8:40999").token != token
    args = cli_main.build_parser().parse_args(["list", "-m", "node8:40999"])
    assert cli_main._cluster_url(args, Configuration()) == "http://node8:40999"
    assert find_credentials("http://node8:40999").token == token


class Jobs(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = json.dumps({"jobs": [{"jid": "j1"}]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def next_attempts_master() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Jobs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_client_follows_the_master_of_the_next_application_attempt(
    monkeypatch: pytest.MonkeyPatch, next_attempts_master: str
) -> None:
    import socket

    with socket.socket() as s:  # a port nobody serves: the first attempt's master is gone
        s.bind(("127.0.0.1", 0))
        gone = f"http://127.0.0.1:{s.getsockname()[1]}"
    fake = FakeSkeinClient(publish=gone)
    monkeypatch.setattr(yarn_client, "skein_client", fake)
    app_id = fake.submit(type("Spec", (), {"tags": {"yarnflink"}})())
    url = rest_url_of(Configuration(), app_id)
    assert url == gone
    # YARN's second attempt: a new ApplicationMaster whose master published another address
    fake.app_clients[app_id].kv[REST_URL_KEY] = next_attempts_master.encode()
    with RestClient(url, timeout=5) as rest:
        assert rest.jobs_overview() == [{"jid": "j1"}]
        assert rest.base_url == next_attempts_master


def test_a_client_of_an_application_that_ended_says_so_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket
    import time

    from yarnflink.client.rest_client import RestClientError

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        gone = f"http://127.0.0.1:{s.getsockname()[1]}"
    fake = FakeSkeinClient(publish=gone)
    monkeypatch.setattr(yarn_client, "skein_client", fake)
    app_id = fake.submit(type("Spec", (), {"tags": {"yarnflink"}})())
    url = rest_url_of(Configuration(), app_id)
    fake.apps[app_id].state, fake.apps[app_id].final_status = "FINISHED", "SUCCEEDED"  # stopped meanwhile
    t0 = time.monotonic()
    with RestClient(url, timeout=5) as rest, pytest.raises(RestClientError, match="has ended \\(FINISHED"):
        rest.jobs_overview()
    assert time.monotonic() - t0 < 30  # not the 300 s a next attempt may take
