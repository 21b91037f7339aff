"""``yarnflink logs`` on YARN (issue 17): the master's log and each TaskExecutor container's, from
the NodeManager while the container runs, from YARN's aggregated logs once it ended."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.yarn.fake_skein import FakeApplicationClient, FakeSkeinClient
from yarnflink.cli.main import build_parser
from yarnflink.common.config import Configuration
from yarnflink.deployment.yarn import YarnDeploymentError
from yarnflink.deployment.yarn.cli import cmd_yarn_logs
from yarnflink.deployment.yarn.logs import ContainerLog, master_container_info
from yarnflink.deployment.yarn.master import prepare
from yarnflink.deployment.yarn.spec import MASTER_CONTAINER_KEY


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YARNFLINK_SESSIONS_DIR", str(tmp_path / "sessions"))


def test_the_master_publishes_where_its_log_is() -> None:
    app = FakeApplicationClient()
    env = {"CONTAINER_ID": "container_1_0001_01_000001", "NM_HOST": "node1", "NM_HTTP_PORT": "8042"}
    prepare(Configuration(), app_client=app, env=env).publish({"rest_url": "http://node1:1"})
    assert json.loads(app.kv[MASTER_CONTAINER_KEY]) == master_container_info(env)
    assert master_container_info(env)["node_http_address"] == "node1:8042"


class Fetched:
    def __init__(self, texts: dict[str, str]) -> None:
        self.texts = texts
        self.urls: list[str] = []
        self.aggregated: list[str] = []

    def fetch(self, url: str) -> str:
        self.urls.append(url)
        if url not in self.texts:
            raise ConnectionError("container gone")
        return self.texts[url]

    def read_aggregated(self, app_id: str, log: ContainerLog) -> str:
        self.aggregated.append(log.container_id)
        return f"aggregated {log.file}\n"


def _cluster() -> tuple[FakeSkeinClient, str]:
    fake = FakeSkeinClient()
    app_id = fake.submit(type("Spec", (), {"tags": {"yarnflink"}})())
    app = fake.app_clients[app_id]
    app.kv[MASTER_CONTAINER_KEY] = json.dumps(
        {"container_id": "container_1_0001_01_000001", "node_http_address": "node1:8042"}
    ).encode()
    app.add_container("taskexecutor")
    app.add_container("taskexecutor")
    app.set_state("taskexecutor_0", "RUNNING")
    app.set_state("taskexecutor_1", "KILLED")
    return fake, app_id


def test_logs_of_the_master_and_of_taskexecutor_containers(capsys: pytest.CaptureFixture[str]) -> None:
    fake, app_id = _cluster()
    master_url = "http://node1:8042/ws/v1/node/containerlogs/container_1_0001_01_000001/application.driver.log"
    te_url = "http://node2.example.com:8042/ws/v1/node/containerlogs/container_1_0001_01_000002/taskexecutor.log"
    fetched = Fetched({master_url: "a\nb\nmaster started\n", te_url: "TaskExecutor serving\n"})

    def logs(*argv: str) -> str:
        args = build_parser().parse_args(["logs", "-yid", app_id, *argv])
        assert cmd_yarn_logs(args, fake, fetched.fetch, fetched.read_aggregated) == 0
        return capsys.readouterr().out

    assert logs("-n", "1") == "master started\n"
    assert logs("-t", "0") == "TaskExecutor serving\n"
    assert logs("-t", "taskexecutor_1") == "aggregated taskexecutor.log\n"  # ended: YARN's aggregated logs
    assert fetched.urls == [master_url, te_url, fetched.urls[-1]] and fetched.aggregated == [
        "container_1_0001_01_000003"
    ]
    listed = logs("--list")
    assert "master" in listed and "taskexecutor_0" in listed and "taskexecutor_1" in listed
    with pytest.raises(YarnDeploymentError, match="the containers are: master, taskexecutor_0, taskexecutor_1"):
        logs("-t", "7")


def test_the_cli_sends_yarn_targets_to_the_yarn_logs() -> None:
    args = build_parser().parse_args(["logs", "--target", "yarn", "-t", "2"])
    assert (args.target, args.taskexecutor) == ("yarn", "2")
