"""Checkpoints, savepoints and restore on S3 (issue 5 item 9), through moto's S3 server run as
its own process on loopback: TaskExecutors write state files and the JobMaster writes
``_metadata`` through s3fs. An event-time window aggregation checkpointing every 200 ms to S3
survives ten SIGKILLed TaskExecutors exactly once (test_checkpointing's kill drill); savepoints
taken to S3 are relocated to another prefix and restored at parallelism 2 -> 3 -> 1 to an
exactly-once result (test_savepoints' rescale). An unreachable endpoint is a clear error that
names the path, and the cluster goes on."""

from __future__ import annotations

import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from yarnflink.api.environment import set_default_executor

from .conftest import Cluster, start_cluster, wait_until
from .kill_drill import (
    KILLS,
    assert_exact_after_kills,
    checkpointed_env,
    committed_windows,
    expected_windows,
    kill_taskexecutors,
    start_kill_cluster,
    window_job,
)
from .test_savepoints import (
    Cli,
    checkpoints_of,
    committed,
    expected_running_sums,
    root_exception,
    running_with_checkpoint,
    state_of,
)

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

        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )
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
    c = start_cluster(
        tmp_path_factory.mktemp("s3-cluster"),
        taskexecutors=2,
        slots=2,
        s3_endpoint=moto_endpoint,
        s3_access__key="testing",
        s3_secret__key="testing",
        s3_path_style_access="true",
    )
    yield c
    c.stop()


@pytest.fixture
def s3_kill_cluster(tmp_path_factory: pytest.TempPathFactory, moto_endpoint: str) -> Iterator[Cluster]:
    """test_checkpointing's kill-drill cluster (three TaskExecutors, two slots each, a killed one
    replaced), with S3 through moto; only for the drill, so stopped right after it."""
    c = start_kill_cluster(
        tmp_path_factory.mktemp("s3-kill-cluster"),
        s3_endpoint=moto_endpoint,
        s3_access__key="testing",
        s3_secret__key="testing",
        s3_path_style_access="true",
    )
    yield c
    set_default_executor(None)
    c.stop()


def s3_fs(endpoint: str) -> Any:
    import s3fs

    return s3fs.S3FileSystem(
        endpoint_url=endpoint, key="testing", secret="testing", client_kwargs={"region_name": "us-east-1"}
    )


def completed_checkpoints_on_s3(fs: Any, job_dir: str) -> list[str]:
    """The ``chk-*`` directories under ``job_dir`` (bucket/key, no scheme) that have a ``_metadata``."""
    chk = [p for p in fs.ls(job_dir, refresh=True) if p.rsplit("/", 1)[-1].startswith("chk-")]
    return [p for p in chk if fs.exists(f"{p}/_metadata")]


def relocate(fs: Any, savepoint: str, target: str) -> str:
    """Copies the savepoint at ``savepoint`` (an s3:// URL) to ``target`` (bucket/key), deletes the
    original, and returns the copy's URL."""
    source = savepoint[len("s3://") :]
    names = sorted(p.rsplit("/", 1)[-1] for p in fs.ls(source, refresh=True))
    for name in names:
        fs.copy(f"{source}/{name}", f"{target}/{name}")
    fs.rm(source, recursive=True)
    fs.invalidate_cache()
    assert not fs.exists(source)
    assert sorted(p.rsplit("/", 1)[-1] for p in fs.ls(target, refresh=True)) == names
    return f"s3://{target}"


def test_event_time_windows_on_s3_are_exactly_once_across_taskexecutor_kills(
    s3_kill_cluster: Cluster, moto_endpoint: str, tmp_path: Path
) -> None:
    """The kill drill of test_checkpointing with the checkpoints on S3: the window operator's keyed
    state and timers go to S3 every 200 ms, ten TaskExecutors are SIGKILLed at random points, and
    every restart restores from S3; the committed output is exactly a failure-free run's."""
    s3_kill_cluster.executor()
    prefix = f"{BUCKET}/{tmp_path.name}"
    flag = tmp_path / "slow"
    flag.touch()
    out = tmp_path / "out"
    env = checkpointed_env(f"s3://{prefix}/checkpoints")
    window_job(env, flag, out)
    client = env.execute_async("windows checkpointed to S3 under kills")
    job_id = client.get_job_id()
    kill_taskexecutors(s3_kill_cluster, job_id, KILLS, random.Random())
    fs = s3_fs(moto_endpoint)
    assert completed_checkpoints_on_s3(fs, f"{prefix}/checkpoints/{job_id}")  # the job's checkpoints are on S3
    flag.unlink()  # full speed to the end
    client.get_job_execution_result()

    stats = assert_exact_after_kills(s3_kill_cluster, job_id, KILLS, out, committed_windows(out), expected_windows())
    restored = stats["latest"]["restored"]
    assert restored is not None and restored["external_path"].startswith(f"s3://{prefix}/checkpoints/{job_id}/chk-")
    assert restored["is_savepoint"] is False


def test_checkpoints_savepoints_and_rescale_2_3_1_through_relocated_savepoints_on_s3(
    s3_cluster: Cluster, moto_endpoint: str, tmp_path: Path
) -> None:
    """test_savepoints' rescale on S3: checkpoints and savepoints on S3, each restore (at
    parallelism 3, then 1) from a savepoint copied to another prefix with the original deleted."""
    cli = Cli(s3_cluster, tmp_path)
    prefix = f"{BUCKET}/{tmp_path.name}"
    cli.checkpoints = f"s3://{prefix}/checkpoints"
    fs = s3_fs(moto_endpoint)
    first = cli.run(2)
    running_with_checkpoint(s3_cluster, first, timeout=180)
    assert completed_checkpoints_on_s3(fs, f"{prefix}/checkpoints/{first}")
    # yarnflink savepoint JOBID DIR: the job keeps running
    taken = cli.savepoint_path(cli("savepoint", "-m", s3_cluster.rest_url, first, f"s3://{prefix}/savepoints"))
    assert taken.startswith(f"s3://{prefix}/savepoints/savepoint-") and fs.exists(f"{taken[len('s3://') :]}/_metadata")
    assert state_of(s3_cluster, first) == "RUNNING"
    stopped = cli.savepoint_path(cli("stop", "-m", s3_cluster.rest_url, "-p", f"s3://{prefix}/savepoints", first))
    assert stopped.startswith(f"s3://{prefix}/savepoints/savepoint-") and stopped != taken
    assert state_of(s3_cluster, first) == "FINISHED"  # stop-with-savepoint: printed once the job finished
    names = [p.rsplit("/", 1)[-1] for p in fs.ls(stopped[len("s3://") :], refresh=True)]
    assert "_metadata" in names and any(n.endswith(".arrow") for n in names), names  # self-contained

    # 2 -> 3, from a copy under another prefix, the original deleted
    moved = relocate(fs, stopped, f"{prefix}/moved/to-3")
    second = cli.run(3, "-s", moved)
    running_with_checkpoint(s3_cluster, second, timeout=180)
    restored = checkpoints_of(s3_cluster, second)["latest"]["restored"]
    assert restored["external_path"] == moved and restored["is_savepoint"] is True
    assert [v["parallelism"] for v in s3_cluster.rest.job(second)["vertices"]].count(3) == 1
    stopped2 = cli.savepoint_path(cli("stop", "-m", s3_cluster.rest_url, "-p", f"s3://{prefix}/savepoints", second))
    assert stopped2.startswith(f"s3://{prefix}/savepoints/savepoint-")
    assert state_of(s3_cluster, second) == "FINISHED"

    # 3 -> 1, again from a relocated copy
    moved2 = relocate(fs, stopped2, f"{prefix}/moved/to-1")
    cli.flag.unlink()  # full speed to the end
    third = cli.run(1, "-s", moved2)
    wait_until(
        lambda: state_of(s3_cluster, third) in ("FINISHED", "FAILED", "CANCELED"),
        timeout=180,
        message="the last job ends",
    )
    assert state_of(s3_cluster, third) == "FINISHED", root_exception(s3_cluster, third)
    restored = checkpoints_of(s3_cluster, third)["latest"]["restored"]
    assert restored["external_path"] == moved2 and restored["is_savepoint"] is True
    assert [v["parallelism"] for v in s3_cluster.rest.job(third)["vertices"]] == [1] * len(
        s3_cluster.rest.job(third)["vertices"]
    )
    got = committed(cli.out)
    expected = expected_running_sums()
    assert len(got) == len(expected), f"{len(got)} committed records, expected {len(expected)}"
    assert got == expected  # the final sums and every intermediate one, exactly once


def test_an_unreachable_s3_endpoint_is_a_clear_error(s3_cluster: Cluster, tmp_path: Path) -> None:
    cli = Cli(s3_cluster, tmp_path)
    cli.flag.unlink()
    dead = f"http://127.0.0.1:{_free_port()}"
    job = cli.run(
        2,
        "-s",
        f"s3://{BUCKET}/savepoints/some-savepoint",
        extra=(f"s3.endpoint={dead}", "s3.access-key=testing", "s3.secret-key=testing"),
    )
    wait_until(lambda: state_of(s3_cluster, job) in ("FAILED", "FINISHED"), timeout=180, message="the job ends")
    assert state_of(s3_cluster, job) == "FAILED"
    cause = root_exception(s3_cluster, job)
    assert f"s3://{BUCKET}/savepoints/some-savepoint" in cause and "failed" in cause, cause
    # the cluster is fine: the next job runs
    assert s3_cluster.rest.overview()["taskmanagers"] == 2
