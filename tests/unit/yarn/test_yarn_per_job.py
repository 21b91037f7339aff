"""Per-job clusters on YARN (issue 17): the master of an attached per-job application waits, once
its jobs ended, until the client (on another host: no pid to watch) says it has the results, or
``yarn.per-job.result-timeout``; a detached one ends with its jobs; a failed job makes the master
exit non-zero (YARN: the application ends FAILED). A master that cannot start says why, where the
client reads it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.unit.yarn.fake_skein import FakeApplicationClient, FakeSkeinClient
from yarnflink.cli.main import main
from yarnflink.common.config import Configuration
from yarnflink.deployment.yarn import YarnDeploymentError
from yarnflink.deployment.yarn import client as yarn_client
from yarnflink.deployment.yarn.client import wait_for_rest_url
from yarnflink.deployment.yarn.master import prepare
from yarnflink.deployment.yarn.spec import CLIENT_DONE_KEY, START_ERROR_KEY
from yarnflink.dispatcher.dispatcher import JobEntry
from yarnflink.entrypoint.master import MasterProcess, job_cluster_done_for_remote_client, run_master

CONFIG = {
    "rest.port": "0",
    "jobmanager.rpc.port": "0",
    "security.rest.authentication": "none",
    "security.ssl.internal.enabled": "false",
}


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YARNFLINK_SESSIONS_DIR", str(tmp_path / "sessions"))
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)


class Client:
    def __init__(self) -> None:
        self.done = False

    def gone(self) -> bool:
        return self.done


@pytest.fixture
def per_job_master() -> Iterator[tuple[MasterProcess, Client]]:
    client = Client()
    master = MasterProcess(Configuration(CONFIG), per_job=True, client_gone=client.gone, client_wait_s=3600)
    master.start()
    yield master, client
    master.stop()


def _end_job(master: MasterProcess, state: str) -> None:
    async def add() -> None:
        entry = JobEntry("a" * 32, "wordcount", 0, archive={"details": {"state": state}})
        master.dispatcher.jobs[entry.job_id] = entry

    master.dispatcher.call(add)


def test_attached_per_job_master_waits_for_its_client_after_the_job_ended(
    per_job_master: tuple[MasterProcess, Client],
) -> None:
    master, client = per_job_master
    assert not master._job_cluster_done()  # no job yet, the client is still building it
    _end_job(master, "FINISHED")
    assert not master._job_cluster_done()  # ended, but the client has not fetched the result
    client.done = True
    assert master._job_cluster_done()
    master.wait()  # returns at once: done
    assert master.exit_code == 0


def test_a_failed_per_job_job_makes_the_master_exit_non_zero(per_job_master: tuple[MasterProcess, Client]) -> None:
    master, client = per_job_master
    _end_job(master, "FAILED")
    client.done = True
    master.wait()
    assert master.exit_code == 1  # skein: "driver failed" -> the YARN application ends FAILED


def test_a_per_job_master_that_never_gets_a_job_ends_after_the_bound() -> None:
    """E.g. YARN's second attempt of a per-job application whose job ended in the first: no job
    comes and the key-value store (with the client's word) was the first ApplicationMaster's."""
    master = MasterProcess(Configuration(CONFIG), per_job=True, client_gone=lambda: False, client_wait_s=0)
    master.start()
    try:
        assert master._job_cluster_done()
    finally:
        master.stop()


def test_a_client_that_went_away_keeps_the_cluster_for_a_bounded_time() -> None:
    assert not job_cluster_done_for_remote_client(False, 10.0, 300.0)
    assert job_cluster_done_for_remote_client(False, 300.0, 300.0)
    assert job_cluster_done_for_remote_client(True, 0.0, 300.0)


def test_the_client_side_of_the_handshake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeSkeinClient(publish="http://127.0.0.1:9")
    monkeypatch.setattr(yarn_client, "skein_client", fake)
    job = tmp_path / "job.py"
    job.write_text("x = 1\n")
    main(["run", "--per-job", "--target", "yarn", str(job)])
    main(["run", "--per-job", "--target", "yarn", "-d", str(job)])
    attached, detached = (s.master.script for s in fake.specs)
    assert "--per-job --await-client" in attached
    assert "--per-job" in detached and "--await-client" not in detached
    yarn_client.release_job_cluster(Configuration(), "application_1700000000000_0001", client_factory=fake)
    app = fake.app_clients["application_1700000000000_0001"]
    assert app.kv[CLIENT_DONE_KEY] == b"1"
    side = prepare(Configuration(), app_client=app, env={})
    assert side.client_gone()


def test_a_master_that_cannot_reach_its_storage_says_which_path(capsys: pytest.CaptureFixture[str]) -> None:
    config = Configuration({**CONFIG, "execution.checkpointing.dir": "hdfs://nn.example:8020/checkpoints"})
    assert run_master(config, local_taskexecutors=None, info_file=None, workdir=None) == 1
    err = capsys.readouterr().err
    assert "execution.checkpointing.dir hdfs://nn.example:8020/checkpoints cannot be used" in err
    assert "CLASSPATH" in err  # and what it needs


def test_the_start_error_reaches_the_application_and_its_diagnostics() -> None:
    app = FakeApplicationClient()
    prepare(Configuration(), app_client=app, env={}).publish_error("high-availability.storageDir hdfs://x/ha: ...")
    assert app.kv[START_ERROR_KEY].startswith(b"high-availability.storageDir")
    assert app.shutdowns == ["FAILED"]


class GoneApplicationMaster:
    @property
    def kv(self) -> Any:
        raise ConnectionError("Unable to connect to application")  # skein.exceptions.ConnectionError is one


def test_session_start_reports_the_masters_error_not_a_raw_connection_error() -> None:
    fake = FakeSkeinClient(publish=None)
    app_id = fake.submit(type("Spec", (), {"tags": {"yarnflink"}})())
    fake.app_clients[app_id].kv[START_ERROR_KEY] = b"high-availability.storageDir hdfs://nn/ha cannot be used"
    polls = iter(range(100))

    def connect(app_id: str, wait: bool = True) -> Any:
        if next(polls) == 0:
            return fake.app_clients[app_id]
        fake.apps[app_id].state = "FAILED"  # the ApplicationMaster died with its master
        return GoneApplicationMaster()

    fake.connect = connect  # type: ignore[method-assign]
    with pytest.raises(YarnDeploymentError, match="storageDir hdfs://nn/ha cannot be used"):
        wait_for_rest_url(fake, app_id, timeout=30, poll=0)
    fake.apps[app_id].state = "RUNNING"
    with pytest.raises(YarnDeploymentError, match="ended"):
        wait_for_rest_url(fake, app_id, timeout=30, poll=0)  # a ConnectionError is no crash


def _checkpoints_in_flight(base: Path, job_id: str) -> Path:
    job = base / job_id
    (job / "chk-1").mkdir(parents=True)
    (job / "chk-1" / "_metadata").write_bytes(b"done")
    (job / "chk-1" / "._metadata.inprogress-0a1b").write_bytes(b"half")  # a kill between write and rename
    (job / "chk-2").mkdir()  # triggered, nothing written
    (job / "chk-3").mkdir()
    (job / "chk-3" / "op-0-state.arrow").write_bytes(b"state")  # acknowledged in part
    (job / "shared").mkdir()
    return job


def test_a_job_clusters_end_removes_what_checkpoints_in_flight_left(
    per_job_master: tuple[MasterProcess, Client], tmp_path: Path
) -> None:
    master, client = per_job_master
    job_id = "b" * 32
    job = _checkpoints_in_flight(tmp_path / "checkpoints", job_id)

    async def add() -> None:
        user = {"execution.checkpointing.dir": f"file://{tmp_path / 'checkpoints'}"}
        entry = JobEntry(job_id, "j", 0, archive={"details": {"state": "CANCELED"}})
        entry.job_config = {"execution-config": {"user-config": user}}
        master.dispatcher.jobs[job_id] = entry

    master.dispatcher.call(add)
    master.stop()
    assert sorted(p.name for p in job.iterdir()) == ["chk-1", "shared"]
    assert [p.name for p in (job / "chk-1").iterdir()] == ["_metadata"]  # the completed one stays
