"""The REST client follows the leading master through ZooKeeper (issue 6, item 2): a standby's 503
or a gone master make it ask ZooKeeper for ``leader/rest_server`` and send the request again, until
``rest.await-leader-timeout``. Real HTTP servers on loopback and a real ZooKeeper."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.zk import free_ports
from yarnflink.client.leader import RestLeaderResolver, ha_config_for, register_ha
from yarnflink.client.rest_client import RestClient, RestClientError
from yarnflink.common.config import Configuration
from yarnflink.highavailability.leaderelection import LeaderInformation
from yarnflink.security.client import RestCredentials


class _Master:
    """A REST endpoint answering every request with ``status`` and a JSON body."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        master = self
        self.status, self.body, self.requests = status, body, []

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                master.requests.append((self.command, self.path, self.headers.get("authorization")))
                data = json.dumps(master.body).encode()
                self.send_response(master.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                self._answer()

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("content-length", 0)))
                self._answer()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def masters() -> Iterator[list[_Master]]:
    made: list[_Master] = []
    yield made
    for m in made:
        m.close()


def _publish(zookeeper: Any, config: Configuration, url: str) -> None:
    from kazoo.client import KazooClient

    from yarnflink.highavailability.services import REST_SERVER
    from yarnflink.highavailability.zookeeper.client import ZooKeeperPaths

    path = ZooKeeperPaths.from_config(config).connection_info(REST_SERVER)
    client = KazooClient(hosts=zookeeper.address, timeout=10)
    client.start(10)
    try:
        client.ensure_path(path)
        client.set(path, LeaderInformation("session", url).to_bytes())
    finally:
        client.stop()
        client.close()


def _client(url: str, config: Configuration, timeout_s: str = "30 s") -> RestClient:
    config = config.merged({"rest.await-leader-timeout": timeout_s})
    return RestClient(url, timeout=5, credentials=RestCredentials(), leader_resolver=RestLeaderResolver(config))


def test_a_standby_answering_503_sends_the_client_to_the_leader_zookeeper_names(
    zookeeper: Any, ha_config: Configuration, masters: list[_Master]
) -> None:
    standby = _Master(503, {"errors": ["this master is not the leader"], "leader": None})
    leader = _Master(200, {"jobs": []})
    masters += [standby, leader]
    _publish(zookeeper, ha_config, leader.url)
    with _client(standby.url, ha_config) as rest:
        assert rest.jobs_overview() == []
        assert rest.base_url == leader.url and rest.last_request_retried
        assert rest.jobs_overview() == [] and not rest.last_request_retried  # stays with the leader
    assert [r[1] for r in standby.requests] == ["/jobs/overview"]
    assert ha_config_for(leader.url) is not None  # later clients of this process follow it too


def test_a_gone_master_is_replaced_by_the_leader_once_it_is_published(
    zookeeper: Any, ha_config: Configuration, masters: list[_Master]
) -> None:
    (dead_port,) = free_ports(1)
    leader = _Master(200, {"taskmanagers": [{"id": "te"}]})
    masters.append(leader)
    with _client(f"http://127.0.0.1:{dead_port}", ha_config) as rest:
        timer = threading.Timer(0.5, _publish, (zookeeper, ha_config, leader.url))  # a takeover under way
        timer.start()
        try:
            assert rest.taskmanagers() == [{"id": "te"}]
        finally:
            timer.join()
        assert rest.base_url == leader.url


def test_a_resubmission_after_a_failover_that_finds_the_job_stored_counts_as_submitted(
    zookeeper: Any, ha_config: Configuration, masters: list[_Master]
) -> None:
    (dead_port,) = free_ports(1)
    leader = _Master(409, {"errors": ["job j1 was already submitted"]})
    masters.append(leader)
    _publish(zookeeper, ha_config, leader.url)
    with _client(f"http://127.0.0.1:{dead_port}", ha_config) as rest:
        assert rest.submit_job({"jobId": "j1"}) == "j1"
    with _client(leader.url, ha_config) as rest:  # sent once: a 409 is the answer
        with pytest.raises(RestClientError, match="already submitted"):
            rest.submit_job({"jobId": "j1"})


def test_a_submission_a_deposed_leader_refuses_with_503_is_sent_to_the_next_leader(
    zookeeper: Any, ha_config: Configuration, masters: list[_Master]
) -> None:
    """Issue 22, item 2: a leader resuming from a freeze refuses a submission with 503 (its fenced
    write failed, nothing of the job stayed); the client submits it to the leader ZooKeeper names."""
    deposed = _Master(503, {"errors": ["this master is not the leader; no leader is known yet"], "leader": None})
    leader = _Master(202, {"jobUrl": "/jobs/j1"})
    masters += [deposed, leader]
    _publish(zookeeper, ha_config, leader.url)
    with _client(deposed.url, ha_config) as rest:
        assert rest.submit_job({"jobId": "j1"}) == "j1"
        assert rest.base_url == leader.url and rest.last_request_retried
    assert [r[:2] for r in deposed.requests] == [("POST", "/jobs")]
    assert [r[:2] for r in leader.requests] == [("POST", "/jobs")]


def test_the_same_client_resubmitting_a_job_whose_submission_may_have_landed_gets_it_submitted(
    masters: list[_Master],
) -> None:
    master = _Master(500, {"errors": ["Internal server error: the answer was lost"]})
    masters.append(master)
    with RestClient(master.url, timeout=5, credentials=RestCredentials()) as rest:
        with pytest.raises(RestClientError, match="the answer was lost"):
            rest.submit_job({"jobId": "j1"})
        master.status, master.body = 409, {"errors": ["job j1 was already submitted"]}
        assert rest.submit_job({"jobId": "j1"}) == "j1"  # the first attempt had been applied
        with pytest.raises(RestClientError, match="already submitted"):
            rest.submit_job({"jobId": "j2"})  # this client never sent j2: another submission's
    with RestClient(master.url, timeout=5, credentials=RestCredentials()) as other:
        with pytest.raises(RestClientError, match="already submitted"):
            other.submit_job({"jobId": "j1"})


def test_without_a_leader_the_client_gives_up_after_the_await_leader_timeout(
    zookeeper: Any, ha_config: Configuration, masters: list[_Master]
) -> None:
    standby = _Master(503, {"errors": ["this master is not the leader"], "leader": None})
    masters.append(standby)
    with _client(standby.url, ha_config, timeout_s="1 s") as rest:
        with pytest.raises(RestClientError, match="no leading master answered within 1s"):
            rest.overview()
    assert len(standby.requests) > 1


def test_a_cluster_without_ha_gets_no_retries(masters: list[_Master]) -> None:
    standby = _Master(503, {"errors": ["busy"]})
    masters.append(standby)
    with RestClient(standby.url, timeout=5, credentials=RestCredentials()) as rest:
        assert rest.leader_resolver is None
        with pytest.raises(RestClientError, match="busy"):
            rest.overview()
    assert len(standby.requests) == 1


def test_clients_find_the_ha_configuration_by_any_master_url(ha_config: Configuration) -> None:
    register_ha(["http://127.0.0.1:1/", "http://127.0.0.1:2"], ha_config)
    assert ha_config_for("http://127.0.0.1:1") is ha_config
    assert ha_config_for("http://127.0.0.1:2/") is ha_config
    assert ha_config_for("http://127.0.0.1:3") is None
