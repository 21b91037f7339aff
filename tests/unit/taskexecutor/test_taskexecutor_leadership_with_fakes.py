"""The real TaskExecutor following the ResourceManager's leader (HA), with a
LeaderRetrievalService whose TestingLeaderRetrievalDriver publishes leaders, and testing gateways as the ResourceManagers and
the JobMaster: it registers at the leader with the leader's session id as token, drops everything
of the old leader when a new one is published, refuses the old leader's calls, and keeps its work
while no leader is known."""

from __future__ import annotations

import pytest

from tests.fakes.conditions import wait_until
from tests.fakes.leadership import TestingLeaderRetrievalDriver
from tests.unit.taskexecutor.harness import RM_ADDRESS, Harness, StartTaskExecutor
from yarnflink.common.rpc_errors import FencingTokenMismatch
from yarnflink.executiongraph.executiongraph import ExecutionState
from yarnflink.highavailability.leaderretrieval import LeaderRetrievalService

RM_2 = "rm-2:6124"


def _following(start: StartTaskExecutor) -> tuple[Harness, TestingLeaderRetrievalDriver]:
    """A TaskExecutor registered at rm-1, the leader of session-1, running a task in alloc-1."""
    retriever = TestingLeaderRetrievalDriver()
    h = start(registered=False, rm_leader_retriever=LeaderRetrievalService(retriever))
    wait_until(lambda: retriever.started, what="the retriever started")
    h.rm.fencing_token = "session-1"
    retriever.publish("session-1", RM_ADDRESS)
    wait_until(lambda: h.te.rm_token == "session-1", what="registered at rm-1")
    h.active_slot("alloc-1", token="session-1")
    h.submit("exec-1")
    h.wait_state("exec-1", ExecutionState.RUNNING)
    return h, retriever


def test_a_new_leader_ends_the_old_connection_and_the_old_leaders_calls_are_refused(
    start_task_executor: StartTaskExecutor,
) -> None:
    h, retriever = _following(start_task_executor)
    rm2 = h.resolver.add_resource_manager(RM_2, fencing_token="session-2")

    retriever.publish("session-2", RM_2)

    wait_until(lambda: h.te.rm_token == "session-2", what="registered at rm-2")
    (registration,) = rm2.requests("register_task_executor")
    assert [s.allocation_id for s in registration.slot_report.slots] == ["", ""]  # everything freed first
    wait_until(lambda: "exec-1" not in h.te.tasks, what="the old leader's task cancelled")
    assert h.freed() == []  # the old leader is not told (the new one has the report)
    with pytest.raises(FencingTokenMismatch, match="stale ResourceManager"):
        h.call(lambda: h.te.heartbeat_from_resource_manager("session-1"))
    with pytest.raises(FencingTokenMismatch, match="stale ResourceManager"):
        h.request_slot("alloc-2", token="session-1")
    assert h.call(lambda: h.te.heartbeat_from_resource_manager("session-2")).version >= 0


def test_while_no_leader_is_known_nothing_changes(start_task_executor: StartTaskExecutor) -> None:
    h, retriever = _following(start_task_executor)

    retriever.lose()  # e.g. the ZooKeeper connection is suspended
    retriever.publish("session-1", RM_ADDRESS)  # and back: the same leader

    assert h.call(lambda: h.te.heartbeat_from_resource_manager("session-1")) is not None
    assert h.te.tasks["exec-1"].state == ExecutionState.RUNNING
    assert h.rm.count("register_task_executor") == 1  # no new registration


def test_a_registration_answered_with_another_token_than_the_leaders_session_does_not_count(
    start_task_executor: StartTaskExecutor,
) -> None:
    retriever = TestingLeaderRetrievalDriver()
    h = start_task_executor(registered=False, rm_leader_retriever=LeaderRetrievalService(retriever))
    wait_until(lambda: retriever.started, what="the retriever started")
    h.rm.fencing_token = "session-0"  # a former leader's answer, still on its way

    retriever.publish("session-1", RM_ADDRESS)
    wait_until(lambda: h.rm.count("register_task_executor") >= 2, what="registered again")
    assert h.te.rm_token == ""
    h.rm.fencing_token = "session-1"

    wait_until(lambda: h.te.rm_token == "session-1", what="registered")
