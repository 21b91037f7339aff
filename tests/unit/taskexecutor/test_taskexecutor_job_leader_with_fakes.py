"""Issue 18, item 1 and 4: a real TaskExecutor (real tasks) keeps a job's slots and tasks while the
job has no JobMaster leader, reports them to the next leader published for the job, holds its task
updates for it, gives up after the reconnect timeout, and refuses the calls of a deposed leader
(stale calls accepted: zero). Testing gateways are the ResourceManagers and JobMasters;
``TestingLeaderRetrievalDriver`` publishes the leaders (ZooKeeper's role)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from tests.fakes.conditions import wait_until
from tests.fakes.gateways import raises
from tests.fakes.leadership import TestingLeaderRetrievalDriver
from tests.unit.taskexecutor.harness import JM_ADDRESS, JOB, RM_ADDRESS, Harness, StartTaskExecutor, source_task
from yarnflink.common.rpc_errors import FencingTokenMismatch, RpcRejected, RpcUnreachable
from yarnflink.executiongraph.executiongraph import ExecutionState
from yarnflink.highavailability.leaderretrieval import LeaderRetrievalService
from yarnflink.jobmaster.gateway import ReconnectTaskManager, TaskManagerHeartbeat
from yarnflink.resourcemanager.resources import UNKNOWN
from yarnflink.taskexecutor import gateway as g

OLD_JM = "0000000001-" + "a" * 32
NEW_JM = "0000000002-" + "b" * 32
JM_2 = "jm-2:6123"


def _running(
    start: StartTaskExecutor, **kwargs: Any
) -> tuple[Harness, TestingLeaderRetrievalDriver, TestingLeaderRetrievalDriver]:
    """A TaskExecutor following rm-1 (session 1) with task exec-1 of job-1 RUNNING in alloc-1
    for the JobMaster of leader session OLD_JM, whose leadership the job retriever published."""
    rm_retriever = TestingLeaderRetrievalDriver()
    job_retriever = TestingLeaderRetrievalDriver()
    h = start(
        registered=False,
        rm_leader_retriever=LeaderRetrievalService(rm_retriever),
        job_leader_retrievers=lambda job_id: LeaderRetrievalService(job_retriever),
        **kwargs,
    )
    h.jm.jobmaster_id = OLD_JM
    wait_until(lambda: rm_retriever.started, what="the retriever started")
    h.rm.fencing_token = "session-1"
    rm_retriever.publish("session-1", RM_ADDRESS)
    wait_until(lambda: h.te.rm_token == "session-1", what="registered at rm-1")
    h.request_slot("alloc-1", token="session-1", jobmaster_id=OLD_JM)
    wait_until(lambda: job_retriever.started, what="the job's leader watched")
    job_retriever.publish(OLD_JM, JM_ADDRESS)
    wait_until(lambda: h.slot_state("alloc-1") is not None and h.te.job_managers[JOB].connected.is_set(), what="slot")
    h.call(lambda: h.te.submit_task(g.SubmitTask(OLD_JM, source_task("exec-1", "alloc-1", 10**12, {}))))
    h.wait_state("exec-1", ExecutionState.RUNNING)
    return h, rm_retriever, job_retriever


def test_a_new_resource_manager_leader_keeps_the_slots_and_tasks_and_gets_them_in_the_slot_report(
    start_task_executor: StartTaskExecutor,
) -> None:
    h, rm_retriever, _ = _running(start_task_executor)
    rm2 = h.resolver.add_resource_manager("rm-2:6124", fencing_token="session-2")
    rm_retriever.publish("session-2", "rm-2:6124")
    wait_until(lambda: h.te.rm_token == "session-2", what="registered at rm-2")
    (registration,) = rm2.requests("register_task_executor")
    kept = [(s.allocation_id, s.job_id) for s in registration.slot_report.slots if s.allocation_id]
    assert kept == [("alloc-1", JOB)]
    assert h.te.tasks["exec-1"].state == ExecutionState.RUNNING


def test_the_next_job_leader_gets_the_report_and_the_held_updates_in_order(
    start_task_executor: StartTaskExecutor,
) -> None:
    h, _, job_retriever = _running(start_task_executor)
    # the old JobMaster is gone: its heartbeats and updates fail; the job is leaderless
    h.jm.heartbeat_from_task_manager_function = raises(RpcUnreachable("gone"))
    h.jm.update_task_execution_state_function = raises(RpcUnreachable("gone"))
    wait_until(lambda: not h.te.job_managers[JOB].connected.is_set(), what="the job leaderless")
    assert h.te.tasks["exec-1"].state == ExecutionState.RUNNING  # kept
    # a task ends while no leader is there: its final state waits for the next leader
    h.call(lambda: h.te.cancel_task(g.CancelTask(OLD_JM, "exec-1")))
    wait_until(lambda: "exec-1" not in h.te.tasks, what="exec-1 ended")

    jm2 = h.resolver.add_job_master(JM_2, jobmaster_id=NEW_JM)
    job_retriever.publish(NEW_JM, JM_2)
    wait_until(lambda: jm2.count("reconnect_task_manager") == 1, what="the report")
    (report,) = jm2.requests("reconnect_task_manager")
    assert isinstance(report, ReconnectTaskManager)
    assert (report.jobmaster_id, report.job_id, report.resource_id) == (NEW_JM, JOB, "te-1")
    assert [s.allocation_id for s in report.slots] == ["alloc-1"]
    assert [(t.execution_id, t.state, t.allocation_id) for t in report.tasks] == [
        ("exec-1", ExecutionState.CANCELED, "alloc-1")
    ]
    # the held update goes to the new leader, with its id
    wait_until(lambda: jm2.count("update_task_execution_state") >= 1, what="the held update")
    update = jm2.requests("update_task_execution_state")[-1]
    assert (update.execution_id, update.state, update.jobmaster_id) == ("exec-1", ExecutionState.CANCELED, NEW_JM)
    assert h.te.jobs_reconnected == 1 and h.slot_state("alloc-1") is not None


def test_calls_of_the_deposed_leader_are_refused_stale_calls_accepted_zero(
    start_task_executor: StartTaskExecutor,
) -> None:
    h, _, job_retriever = _running(start_task_executor)
    jm2 = h.resolver.add_job_master(JM_2, jobmaster_id=NEW_JM)
    job_retriever.publish(NEW_JM, JM_2)
    wait_until(lambda: h.te.job_managers[JOB].jobmaster_id == NEW_JM, what="reconnected")
    assert jm2.count("reconnect_task_manager") == 1
    before = h.te.stale_rpcs_rejected
    stale: list[Callable[[], Coroutine[Any, Any, Any]]] = [
        lambda: h.te.cancel_task(g.CancelTask(OLD_JM, "exec-1")),
        lambda: h.te.trigger_checkpoint(g.TriggerCheckpoint(OLD_JM, "exec-1", 7, 0)),
        lambda: h.te.notify_checkpoint_complete(g.NotifyCheckpoint(OLD_JM, "exec-1", 7)),
        lambda: h.te.free_slot(g.FreeSlot("alloc-1", "old leader suspending", OLD_JM)),
        lambda: h.te.disconnect_job_manager(g.DisconnectJobManager(JOB, "old", OLD_JM)),
        lambda: h.te.release_partitions(g.ReleasePartitions(JOB, (), OLD_JM)),
    ]
    accepted = 0
    for call in stale:
        try:
            h.call(call)
            accepted += 1
        except FencingTokenMismatch:
            pass
    assert accepted == 0
    assert h.te.stale_rpcs_rejected - before == len(stale)
    # an older leader published again (a late ZooKeeper notification) is not followed
    job_retriever.publish(OLD_JM, JM_ADDRESS)
    wait_until(lambda: h.te.stale_rpcs_rejected - before == len(stale) + 1, what="the old epoch refused")
    assert h.te.job_managers[JOB].jobmaster_id == NEW_JM
    assert h.te.tasks["exec-1"].state == ExecutionState.RUNNING and h.slot_state("alloc-1") is not None


def test_a_late_refusal_of_the_deposed_leader_changes_nothing(start_task_executor: StartTaskExecutor) -> None:
    """Drill (f), SIGSTOP/SIGCONT of the leader: heartbeats sent to the old JobMaster while it was
    frozen are answered after the TaskExecutor has switched to the new one. That old JobMaster's
    refusal (or answer) is not about the current connection: the job stays connected to the new
    leader and its heartbeats go on."""
    h, _, job_retriever = _running(start_task_executor)
    thawed = threading.Event()

    async def frozen(request: TaskManagerHeartbeat) -> None:  # answers once SIGCONT'ed: no longer the leader
        while not thawed.is_set():
            await asyncio.sleep(0.01)
        raise FencingTokenMismatch("fencing token mismatch for JobMaster: expected <none>, got " + OLD_JM)

    h.jm.heartbeat_from_task_manager_function = frozen
    wait_until(lambda: h.jm.count("heartbeat_from_task_manager") >= 3, what="heartbeats in flight to the old leader")
    jm2 = h.resolver.add_job_master(JM_2, jobmaster_id=NEW_JM)
    job_retriever.publish(NEW_JM, JM_2)
    wait_until(lambda: h.te.job_managers[JOB].jobmaster_id == NEW_JM, what="reconnected")
    wait_until(lambda: jm2.count("heartbeat_from_task_manager") >= 1, what="heartbeats to the new leader")
    old_calls = h.jm.count("heartbeat_from_task_manager")
    thawed.set()  # the old leader's refusals of the heartbeats sent to it arrive now
    seen = jm2.count("heartbeat_from_task_manager")
    wait_until(lambda: jm2.count("heartbeat_from_task_manager") >= seen + 10, what="heartbeats to the new leader go on")
    conn = h.te.job_managers[JOB]
    assert conn.connected.is_set() and conn.jobmaster_id == NEW_JM and conn.reconnect_timer is None
    assert h.jm.count("heartbeat_from_task_manager") == old_calls  # none sent to the old leader since
    assert {r.jobmaster_id for r in jm2.requests("heartbeat_from_task_manager")} == {NEW_JM}
    assert h.te.tasks["exec-1"].state == ExecutionState.RUNNING and h.te.jobs_reconnected == 1


def test_no_leader_within_the_reconnect_timeout_fails_the_tasks_and_frees_the_slots(
    start_task_executor: StartTaskExecutor,
) -> None:
    h, _, _ = _running(start_task_executor, jobmaster_reconnect_timeout_s=0.5)
    h.jm.heartbeat_from_task_manager_function = raises(RpcUnreachable("gone"))
    wait_until(lambda: "exec-1" not in h.te.tasks, timeout=30, what="the task given up")
    wait_until(lambda: h.slot_state("alloc-1") is None, what="the slot freed")
    assert h.te.jobs_given_up == 1


def test_a_leader_that_started_the_job_afresh_gets_the_slots_back(start_task_executor: StartTaskExecutor) -> None:
    h, _, job_retriever = _running(start_task_executor)
    jm2 = h.resolver.add_job_master(JM_2, jobmaster_id=NEW_JM)
    jm2.reconnect_task_manager_function = raises(RpcRejected("adopts no tasks"))
    job_retriever.publish(NEW_JM, JM_2)
    wait_until(lambda: h.slot_state("alloc-1") is None, what="the slot freed")
    wait_until(lambda: "exec-1" not in h.te.tasks, what="the task cancelled")


def test_a_slot_request_of_the_jobs_new_leader_first_reports_the_kept_slots(
    start_task_executor: StartTaskExecutor,
) -> None:
    h, _, _ = _running(start_task_executor)
    jm2 = h.resolver.add_job_master(JM_2, jobmaster_id=NEW_JM)
    request = g.RequestSlot("session-1", 1, JOB, "alloc-2", UNKNOWN, JM_2, NEW_JM)
    with pytest.raises(RpcRejected, match="reporting the slots kept here"):
        h.call(lambda: h.te.request_slot(request))
    wait_until(lambda: h.te.job_managers[JOB].jobmaster_id == NEW_JM, what="reported to the new leader")
    assert [s.allocation_id for s in jm2.requests("reconnect_task_manager")[0].slots] == ["alloc-1"]
    h.call(lambda: h.te.request_slot(request))  # asked again: served for the new leader
    assert h.slot_state("alloc-2") is not None and h.te.tasks["exec-1"].state == ExecutionState.RUNNING


def test_a_task_that_finished_under_the_old_leader_is_reported_to_the_next_one(
    start_task_executor: StartTaskExecutor,
) -> None:
    h, _, job_retriever = _running(start_task_executor)
    h.call(lambda: h.te.submit_task(g.SubmitTask(OLD_JM, source_task("exec-2", "alloc-1", 10, {}))))
    h.wait_state("exec-2", ExecutionState.FINISHED)  # delivered to the old leader
    jm2 = h.resolver.add_job_master(JM_2, jobmaster_id=NEW_JM)
    job_retriever.publish(NEW_JM, JM_2)
    wait_until(lambda: jm2.count("reconnect_task_manager") == 1, what="the report")
    tasks = {t.execution_id: t.state for t in jm2.requests("reconnect_task_manager")[0].tasks}
    assert tasks == {"exec-1": ExecutionState.RUNNING, "exec-2": ExecutionState.FINISHED}


def test_stopping_stops_the_job_leader_retrievals(start_task_executor: StartTaskExecutor) -> None:
    h, _, job_retriever = _running(start_task_executor)
    h.te.stop()
    assert job_retriever.stopped
