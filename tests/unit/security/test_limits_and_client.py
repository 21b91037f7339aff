"""JobGraph size limits, and how REST clients find a cluster's credentials."""

from __future__ import annotations

from pathlib import Path

import pytest

from yarnflink.client.rest_client import RestClient, find_credentials
from yarnflink.dispatcher.limits import JobGraphTooLarge, check_job_graph_size, deployment_size_estimate
from yarnflink.jobgraph.jobgraph import IntermediateDataSet, JobEdge, JobGraph, JobVertex, OperatorDescriptor
from yarnflink.security import client as creds


def graph(spec_bytes: int, upstream_parallelism: int = 1) -> JobGraph:
    src = JobVertex(
        "a" * 32,
        "src",
        upstream_parallelism,
        128,
        [OperatorDescriptor(0, "src", "source", b"s", output_datasets=["d" * 32])],
    )
    big = JobVertex("b" * 32, "big", 1, 128, [OperatorDescriptor(1, "big", "map", b"x" * spec_bytes)])
    return JobGraph(
        "f" * 32,
        "j",
        [src, big],
        [IntermediateDataSet("d" * 32, "a" * 32)],
        [JobEdge("d" * 32, "b" * 32, "hash", b"k")],
    )


def test_a_vertex_that_could_never_be_deployed_is_refused_at_submission() -> None:
    check_job_graph_size(graph(1000), max_message_bytes=4 << 20)
    with pytest.raises(JobGraphTooLarge, match="vertex 'big'.*RPC message limit of 4 MiB"):
        check_job_graph_size(graph(4 << 20), max_message_bytes=4 << 20)
    # input channels count too: one descriptor per upstream subtask
    assert deployment_size_estimate(graph(0, 20000), "b" * 32) > 20000 * 100
    with pytest.raises(JobGraphTooLarge):
        check_job_graph_size(graph(0, 32768), max_message_bytes=4 << 20)


def test_url_keys_normalise_localhost_and_default_ports() -> None:
    assert creds.url_key("http://localhost:8081/") == creds.url_key("http://127.0.0.1:8081")
    assert creds.url_key("https://Host.example") == "https://host.example:443"
    assert creds.url_key("127.0.0.1:9") == "http://127.0.0.1:9"


def test_registered_clusters_then_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YARNFLINK_SESSIONS_DIR", str(tmp_path / "sessions"))
    for var in (creds.TOKEN_ENV, creds.TOKEN_FILE_ENV, creds.CA_ENV):
        monkeypatch.delenv(var, raising=False)
    token_file = tmp_path / "t"
    token_file.write_text("s3cret\n")
    url = "http://127.0.0.1:1"
    assert find_credentials(url).token is None
    assert RestClient(url).headers == {}
    creds.register("http://localhost:1", creds.RestCredentials(str(token_file)))
    try:
        assert RestClient(url).headers == {"authorization": "Bearer s3cret"}
    finally:
        creds.unregister(url)
    monkeypatch.setenv(creds.TOKEN_ENV, "from-env")
    assert RestClient(url).headers == {"authorization": "Bearer from-env"}


def test_a_master_process_knows_its_own_clusters_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YARNFLINK_SESSIONS_DIR", str(tmp_path / "sessions"))
    for var in (creds.TOKEN_ENV, creds.TOKEN_FILE_ENV, creds.CA_ENV):
        monkeypatch.delenv(var, raising=False)
    token_file = tmp_path / "t"
    token_file.write_text("own\n")
    creds.set_process_default(creds.RestCredentials(str(token_file)))
    try:  # e.g. an application's main() running inside the master
        assert RestClient("http://127.0.0.1:2").headers == {"authorization": "Bearer own"}
    finally:
        creds.set_process_default(None)
    assert RestClient("http://127.0.0.1:2").headers == {}
