"""Checkpoints, savepoints and restore on S3 (issue 5 item 9), through moto's S3 server run as
its own process on loopback: TaskExecutors write state files and the JobMaster writes
``_metadata`` through s3fs; a savepoint is taken to S3, the job is stopped, and a job at another
parallelism restores from it to an exactly-once result. An unreachable endpoint is a clear error
that names the path, and the cluster goes on."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from .conftest import Cluster, start_cluster, wait_until
from .test_savepoints import Cli, committed, expected_running_sums, root_exception, running_with_checkpoint, state_of

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

BUCKET = "yarnflink-e2e"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def moto_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("s3fs")
    server = Path(sys.executable).parent / "moto_server"
    if not server.exists():
        pytest.skip("moto_server is not installed (pip install 'moto[server]')")
    port = _free_port()
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "wb")
    proc = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        import boto3

        client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing",
                              aws_secret_access_key="testing", region_name="us-east-1")
        deadline = time.monotonic() + 60
        while True:
            try:
                client.create_bucket(Bucket=BUCKET)
                break
            except Exception:  # noqa: BLE001 - not up yet
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.2)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def s3_cluster(tmp_path_factory: pytest.TempPathFactory, moto_endpoint: str) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("s3-cluster"), taskexecutors=2, slots=2,
                      s3_endpoint=moto_endpoint, s3_access__key="testing", s3_secret__key="testing",
                      s3_path_style_access="true")
    yield c
    c.stop()


def s3_fs(endpoint: str) -> Any:
    import s3fs

    return s3fs.S3FileSystem(endpoint_url=endpoint, key="testing", secret="testing",
                             client_kwargs={"region_name": "us-east-1"})


def test_checkpoints_savepoint_and_rescaled_restore_on_s3(s3_cluster: Cluster, moto_endpoint: str,
                                                           tmp_path: Path) -> None:
    cli = Cli(s3_cluster, tmp_path)
    prefix = f"{BUCKET}/{tmp_path.name}"
    cli.checkpoints = f"s3://{prefix}/checkpoints"
    first = cli.run(2)
    running_with_checkpoint(s3_cluster, first, timeout=180)
    fs = s3_fs(moto_endpoint)
    chk = [p for p in fs.ls(f"{prefix}/checkpoints/{first}", refresh=True) if p.rsplit("/", 1)[-1].startswith("chk-")]
    assert chk and any(fs.exists(f"{p}/_metadata") for p in chk)
    stopped = cli.savepoint_path(cli("stop", "-m", s3_cluster.rest_url, "-p", f"s3://{prefix}/savepoints", first))
    assert stopped.startswith(f"s3://{prefix}/savepoints/savepoint-")
    assert state_of(s3_cluster, first) == "FINISHED"  # stop-with-savepoint: printed once the job finished
    names = [p.rsplit("/", 1)[-1] for p in fs.ls(stopped[len("s3://"):], refresh=True)]
    assert "_metadata" in names and any(n.endswith(".arrow") for n in names), names  # self-contained
    cli.flag.unlink()
    second = cli.run(3, "-s", stopped)
    wait_until(lambda: state_of(s3_cluster, second) in ("FINISHED", "FAILED", "CANCELED"), timeout=180,
               message="the restored job ends")
    assert state_of(s3_cluster, second) == "FINISHED", root_exception(s3_cluster, second)
    restored = s3_cluster.rest.get_json(f"/jobs/{second}/checkpoints")["latest"]["restored"]
    assert restored["external_path"] == stopped and restored["is_savepoint"] is True
    assert committed(cli.out) == expected_running_sums()


def test_an_unreachable_s3_endpoint_is_a_clear_error(s3_cluster: Cluster, tmp_path: Path) -> None:
    cli = Cli(s3_cluster, tmp_path)
    cli.flag.unlink()
    dead = f"http://127.0.0.1:{_free_port()}"
    job = cli.run(2, "-s", f"s3://{BUCKET}/savepoints/some-savepoint",
                  extra=(f"s3.endpoint={dead}", "s3.access-key=testing", "s3.secret-key=testing"))
    wait_until(lambda: state_of(s3_cluster, job) in ("FAILED", "FINISHED"), timeout=180, message="the job ends")
    assert state_of(s3_cluster, job) == "FAILED"
    cause = root_exception(s3_cluster, job)
    assert f"s3://{BUCKET}/savepoints/some-savepoint" in cause and "failed" in cause, cause
    # the cluster is fine: the next job runs
    assert s3_cluster.rest.overview()["taskmanagers"] == 2
