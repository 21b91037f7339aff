"""Incremental checkpoints end to end (issue 21 items 1 and 3): the drills of incremental_drills
on every backend of ``DRILL_BACKENDS``, on a local directory and on S3 (moto's server), with real
master and TaskExecutor processes. Short forms here; ``YARNFLINK_INCREMENTAL_DRILLS_FULL=1`` for
the full ones (10 kills, 100 checkpoints)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from yarnflink.api.environment import set_default_executor

from .conftest import Cluster
from .incremental_drills import (
    DRILL_BACKENDS,
    FULL,
    Store,
    damaged_shared_file_drill,
    kill_drill,
    retention_drill,
    savepoint_rescale_drill,
)
from .kill_drill import start_kill_cluster
from .test_checkpoint_s3 import BUCKET, moto_endpoint  # noqa: F401 - the fixture

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900 if FULL else 240)]

S3_KEYS = {"s3_access__key": "testing", "s3_secret__key": "testing", "s3_path_style_access": "true"}


@pytest.fixture(scope="module")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_kill_cluster(tmp_path_factory.mktemp("incremental-cluster"))
    yield c
    set_default_executor(None)
    c.stop()


@pytest.fixture(scope="module")
def s3_cluster(tmp_path_factory: pytest.TempPathFactory, moto_endpoint: str) -> Iterator[Cluster]:  # noqa: F811
    c = start_kill_cluster(tmp_path_factory.mktemp("incremental-s3-cluster"), s3_endpoint=moto_endpoint, **S3_KEYS)
    yield c
    set_default_executor(None)
    c.stop()


@pytest.fixture(params=["file", "s3"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Cluster, Store]:
    if request.param == "file":
        return request.getfixturevalue("local_cluster"), Store(f"file://{tmp_path / 'checkpoints'}")
    endpoint = request.getfixturevalue("moto_endpoint")
    options = {
        "endpoint_url": endpoint,
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"region_name": "us-east-1"},
        "config_kwargs": {"s3": {"addressing_style": "path"}},
    }
    return request.getfixturevalue("s3_cluster"), Store(f"s3://{BUCKET}/{uuid.uuid4().hex}", options)


def _forms(*short: tuple[str, str]) -> Any:
    """(storage, backend) pairs of a drill: every pair in the full form; in the suite's short form
    only ``short`` (between them the drills cover both backends and both storages)."""
    pairs = [(w, b) for w in ("file", "s3") for b in DRILL_BACKENDS] if FULL else list(short)
    return pytest.mark.parametrize(("where", "backend"), pairs, indirect=["where"])


@_forms(("file", "hashmap"), ("file", "rocksdb"), ("s3", "rocksdb"))
def test_taskexecutor_kills_with_incremental_checkpoints_are_exactly_once(
    where: tuple[Cluster, Store], backend: str, tmp_path: Path
) -> None:
    cluster, store = where
    kill_drill(cluster, tmp_path, store, backend)


@_forms(("file", "hashmap"))
def test_savepoints_of_an_incremental_job_are_self_contained_and_rescale_2_3_1_exactly(
    where: tuple[Cluster, Store], backend: str, tmp_path: Path
) -> None:
    cluster, store = where
    savepoint_rescale_drill(cluster, tmp_path, store, backend)


@_forms(("file", "hashmap"))
def test_a_corrupt_or_missing_shared_file_is_named_and_the_previous_checkpoint_restored(
    where: tuple[Cluster, Store], backend: str, tmp_path: Path
) -> None:
    cluster, store = where
    damaged_shared_file_drill(cluster, tmp_path, store, backend)


@_forms(("file", "rocksdb"))
def test_after_many_checkpoints_storage_holds_only_what_the_retained_ones_refer_to(
    where: tuple[Cluster, Store], backend: str, tmp_path: Path
) -> None:
    cluster, store = where
    retention_drill(cluster, tmp_path, store, backend)
