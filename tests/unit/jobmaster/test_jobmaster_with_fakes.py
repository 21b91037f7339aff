"""The real JobMaster, on its own thread as in production, driven through every call of its
JobMasterGateway (and of the JobMasterControlGateway the Dispatcher holds), with a
TestingResourceManagerGateway and TestingTaskExecutorGateways as its peers (no other process, no
gRPC): registration at the ResourceManager, slot offers, deployment, task state updates, checkpoint
acknowledgements and declines, savepoints, lost and unreachable TaskExecutors, and stale fencing
tokens."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.fakes.conditions import wait_until
from tests.fakes.endpoints import NoGrpcServer
from tests.fakes.gateways import (
    TestingGatewayResolver,
    TestingResourceManagerGateway,
    TestingTaskExecutorGateway,
    raises,
)
from tests.unit.scheduler.helpers import graph
from yarnflink.common.config import Configuration
from yarnflink.common.rpc_errors import (
    FencingTokenMismatch,
    InvalidRequest,
    RpcRejected,
    RpcTimeout,
    RpcUnreachable,
    UnknownTarget,
)
from yarnflink.executiongraph.executiongraph import ExecutionState, JobStatus
from yarnflink.jobgraph.jobgraph import JobGraph
from yarnflink.jobmaster.gateway import (
    AcknowledgeCheckpoint,
    CoordinationData,
    DeclineCheckpoint,
    DisconnectTaskManager,
    JobMasterControlGateway,
    JobMasterGateway,
    OfferSlots,
    RegisterTaskManager,
    SerializedThrowable,
    SlotOffer,
    TaskExecutionState,
    TaskManagerHeartbeat,
)
from yarnflink.jobmaster.jobmaster import JobMaster
from yarnflink.jobmaster.local_gateway import LocalJobMasterGateway
from yarnflink.state.handles import TaskStateSnapshot
from yarnflink.taskexecutor.gateway import CancelTask, NotifyCheckpoint, SubmitTask, TriggerCheckpoint

T = TypeVar("T")
RM_ADDRESS = "rm-1:6124"


class JobMasterUnderTest(NoGrpcServer, JobMaster):
    pass


def _static_check(jm: JobMasterUnderTest) -> JobMasterGateway:
    return jm  # mypy: the JobMaster is a JobMasterGateway


@dataclass
class Harness:
    jm: JobMasterUnderTest
    resolver: TestingGatewayResolver
    rm: TestingResourceManagerGateway
    terminated: threading.Event
    task_executors: dict[str, TestingTaskExecutorGateway] = field(default_factory=dict)

    def call(self, fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Calls the JobMaster on its own loop, as its servicer does."""
        return self.jm.call(fn, timeout=10)

    @property
    def token(self) -> str:
        return self.jm.jobmaster_id

    def add_task_executor(self, name: str) -> TestingTaskExecutorGateway:
        te = self.resolver.add_task_executor(f"{name}:6122", resource_id=name)
        self.task_executors[name] = te
        return te

    def register(self, te: TestingTaskExecutorGateway) -> None:
        self.call(
            lambda: self.jm.register_task_manager(
                RegisterTaskManager(self.token, self.jm.job_id, te.resource_id, te.address, f"{te.resource_id}:9000")
            )
        )

    def offer(self, te: TestingTaskExecutorGateway, *allocation_ids: str) -> tuple[str, ...]:
        offers = tuple(SlotOffer(a, i) for i, a in enumerate(allocation_ids))
        return self.call(lambda: self.jm.offer_slots(OfferSlots(self.token, te.resource_id, offers)))

    def update(self, execution_id: str, state: ExecutionState, error: SerializedThrowable | None = None) -> None:
        self.call(
            lambda: self.jm.update_task_execution_state(TaskExecutionState(self.token, execution_id, state, error))
        )

    def reports_cancellations(self, te: TestingTaskExecutorGateway) -> None:
        """``te`` answers a cancel, then reports the task CANCELED, as a TaskExecutor does."""

        def cancel(request: CancelTask) -> None:
            update = TaskExecutionState(request.jobmaster_id, request.execution_id, ExecutionState.CANCELED)
            asyncio.get_running_loop().call_soon(asyncio.ensure_future, self.jm.update_task_execution_state(update))

        te.cancel_task_function = cancel

    def deployed(self, te: TestingTaskExecutorGateway) -> list[SubmitTask]:
        return te.requests("submit_task")

    def run_all(self, te: TestingTaskExecutorGateway) -> list[str]:
        """The tasks deployed to ``te`` so far go to RUNNING; their execution ids."""
        ids = [s.tdd.execution_id for s in self.deployed(te)]
        for eid in ids:
            self.update(eid, ExecutionState.INITIALIZING)
            self.update(eid, ExecutionState.RUNNING)
        return ids


def _failures(h: Harness) -> str:
    return " | ".join(f"{f.exception_class}: {f.message}" for f in h.jm.eg.failures)


def _two_tasks() -> JobGraph:
    return graph([("src", 1), ("sink", 1)], [("src", "sink", "forward", "P")])


@pytest.fixture
def start_jobmaster() -> Iterator[Callable[..., Harness]]:
    started: list[JobMasterUnderTest] = []

    def start(
        job_graph: JobGraph | None = None, config: dict[str, str] | None = None, start: bool = True, **kwargs: Any
    ) -> Harness:
        """``start`` False: the test sets its fakes' behaviour first, then calls ``h.jm.start()``."""
        resolver = TestingGatewayResolver()
        rm = resolver.add_resource_manager(RM_ADDRESS, fencing_token="rm-token-1")
        terminated = threading.Event()
        jm = JobMasterUnderTest(
            job_graph or _two_tasks(),
            "127.0.0.1",
            RM_ADDRESS,
            on_terminated=lambda jm: terminated.set(),
            config=Configuration(config or {}),
            gateways=resolver,
            **kwargs,
        )
        started.append(jm)
        if start:
            jm.start()
        return Harness(jm, resolver, rm, terminated)

    yield start
    for jm in started:
        jm.stop()


def _running_with_one_slot(start: Callable[..., Harness], **kwargs: Any) -> tuple[Harness, TestingTaskExecutorGateway]:
    h = start(**kwargs)
    wait_until(lambda: h.rm.count("declare_required_resources") >= 1, what="requirements declared")
    te = h.add_task_executor("te-1")
    h.register(te)
    assert h.offer(te, "alloc-1") == ("alloc-1",)
    wait_until(lambda: len(h.deployed(te)) == 2, what="both tasks deployed")
    h.run_all(te)
    wait_until(lambda: h.jm.eg.status == JobStatus.RUNNING, what="the job running")
    return h, te


# ---------------------------------------------------------------------------- ResourceManager


def test_it_registers_at_the_resource_manager_and_declares_the_slots_it_needs(start_jobmaster: Any) -> None:
    h = start_jobmaster(graph([("src", 2), ("sink", 3)], [("src", "sink", "hash", "P")]))

    wait_until(lambda: h.rm.count("declare_required_resources") >= 1, what="requirements declared")
    (registration,) = h.rm.requests("register_job_master")
    assert (registration.job_id, registration.jobmaster_id) == (h.jm.job_id, h.token)
    assert registration.jobmaster_address == h.jm.address
    declared = h.rm.requests("declare_required_resources")[-1]
    assert declared.fencing_token == "rm-token-1"  # the token the registration answered
    assert declared.jobmaster_id == h.token
    assert sum(r.number_of_slots for r in declared.requirements) == 3  # one shared slot per sink subtask


@pytest.mark.parametrize(
    "refusal", [RpcUnreachable("connection refused"), RpcTimeout("deadline exceeded"), FencingTokenMismatch("standby")]
)
def test_a_failed_registration_at_the_resource_manager_is_retried(start_jobmaster: Any, refusal: Exception) -> None:
    h = start_jobmaster(start=False)
    succeed = h.rm.register_job_master_function
    h.rm.register_job_master_function = lambda r: (
        succeed(r) if h.rm.count("register_job_master") > 1 else raises(refusal)(r)
    )
    h.jm.start()

    wait_until(lambda: h.rm.count("declare_required_resources") == 1, what="registered and declared")
    assert h.rm.count("register_job_master") == 2
    assert h.rm.requests("declare_required_resources")[0].fencing_token == "rm-token-1"


@pytest.mark.parametrize(
    "answer",
    [lambda r: False, raises(RpcUnreachable("connection refused"))],
    ids=["job-forgotten", "unreachable"],
)
def test_heartbeats_go_to_the_resource_manager_and_a_lost_connection_registers_again(
    start_jobmaster: Any, answer: Callable[[Any], bool]
) -> None:
    h = start_jobmaster()
    wait_until(lambda: h.rm.count("heartbeat_from_job_master") >= 1, what="a heartbeat")
    beat = h.rm.requests("heartbeat_from_job_master")[0]
    assert (beat.fencing_token, beat.job_id, beat.jobmaster_id) == ("rm-token-1", h.jm.job_id, h.token)

    h.rm.heartbeat_from_job_master_function = answer  # False: "I do not know this job" (a restarted RM)

    wait_until(lambda: h.rm.count("register_job_master") >= 2, what="registered again")
    wait_until(lambda: h.rm.count("declare_required_resources") >= 2, what="declared again")


def test_a_failed_declaration_is_made_again_with_a_new_registration(start_jobmaster: Any) -> None:
    h = start_jobmaster(start=False)
    h.rm.declare_required_resources_function = lambda r: (
        raises(RpcTimeout("deadline exceeded"))(r) if h.rm.count("declare_required_resources") == 1 else None
    )
    h.jm.start()

    wait_until(lambda: h.rm.count("declare_required_resources") == 2, what="declared again")
    assert h.rm.count("register_job_master") == 2
    wait_until(lambda: h.rm.count("heartbeat_from_job_master") >= 1, what="connected: heartbeats")


def test_a_new_resource_manager_leader_is_registered_at_with_its_new_token(start_jobmaster: Any) -> None:
    h = start_jobmaster()
    wait_until(lambda: h.rm.count("heartbeat_from_job_master") >= 1, what="a heartbeat")

    h.rm.fencing_token = "rm-token-2"
    h.rm.heartbeat_from_job_master_function = raises(FencingTokenMismatch("a new leader session"))
    wait_until(lambda: h.rm.count("register_job_master") >= 2, what="registered again")
    wait_until(
        lambda: any(d.fencing_token == "rm-token-2" for d in h.rm.requests("declare_required_resources")),
        what="declared with the new token",
    )


# ---------------------------------------------------------------------------- slots and deployment


def test_offered_slots_are_accepted_and_the_tasks_deployed_into_them(start_jobmaster: Any) -> None:
    h = start_jobmaster()
    wait_until(lambda: h.rm.count("declare_required_resources") >= 1, what="requirements declared")
    te = h.add_task_executor("te-1")
    h.register(te)

    assert h.offer(te, "alloc-1") == ("alloc-1",)

    wait_until(lambda: len(h.deployed(te)) == 2, what="both tasks deployed")
    submitted = h.deployed(te)
    assert {s.jobmaster_id for s in submitted} == {h.token}
    assert {s.tdd.allocation_id for s in submitted} == {"alloc-1"}
    assert sorted(s.tdd.task_name for s in submitted) == ["sink", "src"]


def test_slots_beyond_the_need_and_from_an_unregistered_task_executor_are_refused(start_jobmaster: Any) -> None:
    h = start_jobmaster()
    wait_until(lambda: h.rm.count("declare_required_resources") >= 1, what="requirements declared")
    stranger = h.add_task_executor("te-9")
    assert h.offer(stranger, "alloc-9") == ()  # it never registered

    te = h.add_task_executor("te-1")
    h.register(te)
    assert h.offer(te, "alloc-1", "alloc-2") == ("alloc-1",)  # the job needs one slot


def test_the_job_finishes_when_every_task_finished_and_then_frees_its_slot_and_disconnects(
    start_jobmaster: Any,
) -> None:
    h, te = _running_with_one_slot(start_jobmaster)

    for submit in h.deployed(te):
        h.update(submit.tdd.execution_id, ExecutionState.FINISHED)

    assert h.terminated.wait(10), "on_terminated was not called"
    assert h.jm.eg.status == JobStatus.FINISHED
    wait_until(lambda: h.rm.count("disconnect_job_master") == 1, what="disconnected from the ResourceManager")
    assert h.rm.requests("disconnect_job_master")[0].cause == "FINISHED"
    wait_until(lambda: te.count("free_slot") == 1, what="the slot freed")
    assert te.requests("free_slot")[0].allocation_id == "alloc-1"


def test_a_failed_task_fails_the_job_without_a_restart_strategy(start_jobmaster: Any) -> None:
    h, te = _running_with_one_slot(start_jobmaster)
    src = next(s.tdd.execution_id for s in h.deployed(te) if s.tdd.task_name == "src")

    h.update(src, ExecutionState.FAILED, SerializedThrowable("ValueError", "bad record", "Traceback ..."))

    wait_until(lambda: te.count("cancel_task") == 1, what="the other task cancelled")
    sink = next(s.tdd.execution_id for s in h.deployed(te) if s.tdd.task_name == "sink")
    assert te.requests("cancel_task")[0].execution_id == sink
    h.update(sink, ExecutionState.CANCELED)
    assert h.terminated.wait(10)
    assert h.jm.eg.status == JobStatus.FAILED
    assert "bad record" in _failures(h)


def test_a_failed_task_is_restarted_by_the_restart_strategy(start_jobmaster: Any) -> None:
    h, te = _running_with_one_slot(
        start_jobmaster,
        config={"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "0 ms"},
    )
    first = {s.tdd.execution_id for s in h.deployed(te)}
    src = next(s.tdd.execution_id for s in h.deployed(te) if s.tdd.task_name == "src")

    h.update(src, ExecutionState.FAILED, SerializedThrowable("ValueError", "bad record"))
    wait_until(lambda: te.count("cancel_task") == 1, what="the other task cancelled")
    h.update(te.requests("cancel_task")[0].execution_id, ExecutionState.CANCELED)

    wait_until(lambda: len(h.deployed(te)) == 4, what="both tasks deployed again")
    again = {s.tdd.execution_id for s in h.deployed(te)[2:]}
    assert not again & first  # new attempts
    assert {s.tdd.attempt_number for s in h.deployed(te)[2:]} == {1}
    assert h.jm.eg.status == JobStatus.RUNNING and h.jm.num_restarts == 1


def test_a_task_executor_unreachable_while_deploying_is_lost_at_once(start_jobmaster: Any) -> None:
    h = start_jobmaster(config={"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "0 ms"})
    wait_until(lambda: h.rm.count("declare_required_resources") >= 1, what="requirements declared")
    dead = h.add_task_executor("te-1")
    dead.submit_task_function = raises(RpcUnreachable("connection refused"))
    h.register(dead)

    assert h.offer(dead, "alloc-1") == ("alloc-1",)

    # the ResourceManager is told at once (not after a heartbeat timeout), and its slots are gone
    wait_until(lambda: h.rm.count("disconnect_task_executor") >= 1, what="the ResourceManager told")
    lost = h.rm.requests("disconnect_task_executor")[0]
    assert lost.resource_id == "te-1" and "unreachable" in lost.cause and lost.fencing_token == "rm-token-1"
    wait_until(lambda: "te-1" not in h.jm.slot_pool.task_managers, what="te-1 dropped")
    # the job restarts on a live TaskExecutor
    live = h.add_task_executor("te-2")
    h.register(live)
    wait_until(lambda: h.offer(live, "alloc-2") == ("alloc-2",), what="the new slot accepted")
    wait_until(lambda: len(h.deployed(live)) == 2, what="deployed to te-2")


@pytest.mark.parametrize("refusal", [RpcRejected("no slot alloc-1 here"), RpcTimeout("deadline exceeded")])
def test_a_refused_or_timed_out_deployment_fails_the_task_but_keeps_the_task_executor(
    start_jobmaster: Any, refusal: Exception
) -> None:
    h = start_jobmaster()
    wait_until(lambda: h.rm.count("declare_required_resources") >= 1, what="requirements declared")
    te = h.add_task_executor("te-1")
    te.submit_task_function = raises(refusal)
    h.reports_cancellations(te)
    h.register(te)

    h.offer(te, "alloc-1")

    assert h.terminated.wait(10)  # no restart strategy: the job fails
    assert h.jm.eg.status == JobStatus.FAILED
    assert "could not deploy" in _failures(h)
    assert h.rm.count("disconnect_task_executor") == 0  # it answered: not lost


@pytest.mark.parametrize(
    "refusal", [RpcUnreachable("connection refused"), UnknownTarget("no task here")], ids=["unreachable", "task-gone"]
)
def test_a_cancel_that_fails_counts_the_task_as_canceled(start_jobmaster: Any, refusal: Exception) -> None:
    h, te = _running_with_one_slot(start_jobmaster)
    te.cancel_task_function = raises(refusal)

    assert h.call(lambda: _cancel(h.jm))

    assert h.terminated.wait(10)  # nobody reports CANCELED: the failed cancels do
    assert h.jm.eg.status == JobStatus.CANCELED
    if isinstance(refusal, RpcUnreachable):  # its process is gone: lost at once
        wait_until(lambda: h.rm.count("disconnect_task_executor") >= 1, what="the ResourceManager told")
    else:  # it answered: still there
        assert h.rm.count("disconnect_task_executor") == 0 and "te-1" in h.jm.slot_pool.task_managers


async def _cancel(jm: JobMaster) -> bool:
    return jm.cancel()


def test_a_disconnected_task_manager_fails_its_tasks_and_is_forgotten(start_jobmaster: Any) -> None:
    h, te = _running_with_one_slot(start_jobmaster)

    h.call(lambda: h.jm.disconnect_task_manager(DisconnectTaskManager(h.token, "te-1", "its process exited")))

    assert h.terminated.wait(10)
    assert h.jm.eg.status == JobStatus.FAILED
    assert "its process exited" in _failures(h)
    assert "te-1" not in h.jm.slot_pool.task_managers


def test_a_task_manager_without_heartbeats_is_lost_after_the_heartbeat_timeout(start_jobmaster: Any) -> None:
    h, te = _running_with_one_slot(start_jobmaster, heartbeat_interval_s=0.05, heartbeat_timeout_s=0.5)
    beat = TaskManagerHeartbeat(h.token, "te-1", ())
    for _ in range(3):  # heartbeats keep it (three timeouts' worth)
        until = h.jm.slot_pool.task_managers["te-1"].last_heartbeat
        h.call(lambda: h.jm.heartbeat_from_task_manager(beat))
        wait_until(lambda: h.jm.slot_pool.task_managers["te-1"].last_heartbeat > until, what="heartbeat noted")

    assert h.terminated.wait(10), "the silent TaskManager was not lost"
    assert "heartbeat of TaskManager te-1 timed out" in _failures(h)


def test_a_batch_job_runs_region_by_region_and_releases_the_blocking_results_at_its_end(start_jobmaster: Any) -> None:
    h = start_jobmaster(graph([("a", 1), ("b", 1)], [("a", "b", "forward", "B")], mode="BATCH"))
    wait_until(lambda: h.rm.count("declare_required_resources") >= 1, what="requirements declared")
    te = h.add_task_executor("te-1")
    h.register(te)
    h.offer(te, "alloc-1")
    wait_until(lambda: len(h.deployed(te)) == 1, what="the producer deployed")
    (producer,) = h.run_all(te)
    assert h.deployed(te)[0].tdd.task_name == "a"
    partition = h.deployed(te)[0].tdd.produced_partitions[0].partition_id

    h.update(producer, ExecutionState.FINISHED)  # its result is complete: the consumer's region goes
    wait_until(lambda: len(h.deployed(te)) == 2, what="the consumer deployed")
    assert te.count("release_partitions") == 0  # the consumer still reads it
    consumer = h.deployed(te)[1].tdd
    assert consumer.task_name == "b" and consumer.input_gates[0].channels[0].partition_id == partition
    h.update(consumer.execution_id, ExecutionState.INITIALIZING)
    h.update(consumer.execution_id, ExecutionState.RUNNING)
    h.update(consumer.execution_id, ExecutionState.FINISHED)

    assert h.terminated.wait(10) and h.jm.eg.status == JobStatus.FINISHED
    wait_until(lambda: te.count("release_partitions") >= 1, what="the blocking result released")
    released = te.requests("release_partitions")
    assert {r.job_id for r in released} == {h.jm.job_id}
    assert any(partition in r.partition_ids or not r.partition_ids for r in released)


@pytest.mark.parametrize(
    "probe",
    [None, RpcTimeout("deadline exceeded"), RpcUnreachable("connection refused")],
    ids=["alive", "slow", "unreachable"],
)
def test_a_consumer_that_lost_its_producers_data_connection_has_the_producers_task_executor_probed(
    start_jobmaster: Any, probe: Exception | None
) -> None:
    h, te = _running_with_one_slot(
        start_jobmaster,
        config={"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "1 h"},
    )
    if probe is not None:
        te.request_task_executor_info_function = raises(probe)
    src = next(s.tdd for s in h.deployed(te) if s.tdd.task_name == "src")
    sink = next(s.tdd for s in h.deployed(te) if s.tdd.task_name == "sink")
    partition = src.produced_partitions[0].partition_id

    h.call(
        lambda: h.jm.update_task_execution_state(
            TaskExecutionState(
                h.token,
                sink.execution_id,
                ExecutionState.FAILED,
                SerializedThrowable("PartitionException", f"lost the connection to {partition}"),
                failed_partition_id=partition,
            )
        )
    )

    wait_until(lambda: te.count("request_task_executor_info") == 1, what="the producer's TaskExecutor probed")
    (probing,) = [c for c in te.calls if c.method == "request_task_executor_info"]
    assert probing.timeout <= 5  # a probe is short
    if not isinstance(probe, RpcUnreachable):  # answered, or slow: there
        assert h.rm.count("disconnect_task_executor") == 0
        assert "te-1" in h.jm.slot_pool.task_managers
    else:
        wait_until(lambda: h.rm.count("disconnect_task_executor") == 1, what="the ResourceManager told")
        assert "a consumer lost its data connection" in h.rm.requests("disconnect_task_executor")[0].cause
        assert "te-1" not in h.jm.slot_pool.task_managers


def test_a_suspended_jobmaster_frees_its_slots_and_refuses_every_call(start_jobmaster: Any) -> None:
    h, te = _running_with_one_slot(start_jobmaster)
    old = h.token

    h.call(lambda: h.jm.suspend("leadership lost"))

    assert [f.allocation_id for f in te.requests("free_slot")] == ["alloc-1"]
    with pytest.raises(FencingTokenMismatch):
        h.call(lambda: h.jm.heartbeat_from_task_manager(TaskManagerHeartbeat(old, "te-1")))
    assert not h.terminated.is_set()  # not a terminal state: the next leader goes on with the job


# ---------------------------------------------------------------------------- collect and fencing


def test_collected_results_are_kept_and_an_unknown_kind_of_data_is_an_invalid_request(start_jobmaster: Any) -> None:
    h, te = _running_with_one_slot(start_jobmaster)
    sink = next(s.tdd.execution_id for s in h.deployed(te) if s.tdd.task_name == "sink")

    h.call(lambda: h.jm.send_coordination_data(CoordinationData(h.token, sink, "collect", b"rows")))
    with pytest.raises(InvalidRequest, match="unknown coordination data kind"):
        h.call(lambda: h.jm.send_coordination_data(CoordinationData(h.token, sink, "gossip", b"?")))

    assert h.jm.collected_payloads() == [b"rows"]


_EMPTY = TaskStateSnapshot()
STALE_CALLS: list[tuple[str, Callable[[JobMaster, str], Coroutine[Any, Any, Any]]]] = [
    (
        "register_task_manager",
        lambda jm, t: jm.register_task_manager(RegisterTaskManager(t, jm.job_id, "x", "x:1", "")),
    ),
    ("offer_slots", lambda jm, t: jm.offer_slots(OfferSlots(t, "te-1", (SlotOffer("alloc-2", 1),)))),
    ("update_task_execution_state", lambda jm, t: _update_first(jm, t, ExecutionState.FINISHED)),
    ("acknowledge_checkpoint", lambda jm, t: jm.acknowledge_checkpoint(AcknowledgeCheckpoint(t, "e", 1, 0, _EMPTY))),
    ("decline_checkpoint", lambda jm, t: jm.decline_checkpoint(DeclineCheckpoint(t, "e", 1, 0, "no"))),
    ("send_coordination_data", lambda jm, t: jm.send_coordination_data(CoordinationData(t, "e", "collect", b"x"))),
    ("heartbeat_from_task_manager", lambda jm, t: jm.heartbeat_from_task_manager(TaskManagerHeartbeat(t, "te-1"))),
    ("disconnect_task_manager", lambda jm, t: jm.disconnect_task_manager(DisconnectTaskManager(t, "te-1", "x"))),
]


async def _update_first(jm: JobMaster, token: str, state: ExecutionState) -> None:
    execution = next(iter(jm.eg.executions()))
    await jm.update_task_execution_state(TaskExecutionState(token, execution.attempt_id, state))


@pytest.mark.parametrize("name, call", STALE_CALLS, ids=[n for n, _ in STALE_CALLS])
def test_every_call_with_a_stale_fencing_token_is_refused_and_changes_nothing(
    start_jobmaster: Any, name: str, call: Callable[[JobMaster, str], Coroutine[Any, Any, Any]]
) -> None:
    h, te = _running_with_one_slot(start_jobmaster)

    for stale in ("an-old-jobmaster-id", ""):
        with pytest.raises(FencingTokenMismatch):
            h.call(lambda: call(h.jm, stale))

    assert h.jm.eg.status == JobStatus.RUNNING
    assert set(h.jm.slot_pool.task_managers) == {"te-1"} and set(h.jm.slot_pool.slots) == {"alloc-1"}
    assert h.jm.collected_payloads() == []


# ---------------------------------------------------------------------------- checkpoints


def _checkpointing(tmp_path: Path) -> dict[str, str]:
    return {"execution.checkpointing.interval": "100 ms", "execution.checkpointing.dir": f"file://{tmp_path}"}


def _acknowledge_all(h: Harness, te: TestingTaskExecutorGateway, checkpoint_id: int) -> None:
    for submit in h.deployed(te):
        ack = AcknowledgeCheckpoint(h.token, submit.tdd.execution_id, checkpoint_id, 0, TaskStateSnapshot())
        h.call(lambda: h.jm.acknowledge_checkpoint(ack))


def test_a_checkpoint_acknowledged_by_every_task_completes_and_the_tasks_are_told(
    start_jobmaster: Any, tmp_path: Path
) -> None:
    h, te = _running_with_one_slot(start_jobmaster, config=_checkpointing(tmp_path))
    wait_until(lambda: te.count("trigger_checkpoint") >= 1, what="a checkpoint triggered")
    trigger: TriggerCheckpoint = te.requests("trigger_checkpoint")[0]
    src = next(s.tdd.execution_id for s in h.deployed(te) if s.tdd.task_name == "src")
    assert (trigger.execution_id, trigger.jobmaster_id) == (src, h.token)  # at the source only

    _acknowledge_all(h, te, trigger.checkpoint_id)

    wait_until(
        lambda: (
            {n.execution_id for n in te.requests("notify_checkpoint_complete")}
            == {s.tdd.execution_id for s in h.deployed(te)}
        ),
        what="every task told of the completion",
    )
    notice: NotifyCheckpoint = te.requests("notify_checkpoint_complete")[0]
    assert notice.checkpoint_id == trigger.checkpoint_id
    assert te.count("notify_checkpoint_aborted") == 0
    wait_until(lambda: (tmp_path / h.jm.job_id / f"chk-{trigger.checkpoint_id}" / "_metadata").exists())


def test_a_declined_checkpoint_is_aborted_at_every_task(start_jobmaster: Any, tmp_path: Path) -> None:
    h, te = _running_with_one_slot(start_jobmaster, config=_checkpointing(tmp_path))
    wait_until(lambda: te.count("trigger_checkpoint") >= 1, what="a checkpoint triggered")
    cid = te.requests("trigger_checkpoint")[0].checkpoint_id
    sink = next(s.tdd.execution_id for s in h.deployed(te) if s.tdd.task_name == "sink")

    h.call(lambda: h.jm.decline_checkpoint(DeclineCheckpoint(h.token, sink, cid, 0, "the snapshot failed")))

    wait_until(
        lambda: cid in {n.checkpoint_id for n in te.requests("notify_checkpoint_aborted")},
        what="the abort sent to the tasks",
    )
    assert cid not in {n.checkpoint_id for n in te.requests("notify_checkpoint_complete")}
    assert not (tmp_path / h.jm.job_id / f"chk-{cid}" / "_metadata").exists()


def test_acknowledgements_of_an_ended_attempt_are_dropped(start_jobmaster: Any, tmp_path: Path) -> None:
    config = _checkpointing(tmp_path) | {"execution.checkpointing.interval": "1 h"}
    h, te = _running_with_one_slot(start_jobmaster, config=config)
    ack = AcknowledgeCheckpoint(h.token, "an-attempt-that-is-not-here", 1, 0, TaskStateSnapshot())

    h.call(lambda: h.jm.acknowledge_checkpoint(ack))  # no error: dropped

    assert te.count("notify_checkpoint_complete") == 0


# ---------------------------------------------------------------------------- the Dispatcher's calls


def _control(h: Harness) -> JobMasterControlGateway:
    """The JobMasterControlGateway the Dispatcher holds (it hops onto the JobMaster's loop)."""
    return LocalJobMasterGateway(h.jm)


def _savepoint(h: Harness, te: TestingTaskExecutorGateway, target: Path, **kind: bool) -> tuple[str, int]:
    """Triggers a savepoint through the control gateway; the id of its trigger and of its checkpoint."""
    before = te.count("trigger_checkpoint")
    trigger_id = asyncio.run(_control(h).trigger_savepoint(str(target), **kind))
    assert trigger_id is not None
    wait_until(lambda: te.count("trigger_checkpoint") > before, what="the savepoint triggered at the source")
    trigger: TriggerCheckpoint = te.requests("trigger_checkpoint")[-1]
    assert trigger.is_savepoint and trigger.synchronous == kind.get("stop", False)
    return trigger_id, trigger.checkpoint_id


def _result(h: Harness, trigger_id: str) -> dict[str, Any]:
    """The savepoint's result (Flink's operation: its ``location`` or ``failure-cause``); {} while in progress."""
    status = asyncio.run(_control(h).request_savepoint_status(trigger_id))
    assert status is not None
    return dict(status["operation"]) if status["status"]["id"] == "COMPLETED" else {}


def test_the_control_gateway_answers_the_dispatchers_views(start_jobmaster: Any) -> None:
    h, te = _running_with_one_slot(start_jobmaster)

    details = asyncio.run(_control(h).request_job_details())
    snapshot = asyncio.run(_control(h).request_monitoring_snapshot())
    exceptions = asyncio.run(_control(h).request_job_exceptions())

    assert details["jid"] == h.jm.job_id and details["state"] == "RUNNING"
    assert snapshot["details"]["state"] == "RUNNING"
    assert exceptions["exceptionHistory"]["entries"] == []
    assert asyncio.run(_control(h).trigger_savepoint(None)) is None  # no checkpointing: no savepoint


def test_a_savepoint_triggered_through_the_control_gateway_completes_and_the_job_goes_on(
    start_jobmaster: Any, tmp_path: Path
) -> None:
    config = _checkpointing(tmp_path) | {"execution.checkpointing.interval": "1 h"}
    h, te = _running_with_one_slot(start_jobmaster, config=config)

    trigger_id, cid = _savepoint(h, te, tmp_path / "savepoints")
    assert _result(h, trigger_id) == {}
    _acknowledge_all(h, te, cid)

    wait_until(lambda: _result(h, trigger_id), what="the savepoint completed")
    assert str(_result(h, trigger_id)["location"]).startswith(f"file://{tmp_path}/savepoints/")
    assert h.jm.eg.status == JobStatus.RUNNING and te.count("cancel_task") == 0


def test_a_stop_with_savepoint_through_the_control_gateway_finishes_the_job(
    start_jobmaster: Any, tmp_path: Path
) -> None:
    config = _checkpointing(tmp_path) | {"execution.checkpointing.interval": "1 h"}
    h, te = _running_with_one_slot(start_jobmaster, config=config)

    trigger_id, cid = _savepoint(h, te, tmp_path / "savepoints", stop=True)
    _acknowledge_all(h, te, cid)
    wait_until(
        lambda: (
            {n.execution_id for n in te.requests("notify_checkpoint_complete")}
            == {s.tdd.execution_id for s in h.deployed(te)}
        ),
        what="every task told: it finishes",
    )
    assert _result(h, trigger_id) == {}  # until the job has finished
    for submit in h.deployed(te):
        h.update(submit.tdd.execution_id, ExecutionState.FINISHED)

    assert h.terminated.wait(10) and h.jm.eg.status == JobStatus.FINISHED
    wait_until(lambda: _result(h, trigger_id), what="the stop completed")
    assert "location" in _result(h, trigger_id)


def test_a_declined_savepoint_fails_and_the_job_goes_on(start_jobmaster: Any, tmp_path: Path) -> None:
    config = _checkpointing(tmp_path) | {"execution.checkpointing.interval": "1 h"}
    h, te = _running_with_one_slot(start_jobmaster, config=config)

    trigger_id, cid = _savepoint(h, te, tmp_path / "savepoints", stop=True)
    sink = next(s.tdd.execution_id for s in h.deployed(te) if s.tdd.task_name == "sink")
    h.call(lambda: h.jm.decline_checkpoint(DeclineCheckpoint(h.token, sink, cid, 0, "the snapshot failed")))

    wait_until(lambda: _result(h, trigger_id), what="the savepoint failed")
    assert "the snapshot failed" in _result(h, trigger_id)["failure-cause"]["stack-trace"]
    assert cid in {n.checkpoint_id for n in te.requests("notify_checkpoint_aborted")}
    assert h.jm.eg.status == JobStatus.RUNNING  # a failed stop leaves the job running


def test_a_job_cancelled_through_the_control_gateway_cancels_its_tasks(start_jobmaster: Any) -> None:
    h, te = _running_with_one_slot(start_jobmaster)
    h.reports_cancellations(te)

    assert asyncio.run(_control(h).cancel())

    assert h.terminated.wait(10) and h.jm.eg.status == JobStatus.CANCELED
    assert {c.execution_id for c in te.requests("cancel_task")} == {s.tdd.execution_id for s in h.deployed(te)}
    assert {c.jobmaster_id for c in te.requests("cancel_task")} == {h.token}
