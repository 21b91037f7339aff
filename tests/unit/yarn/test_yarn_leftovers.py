"""What a YARN cluster leaves behind (issue 17): the client's staging directory (configuration,
TLS keys, REST token) goes when the client is done with the cluster; ``session stop`` of an HA
session removes its ZooKeeper nodes and HA storage once YARN says the application ended."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.yarn.fake_skein import FakeSkeinClient
from tests.zk import ZooKeeperServer, unique_root
from yarnflink.common.config import Configuration
from yarnflink.deployment.yarn import YarnDeploymentError
from yarnflink.deployment.yarn.client import release_job_cluster, stop_cluster, submit_cluster
from yarnflink.deployment.yarn.spec import ClusterRequest


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YARNFLINK_SESSIONS_DIR", str(tmp_path / "sessions"))
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR read again


def _staging_dirs(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "tmp").glob("yarnflink-yarn-*"))


def test_a_sessions_staging_directory_goes_with_the_session(tmp_path: Path) -> None:
    fake = FakeSkeinClient()
    cluster = submit_cluster(Configuration(), ClusterRequest(), client_factory=fake)
    (staging,) = _staging_dirs(tmp_path)
    assert Path(cluster.token_file).parent.parent == staging  # the REST token lives there until the stop
    stop_cluster(Configuration(), cluster.app_id, client_factory=fake)
    assert _staging_dirs(tmp_path) == []


def test_job_clusters_staging_directories_go_once_the_client_is_done(tmp_path: Path) -> None:
    fake = FakeSkeinClient()
    job = tmp_path / "job.py"
    job.write_text("")
    submit_cluster(Configuration(), ClusterRequest(mode="application", job_file=str(job)), client_factory=fake)
    submit_cluster(Configuration(), ClusterRequest(mode="per-job", attached=False), client_factory=fake)
    assert _staging_dirs(tmp_path) == []  # skein uploaded them; nothing here needs them
    attached = submit_cluster(Configuration(), ClusterRequest(mode="per-job"), client_factory=fake)
    assert len(_staging_dirs(tmp_path)) == 1  # the attached client uses the REST token until its result
    release_job_cluster(Configuration(), attached.app_id, client_factory=fake)
    assert _staging_dirs(tmp_path) == []


def test_a_failed_submission_leaves_no_staging_directory(tmp_path: Path) -> None:
    fake = FakeSkeinClient(publish=None)
    fake.submit = lambda spec: (_ for _ in ()).throw(YarnDeploymentError("queue full"))  # type: ignore[method-assign]
    with pytest.raises(YarnDeploymentError):
        submit_cluster(Configuration(), ClusterRequest(), client_factory=fake)
    assert _staging_dirs(tmp_path) == []


def test_session_stop_removes_the_ha_sessions_zookeeper_nodes_and_storage(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    from kazoo.client import KazooClient

    root = unique_root("yarnfix")
    storage = tmp_path / "ha"
    config = Configuration(
        {
            "high-availability.type": "zookeeper",
            "high-availability.zookeeper.quorum": zookeeper.address,
            "high-availability.zookeeper.path.root": root,
            "high-availability.storageDir": f"file://{storage}",
        }
    )
    fake = FakeSkeinClient()
    cluster = submit_cluster(config, ClusterRequest(), client_factory=fake)
    # what the application's masters left: a JobGraph node of an unfinished job and its file
    zk = KazooClient(hosts=zookeeper.address, timeout=10)
    zk.start(10)
    try:
        zk.create(f"{root}/{cluster.app_id}/jobgraphs/j1", b"x", makepath=True)
        (storage / cluster.app_id).mkdir(parents=True)
        (storage / cluster.app_id / "jobgraph-j1").write_bytes(b"graph")
        stop_cluster(Configuration(), cluster.app_id, client_factory=fake, poll=0)  # a CLI without the HA keys
        assert zk.exists(f"{root}/{cluster.app_id}") is None and zk.get_children(root) == []
        assert not (storage / cluster.app_id).exists()
    finally:
        zk.delete(root, recursive=True) if zk.exists(root) else None
        zk.stop()
        zk.close()
