"""HA services without ZooKeeper: the embedded services (leadership on demand, for tests of the
logic around leadership), standalone (no HA: nothing changes), the job result store on a file
system, and the recovery decision."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from yarnflink.common.config import Configuration
from yarnflink.highavailability import (
    DISPATCHER,
    RESOURCE_MANAGER,
    EmbeddedHaServices,
    HaStoreError,
    JobResult,
    LeaderInformation,
    LeadershipLostError,
    StandaloneHaServices,
    create_ha_services,
    plan_recovery,
)
from yarnflink.highavailability.filesystem import FileSystemJobResultStore, FileSystemStateStorage

from .helpers import RecordingContender, Timeline, graph, join

JOB_A, JOB_B, JOB_C = "a" * 32, "b" * 32, "c" * 32


@pytest.fixture
def embedded() -> Iterator[EmbeddedHaServices]:
    ha = EmbeddedHaServices()
    yield ha
    ha.close()


def test_embedded_grant_and_revoke_on_demand_reach_every_component(
    embedded: EmbeddedHaServices, timeline: Timeline
) -> None:
    service = embedded.leader_election_service()
    rm, disp = RecordingContender("rm", timeline), RecordingContender("disp", timeline)
    join(service, RESOURCE_MANAGER, rm)
    join(service, DISPATCHER, disp)
    assert timeline.entries == []
    fence = embedded.grant_leadership()
    assert [(e.who, e.what, e.session_id) for e in timeline.entries] == [
        ("rm", "grant", fence.session_id),
        ("disp", "grant", fence.session_id),
    ]
    service.drain()
    assert embedded.published(RESOURCE_MANAGER) == LeaderInformation(fence.session_id, "rm:1234")
    embedded.revoke_leadership()
    assert [e.what for e in timeline.entries[2:]] == ["revoke", "revoke"]
    second = embedded.grant_leadership()
    assert second.session_id != fence.session_id


def test_embedded_stores_refuse_writes_of_an_ended_leadership(embedded: EmbeddedHaServices) -> None:
    old = embedded.grant_leadership()
    embedded.job_graph_store(old).put_job_graph(graph(JOB_A))
    embedded.checkpoint_id_counter(JOB_A, old).get_and_increment()
    embedded.suspend_connection()  # without tolerance: leadership ends at once
    embedded.reconnect()
    new = embedded.grant_leadership()
    with pytest.raises(LeadershipLostError):
        embedded.job_graph_store(old).global_cleanup(JOB_A)
    with pytest.raises(LeadershipLostError):
        embedded.checkpoint_id_counter(JOB_A, old).get_and_increment()
    assert embedded.checkpoint_id_counter(JOB_A, new).get_and_increment() == 2  # the data is shared
    assert embedded.job_graph_store().get_job_ids() == [JOB_A]
    assert not embedded.leader_election_service().verify_leadership(old.session_id)
    assert embedded.leader_election_service().verify_leadership(new.session_id)


def test_embedded_lease_expiry_revokes_and_renewal_regrants(embedded: EmbeddedHaServices, timeline: Timeline) -> None:
    service = embedded.leader_election_service()
    join(service, RESOURCE_MANAGER, RecordingContender("rm", timeline))
    embedded.grant_leadership()
    embedded.expire_lease()
    assert [e.what for e in timeline.entries] == ["grant", "revoke"]
    embedded.renew_lease()  # the spent latch is replaced; the test grants the new one
    assert service.leader is None
    embedded.grant_leadership()
    assert [e.what for e in timeline.entries] == ["grant", "revoke", "grant"]


def test_retrieval_tells_every_change_and_waits_for_a_leader(embedded: EmbeddedHaServices, timeline: Timeline) -> None:
    seen: list[LeaderInformation | None] = []
    retriever = embedded.resource_manager_leader_retriever().start(seen.append)
    rm = RecordingContender("rm", timeline, address="host:1")
    join(embedded.leader_election_service(), RESOURCE_MANAGER, rm)
    result: list[LeaderInformation] = []
    waiter = threading.Thread(target=lambda: result.append(retriever.wait_for_leader(10)))
    waiter.start()
    fence = embedded.grant_leadership()
    embedded.leader_election_service().drain()
    waiter.join(10)
    assert result == [LeaderInformation(fence.session_id, "host:1")]
    embedded.revoke_leadership()
    second = embedded.grant_leadership()
    embedded.leader_election_service().drain()
    assert retriever.wait_for_leader(10, other_than=result[0]) == LeaderInformation(second.session_id, "host:1")
    # a revoked leader's address stays until the next leader's replaces it (as in ZooKeeper, where
    # a deposed leader cannot touch it any more): retrievers tell by the session id
    assert seen == [None, result[0], LeaderInformation(second.session_id, "host:1")]
    retriever.stop()
    with pytest.raises(TimeoutError):
        embedded.dispatcher_leader_retriever().start().wait_for_leader(0.05)


def test_a_contender_registered_twice_is_refused(embedded: EmbeddedHaServices, timeline: Timeline) -> None:
    service = embedded.leader_election_service()
    join(service, RESOURCE_MANAGER, RecordingContender("rm", timeline))
    with pytest.raises(ValueError, match="already registered"):
        join(service, RESOURCE_MANAGER, RecordingContender("rm2", timeline))


def test_closing_the_service_revokes_before_returning(timeline: Timeline) -> None:
    ha = EmbeddedHaServices()
    join(ha.leader_election_service(), RESOURCE_MANAGER, RecordingContender("rm", timeline))
    ha.grant_leadership()
    ha.close()
    assert [e.what for e in timeline.entries] == ["grant", "revoke"]


def test_without_ha_nothing_changes(timeline: Timeline) -> None:
    ha = create_ha_services(Configuration(), addresses={RESOURCE_MANAGER: "127.0.0.1:6123"})
    assert isinstance(ha, StandaloneHaServices)
    try:
        rm = RecordingContender("rm", timeline, confirm=False)
        join(ha.leader_election_service(), RESOURCE_MANAGER, rm)
        jm = RecordingContender("jm", timeline)
        join(ha.leader_election_service(), JOB_A, jm)
        # granted at once, one session id for the process's lifetime
        assert rm.session_id == jm.session_id == ha.leader_session_id
        # the configured address, and no token known in advance (taken at registration, as before)
        with ha.resource_manager_leader_retriever() as r:
            assert r.wait_for_leader(1) == LeaderInformation("", "127.0.0.1:6123")
        ha.job_graph_store().put_job_graph(graph(JOB_A))
        assert ha.job_graph_store().get_job_ids() == [JOB_A]
    finally:
        ha.close()
    assert [e.what for e in timeline.entries] == ["grant", "grant", "revoke", "revoke"]
    assert StandaloneHaServices().leader_session_id != StandaloneHaServices().leader_session_id


@pytest.mark.parametrize("delete_on_commit", [True, False])
def test_file_system_job_result_store(tmp_path: Path, delete_on_commit: bool) -> None:
    url = f"file://{tmp_path}/jrs"
    jrs = FileSystemJobResultStore(url, delete_on_commit)
    jrs.create_dirty_result(JobResult(JOB_A, "FINISHED", 5))
    jrs.create_dirty_result(JobResult(JOB_B, "FAILED", 7, "Traceback ..."))
    assert (tmp_path / "jrs" / f"{JOB_A}_DIRTY.json").exists()
    with pytest.raises(HaStoreError):
        jrs.create_dirty_result(JobResult(JOB_A, "CANCELED"))
    jrs.mark_result_as_clean(JOB_A)
    jrs.mark_result_as_clean(JOB_A)  # idempotent
    other = FileSystemJobResultStore(url, delete_on_commit)  # another process
    assert other.get_dirty_results() == [JobResult(JOB_B, "FAILED", 7, "Traceback ...")]
    assert other.has_dirty_job_result_entry(JOB_B) and not other.has_dirty_job_result_entry(JOB_A)
    assert other.has_clean_job_result_entry(JOB_A) is (not delete_on_commit)
    assert other.has_job_result_entry(JOB_C) is False
    with pytest.raises(ValueError):
        JobResult(JOB_C, "RUNNING")


def test_state_storage_round_trip_and_discard(tmp_path: Path) -> None:
    storage = FileSystemStateStorage(str(tmp_path / "blobs"))
    pointer = storage.store("submittedJobGraph-", b"{}")
    assert pointer.startswith("file://") and storage.retrieve(pointer) == b"{}"
    storage.discard(pointer)
    storage.discard(pointer)
    with pytest.raises(HaStoreError):
        storage.retrieve(pointer)
    mem = FileSystemStateStorage("memory://ha-test")
    assert mem.retrieve(mem.store("x-", b"abc")) == b"abc"


def test_recovery_plan() -> None:
    dirty = [JobResult(JOB_B, "FAILED")]
    plan = plan_recovery([JOB_C, JOB_A, JOB_B], dirty, has_result=lambda j: j in (JOB_A, JOB_B))
    assert plan.jobs_to_recover == (JOB_C,)
    assert plan.dirty_results == (JobResult(JOB_B, "FAILED"),)
    assert plan.stale_job_graphs == (JOB_A,)
