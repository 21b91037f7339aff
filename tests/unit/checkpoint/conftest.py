"""A real S3 endpoint for storage tests: moto's standalone server on a free loopback port."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def s3_server() -> Iterator[dict[str, Any]]:
    pytest.importorskip("s3fs")
    server_mod = pytest.importorskip("moto.server")
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    options = {
        "endpoint_url": f"http://{host}:{port}",
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"region_name": "us-east-1"},
    }
    import boto3

    boto3.client(
        "s3",
        endpoint_url=options["endpoint_url"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    ).create_bucket(Bucket="yarnflink-checkpoints")
    yield options
    server.stop()


@pytest.fixture(params=["file", "s3"])
def checkpoint_dir(request: pytest.FixtureRequest, tmp_path: Any) -> tuple[str, dict[str, Any]]:
    """(checkpoint directory URL, storage options): a local directory, then S3."""
    if request.param == "file":
        return f"file://{tmp_path}/checkpoints", {}
    options = request.getfixturevalue("s3_server")
    return f"s3://yarnflink-checkpoints/{uuid.uuid4().hex}", options
