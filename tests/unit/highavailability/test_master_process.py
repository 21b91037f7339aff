"""A real master (ResourceManager + Dispatcher with REST and JobMasters on loopback) whose
leadership a test plays through ``EmbeddedHaServices``: it acts only when granted, recovers jobs
from the HA stores, publishes its addresses, cleans up jobs that ended for good, and steps down
(fenced, JobMasters suspended, HA data kept) when it loses leadership. The process replacement
(``os.execv``) is recorded instead of done."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from yarnflink.common.config import Configuration
from yarnflink.dispatcher.recovery import CleanupJob
from yarnflink.entrypoint.master import MasterProcess
from yarnflink.highavailability import EmbeddedHaServices, JobResult
from yarnflink.highavailability.leaderelection import LeaderInformation
from yarnflink.highavailability.services import DISPATCHER, RESOURCE_MANAGER, REST_SERVER, job_master_component

from .helpers import graph

A, B, C = "a" * 32, "b" * 32, "c" * 32


class RecordingMaster(MasterProcess):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.replaced = threading.Event()

    def _replace_process(self) -> None:
        self.replaced.set()


def _until(cond: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _config() -> Configuration:
    return Configuration(
        {
            "rest.port": "0",
            "jobmanager.rpc.port": "0",
            "security.rest.authentication": "none",
            "security.ssl.internal.enabled": "false",
            "heartbeat.interval": "1 s",
        }
    )


@pytest.fixture
def make_master() -> Iterator[Callable[..., tuple[RecordingMaster, EmbeddedHaServices]]]:
    made: list[RecordingMaster] = []

    def make(**ha_kwargs: Any) -> tuple[RecordingMaster, EmbeddedHaServices]:
        ha = EmbeddedHaServices(**ha_kwargs)
        m = RecordingMaster(_config(), ha_services=ha)
        made.append(m)
        m.start()
        return m, ha

    yield make
    for m in made:
        m.stop()


def _get(m: MasterProcess, path: str) -> httpx.Response:
    return httpx.get(m.dispatcher.rest_url + path, timeout=10)


def _jobs(m: MasterProcess) -> set[str]:
    async def ids() -> set[str]:
        return set(m.dispatcher.jobs)

    return m.dispatcher.call(ids)


def test_a_master_that_does_not_lead_refuses_jobs_and_registrations(make_master: Any) -> None:
    m, ha = make_master()
    assert m.rm.fencing_token == "" and not m.rm.leading
    r = _get(m, "/jobs")
    assert r.status_code == 503 and "not the leader" in r.json()["errors"][0]
    post = httpx.post(m.dispatcher.rest_url + "/jobs", json=graph(A).to_json(), timeout=10)
    assert post.status_code == 503
    assert _get(m, "/overview").status_code == 200
    assert ha.published(RESOURCE_MANAGER) is None and ha.published(REST_SERVER) is None
    assert ha.job_graph_store().get_job_ids() == []


def test_a_grant_recovers_jobs_and_publishes_the_addresses(make_master: Any) -> None:
    m, ha = make_master()
    store = ha.job_graph_store()
    for job_id in (A, B, C):
        store.put_job_graph(graph(job_id))
    ha.job_result_store().create_dirty_result(JobResult(B, "FINISHED"))  # its cleanup was cut short
    ha.job_result_store().create_dirty_result(JobResult(C, "CANCELED"))
    ha.job_result_store().mark_result_as_clean(C)

    fence = ha.grant_leadership()
    assert m.rm.fencing_token == fence.session_id
    _until(lambda: _get(m, "/jobs").status_code == 200, what="jobs accepted")
    assert _jobs(m) == {A}  # B and C ended for good under an earlier leader: never run again
    _until(lambda: store.get_job_ids() == [A], what="the stale JobGraphs removed")
    assert ha.job_result_store().has_clean_job_result_entry(B)
    rm, rest, disp = ha.published(RESOURCE_MANAGER), ha.published(REST_SERVER), ha.published(DISPATCHER)
    assert rm is not None and rm.session_id == fence.session_id and rm.address == m.rm.address
    assert rest is not None and rest.address == m.dispatcher.rest_url and disp == rest
    jm = m.dispatcher.jobs[A].master
    assert jm is not None and jm.jobmaster_id == fence.session_id  # fresh per leadership
    info = _until(lambda: ha.published(job_master_component(A)), what="the JobMaster's address")
    assert info.address == jm.address and info.session_id == fence.session_id


def test_submission_stores_the_job_graph_and_a_job_that_ends_leaves_no_ha_data(make_master: Any) -> None:
    m, ha = make_master()
    fence = ha.grant_leadership()
    _until(lambda: _get(m, "/jobs").status_code == 200, what="jobs accepted")
    r = httpx.post(m.dispatcher.rest_url + "/jobs", json=graph(A).to_json(), timeout=10)
    assert r.status_code == 202, r.text
    assert ha.job_graph_store().get_job_ids() == [A]
    ha.checkpoint_id_counter(A, fence).get_and_increment()
    _until(lambda: ha.published(job_master_component(A)), what="the JobMaster's address")

    assert httpx.patch(m.dispatcher.rest_url + f"/jobs/{A}", timeout=10).status_code == 202
    _until(lambda: ha.job_result_store().has_clean_job_result_entry(A), what="a clean job result")
    assert ha.job_graph_store().get_job_ids() == []
    assert ha.checkpoint_id_counter(A).get() == 1  # the counter went with the job
    assert ha.published(job_master_component(A)) is None
    again = httpx.post(m.dispatcher.rest_url + "/jobs", json=graph(A).to_json(), timeout=10)
    assert again.status_code == 409


def test_a_deposed_leader_that_has_not_noticed_refuses_submissions_with_503(make_master: Any) -> None:
    """Issue 22, item 2: a leader resuming from SIGSTOP handles a pending submission before it
    learns it lost leadership; its fenced write fails. The client gets 503 (it then asks the new
    leader), not 500, and nothing of the job stays on the deposed master or in the HA stores."""
    m, ha = make_master()
    ha.grant_leadership()
    _until(lambda: _get(m, "/jobs").status_code == 200, what="jobs accepted")
    ha.lose_latch_unnoticed()
    assert m.dispatcher.is_leader  # it has not noticed
    own = ha.published(REST_SERVER)
    assert own is not None and own.address == m.dispatcher.rest_url  # its stale publication

    r = httpx.post(m.dispatcher.rest_url + "/jobs", json=graph(A).to_json(), timeout=10)
    assert r.status_code == 503, r.text
    assert "not the leader" in r.json()["errors"][0]
    assert r.json()["leader"] is None  # never itself
    assert ha.job_graph_store().get_job_ids() == [] and _jobs(m) == set()

    new_leader = "http://127.0.0.1:1"
    ha.publish_other_leader(REST_SERVER, LeaderInformation("other-session", new_leader))
    r = httpx.post(m.dispatcher.rest_url + "/jobs", json=graph(B).to_json(), timeout=10)
    assert r.status_code == 503 and r.json()["leader"] == new_leader, r.text
    assert new_leader in r.json()["errors"][0]
    assert ha.job_graph_store().get_job_ids() == [] and _jobs(m) == set()


def test_losing_leadership_fences_suspends_and_steps_down_keeping_ha_data(
    make_master: Any, caplog: pytest.LogCaptureFixture
) -> None:
    m, ha = make_master()
    ha.job_graph_store().put_job_graph(graph(A))
    fence = ha.grant_leadership()
    _until(lambda: _get(m, "/jobs").status_code == 200, what="jobs accepted")
    jm = m.dispatcher.jobs[A].master
    assert jm is not None
    with caplog.at_level(logging.WARNING, logger="yarnflink.entrypoint.master"):
        ha.revoke_leadership()
        assert m.rm.fencing_token == ""  # at once, on the election's callback
        assert jm.jobmaster_id == ""
        assert m.replaced.wait(30)
    assert "lost leadership: leader latch released" in caplog.text
    assert _get(m, "/jobs").status_code == 503
    assert ha.job_graph_store().get_job_ids() == [A]  # suspended, not ended: the next leader runs it
    assert not ha.job_result_store().has_job_result_entry(A)
    assert m.dispatcher.jobs[A].archive is None
    ha.grant_leadership()  # a process leads at most once: the fresh one replacing it competes
    assert m.rm.fencing_token == ""
    del fence


def test_a_suspended_connection_steps_down_unless_tolerated(make_master: Any) -> None:
    strict, ha = make_master()
    ha.grant_leadership()
    ha.suspend_connection()
    assert strict.replaced.wait(30) and strict.rm.fencing_token == ""

    tolerant, ha2 = make_master(tolerate_suspended=True)
    fence = ha2.grant_leadership()
    ha2.suspend_connection()
    ha2.reconnect()
    assert tolerant.leadership is not None and not tolerant.leadership.state.stepped_down
    assert not tolerant.replaced.is_set() and tolerant.rm.fencing_token == fence.session_id
    ha2.lose_session()
    assert tolerant.replaced.wait(30) and tolerant.rm.fencing_token == ""


def _checkpointed(job_id: str, directory: Path, retention: str = "NO_EXTERNALIZED_CHECKPOINTS") -> Any:
    g = graph(job_id)
    g.config = {
        "execution.checkpointing.interval": "1 h",
        "execution.checkpointing.dir": f"file://{directory}",
        "execution.checkpointing.externalized-checkpoint-retention": retention,
    }
    return g


def _checkpoint_on_disk(ha: EmbeddedHaServices, job_id: str, directory: Path, cid: int) -> Path:
    """A completed checkpoint's directory and its pointer in the HA store (as its JobMaster left them)."""
    chk = directory / job_id / f"chk-{cid}"
    chk.mkdir(parents=True)
    (chk / "_metadata").write_bytes(b"metadata")
    ha.completed_checkpoint_pointer_store(job_id, 2).add_checkpoint(cid, f"file://{chk}/_metadata")
    return chk


def test_an_ended_jobs_checkpoints_go_with_its_ha_data_pointers_first_as_its_retention_says(
    make_master: Any, tmp_path: Path
) -> None:
    """A dirty result of an earlier leader: the new leader's cleanup removes the job's pointers
    (fenced), then deletes their checkpoints if the job's retention discards them for that end."""
    m, ha = make_master()
    for job_id, status, retention in (
        (A, "FAILED", "NO_EXTERNALIZED_CHECKPOINTS"),
        (B, "CANCELED", "RETAIN_ON_CANCELLATION"),
    ):
        ha.job_graph_store().put_job_graph(_checkpointed(job_id, tmp_path, retention))
        ha.job_result_store().create_dirty_result(JobResult(job_id, status))
    a1, a2 = (_checkpoint_on_disk(ha, A, tmp_path, cid) for cid in (1, 2))
    b1 = _checkpoint_on_disk(ha, B, tmp_path, 1)

    ha.grant_leadership()
    _until(lambda: ha.job_result_store().has_clean_job_result_entry(A), what="A cleaned up")
    _until(lambda: ha.job_result_store().has_clean_job_result_entry(B), what="B cleaned up")
    assert ha.completed_checkpoint_pointer_store(A).get_all() == []
    assert not a1.exists() and not a2.exists()  # NO_EXTERNALIZED_CHECKPOINTS: deleted
    assert b1.exists()  # RETAIN_ON_CANCELLATION, CANCELED: retained


def test_a_deposed_leaders_cleanup_deletes_no_checkpoint_and_records_no_result(
    make_master: Any, tmp_path: Path
) -> None:
    """A leader frozen past its session whose job ended: its fenced check fails, so it records no
    job result and removes no HA data; the pointers stay, and so do their files."""
    m, ha = make_master()
    fence = ha.grant_leadership()
    _until(lambda: _get(m, "/jobs").status_code == 200, what="jobs accepted")
    ha.job_graph_store(fence).put_job_graph(_checkpointed(A, tmp_path))
    chk = _checkpoint_on_disk(ha, A, tmp_path, 1)
    ha.lose_latch_unnoticed()
    leadership = m.leadership
    assert leadership is not None

    async def cleanup() -> None:
        await leadership._cleanup(CleanupJob(A, fence.session_id, JobResult(A, "FAILED")))

    m.dispatcher.call(cleanup)

    assert chk.exists() and [cid for cid, _ in ha.completed_checkpoint_pointer_store(A).get_all()] == [1]
    # nor does it record the job's end (the job result store is not fenced): the next leader runs it
    assert not ha.job_result_store().has_job_result_entry(A)
