"""The pure reconciliation core (yarnflink/jobmaster/reconciliation.py): a new JobMaster leader
adopts the tasks TaskExecutors kept running, case by case, without servers."""

from __future__ import annotations

from yarnflink.executiongraph.executiongraph import ExecutionState
from yarnflink.highavailability.epoch import epoch_of, is_older, latch_sequence, session_id_for_latch
from yarnflink.jobmaster.gateway import ReconnectTaskManager, ReportedTask, SerializedThrowable, SlotOffer
from yarnflink.jobmaster.reconciliation import (
    Adopt,
    AdoptSlots,
    CancelTasks,
    Decided,
    FailSubtask,
    MarkFinished,
    Reconciliation,
    RejectStale,
    ReportReceived,
    TaskManagerLost,
    Timeout,
)

OLD = "0000000003-" + "a" * 32  # the previous leader's session id
NEW = "0000000005-" + "b" * 32  # this leader's
JOB = "job1"
# a source (2 subtasks) and a sink (2 subtasks), subtask i of both in shared slot "default/i"
SUBTASKS = {("src", 0): "default/0", ("src", 1): "default/1", ("snk", 0): "default/0", ("snk", 1): "default/1"}


def task(
    vertex: str,
    sub: int,
    alloc: str,
    state: ExecutionState = ExecutionState.RUNNING,
    attempt: int = 0,
    error: SerializedThrowable | None = None,
) -> ReportedTask:
    return ReportedTask(f"{vertex}{sub}-a{attempt}", vertex, sub, attempt, state, alloc, error)


def report(rid: str, *tasks: ReportedTask, jobmaster_id: str = NEW, job_id: str = JOB) -> ReconnectTaskManager:
    allocs = sorted({t.allocation_id for t in tasks})
    return ReconnectTaskManager(
        jobmaster_id,
        job_id,
        rid,
        f"{rid}:rpc",
        f"{rid}:data",
        tuple(SlotOffer(a, i) for i, a in enumerate(allocs)),
        tasks,
    )


def te1() -> ReconnectTaskManager:
    return report("te1", task("src", 0, "s0"), task("snk", 0, "s0"))


def te2(**kw: ExecutionState) -> ReconnectTaskManager:
    return report(
        "te2",
        task("src", 1, "s1", kw.get("src", ExecutionState.RUNNING)),
        task("snk", 1, "s1", kw.get("snk", ExecutionState.RUNNING)),
    )


def core() -> Reconciliation:
    return Reconciliation(JOB, NEW, SUBTASKS, deadline=10.0)


def kinds(actions: list[object]) -> list[str]:
    return [type(a).__name__ for a in actions]


def test_all_present_adopts_every_task_at_once_before_the_timeout() -> None:
    r = core()
    assert r.handle(ReportReceived(te1(), 1.0)) == []  # not every subtask accounted for yet
    actions = r.handle(ReportReceived(te2(), 1.1))
    assert kinds(actions) == ["AdoptSlots", "AdoptSlots"] + ["Adopt"] * 4 + ["Decided"]
    adopted = {a.task.execution_id: a.resource_id for a in actions if isinstance(a, Adopt)}
    assert adopted == {"src0-a0": "te1", "snk0-a0": "te1", "src1-a0": "te2", "snk1-a0": "te2"}
    assert actions[-1] == Decided(adopted=4, finished=0, failed=0, timed_out=False)
    assert r.decided
    # a repeated report of adopted tasks changes nothing
    assert r.handle(ReportReceived(te1(), 2.0)) == []


def test_a_task_executor_missing_fails_its_subtasks_at_the_timeout() -> None:
    r = core()
    assert r.handle(ReportReceived(te1(), 1.0)) == []
    assert r.handle(Timeout(5.0)) == []  # before the deadline
    actions = r.handle(Timeout(10.0))
    assert [a.task.execution_id for a in actions if isinstance(a, Adopt)] == ["snk0-a0", "src0-a0"]
    failed = [a for a in actions if isinstance(a, FailSubtask)]
    assert [(f.vertex_id, f.subtask_index) for f in failed] == [("snk", 1), ("src", 1)]
    assert all("no TaskExecutor reported" in f.cause and f.task is None for f in failed)
    assert actions[-1] == Decided(adopted=2, finished=0, failed=2, timed_out=True)


def test_a_task_executor_that_reported_is_pending_until_the_decision() -> None:
    r = core()
    assert not r.pending_for("te1")
    r.handle(ReportReceived(te1(), 1.0))
    r.handle(ReportReceived(report("te3", task("src", 1, "s9"), jobmaster_id=OLD), 1.0))  # refused: not pending
    assert r.pending_for("te1") and not r.pending_for("te2") and not r.pending_for("te3")
    r.handle(TaskManagerLost("te1", "heartbeat timed out", 2.0))
    assert not r.pending_for("te1")
    r = core()
    r.handle(ReportReceived(te1(), 1.0))
    r.handle(Timeout(10.0))
    assert not r.pending_for("te1")  # decided: the JobMaster's own registration counts from now


def test_a_task_executor_lost_before_the_decision_fails_what_it_reported() -> None:
    r = core()
    r.handle(ReportReceived(te1(), 1.0))
    r.handle(ReportReceived(te2(), 1.0))  # decided: all present
    r2 = core()
    r2.handle(ReportReceived(te1(), 1.0))
    assert r2.handle(TaskManagerLost("te1", "heartbeat timed out", 1.5)) == []
    actions = r2.handle(ReportReceived(te2(), 2.0))
    # every subtask was reported, te1's count as failed: no need to wait for the timeout
    assert not any(isinstance(a, AdoptSlots) and a.resource_id == "te1" for a in actions)
    failed = {(f.vertex_id, f.subtask_index): f for f in actions if isinstance(f, FailSubtask)}
    assert set(failed) == {("src", 0), ("snk", 0)}
    assert "TaskManager te1 was lost" in failed[("src", 0)].cause
    assert actions[-1] == Decided(adopted=2, finished=0, failed=2, timed_out=False)


def test_a_task_finished_meanwhile_is_adopted_as_finished() -> None:
    r = core()
    r.handle(ReportReceived(te1(), 1.0))
    actions = r.handle(ReportReceived(te2(src=ExecutionState.FINISHED), 1.0))
    finished = [a for a in actions if isinstance(a, MarkFinished)]
    assert [(f.resource_id, f.task.execution_id) for f in finished] == [("te2", "src1-a0")]
    assert actions[-1] == Decided(adopted=3, finished=1, failed=0, timed_out=False)


def test_a_task_failed_meanwhile_goes_to_the_failover_strategy_with_its_error() -> None:
    r = core()
    r.handle(ReportReceived(te1(), 1.0))
    err = SerializedThrowable("ValueError", "boom")
    bad = report("te2", task("src", 1, "s1"), task("snk", 1, "s1", ExecutionState.FAILED, error=err))
    actions = r.handle(ReportReceived(bad, 1.0))
    failed = [a for a in actions if isinstance(a, FailSubtask)]
    assert len(failed) == 1
    f = failed[0]
    assert (f.vertex_id, f.subtask_index, f.resource_id) == ("snk", 1, "te2")
    assert f.task is not None and f.task.execution_id == "snk1-a0"
    assert "FAILED while the job had no leader: boom" == f.cause
    assert sum(isinstance(a, Adopt) for a in actions) == 3  # the failover strategy decides what else restarts


def test_a_report_from_an_older_leaders_epoch_is_rejected_and_adopts_nothing() -> None:
    r = core()
    stale = report("te1", task("src", 0, "s0"), task("snk", 0, "s0"), jobmaster_id=OLD)
    actions = r.handle(ReportReceived(stale, 1.0))
    assert len(actions) == 1 and isinstance(actions[0], RejectStale)
    assert "older leader's epoch" in actions[0].reason
    other = report("te1", task("src", 0, "s0"), jobmaster_id="0000000009-" + "c" * 32)
    assert "not this leader" in r.handle(ReportReceived(other, 1.0))[0].reason  # type: ignore[union-attr]
    wrong_job = report("te1", task("src", 0, "s0"), job_id="job2")
    assert "for job job2" in r.handle(ReportReceived(wrong_job, 1.0))[0].reason  # type: ignore[union-attr]
    assert not r.decided
    assert r.handle(Timeout(10.0))[-1] == Decided(adopted=0, finished=0, failed=4, timed_out=True)


def test_duplicate_attempts_keep_the_newest_and_cancel_the_other() -> None:
    r = core()
    r.handle(
        ReportReceived(report("te1", task("src", 0, "s0"), task("snk", 0, "s0"), task("src", 1, "x", attempt=0)), 1.0)
    )
    actions = r.handle(
        ReportReceived(report("te2", task("src", 1, "s1", attempt=1), task("snk", 1, "s1", attempt=1)), 1.0)
    )
    assert {a.task.execution_id for a in actions if isinstance(a, Adopt)} == {
        "src0-a0",
        "snk0-a0",
        "src1-a1",
        "snk1-a1",
    }
    cancels = [a for a in actions if isinstance(a, CancelTasks)]
    assert [(c.resource_id, c.execution_ids) for c in cancels] == [("te1", ("src1-a0",))]


def test_unknown_subtasks_and_split_groups() -> None:
    r = core()
    r.handle(ReportReceived(report("te1", task("src", 0, "s0"), task("snk", 0, "s9"), task("ghost", 0, "s0")), 1.0))
    actions = r.handle(ReportReceived(te2(), 1.0))
    failed = [(f.vertex_id, f.subtask_index) for f in actions if isinstance(f, FailSubtask)]
    assert failed == [("snk", 0)]  # its group's slot is s0, it ran in s9
    cancels = {c.execution_ids for c in actions if isinstance(c, CancelTasks)}
    assert cancels == {("ghost0-a0", "snk0-a0")}


def test_a_report_after_the_decision_is_cancelled_and_its_slots_freed() -> None:
    r = core()
    r.handle(ReportReceived(te1(), 1.0))
    r.handle(Timeout(10.0))  # te2's subtasks failed over
    actions = r.handle(ReportReceived(te2(), 11.0))
    assert actions == [
        CancelTasks(
            "te2",
            "te2:rpc",
            ("src1-a0", "snk1-a0"),
            ("s1",),
            "reported after the new leader had decided (its subtasks were restarted elsewhere)",
        )
    ]


def test_session_ids_are_ordered_by_the_latch_sequence() -> None:
    assert latch_sequence("/yarnflink/c/leaderlatch/abc-latch-0000000012") == 12
    assert latch_sequence("/x/embedded") is None
    a = session_id_for_latch("/l/g1-latch-0000000009")
    b = session_id_for_latch("/l/g2-latch-0000000010")
    assert epoch_of(a) == 9 and epoch_of(b) == 10
    assert is_older(a, b) and not is_older(b, a) and not is_older(a, a)
    plain = session_id_for_latch(None)
    assert epoch_of(plain) is None and not is_older(plain, b) and not is_older(b, plain)
