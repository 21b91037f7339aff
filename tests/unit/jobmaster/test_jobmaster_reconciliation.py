"""A real JobMaster that took over a running job (``reconcile=True``) with testing gateways as its
TaskExecutors: it adopts reported tasks instead of deploying, fails over by region what is
missing, and refuses reports of another leader."""

from __future__ import annotations

import dataclasses

import pytest

from tests.fakes.conditions import wait_until
from tests.unit.jobmaster.harness import StartJobMaster
from tests.unit.scheduler.helpers import graph, vid
from yarnflink.common.rpc_errors import FencingTokenMismatch, RpcRejected, UnknownTarget
from yarnflink.executiongraph.executiongraph import ExecutionState, JobStatus
from yarnflink.jobmaster.gateway import (
    ReconnectTaskManager,
    ReportedTask,
    SerializedThrowable,
    SlotOffer,
    TaskExecutionState,
    TaskManagerHeartbeat,
)

NEW = "0000000007-" + "e" * 32
OLD = "0000000004-" + "d" * 32


def two_pipelines():  # type: ignore[no-untyped-def]
    """src -> sink, forward, two subtasks each: two shared slots, two pipelined regions."""
    return graph([("src", 2), ("sink", 2)], [("src", "sink", "forward", "P")])


def report(rid: str, sub: int, jobmaster_id: str = NEW, job_id: str = "f" * 32) -> ReconnectTaskManager:
    alloc = f"alloc-{sub}"
    return ReconnectTaskManager(
        jobmaster_id,
        job_id,
        rid,
        f"{rid}:6122",
        f"{rid}:9000",
        (SlotOffer(alloc, 0),),
        tuple(
            ReportedTask(f"{name}{sub}-old", vid(name), sub, 3, ExecutionState.RUNNING, alloc)
            for name in ("src", "sink")
        ),
    )


def test_all_reported_adopts_with_the_same_attempt_ids_and_deploys_nothing(start_jobmaster: StartJobMaster) -> None:
    h = start_jobmaster(
        job_graph=two_pipelines(), jobmaster_id=NEW, reconcile=True, config={"restart-strategy.type": "fixed-delay"}
    )
    tes = [h.add_task_executor("te-0"), h.add_task_executor("te-1")]
    # a task's update before the decision is kept and applied after it
    h.call(lambda: h.jm.reconnect_task_manager(report("te-0", 0)))
    h.call(lambda: h.jm.update_task_execution_state(TaskExecutionState(NEW, "src0-old", ExecutionState.FINISHED)))
    h.call(lambda: h.jm.reconnect_task_manager(report("te-1", 1)))
    wait_until(lambda: h.jm.reconciled is not None, what="reconciled")
    assert h.jm.reconciled is not None and h.jm.reconciled.adopted == 4 and not h.jm.reconciled.timed_out
    assert h.jm.eg.status == JobStatus.RUNNING
    ids = {e.attempt_id for e in h.jm.eg.executions()}
    assert ids == {"src0-old", "sink0-old", "src1-old", "sink1-old"}
    assert all(e.attempt_number == 3 for e in h.jm.eg.executions())
    wait_until(lambda: h.jm.eg.find_execution("src0-old").state == ExecutionState.FINISHED, what="early update")  # type: ignore[union-attr]
    assert h.jm.num_restarts == 0
    assert all(te.requests("submit_task") == [] and te.requests("cancel_task") == [] for te in tes)
    # the slots are the job's: its requirements count them, none is asked for anew
    assert sorted(h.jm.slot_pool.slots) == ["alloc-0", "alloc-1"]


def test_a_missing_task_executor_restarts_only_its_region_at_the_timeout(start_jobmaster: StartJobMaster) -> None:
    h = start_jobmaster(
        job_graph=two_pipelines(),
        jobmaster_id=NEW,
        reconcile=True,
        config={
            "high-availability.jobmaster.reconciliation-timeout": "300 ms",
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.delay": "0 s",
        },
    )
    te0 = h.add_task_executor("te-0")
    h.add_task_executor("te-1")
    h.call(lambda: h.jm.reconnect_task_manager(report("te-0", 0)))
    wait_until(lambda: h.jm.reconciled is not None, what="reconciled after the timeout")
    assert h.jm.reconciled is not None and h.jm.reconciled.timed_out and h.jm.reconciled.failed == 2
    adopted = {e.attempt_id for e in h.jm.eg.executions()}
    assert {"src0-old", "sink0-old"} <= adopted  # the other region runs on untouched
    assert te0.requests("cancel_task") == []
    assert h.jm.num_restarts == 1  # one region failover, not a global restart
    assert "no TaskExecutor reported this subtask" in " | ".join(f.message for f in h.jm.eg.failures)
    # the failed region asks for a slot: it is not deployed into te-0's slot, which runs region 0
    wait_until(lambda: h.rm.count("declare_required_resources") >= 1, what="requirements declared")
    assert te0.requests("submit_task") == []


def test_a_task_executor_that_reported_is_registered_for_heartbeats_while_the_decision_pends(
    start_jobmaster: StartJobMaster,
) -> None:
    """Drill (g) with the default reconciliation timeout: while the new leader waits for a dead
    TaskExecutor's report, the survivor that reported must not have its heartbeats refused ("not
    registered"), else both sides time each other out and its adopted tasks are redeployed."""
    h = start_jobmaster(
        job_graph=two_pipelines(),
        jobmaster_id=NEW,
        reconcile=True,
        config={"high-availability.jobmaster.reconciliation-timeout": "1 s"},
    )
    h.add_task_executor("te-0")
    h.add_task_executor("te-1")
    h.call(lambda: h.jm.reconnect_task_manager(report("te-0", 0)))
    for _ in range(3):  # te-1 never reports (it died while the job had no leader)
        h.call(lambda: h.jm.heartbeat_from_task_manager(TaskManagerHeartbeat(NEW, "te-0", ("src0-old", "sink0-old"))))
    assert h.jm.reconciled is None  # still waiting for te-1
    with pytest.raises(UnknownTarget, match="not registered"):
        h.call(lambda: h.jm.heartbeat_from_task_manager(TaskManagerHeartbeat(NEW, "te-1", ())))
    with pytest.raises(FencingTokenMismatch):
        h.call(lambda: h.jm.heartbeat_from_task_manager(TaskManagerHeartbeat(OLD, "te-0", ())))
    wait_until(lambda: h.jm.reconciled is not None, what="reconciled after the timeout")
    assert "te-0" in h.jm.slot_pool.task_managers  # registered by the adoption
    h.call(lambda: h.jm.heartbeat_from_task_manager(TaskManagerHeartbeat(NEW, "te-0", ("src0-old", "sink0-old"))))
    adopted = {e.attempt_id for e in h.jm.eg.executions()}
    assert {"src0-old", "sink0-old"} <= adopted


def test_a_report_of_an_older_leader_is_refused_and_a_fresh_jobmaster_adopts_nothing(
    start_jobmaster: StartJobMaster,
) -> None:
    h = start_jobmaster(job_graph=two_pipelines(), jobmaster_id=NEW, reconcile=True)
    with pytest.raises(FencingTokenMismatch, match="older leader's epoch"):
        h.call(lambda: h.jm.reconnect_task_manager(report("te-0", 0, jobmaster_id=OLD)))
    assert h.jm.reconciled is None
    fresh = start_jobmaster(job_graph=two_pipelines(), jobmaster_id=NEW)
    with pytest.raises(RpcRejected, match="adopts no tasks"):
        fresh.call(lambda: fresh.jm.reconnect_task_manager(report("te-0", 0)))


def test_a_suspended_jobmaster_refuses_reports(start_jobmaster: StartJobMaster) -> None:
    h = start_jobmaster(job_graph=two_pipelines(), jobmaster_id=NEW, reconcile=True)
    h.call(lambda: h.jm.suspend("leadership lost"))
    with pytest.raises(FencingTokenMismatch):
        h.call(lambda: h.jm.reconnect_task_manager(report("te-0", 0)))


def _with(r: ReconnectTaskManager, vertex: str, state: ExecutionState) -> ReconnectTaskManager:
    tasks = tuple(
        dataclasses.replace(t, state=state, error=SerializedThrowable("ValueError", "boom"))
        if t.vertex_id == vid(vertex)
        else t
        for t in r.tasks
    )
    return dataclasses.replace(r, tasks=tasks)


def test_a_task_failed_meanwhile_restarts_its_region_only(start_jobmaster: StartJobMaster) -> None:
    h = start_jobmaster(
        job_graph=two_pipelines(),
        jobmaster_id=NEW,
        reconcile=True,
        config={"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "0 s"},
    )
    te0, te1 = h.add_task_executor("te-0"), h.add_task_executor("te-1")
    h.reports_cancellations(te1)
    h.call(lambda: h.jm.reconnect_task_manager(report("te-0", 0)))
    h.call(lambda: h.jm.reconnect_task_manager(_with(report("te-1", 1), "sink", ExecutionState.FAILED)))
    wait_until(lambda: h.jm.reconciled is not None, what="reconciled")
    assert h.jm.reconciled is not None and (h.jm.reconciled.adopted, h.jm.reconciled.failed) == (3, 1)
    # region 1: its source is cancelled and both are deployed again into te-1's slot
    wait_until(lambda: len(te1.requests("submit_task")) == 2, what="region 1 redeployed")
    assert [c.execution_id for c in te1.requests("cancel_task")] == ["src1-old"]
    assert {s.tdd.allocation_id for s in te1.requests("submit_task")} == {"alloc-1"}
    assert te0.requests("cancel_task") == [] and te0.requests("submit_task") == []
    assert h.jm.num_restarts == 1
    assert "boom" in h.failures()


def test_a_task_finished_meanwhile_is_finished_under_the_new_leader(start_jobmaster: StartJobMaster) -> None:
    h = start_jobmaster(job_graph=two_pipelines(), jobmaster_id=NEW, reconcile=True)
    h.add_task_executor("te-0")
    h.add_task_executor("te-1")
    h.call(lambda: h.jm.reconnect_task_manager(_with(report("te-0", 0), "src", ExecutionState.FINISHED)))
    h.call(lambda: h.jm.reconnect_task_manager(report("te-1", 1)))
    wait_until(lambda: h.jm.reconciled is not None, what="reconciled")
    assert h.jm.reconciled is not None and (h.jm.reconciled.adopted, h.jm.reconciled.finished) == (3, 1)
    assert h.jm.eg.find_execution("src0-old").state == ExecutionState.FINISHED  # type: ignore[union-attr]
    assert h.jm.num_restarts == 0
