"""Batch jobs keep finished work across a master failover (issue 18, item 5): a real JobMaster that
took over (``reconcile=True``) a BATCH job whose first stage finished under the earlier leader.
The TaskExecutors report the first stage's subtasks FINISHED (in slots that went back since, or that
the second stage runs in now; their blocking results are kept there) and the second stage's tasks
RUNNING: the new leader decides at once, runs nothing again, takes no slot for what finished and
points consumers at the kept results."""

from __future__ import annotations

from tests.fakes.conditions import wait_until
from tests.unit.jobmaster.harness import StartJobMaster
from tests.unit.jobmaster.test_jobmaster_reconciliation import NEW
from tests.unit.scheduler.helpers import graph, vid
from yarnflink.executiongraph.executiongraph import ExecutionState, JobStatus
from yarnflink.jobmaster import reconciliation as rc
from yarnflink.jobmaster.gateway import ReconnectTaskManager, ReportedTask, SlotOffer

JOB = "f" * 32


def two_stages():  # type: ignore[no-untyped-def]
    """first (2) -> hash, blocking -> second (2): two stages, each its own regions and slots."""
    return graph([("first", 2), ("second", 2)], [("first", "second", "hash", "B")], mode="BATCH")


def report(rid: str, sub: int) -> ReconnectTaskManager:
    alloc = f"alloc-{sub}"
    return ReconnectTaskManager(
        NEW,
        JOB,
        rid,
        f"{rid}:6122",
        f"{rid}:9000",
        (SlotOffer(alloc, 0),),
        (
            ReportedTask(f"second{sub}-old", vid("second"), sub, 0, ExecutionState.RUNNING, alloc),
            # finished under the earlier leader in the slot the second stage runs in now; its
            # results are kept here
            ReportedTask(f"first{sub}-old", vid("first"), sub, 0, ExecutionState.FINISHED, alloc),
        ),
    )


def test_the_reconciliation_adopts_finished_producers_and_running_consumers_at_once() -> None:
    subtasks = {(vid(v), i): f"{v}-{i}" for v in ("first", "second") for i in range(2)}
    r = rc.Reconciliation(JOB, NEW, subtasks, deadline=10.0)
    assert r.handle(rc.ReportReceived(report("te-0", 0), 0.0)) == []
    actions = r.handle(rc.ReportReceived(report("te-1", 1), 0.1))  # every subtask accounted for: at once
    finished = sorted(a.task.execution_id for a in actions if isinstance(a, rc.MarkFinished))
    adopted = sorted(a.task.execution_id for a in actions if isinstance(a, rc.Adopt))
    assert finished == ["first0-old", "first1-old"] and adopted == ["second0-old", "second1-old"]
    assert not [a for a in actions if isinstance(a, (rc.FailSubtask, rc.CancelTasks))]
    decided = next(a for a in actions if isinstance(a, rc.Decided))
    assert (decided.adopted, decided.finished, decided.failed, decided.timed_out) == (2, 2, 0, False)


def test_a_new_leader_runs_no_finished_stage_again(start_jobmaster: StartJobMaster) -> None:
    h = start_jobmaster(
        job_graph=two_stages(), jobmaster_id=NEW, reconcile=True, config={"restart-strategy.type": "fixed-delay"}
    )
    tes = [h.add_task_executor("te-0"), h.add_task_executor("te-1")]
    h.call(lambda: h.jm.reconnect_task_manager(report("te-0", 0)))
    h.call(lambda: h.jm.reconnect_task_manager(report("te-1", 1)))
    wait_until(lambda: h.jm.reconciled is not None, what="reconciled")
    assert h.jm.reconciled is not None and not h.jm.reconciled.timed_out and h.jm.reconciled.failed == 0
    assert h.jm.eg.status == JobStatus.RUNNING and h.jm.num_restarts == 0
    first = h.jm.eg.vertex(vid("first")).task_vertices
    assert [ev.current.state for ev in first] == [ExecutionState.FINISHED] * 2
    assert [ev.current.attempt_id for ev in first] == ["first0-old", "first1-old"]
    # the kept results are where the TaskExecutor that reported them serves data
    assert [ev.current.slot.data_address for ev in first if ev.current.slot] == ["te-0:9000", "te-1:9000"]
    assert all(te.requests("submit_task") == [] and te.requests("cancel_task") == [] for te in tes)
    # the second stage holds the slots; nothing finished took one
    second = h.jm.eg.vertex(vid("second")).task_vertices
    assert [ev.current.slot.allocation_id for ev in second if ev.current.slot] == ["alloc-0", "alloc-1"]
