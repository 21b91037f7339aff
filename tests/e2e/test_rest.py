"""The Dispatcher's REST API: Flink's paths and shapes, and clear errors for bad input."""

from __future__ import annotations

import json

import httpx
import pytest

from yarnflink import StreamExecutionEnvironment

from .conftest import Cluster, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def test_cluster_endpoints(cluster: Cluster) -> None:
    ov = cluster.rest.overview()
    assert ov["taskmanagers"] == 2 and ov["slots-total"] == 4
    tms = cluster.rest.taskmanagers()
    assert len(tms) == 2 and all(tm["slotsNumber"] == 2 for tm in tms)
    r = httpx.get(cluster.rest_url + "/config", headers=cluster.auth, timeout=30)
    assert r.status_code == 200 and "flink-version" in r.json()
    spec = httpx.get(cluster.rest_url + "/openapi.json", headers=cluster.auth, timeout=30).json()
    for path in (
        "/jobs",
        "/overview",
        "/jobs/overview",
        "/jobs/{jobid}",
        "/jobs/{jobid}/exceptions",
        "/taskmanagers",
        "/config",
    ):
        assert path in spec["paths"], path
    assert "patch" in spec["paths"]["/jobs/{jobid}"]


@pytest.mark.parametrize(
    "body,status,fragment",
    [
        (b"not json", 400, "not JSON"),
        (b"[1,2,3]", 400, "must be a JSON object"),
        (json.dumps({"jobId": "0" * 32, "jobName": "x", "vertices": []}).encode(), 400, "vertices must not be empty"),
        (json.dumps({"jobId": "xyz", "jobName": "x", "vertices": [{}]}).encode(), 400, "jobId must be 32"),
    ],
)
def test_bad_job_submissions_get_clear_errors(cluster: Cluster, body: bytes, status: int, fragment: str) -> None:
    r = httpx.post(
        cluster.rest_url + "/jobs",
        content=body,
        headers={"content-type": "application/json", **cluster.auth},
        timeout=30,
    )
    assert r.status_code == status
    assert fragment in r.json()["errors"][0]
    assert cluster.rest.overview()["taskmanagers"] == 2  # the master keeps serving


def test_oversized_body_is_refused(cluster: Cluster) -> None:
    r = httpx.post(
        cluster.rest_url + "/jobs",
        content=b"x" * (101 * 1024 * 1024),
        headers={"content-type": "application/json", **cluster.auth},
        timeout=60,
    )
    assert r.status_code == 413 and "max-content-length" in r.json()["errors"][0]


def test_unknown_and_malformed_job_ids(cluster: Cluster) -> None:
    r = httpx.get(cluster.rest_url + "/jobs/" + "a" * 32, headers=cluster.auth, timeout=30)
    assert r.status_code == 404 and "not found" in r.json()["errors"][0]
    r = httpx.get(cluster.rest_url + "/jobs/nope/exceptions", headers=cluster.auth, timeout=30)
    assert r.status_code == 400 and "not a job id" in r.json()["errors"][0]
    r = httpx.patch(cluster.rest_url + "/jobs/" + "a" * 32, params={"mode": "cancel"}, headers=cluster.auth)
    assert r.status_code == 404


def test_cancel_a_running_job(cluster: Cluster, executor) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.from_sequence(1, 10**12).map(lambda x: x + 1).filter(lambda x: x < 0).print()
    client = env.execute_async("forever")
    job_id = client.get_job_id()
    wait_until(
        lambda: (
            cluster.rest.job(job_id)["state"] == "RUNNING"
            and all(v["status"] == "RUNNING" for v in cluster.rest.job(job_id)["vertices"])
        ),
        message="job running",
    )
    details = cluster.rest.job(job_id)
    assert [v["parallelism"] for v in details["vertices"]] == [2] * len(details["vertices"])
    overview = {j["jid"]: j for j in cluster.rest.jobs_overview()}
    assert overview[job_id]["state"] == "RUNNING"
    r = httpx.patch(f"{cluster.rest_url}/jobs/{job_id}", params={"mode": "cancel"}, headers=cluster.auth)
    assert r.status_code == 202
    wait_until(lambda: cluster.rest.job(job_id)["state"] == "CANCELED", message="job canceled")
    assert all(v["status"] == "CANCELED" for v in cluster.rest.job(job_id)["vertices"])
    # its slots are free again
    wait_until(lambda: cluster.rest.overview()["slots-available"] == 4, message="slots freed")
