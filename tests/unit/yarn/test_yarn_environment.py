"""Shipping the client's environment (issue 17, point 6): with neither yarn.ship-archives nor
yarn.python.executable the client packs its environment, uploads it once per content hash to the
cluster's filesystem and reuses it; the containers run its bin/python."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import uuid
from pathlib import Path

import pytest

from tests.unit.yarn.fake_skein import FakeSkeinClient
from yarnflink.common.config import Configuration
from yarnflink.deployment.yarn import YarnDeploymentError
from yarnflink.deployment.yarn.client import submit_cluster
from yarnflink.deployment.yarn.environment import environment_hash, pack_environment, ship_client_environment
from yarnflink.deployment.yarn.options import YarnConfigOptions
from yarnflink.deployment.yarn.spec import ClusterRequest


class Packer:
    def __init__(self) -> None:
        self.packed = 0

    def __call__(self, target: Path) -> None:
        self.packed += 1
        target.write_bytes(b"packed environment")


@pytest.fixture
def cluster_fs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A Hadoop client configuration whose default filesystem is fsspec's in-memory one."""
    fs = f"memory://cluster-{uuid.uuid4().hex[:8]}"
    conf = tmp_path / "hadoop"
    conf.mkdir()
    (conf / "core-site.xml").write_text(
        f"<configuration><property><name>fs.defaultFS</name><value>{fs}</value></property></configuration>"
    )
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    monkeypatch.setenv("YARNFLINK_SESSIONS_DIR", str(tmp_path / "sessions"))
    monkeypatch.setenv("USER", "etl")
    return fs


def test_the_environment_is_uploaded_once_per_content_hash_and_shipped(cluster_fs: str, tmp_path: Path) -> None:
    fake, packer = FakeSkeinClient(), Packer()
    for _ in range(2):
        submit_cluster(Configuration(), ClusterRequest(), client_factory=fake, environment_packer=packer)
    assert packer.packed == 1  # the second session reuses the upload
    name = f"yarnflink-env-{environment_hash()}"
    for spec in fake.specs:
        archive = spec.master.files[name]
        assert archive.source == f"{cluster_fs}/user/etl/.yarnflink/environments/{name}.tar.gz"
        assert spec.master.script.splitlines()[-1].startswith(f"exec ./{name}/bin/python -m yarnflink")
        assert name in spec.services["taskexecutor"].files


def test_a_configured_interpreter_or_archive_ships_nothing(cluster_fs: str) -> None:
    packer = Packer()
    for conf in ({"yarn.python.executable": "/opt/py/bin/python"}, {"yarn.ship-archives": "hdfs:///envs/a.tar.gz"}):
        config = Configuration(conf)
        assert ship_client_environment(config, cluster_fs, packer=packer) is config
    submit_cluster(
        Configuration({"yarn.ship-environment": "false"}),
        ClusterRequest(),
        client_factory=FakeSkeinClient(),
        environment_packer=packer,
    )
    assert packer.packed == 0


def test_no_cluster_filesystem_to_upload_to_is_a_clear_error() -> None:
    with pytest.raises(YarnDeploymentError, match="yarn.environment.dir"):
        ship_client_environment(Configuration(), "file:///", packer=Packer())


# ----------------------------------------------------------------------------- the real venv-pack
def _throwaway_venv(root: Path, *, with_yarnflink: bool) -> Path:
    """A tiny virtualenv (no pip: fast) whose site-packages holds a stand-in yarnflink package."""
    prefix = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=60)
    site_packages = next(prefix.glob("lib/python*/site-packages"))
    if with_yarnflink:
        (site_packages / "yarnflink").mkdir()
        (site_packages / "yarnflink" / "__init__.py").write_text("VERSION = 'shipped'\n")
    else:  # what pip install -e leaves: a path hook to the client's checkout
        (site_packages / "__editable__.yarnflink-0.1.0.pth").write_text("import __editable___yarnflink_finder\n")
    return prefix


def test_a_real_virtualenv_is_packed_by_venv_pack_uploaded_once_and_reused(cluster_fs: str, tmp_path: Path) -> None:
    pytest.importorskip("venv_pack")
    import fsspec

    prefix = _throwaway_venv(tmp_path, with_yarnflink=True)
    packs: list[Path] = []

    def packer(target: Path) -> None:
        pack_environment(target, prefix=str(prefix))
        packs.append(target)
        with tarfile.open(target) as tar:  # checked while the temporary archive exists
            names = set(tar.getnames())
            init = next(n for n in names if n.endswith("site-packages/yarnflink/__init__.py"))
            assert tar.extractfile(init).read() == b"VERSION = 'shipped'\n"  # type: ignore[union-attr]
        assert {"bin/python", "pyvenv.cfg"} <= names

    shipped = [ship_client_environment(Configuration(), cluster_fs, packer=packer) for _ in range(2)]
    assert len(packs) == 1  # the second submission found the content hash uploaded
    url = shipped[0].get(YarnConfigOptions.SHIP_ARCHIVES)
    assert url == shipped[1].get(YarnConfigOptions.SHIP_ARCHIVES)
    assert url == f"{cluster_fs}/user/etl/.yarnflink/environments/yarnflink-env-{environment_hash()}.tar.gz"
    with fsspec.open(url, "rb") as f, tarfile.open(fileobj=f) as tar:
        assert any(n.endswith("site-packages/yarnflink/__init__.py") for n in tar.getnames())


def test_an_environment_without_yarnflink_in_it_is_refused_with_the_reason(tmp_path: Path) -> None:
    pytest.importorskip("venv_pack")
    prefix = _throwaway_venv(tmp_path, with_yarnflink=False)
    with pytest.raises(YarnDeploymentError, match="holds no yarnflink package .*editable"):
        pack_environment(tmp_path / "env.tar.gz", prefix=str(prefix))


def test_a_python_that_is_no_environment_is_refused(tmp_path: Path) -> None:
    with pytest.raises(YarnDeploymentError, match="no virtualenv or conda environment"):
        pack_environment(tmp_path / "env.tar.gz", prefix=str(tmp_path))
