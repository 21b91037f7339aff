from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.yarn.fake_skein import FakeApplicationClient, FakeSkeinClient
from yarnflink.cli.main import main
from yarnflink.common.config import Configuration
from yarnflink.deployment.yarn import YarnDeploymentError
from yarnflink.deployment.yarn import client as yarn_client
from yarnflink.deployment.yarn.client import (
    last_session,
    list_clusters,
    rest_url_of,
    stop_cluster,
    submit_cluster,
)
from yarnflink.deployment.yarn.master import prepare, yarn_master_config, yarn_taskexecutor_config
from yarnflink.deployment.yarn.spec import REST_URL_KEY, ClusterRequest


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YARNFLINK_SESSIONS_DIR", str(tmp_path / "sessions"))
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)


def test_session_submit_waits_for_the_rest_address_and_is_remembered(tmp_path: Path) -> None:
    fake = FakeSkeinClient(publish="http://node7:40123")
    cluster = submit_cluster(
        Configuration(), ClusterRequest(taskexecutors=2), client_factory=fake, staging=tmp_path / "staging"
    )
    assert cluster.app_id == "application_1700000000000_0001" and cluster.rest_url == "http://node7:40123"
    assert "--local-taskexecutors 2" in fake.specs[0].master.script
    last = last_session()
    assert last is not None and last.app_id == cluster.app_id
    assert rest_url_of(Configuration(), None, client_factory=fake) == "http://node7:40123"  # the last session
    assert rest_url_of(Configuration(), cluster.app_id, client_factory=fake) == "http://node7:40123"


def test_an_application_that_ends_before_its_master_started_is_an_error(tmp_path: Path) -> None:
    fake = FakeSkeinClient(publish=None)
    orig = fake.submit

    def submit_and_fail(spec: object) -> str:
        app_id = orig(spec)
        fake.apps[app_id].state, fake.apps[app_id].diagnostics = "FAILED", "AM container exited with 1"
        return app_id

    fake.submit = submit_and_fail  # type: ignore[method-assign]
    with pytest.raises(YarnDeploymentError, match="AM container exited with 1"):
        submit_cluster(Configuration(), ClusterRequest(), client_factory=fake, staging=tmp_path / "s")


def test_unknown_or_foreign_application_ids() -> None:
    fake = FakeSkeinClient(publish=None)
    with pytest.raises(YarnDeploymentError, match="no YARN session"):
        rest_url_of(Configuration(), None, client_factory=fake)
    with pytest.raises(YarnDeploymentError, match="no YARN application"):
        rest_url_of(Configuration(), "application_1_0042", client_factory=fake)
    app_id = fake.submit(type("Spec", (), {"tags": {"other"}})())
    with pytest.raises(YarnDeploymentError, match="not a yarnflink cluster"):
        rest_url_of(Configuration(), app_id, client_factory=fake)


def test_list_shows_only_live_yarnflink_applications_and_stop_shuts_down(tmp_path: Path) -> None:
    fake = FakeSkeinClient()
    mine = submit_cluster(Configuration(), ClusterRequest(), client_factory=fake, staging=tmp_path / "s").app_id
    fake.submit(type("Spec", (), {"tags": {"spark"}})())
    assert [a.id for a in list_clusters(Configuration(), client_factory=fake)] == [mine]
    stop_cluster(Configuration(), mine, client_factory=fake)
    assert fake.app_clients[mine].shutdowns == ["SUCCEEDED"] and last_session() is None


def test_stop_falls_back_to_killing_through_yarn() -> None:
    fake = FakeSkeinClient()
    app_id = fake.submit(type("Spec", (), {"tags": {"yarnflink"}})())
    fake.app_clients[app_id].shutdown = lambda *a, **k: (_ for _ in ()).throw(ConnectionError("AM gone"))  # type: ignore[method-assign]
    stop_cluster(Configuration(), app_id, client_factory=fake)
    assert fake.killed == [app_id]


def test_kerberos_needs_principal_and_keytab(tmp_path: Path) -> None:
    with pytest.raises(YarnDeploymentError, match="both"):
        yarn_client.skein_client(Configuration({"security.kerberos.login.principal": "flink@REALM"}))
    with pytest.raises(YarnDeploymentError, match="does not exist"):
        yarn_client.skein_client(
            Configuration(
                {
                    "security.kerberos.login.principal": "flink@REALM",
                    "security.kerberos.login.keytab": str(tmp_path / "no.keytab"),
                }
            )
        )


def test_master_config_inside_the_application_master() -> None:
    env = {"SKEIN_APPLICATION_ID": "application_1_0007"}
    config = yarn_master_config(Configuration(), env, "node3.example.com")
    assert config.get("jobmanager.rpc.address") == "node3.example.com"
    assert config.get("rest.address") == "node3.example.com" and config.get("rest.port") == 0
    assert config.get("high-availability.cluster-id") == "application_1_0007"
    explicit = yarn_master_config(Configuration({"high-availability.cluster-id": "etl"}), env, "h")
    assert explicit.get("high-availability.cluster-id") == "etl"


def test_every_process_of_the_application_has_one_ha_cluster_id() -> None:
    """HA on YARN without an explicit cluster id: the TaskExecutor containers must look for the
    leader under the master's cluster id (the application id), or none ever registers."""
    env = {"SKEIN_APPLICATION_ID": "application_1_0007", "SKEIN_CONTAINER_ID": "taskexecutor_3"}
    ha = Configuration({"high-availability.type": "zookeeper"})
    master = yarn_master_config(ha, env, "node3")
    te = yarn_taskexecutor_config(ha, env, "node5.example.com")
    assert te.get("high-availability.cluster-id") == master.get("high-availability.cluster-id") == "application_1_0007"
    assert te.get("taskmanager.host") == "node5.example.com"  # reachable from other nodes, not loopback
    explicit = Configuration({"high-availability.cluster-id": "etl", "taskmanager.host": "10.0.0.5"})
    te = yarn_taskexecutor_config(explicit, env, "node5")
    assert (te.get("high-availability.cluster-id"), te.get("taskmanager.host")) == ("etl", "10.0.0.5")


def test_the_taskexecutor_command_applies_the_yarn_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    from yarnflink.entrypoint import taskexecutor as te_entrypoint

    seen: list[tuple[object, ...]] = []
    monkeypatch.setattr(te_entrypoint, "run_taskexecutor", lambda *a, **k: seen.append((a, k)) or 0)
    assert main(["taskexecutor", "start", "--yarn", "--master", "am:1", "--resource-id", "te-1"]) == 0
    assert seen[0][1]["yarn"] is True


def test_master_publishes_its_rest_address_unless_standby() -> None:
    app = FakeApplicationClient()
    side = prepare(Configuration(), app_client=app, env={"SKEIN_APPLICATION_ID": "a"})
    assert side.driver.app_client is app
    side.publish({"rest_url": "http://node3:8081"})
    assert app.kv[REST_URL_KEY] == b"http://node3:8081"
    standby = FakeApplicationClient()
    prepare(Configuration(), standby=True, app_client=standby, env={}).publish({"rest_url": "http://x:1"})
    assert standby.kv == {}


def test_cli_session_start_list_stop(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeSkeinClient(publish="http://node7:40123")
    monkeypatch.setattr(yarn_client, "skein_client", fake)
    assert (
        main(
            [
                "session",
                "start",
                "--target",
                "yarn",
                "-n",
                "3",
                "-s",
                "2",
                "--tm-memory",
                "2048",
                "--jm-memory",
                "1024",
                "--queue",
                "etl",
                "--name",
                "nightly",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "application_1700000000000_0001" in out and "REST address: http://node7:40123" in out
    spec = fake.specs[0]
    assert (spec.queue, spec.name, spec.master.resources.memory) == ("etl", "nightly", 1024)
    assert (spec.services["taskexecutor"].resources.memory, spec.services["taskexecutor"].resources.vcores) == (2048, 2)
    assert main(["session", "list", "--target", "yarn"]) == 0
    assert "application_1700000000000_0001" in capsys.readouterr().out
    assert main(["session", "stop", "application_1700000000000_0001"]) == 0
    assert fake.app_clients["application_1700000000000_0001"].shutdowns == ["SUCCEEDED"]


def test_cli_errors_are_user_errors(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(yarn_client, "skein_client", FakeSkeinClient())
    job = tmp_path / "job.py"
    job.write_text("")
    assert main(["run", "-yid", "application_1_0099", str(job)]) == 1
    assert "no YARN application application_1_0099" in capsys.readouterr().err
    assert main(["session", "start", "--target", "yarn", "--standby", "1"]) == 1
    assert "ZooKeeper" in capsys.readouterr().err


def test_cli_application_mode_detached_submits_the_job_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeSkeinClient(publish=None)
    monkeypatch.setattr(yarn_client, "skein_client", fake)
    job = tmp_path / "job.py"
    job.write_text("print('hi')\n")
    assert main(["run", "--application", "--target", "yarn", "-d", str(job), "x"]) == 0
    assert "--application job.py --application-arg x" in fake.specs[0].master.script
    orig = fake.submit

    def submit_and_fail(spec: object) -> str:  # the job script fails in the ApplicationMaster
        app_id = orig(spec)
        fake.apps[app_id].state, fake.apps[app_id].final_status = "FINISHED", "FAILED"
        return app_id

    fake.submit = submit_and_fail  # type: ignore[method-assign]
    assert main(["run", "--application", "--target", "yarn", str(job)]) == 1  # attached: the final state


def test_internal_tls_certificate_names_every_node(tmp_path: Path) -> None:
    from cryptography import x509

    fake = FakeSkeinClient()
    submit_cluster(Configuration(), ClusterRequest(), client_factory=fake, staging=tmp_path / "s")
    files = fake.specs[0].master.files
    cert_file = files["security-cluster.pem"]
    cert = x509.load_pem_x509_certificate(Path(cert_file.source.replace("file://", "")).read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert {"node1.example.com", "node2.example.com"} <= set(names)


def test_cli_per_job_starts_an_application_and_stops_it_when_no_job_came(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fake = FakeSkeinClient(publish="http://node7:40123")
    monkeypatch.setattr(yarn_client, "skein_client", fake)
    job = tmp_path / "job.py"
    job.write_text("x = 1\n")  # never calls env.execute()
    assert main(["run", "--per-job", "--target", "yarn", "-n", "2", str(job)]) == 1
    assert "defined no job" in capsys.readouterr().err
    (app_id,) = fake.apps
    assert "--per-job" in fake.specs[0].master.script and "--local-taskexecutors 2" in fake.specs[0].master.script
    assert fake.app_clients[app_id].shutdowns == ["SUCCEEDED"]  # not left holding YARN resources
    assert last_session() is None  # a per-job cluster is no session


def test_submission_warns_of_attempts_yarn_will_not_make(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeSkeinClient()
    config = Configuration({"yarn.application-attempts": "3"})
    submit_cluster(config, ClusterRequest(), client_factory=fake, staging=tmp_path / "s")
    assert "yarn.resourcemanager.am.max-attempts is 2" in capsys.readouterr().err


def test_a_submission_yarn_refuses_is_a_user_error(tmp_path: Path) -> None:
    fake = FakeSkeinClient()

    def refuse(spec: object) -> str:
        raise ConnectionError("Failed to connect to the ResourceManager at 127.0.0.1:8032")

    fake.submit = refuse  # type: ignore[method-assign]
    with pytest.raises(YarnDeploymentError, match="did not accept the application: ConnectionError: Failed"):
        submit_cluster(Configuration(), ClusterRequest(), client_factory=fake, staging=tmp_path / "s")
