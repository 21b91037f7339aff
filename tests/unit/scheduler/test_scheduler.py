"""The DefaultScheduler as a state machine: events in, actions out (no servers)."""

from __future__ import annotations

from yarnflink.executiongraph.executiongraph import ExecutionGraph, ExecutionState, Failure, JobStatus
from yarnflink.jobmaster.slotpool import SlotPool
from yarnflink.scheduler.restart import FixedDelayRestartBackoffTimeStrategy
from yarnflink.scheduler.scheduler import (
    CancelTask,
    CheckTaskManager,
    DeclareResources,
    DefaultScheduler,
    DeployTask,
    FreeSlot,
    JobTerminated,
    ReleasePartitions,
    TaskManagerLost,
)

from .helpers import Driver, ev, fail, graph, names

RUNNING, FINISHED, CANCELED = ExecutionState.RUNNING, ExecutionState.FINISHED, ExecutionState.CANCELED


def scheduler(g, **kw) -> DefaultScheduler:  # type: ignore[no-untyped-def]
    return DefaultScheduler(ExecutionGraph(g), **kw)


def test_eager_scheduling_deploys_everything_once_all_slots_are_there() -> None:
    s = scheduler(graph([("A", 2), ("B", 2)], [("A", "B", "hash", "P")]))
    assert not s.lazy
    actions = s.start(0.0)
    assert actions == [DeclareResources(2)]  # one shared slot per subtask index
    s.pool.register_task_manager("te", "te:rpc", "te:data", 0.0)
    accepted, actions = s.slots_offered("te", [("a0", 0)], 0.0)
    assert accepted == ["a0"] and actions == []  # half the slots: nothing deployed yet
    accepted, actions = s.slots_offered("te", [("a1", 1), ("a2", 2)], 0.0)
    assert accepted == ["a1"]  # nobody waits for a2
    assert [a.execution.vertex.task_name_with_subtask for a in actions if isinstance(a, DeployTask)] == [
        "A (1/2)",
        "A (2/2)",
        "B (1/2)",
        "B (2/2)",
    ]
    assert ev(s.eg, "A", 0).current.slot is ev(s.eg, "B", 0).current.slot  # slot sharing


def test_batch_regions_run_one_after_another_in_the_same_slots() -> None:
    s = scheduler(
        graph([("A", 2), ("B", 2), ("C", 2)], [("A", "B", "hash", "B"), ("B", "C", "rebalance", "B")], mode="BATCH")
    )
    d = Driver(s, task_managers=1, slots_each=2)
    assert s.lazy
    d.start()
    assert names(d.deployed) == ["A (1/2)", "A (2/2)"] and d.declared == 2
    a_slots = {ev(s.eg, "A", i).current.slot.allocation_id for i in (0, 1)}  # type: ignore[union-attr]
    d.finish(ev(s.eg, "A", 0))
    assert names(d.deployed) == ["A (1/2)", "A (2/2)"]  # B reads all of A: waits for A1 too
    d.finish(ev(s.eg, "A", 1))
    assert names(d.deployed[2:]) == ["B (1/2)", "B (2/2)"]
    assert {ev(s.eg, "B", i).current.slot.allocation_id for i in (0, 1)} == a_slots  # type: ignore[union-attr]
    d.take()
    d.finish(ev(s.eg, "B", 0))
    assert not any(isinstance(a, ReleasePartitions) for a in d.actions)  # B1 still reads A's results
    d.finish(ev(s.eg, "B", 1))
    released = [a for a in d.take() if isinstance(a, ReleasePartitions)]
    assert sorted(p for a in released for p in a.partition_ids) == sorted(
        p.partition_id for i in (0, 1) for p in ev(s.eg, "A", i).produced.values()
    )
    d.finish(ev(s.eg, "C", 0))
    d.finish(ev(s.eg, "C", 1))
    assert s.eg.status == JobStatus.FINISHED and d.max_declared == 2  # never more than one region's slots
    end = d.take()
    assert [a for a in end if isinstance(a, FreeSlot)] and end[-1] == JobTerminated(JobStatus.FINISHED)


def test_region_failover_cancels_the_region_waits_for_the_backoff_and_redeploys_sticky() -> None:
    s = scheduler(
        graph([("X1", 2), ("X2", 2), ("Y", 2)], [("X1", "X2", "rebalance", "P")]),
        restart_strategy=FixedDelayRestartBackoffTimeStrategy(1, 2.0),
    )
    d = Driver(s)
    d.start()
    d.run_all()
    before = {v.task_name_with_subtask: v.current.slot.allocation_id for v in s.eg.all_vertices()}  # type: ignore[union-attr]
    d.take()
    d.report(ev(s.eg, "X2", 0), ExecutionState.FAILED, fail(ev(s.eg, "X2", 0)))
    assert names(d.cancels()) == ["X1 (1/2)", "X1 (2/2)", "X2 (2/2)"]
    d.confirm_cancels()
    d.advance(1.9)
    assert not any(isinstance(a, DeployTask) for a in d.actions)  # the backoff has not passed
    d.advance(0.2)
    deployed = [a.execution for a in d.actions if isinstance(a, DeployTask)]
    assert names(e.vertex for e in deployed) == ["X1 (1/2)", "X1 (2/2)", "X2 (1/2)", "X2 (2/2)"]
    assert all(
        e.attempt_number == 1 and e.slot.allocation_id == before[e.vertex.task_name_with_subtask]  # type: ignore[union-attr]
        for e in deployed
    )
    assert [ev(s.eg, "Y", i).current.attempt_number for i in (0, 1)] == [0, 0]
    assert s.eg.num_restarts == 1
    (entry,) = s.eg.failures
    assert entry.restarted_tasks == ["X1 (1/2)", "X1 (2/2)", "X2 (1/2)", "X2 (2/2)"]
    # the second failure is one more than fixed-delay(attempts=1) allows
    d.run_all()
    d.take()
    d.report(ev(s.eg, "Y", 1), ExecutionState.FAILED, fail(ev(s.eg, "Y", 1), "again"))
    assert s.eg.status == JobStatus.FAILING and len(d.cancels()) == 5
    d.confirm_cancels()
    assert s.eg.status == JobStatus.FAILED and s.eg.failures[-1].message.startswith("again")
    assert JobTerminated(JobStatus.FAILED) in d.actions


def test_a_failure_of_a_task_being_cancelled_joins_the_pending_restart() -> None:
    s = scheduler(
        graph([("A", 1), ("B", 1)], [("A", "B", "forward", "P")]),
        restart_strategy=FixedDelayRestartBackoffTimeStrategy(1, 0.0),
    )
    d = Driver(s)
    d.start()
    d.run_all()
    d.report(ev(s.eg, "A", 0), ExecutionState.FAILED, fail(ev(s.eg, "A", 0), "root"))
    d.report(ev(s.eg, "B", 0), ExecutionState.FAILED, fail(ev(s.eg, "B", 0), "upstream failed"))
    assert s.eg.num_restarts == 1 and [f.message for f in s.eg.failures[0].concurrent] == ["upstream failed"]
    assert [v.current.attempt_number for v in s.eg.all_vertices()] == [1, 1]


def test_lost_task_executor_restarts_its_tasks_and_producers_whose_results_are_still_needed() -> None:
    s = scheduler(
        graph([("A", 2), ("B", 2)], [("A", "B", "hash", "B")], mode="BATCH"),
        restart_strategy=FixedDelayRestartBackoffTimeStrategy(1, 0.0),
    )
    d = Driver(s, task_managers=2, slots_each=1)
    d.start()
    te_of = {i: ev(s.eg, "A", i).current.slot.resource_id for i in (0, 1)}  # type: ignore[union-attr]
    assert sorted(te_of.values()) == ["te0", "te1"]
    d.finish(ev(s.eg, "A", 0))
    d.finish(ev(s.eg, "A", 1))
    b_on = {ev(s.eg, "B", i).current.slot.resource_id: i for i in (0, 1)}  # type: ignore[union-attr]
    d.finish(ev(s.eg, "B", b_on[te_of[1]]))  # B on A1's TaskExecutor finished: its result is final
    d.report(ev(s.eg, "B", b_on[te_of[0]]), RUNNING)
    d.take()
    lost = te_of[1]
    d.run(s.task_manager_lost(lost, Failure("TaskManagerLostException", "gone", "", 5), d.now))
    assert [(a.resource_id, a.cause) for a in d.actions if isinstance(a, TaskManagerLost)] == [(lost, "gone")]
    # A1's result is lost and B (the running one) still needs it
    assert names(d.cancels()) == [f"B ({b_on[te_of[0]] + 1}/2)"]
    d.confirm_cancels()
    d.offer()
    assert [v.current.attempt_number for v in (ev(s.eg, "A", 0), ev(s.eg, "A", 1))] == [0, 1]
    assert ev(s.eg, "A", 1).current.state == ExecutionState.DEPLOYING
    assert ev(s.eg, "A", 1).current.slot.resource_id == te_of[0]  # type: ignore[union-attr]
    (entry,) = s.eg.failures
    assert sorted(entry.restarted_tasks) == sorted(["A (2/2)", f"B ({b_on[te_of[0]] + 1}/2)"])


def test_a_consumer_that_cannot_read_a_partition_makes_the_scheduler_probe_its_producer() -> None:
    s = scheduler(
        graph([("A", 2), ("B", 2)], [("A", "B", "hash", "B")], mode="BATCH"),
        restart_strategy=FixedDelayRestartBackoffTimeStrategy(1, 0.0),
    )
    d = Driver(s, task_managers=2, slots_each=1)
    d.start()
    d.finish(ev(s.eg, "A", 0))
    d.finish(ev(s.eg, "A", 1))
    d.run_all()
    d.take()
    a1 = ev(s.eg, "A", 1)
    pid = next(iter(a1.produced.values())).partition_id
    b = ev(s.eg, "B", 0)
    d.report(b, ExecutionState.FAILED, fail(b, "connection refused", partition_id=pid))
    probe = [a for a in d.actions if isinstance(a, CheckTaskManager)]
    assert probe == [CheckTaskManager(a1.current.slot.resource_id, a1.current.slot.rpc_address)]  # type: ignore[union-attr]
    # B1 also reads A1: it is running, so it restarts with it
    assert names(d.cancels()) == ["B (2/2)"]
    d.confirm_cancels()
    assert a1.current.attempt_number == 0  # restarts wait for the probe's answer
    d.run(s.task_manager_checked(probe[0].resource_id, d.now))
    d.offer()
    assert [v.current.attempt_number for v in s.eg.all_vertices()] == [0, 1, 1, 1]


def test_idle_slots_are_kept_for_the_idle_timeout_then_freed() -> None:
    s = scheduler(
        graph([("A", 2), ("B", 1)], [("A", "B", "rebalance", "B")], mode="BATCH"),
        slot_pool=SlotPool(idle_timeout_s=50.0),
    )
    d = Driver(s, task_managers=1, slots_each=2)
    d.start()
    d.finish(ev(s.eg, "A", 0))
    d.finish(ev(s.eg, "A", 1))
    d.report(ev(s.eg, "B", 0), RUNNING)
    assert len(s.pool.slots) == 2 and len(s.pool.idle_slots()) == 1 and d.declared == 1
    assert s.next_deadline() == 50.0
    d.advance(49.0)
    assert not [a for a in d.take() if isinstance(a, FreeSlot)]
    d.advance(1.0)
    (free,) = [a for a in d.take() if isinstance(a, FreeSlot)]
    assert free.slot not in s.pool.slots.values() and len(s.pool.slots) == 1


def test_unfulfilled_slot_requests_fail_the_job_after_the_slot_request_timeout() -> None:
    s = scheduler(graph([("A", 3)], []), slot_request_timeout_s=10.0)
    d = Driver(s, task_managers=1, slots_each=2)
    d.start()
    d.advance(10.0)
    assert s.eg.status == JobStatus.FAILED
    assert s.eg.failures[-1].exception_class == "NoResourceAvailableException"
    assert CancelTask not in {type(a) for a in d.actions}


def test_cancel_ends_the_job_canceled() -> None:
    s = scheduler(graph([("A", 2)], []))
    d = Driver(s)
    d.start()
    d.run_all()
    assert s.cancel(d.now)
    d.run(s.take_actions(d.now))
    assert len(d.cancels()) == 2 and s.eg.status == JobStatus.CANCELLING
    d.confirm_cancels()
    assert s.eg.status == JobStatus.CANCELED


def test_a_probe_finding_more_lost_results_extends_the_consumers_restart_as_one_failure() -> None:
    """A consumer fails reading A1's result: its restart is counted and waits for the probe of
    A1's TaskExecutor. The probe finds it dead, and A0 ran there too: A0's result is lost as well.
    A0 joins the pending restart -- one failure, so fixed-delay(attempts=1) still recovers."""
    s = scheduler(
        graph([("A", 2), ("B", 3)], [("A", "B", "rebalance", "B")], mode="BATCH"),
        restart_strategy=FixedDelayRestartBackoffTimeStrategy(1, 0.0),
    )
    d = Driver(s, task_managers=2, slots_each=2)
    d.start()
    a0, a1 = ev(s.eg, "A", 0), ev(s.eg, "A", 1)
    te = a1.current.slot.resource_id  # type: ignore[union-attr]
    assert a0.current.slot.resource_id == te  # type: ignore[union-attr]
    d.finish(a0)
    d.finish(a1)
    d.run_all()
    consumers = [ev(s.eg, "B", i) for i in range(3)]
    elsewhere = [v for v in consumers if v.current.slot.resource_id != te]  # type: ignore[union-attr]
    assert elsewhere, "a consumer on the other TaskExecutor"
    for v in consumers:
        if v not in elsewhere:
            d.finish(v)
    d.take()
    b = elsewhere[0]
    d.report(
        b,
        ExecutionState.FAILED,
        fail(b, "connection refused", partition_id=next(iter(a1.produced.values())).partition_id),
    )
    (probe,) = [a for a in d.actions if isinstance(a, CheckTaskManager)]
    d.confirm_cancels()
    d.run(s.task_manager_lost(probe.resource_id, Failure("TaskManagerLostException", "probe: refused", "", 5), d.now))
    assert s.eg.status == JobStatus.RUNNING and s.eg.num_restarts == 1
    d.confirm_cancels()
    d.offer()
    assert (a0.current.attempt_number, a1.current.attempt_number) == (1, 1)
    (entry,) = s.eg.failures
    assert "A (1/2)" in entry.restarted_tasks and "A (2/2)" in entry.restarted_tasks
    assert [f.exception_class for f in entry.concurrent] == ["TaskManagerLostException"]


def test_a_global_failure_restarts_every_task_through_the_restart_strategy_whatever_the_failover_strategy() -> None:
    """Flink's handleGlobalFailure (checkpoint failures beyond the tolerable number): with region
    failover and two independent regions, every task restarts, counted once; with the restart
    strategy exhausted the job fails with that failure as its cause."""
    s = scheduler(
        graph([("X", 1), ("Y", 1)], []),
        failover_strategy="region",
        restart_strategy=FixedDelayRestartBackoffTimeStrategy(1, 0.0),
    )
    d = Driver(s)
    d.start()
    d.run_all()
    d.take()
    checkpoint = Failure("CheckpointException", "Exceeded checkpoint tolerable failure threshold (0)", "", 1)
    d.run(s.global_failure(checkpoint, d.now))
    assert names(d.cancels()) == ["X (1/1)", "Y (1/1)"]
    d.confirm_cancels()
    assert [v.current.attempt_number for v in s.eg.all_vertices()] == [1, 1]
    assert s.eg.num_restarts == 1 and s.eg.status == JobStatus.RUNNING
    assert s.eg.failures == [checkpoint] and checkpoint.restarted_tasks == ["X (1/1)", "Y (1/1)"]

    d.run_all()
    again = Failure("CheckpointException", "Exceeded checkpoint tolerable failure threshold (0), again", "", 2)
    d.run(s.global_failure(again, d.now))
    d.confirm_cancels()
    assert s.eg.status == JobStatus.FAILED and s.eg.num_restarts == 1
    assert s.eg.failures[-1] is again and "recovery is suppressed by" in again.message


def test_a_task_executor_that_holds_nothing_of_the_job_is_forgotten_not_reported_lost() -> None:
    """Chaos finding 4: a TaskExecutor registered at a JobMaster whose offer that JobMaster refused
    sends it no heartbeats; their timeout must not have the ResourceManager drop it (that failed
    another job's healthy tasks there and left that job without slots)."""
    s = scheduler(graph([("A", 1)], []), restart_strategy=FixedDelayRestartBackoffTimeStrategy(1, 0.0))
    d = Driver(s, task_managers=2, slots_each=1)
    d.start()
    d.run_all()
    assert ev(s.eg, "A", 0).current.slot.resource_id == "te0"  # type: ignore[union-attr]
    d.take()

    d.run(s.task_manager_lost("te1", Failure("TaskManagerLostException", "heartbeat timed out", "", 5), d.now))

    assert not [a for a in d.actions if isinstance(a, TaskManagerLost)]
    assert not d.cancels()
    assert "te1" not in s.pool.task_managers
    assert ev(s.eg, "A", 0).current.state == ExecutionState.RUNNING

    # one that holds the job's tasks is reported, with its address (the JobMaster tells it too)
    d.run(s.task_manager_lost("te0", Failure("TaskManagerLostException", "heartbeat timed out", "", 6), d.now))
    assert [a for a in d.actions if isinstance(a, TaskManagerLost)] == [
        TaskManagerLost("te0", "heartbeat timed out", "te0:rpc")
    ]
