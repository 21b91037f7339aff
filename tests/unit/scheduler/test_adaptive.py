"""The Adaptive scheduler (streaming) as pure logic: the parallelism from the slots available,
waiting for resources, scaling up when slots arrive, down when a TaskExecutor is lost. No servers."""

from __future__ import annotations

from yarnflink.executiongraph.executiongraph import ExecutionGraph, ExecutionState, Failure
from yarnflink.scheduler.adaptive import (
    EXECUTING,
    WAITING_FOR_RESOURCES,
    AdaptiveOptions,
    AdaptiveScheduler,
    decide_parallelism,
)
from yarnflink.scheduler.restart import FixedDelayRestartBackoffTimeStrategy
from yarnflink.scheduler.scheduler import CancelTask, DeclareResources, DeployTask

from .helpers import graph, vid

OPTS = AdaptiveOptions(resource_wait_timeout_s=30.0, resource_stabilization_timeout_s=2.0)


def test_slots_go_round_robin_to_slot_sharing_groups_up_to_what_each_wants() -> None:
    desired = {"a": 4, "b": 4, "c": 2}
    groups = {"a": "g1", "b": "g1", "c": "g2"}
    assert decide_parallelism(desired, groups, 1) is None  # one slot per group at least
    assert decide_parallelism(desired, groups, 2) == {"a": 1, "b": 1, "c": 1}
    assert decide_parallelism(desired, groups, 4) == {"a": 2, "b": 2, "c": 2}
    assert decide_parallelism(desired, groups, 5) == {"a": 3, "b": 3, "c": 2}
    assert decide_parallelism(desired, groups, 99) == desired
    # a forward edge across groups keeps both ends equal
    assert decide_parallelism({"a": 4, "c": 4}, {"a": "g1", "c": "g2"}, 5, (("a", "c"),)) == {"a": 2, "c": 2}


class Cluster:
    """Plays the TaskExecutors (slots offered by resource id) and the tasks."""

    def __init__(self, s: AdaptiveScheduler) -> None:
        self.s = s
        self.now = 0.0
        self.actions: list = []  # type: ignore[type-arg]
        self.n = 0

    def run(self, actions: list) -> None:  # type: ignore[type-arg]
        self.actions.extend(actions)

    def join(self, rid: str, slots: int) -> None:
        self.s.register_task_manager(rid, f"{rid}:rpc", f"{rid}:data", self.now)
        offers = []
        for i in range(slots):
            self.n += 1
            offers.append((f"{rid}-{self.n}", i))
        accepted, actions = self.s.slots_offered(rid, offers, self.now)
        self.run(actions)

    def advance(self, dt: float) -> None:
        self.now += dt
        self.run(self.s.on_timer(self.now))

    def run_deployed(self) -> None:
        for a in list(self.actions):
            if isinstance(a, DeployTask) and a.execution.state == ExecutionState.DEPLOYING:
                self.run(self.s.task_state_changed(a.execution.attempt_id, ExecutionState.RUNNING, None, self.now))

    def confirm_cancels(self) -> None:
        for a in list(self.actions):
            if isinstance(a, CancelTask) and a.execution.state == ExecutionState.CANCELING:
                self.run(self.s.task_state_changed(a.execution.attempt_id, ExecutionState.CANCELED, None, self.now))

    def take(self) -> list:  # type: ignore[type-arg]
        out, self.actions = self.actions, []
        return out


def job() -> AdaptiveScheduler:
    eg = ExecutionGraph(graph([("src", 4), ("map", 4)], [("src", "map", "rebalance", "P")]))
    return AdaptiveScheduler(
        eg, adaptive=OPTS, restart_strategy=FixedDelayRestartBackoffTimeStrategy(attempts=5, delay_s=1.0)
    )


def test_the_job_declares_all_it_wants_and_starts_with_what_it_got_once_stable() -> None:
    s = job()
    c = Cluster(s)
    c.run(s.start(0.0))
    assert s.state == WAITING_FOR_RESOURCES
    assert [a.slots for a in c.take() if isinstance(a, DeclareResources)] == [4]
    c.join("te1", 2)
    assert s.state == WAITING_FOR_RESOURCES and not any(isinstance(a, DeployTask) for a in c.actions)
    assert s.next_deadline() == 2.0  # the stabilization timeout
    c.advance(2.0)
    assert s.state == EXECUTING and s.parallelism == {vid("src"): 2, vid("map"): 2}
    assert sorted(a.execution.vertex.task_name_with_subtask for a in c.actions if isinstance(a, DeployTask)) == [
        "map (1/2)",
        "map (2/2)",
        "src (1/2)",
        "src (2/2)",
    ]
    assert s.pool.required == 4  # it still asks for the 2 slots it lacks


def test_all_wanted_slots_start_the_job_at_once() -> None:
    s = job()
    c = Cluster(s)
    c.run(s.start(0.0))
    c.join("te1", 4)
    assert s.state == EXECUTING and s.parallelism == {vid("src"): 4, vid("map"): 4}


def test_more_slots_scale_the_job_up_after_the_stabilization_timeout() -> None:
    s = job()
    c = Cluster(s)
    c.run(s.start(0.0))
    c.join("te1", 2)
    c.advance(2.0)
    c.run_deployed()
    c.take()
    c.join("te2", 2)
    assert s.parallelism == {vid("src"): 2, vid("map"): 2} and not c.actions
    c.advance(2.0)
    cancelled = [a.execution for a in c.take() if isinstance(a, CancelTask)]
    assert len(cancelled) == 4
    c.run([])
    for e in cancelled:
        c.run(s.task_state_changed(e.attempt_id, ExecutionState.CANCELED, None, c.now))
    assert s.parallelism == {vid("src"): 4, vid("map"): 4}
    deployed = [a.execution for a in c.actions if isinstance(a, DeployTask)]
    assert len(deployed) == 8 and {e.slot.resource_id for e in deployed} == {"te1", "te2"}  # type: ignore[union-attr]
    assert all(e.attempt_number == 1 for e in deployed)  # attempts keep counting across rescales
    assert s.eg.num_restarts == 0 and [p for _, p in s.rescales] == [
        {vid("src"): 2, vid("map"): 2},
        {vid("src"): 4, vid("map"): 4},
    ]


def test_a_lost_taskexecutor_restarts_the_job_at_a_lower_parallelism() -> None:
    s = job()
    c = Cluster(s)
    c.run(s.start(0.0))
    c.join("te1", 2)
    c.join("te2", 2)
    c.run_deployed()
    c.take()
    c.run(s.task_manager_lost("te2", Failure("TaskManagerLostException", "killed", "", 1), c.now))
    c.confirm_cancels()
    assert s.eg.num_restarts == 1
    c.advance(1.0)  # the restart strategy's delay
    assert s.state == EXECUTING and s.parallelism == {vid("src"): 2, vid("map"): 2}
    deployed = [a.execution for a in c.actions if isinstance(a, DeployTask)]
    assert {e.slot.resource_id for e in deployed} == {"te1"}  # type: ignore[union-attr]
    assert s.pool.required == 4  # and it asks for the lost slots again


def test_without_enough_slots_the_job_fails_after_the_resource_wait_timeout() -> None:
    s = job()
    c = Cluster(s)
    c.run(s.start(0.0))
    assert s.next_deadline() == 30.0
    c.advance(30.0)
    assert s.eg.status.value == "FAILED"
    assert "resource-wait-timeout" in s.eg.failures[-1].message


def test_the_jobmaster_picks_the_scheduler_by_mode_and_refuses_misfits() -> None:
    import pytest

    from yarnflink.jobmaster.jobmaster import JobMaster, JobSubmissionException
    from yarnflink.scheduler.speculative import SpeculativeScheduler

    def jobmaster(mode: str, **config: str) -> JobMaster:
        jg = graph([("a", 2), ("b", 2)], [("a", "b", "rebalance", "B" if mode == "BATCH" else "P")], mode=mode)
        jg.config = dict(config)
        return JobMaster(jg, "127.0.0.1", "127.0.0.1:1", on_terminated=lambda jm: None)

    assert jobmaster("BATCH").scheduler_type == "AdaptiveBatch"  # Flink's defaults
    assert jobmaster("STREAMING").scheduler_type == "Default"
    assert isinstance(jobmaster("STREAMING", **{"jobmanager.scheduler": "Adaptive"}).scheduler, AdaptiveScheduler)
    assert isinstance(
        jobmaster("BATCH", **{"execution.batch.speculative.enabled": "true"}).scheduler, SpeculativeScheduler
    )
    with pytest.raises(JobSubmissionException, match="Adaptive schedules STREAMING jobs only"):
        jobmaster("BATCH", **{"jobmanager.scheduler": "Adaptive"})
    with pytest.raises(JobSubmissionException, match="AdaptiveBatch schedules BATCH jobs only"):
        jobmaster("STREAMING", **{"jobmanager.scheduler": "AdaptiveBatch"})
    with pytest.raises(JobSubmissionException, match="smaller than execution.batch.adaptive"):
        jobmaster(
            "BATCH",
            **{
                "execution.batch.adaptive.auto-parallelism.min-parallelism": "5",
                "execution.batch.adaptive.auto-parallelism.max-parallelism": "2",
            },
        )
    with pytest.raises(JobSubmissionException, match="unaligned checkpoints"):
        jobmaster(
            "STREAMING",
            **{
                "jobmanager.scheduler": "Adaptive",
                "execution.checkpointing.interval": "1 s",
                "execution.checkpointing.unaligned.enabled": "true",
            },
        )
    # with checkpointing: a rescale restores the latest completed checkpoint at the new parallelism
    assert (
        jobmaster(
            "STREAMING", **{"jobmanager.scheduler": "Adaptive", "execution.checkpointing.interval": "1 s"}
        ).checkpoints
        is not None
    )
    with pytest.raises(JobSubmissionException, match="jobmanager.scheduler"):
        jobmaster("STREAMING", **{"jobmanager.scheduler": "Fastest"})


def test_a_scale_up_needs_the_minimum_parallelism_increase() -> None:
    eg = ExecutionGraph(graph([("src", 4), ("map", 4)], [("src", "map", "rebalance", "P")]))
    s = AdaptiveScheduler(eg, adaptive=AdaptiveOptions(30.0, 2.0, min_parallelism_increase=2))
    c = Cluster(s)
    c.run(s.start(0.0))
    c.join("te1", 2)
    c.advance(2.0)
    c.run_deployed()
    c.take()
    c.join("te2", 1)  # one more subtask each: not enough
    c.advance(5.0)
    assert not any(isinstance(a, CancelTask) for a in c.take()) and s.parallelism[vid("src")] == 2
    c.join("te3", 1)  # two more: rescale
    c.advance(2.0)
    assert len([a for a in c.take() if isinstance(a, CancelTask)]) == 4


def test_checkpointing_follows_a_rescale_keeping_completed_checkpoints() -> None:
    """The JobMaster's CheckpointDriver after the adaptive scheduler rebuilt the graph: a
    coordinator for the new tasks, the completed checkpoints kept (restored next, assigned at the
    new parallelism), a checkpoint still being finalized aborted, ids counting on."""
    from yarnflink.checkpoint import coordinator as cc
    from yarnflink.jobmaster.checkpointing import task_id_of
    from yarnflink.jobmaster.jobmaster import JobMaster
    from yarnflink.state.handles import TaskStateSnapshot

    jg = graph([("a", 2), ("b", 2)], [("a", "b", "rebalance", "P")])
    jg.config = {"jobmanager.scheduler": "Adaptive", "execution.checkpointing.interval": "1 s"}
    jm = JobMaster(jg, "127.0.0.1", "127.0.0.1:1", on_terminated=lambda jm: None)
    driver = jm.checkpoints
    assert driver is not None and not driver.follow_rescale()  # nothing changed
    coord = driver.coordinator
    tids = sorted(coord.tasks)
    assert len(tids) == 4
    for t in tids:
        coord.handle(cc.TaskRunning(t, 0))

    def checkpoint(now: int) -> int:
        trigger = next(a for a in coord.handle(cc.Tick(now)) if isinstance(a, cc.TriggerCheckpoint))
        for t in tids:
            coord.handle(cc.AcknowledgeCheckpoint(trigger.checkpoint_id, t, TaskStateSnapshot(), 0, now))
        return trigger.checkpoint_id

    first = checkpoint(10**13)
    coord.handle(cc.MetadataWritten(first, "file:///chk-1", 10**13))
    second = checkpoint(10**13 + 2000)  # acknowledged by all, its _metadata not yet written
    driver.history.insert(0, {"id": second, "status": "IN_PROGRESS", "trigger_timestamp": 0})

    jm.eg.rescale({vid("a"): 4, vid("b"): 4})
    assert driver.follow_rescale()
    new = driver.coordinator
    assert new is not coord and len(new.tasks) == 8
    assert sorted(new.tasks) == sorted(task_id_of(ev) for v in jm.eg.job_vertices for ev in v.task_vertices)
    assert [c.checkpoint_id for c in new.completed] == [first] and not new.pending
    assert new.next_checkpoint_id == second + 1
    assert driver.history[0]["status"] == "FAILED"
    assert new.handle(cc.MetadataWritten(second, "file:///chk-2", 0)) == []  # never completes
    assert [v.parallelism for v in driver.vertices] == [4, 4]
    execution = jm.eg.vertex(vid("a")).task_vertices[3].current
    assert driver.restore_state(execution)[1] == first
