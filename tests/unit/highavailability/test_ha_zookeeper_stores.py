"""Durable HA metadata against a real ZooKeeper and a storageDir on disk: what one master process
writes, a new one (a new kazoo client and session) reads; a deposed leader cannot write; a job
that ended for good is never run again and its HA data goes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from yarnflink.common.config import ConfigError, Configuration
from yarnflink.highavailability import (
    RESOURCE_MANAGER,
    HaStoreError,
    HighAvailabilityError,
    JobResult,
    LeadershipLostError,
    create_ha_services,
    recover_jobs,
)
from yarnflink.highavailability.zookeeper.services import ZooKeeperHaServices

from .helpers import RecordingContender, Timeline, graph, join

WAIT = 30.0
JOB_A, JOB_B, JOB_C = "a" * 32, "b" * 32, "c" * 32


def lead(ha: ZooKeeperHaServices, timeline: Timeline, name: str = "A") -> Any:
    """Makes ``ha``'s process the leader (it is the only contender) and returns its fence."""
    c = RecordingContender(name, timeline)
    join(ha.leader_election_service(), RESOURCE_MANAGER, c)
    g = timeline.wait(name, "grant", WAIT)
    return ha.leader_election_service().fence(g.session_id or "")


def blobs(ha_dir: Path) -> list[str]:
    return sorted(p.name for p in ha_dir.rglob("submittedJobGraph-*"))


def test_job_graphs_survive_the_process_that_wrote_them(make_ha: Any, timeline: Timeline, tmp_path: Path) -> None:
    a = make_ha()
    fence = lead(a, timeline)
    store = a.job_graph_store(fence)
    store.put_job_graph(graph(JOB_A))
    store.put_job_graph(graph(JOB_B))
    store.put_job_graph(graph(JOB_B, "renamed"))  # replaces B's graph; the old file is removed
    assert len(blobs(tmp_path / "ha")) == 2
    a.close()

    b = make_ha()  # another process: new client, new session
    store = b.job_graph_store()
    assert store.get_job_ids() == [JOB_A, JOB_B]
    recovered = store.recover_job_graph(JOB_A)
    assert recovered is not None and recovered.to_json() == graph(JOB_A).to_json()
    assert store.recover_job_graph(JOB_B).job_name == "renamed"  # type: ignore[union-attr]
    assert store.recover_job_graph(JOB_C) is None


def test_a_pointer_whose_file_is_gone_is_an_error_naming_the_job(make_ha: Any, tmp_path: Path) -> None:
    a = make_ha()
    a.job_graph_store().put_job_graph(graph(JOB_A))
    for name in blobs(tmp_path / "ha"):
        next((tmp_path / "ha").rglob(name)).unlink()
    with pytest.raises(HaStoreError, match=JOB_A):
        make_ha().job_graph_store().recover_job_graph(JOB_A)


def test_checkpoint_ids_and_pointers_survive_the_process_that_wrote_them(make_ha: Any, timeline: Timeline) -> None:
    a = make_ha()
    fence = lead(a, timeline)
    counter = a.checkpoint_id_counter(JOB_A, fence)
    counter.start()
    assert [counter.get_and_increment() for _ in range(3)] == [1, 2, 3]
    pointers = a.completed_checkpoint_pointer_store(JOB_A, max_retained=2, fence=fence)
    assert pointers.add_checkpoint(1, "s3://b/chk-1/_metadata") == []
    assert pointers.add_checkpoint(2, "s3://b/chk-2/_metadata") == []
    assert pointers.add_checkpoint(3, "s3://b/chk-3/_metadata") == [(1, "s3://b/chk-1/_metadata")]
    a.close()

    b = make_ha()
    counter = b.checkpoint_id_counter(JOB_A)
    counter.start()  # exists: keeps its value
    assert counter.get() == 4 and counter.get_and_increment() == 4
    pointers = b.completed_checkpoint_pointer_store(JOB_A, max_retained=2)
    assert pointers.get_all() == [(2, "s3://b/chk-2/_metadata"), (3, "s3://b/chk-3/_metadata")]
    assert pointers.get_latest() == (3, "s3://b/chk-3/_metadata")
    assert pointers.shutdown("SUSPENDED") == []  # not terminal: kept for the next leader
    assert pointers.get_all() != []


def test_a_pointer_written_after_the_jobs_cleanup_is_refused_and_recreates_nothing(
    make_ha: Any, timeline: Timeline
) -> None:
    """Chaos finding (docs/RELIABILITY.md): a checkpoint whose metadata upload outlived its job
    added its pointer after the Dispatcher had removed the job's HA data, re-creating
    ``jobs/<id>/checkpoints`` for good."""
    a = make_ha()
    fence = lead(a, timeline)
    counter = a.checkpoint_id_counter(JOB_A, fence)
    counter.start()
    pointers = a.completed_checkpoint_pointer_store(JOB_A, max_retained=1, fence=fence)
    assert pointers.add_checkpoint(counter.get_and_increment(), "s3://b/chk-1/_metadata") == []
    a.global_cleanup(JOB_A, fence)
    assert not a.client.exists(a.paths.job(JOB_A))
    with pytest.raises(HaStoreError, match=f"HA data of job {JOB_A} is gone"):
        pointers.add_checkpoint(2, "s3://b/chk-2/_metadata")
    assert not a.client.exists(a.paths.job(JOB_A))


def test_concurrent_increments_never_hand_out_an_id_twice(make_ha: Any) -> None:
    import threading

    a, b = make_ha(), make_ha()
    a.checkpoint_id_counter(JOB_A).start()
    got: list[int] = []
    lock = threading.Lock()

    def take(ha: ZooKeeperHaServices) -> None:
        c = ha.checkpoint_id_counter(JOB_A)
        for _ in range(15):
            v = c.get_and_increment()
            with lock:
                got.append(v)

    threads = [threading.Thread(target=take, args=(h,)) for h in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert sorted(got) == list(range(1, 31))


def test_a_deposed_leader_cannot_write_any_store(make_ha: Any, timeline: Timeline) -> None:
    a = make_ha()
    old = lead(a, timeline, "A")
    a.checkpoint_id_counter(JOB_A, old).start()
    b = make_ha()
    join(b.leader_election_service(), RESOURCE_MANAGER, RecordingContender("B", timeline))
    # A's process lives on but its latch is gone (here: it left the election; an expired session
    # or a suspension does the same, see the election tests)
    a.leader_election_service().close()
    new = b.leader_election_service().fence(timeline.wait("B", "grant", WAIT).session_id or "")

    writes = [
        lambda f: a.job_graph_store(f).put_job_graph(graph(JOB_A)),
        lambda f: a.checkpoint_id_counter(JOB_A, f).get_and_increment(),
        lambda f: a.checkpoint_id_counter(JOB_A, f).set_count(100),
        lambda f: a.completed_checkpoint_pointer_store(JOB_A, 1, f).add_checkpoint(7, "p"),
        # removing a pointer (present or not) and checking the fence: before any checkpoint file goes
        lambda f: a.completed_checkpoint_pointer_store(JOB_A, 1, f).remove(8),
        lambda f: a.completed_checkpoint_pointer_store(JOB_A, 1, f).check_leadership(),
        lambda f: a.global_cleanup(JOB_A, f),
    ]
    for write in writes:
        with pytest.raises(LeadershipLostError):
            write(old)
    assert a.job_graph_store().get_job_ids() == []
    assert a.checkpoint_id_counter(JOB_A).get() == 1
    for write in writes:
        write(new)  # the new leader, through the same client: fine


def test_a_job_with_a_result_is_never_run_again_and_its_ha_data_goes(
    make_ha: Any, timeline: Timeline, tmp_path: Path
) -> None:
    a = make_ha()
    fence = lead(a, timeline)
    for job in (JOB_A, JOB_B, JOB_C):
        a.job_graph_store(fence).put_job_graph(graph(job))
        counter = a.checkpoint_id_counter(job, fence)
        counter.start()
        a.completed_checkpoint_pointer_store(job, 1, fence).add_checkpoint(counter.get_and_increment(), "p")
    # A finished and is fully cleaned up; B failed and its leader died before cleaning up
    jrs = a.job_result_store()
    jrs.create_dirty_result(JobResult(JOB_A, "FINISHED", 1200))
    a.job_graph_store(fence).global_cleanup(JOB_A)
    a.global_cleanup(JOB_A, fence)
    jrs.mark_result_as_clean(JOB_A)
    jrs.create_dirty_result(JobResult(JOB_B, "FAILED", 30, "boom"))
    with pytest.raises(HaStoreError, match="already"):
        jrs.create_dirty_result(JobResult(JOB_B, "FINISHED"))
    a.close()

    b = make_ha()
    plan = recover_jobs(b.job_graph_store(), b.job_result_store())
    assert plan.jobs_to_recover == (JOB_C,)
    assert [r.job_id for r in plan.dirty_results] == [JOB_B]
    assert plan.dirty_results[0] == JobResult(JOB_B, "FAILED", 30, "boom")
    assert not b.client.exists(b.paths.job(JOB_A)) and b.job_graph_store().recover_job_graph(JOB_A) is None

    # B's leader finishes B's cleanup: then nothing of B is left and nothing is to be done for it
    fence = lead(b, timeline, "B")
    b.job_graph_store(fence).global_cleanup(JOB_B)
    b.global_cleanup(JOB_B, fence)
    b.job_result_store().mark_result_as_clean(JOB_B)
    assert not b.client.exists(b.paths.job(JOB_B))
    assert b.job_graph_store().get_job_ids() == [JOB_C]
    assert len(blobs(tmp_path / "ha")) == 1  # C's
    plan = recover_jobs(make_ha().job_graph_store(), make_ha().job_result_store())
    assert plan.jobs_to_recover == (JOB_C,) and plan.dirty_results == ()


def test_a_graph_left_beside_a_clean_result_is_not_run(make_ha: Any, tmp_path: Path) -> None:
    """Clean entries kept (job-result-store.delete-on-commit: false): a graph that reappears for a
    job that has a result is stale, never recovered."""
    a = make_ha({"job-result-store.delete-on-commit": "false"})
    a.job_result_store().create_dirty_result(JobResult(JOB_A, "CANCELED"))
    a.job_result_store().mark_result_as_clean(JOB_A)
    a.job_graph_store().put_job_graph(graph(JOB_A))
    plan = recover_jobs(a.job_graph_store(), a.job_result_store())
    assert plan.jobs_to_recover == () and plan.stale_job_graphs == (JOB_A,)
    assert (tmp_path / "ha" / "job-result-store" / "test-cluster" / f"{JOB_A}.json").exists()


def test_close_and_cleanup_all_data_leaves_nothing(make_ha: Any, tmp_path: Path) -> None:
    a = make_ha()
    a.job_graph_store().put_job_graph(graph(JOB_A))
    a.job_result_store().create_dirty_result(JobResult(JOB_B, "FINISHED"))
    a.checkpoint_id_counter(JOB_A).start()
    root = a.paths.root
    a.close_and_cleanup_all_data()
    assert blobs(tmp_path / "ha") == [] and not (tmp_path / "ha" / "job-result-store" / "test-cluster").exists()
    assert not make_ha().client.exists(root)


def test_configuration_errors_name_the_missing_key(ha_config: Configuration) -> None:
    for key in ("high-availability.zookeeper.quorum", "high-availability.storageDir"):
        conf = ha_config.copy()
        conf.remove(key)
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            create_ha_services(conf)


def test_an_unreachable_quorum_fails_within_the_connection_timeout(ha_config: Configuration) -> None:
    from tests.zk import free_ports

    (port,) = free_ports(1)
    conf = ha_config.merged(
        {
            "high-availability.zookeeper.quorum": f"127.0.0.1:{port}",
            "high-availability.zookeeper.client.connection-timeout": "1 s",
        }
    )
    with pytest.raises(HighAvailabilityError, match="connection-timeout"):
        create_ha_services(conf)


def test_the_paths_follow_root_and_cluster_id(make_ha: Any, zk_root: str) -> None:
    a = make_ha()
    assert a.paths.root == f"{zk_root}/test-cluster"
    assert (
        a.paths.connection_info("resource_manager") == f"{zk_root}/test-cluster/leader/resource_manager/connection_info"
    )
    with pytest.raises(ValueError):
        a.paths.job("../x")
    assert os.path.basename(a.storage.base) == "test-cluster"
