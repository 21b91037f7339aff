"""The real JobMaster, on its own thread as in production, driven through every call of its
JobMasterGateway, with a TestingResourceManagerGateway and TestingTaskExecutorGateways as its peers
(no other process, no gRPC): registration and heartbeats at the ResourceManager, slot offers,
deployment, task state updates, failover, lost and unreachable TaskExecutors, collected results,
suspension, and stale fencing tokens. Checkpoints and savepoints:
test_jobmaster_checkpoints_with_fakes.py."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from tests.fakes.conditions import wait_until
from tests.fakes.gateways import raises
from tests.unit.jobmaster.harness import RM_TOKEN, StartJobMaster, running_with_one_slot
from tests.unit.scheduler.helpers import graph
from yarnflink.common.rpc_errors import (
    FencingTokenMismatch,
    InvalidRequest,
    RpcRejected,
    RpcTimeout,
    RpcUnreachable,
    UnknownTarget,
)
from yarnflink.executiongraph.executiongraph import ExecutionState, JobStatus
from yarnflink.jobmaster.gateway import (
    AcknowledgeCheckpoint,
    CoordinationData,
    DeclineCheckpoint,
    DisconnectTaskManager,
    OfferSlots,
    RegisterTaskManager,
    SerializedThrowable,
    SlotOffer,
    TaskExecutionState,
    TaskManagerHeartbeat,
)
from yarnflink.jobmaster.jobmaster import JobMaster
from yarnflink.state.handles import TaskStateSnapshot

# ---------------------------------------------------------------------------- ResourceManager


def test_it_registers_at_the_resource_manager_and_declares_the_slots_it_needs(start_jobmaster: StartJobMaster) -> None:
    h = start_jobmaster(graph([("src", 2), ("sink", 3)], [("src", "sink", "hash", "P")]))

    wait_until(lambda: h.rm.count("declare_required_resources") >= 1, what="requirements declared")
    (registration,) = h.rm.requests("register_job_master")
    assert (registration.job_id, registration.jobmaster_id) == (h.jm.job_id, h.token)
    assert registration.jobmaster_address == h.jm.address
    declared = h.rm.requests("declare_required_resources")[-1]
    assert declared.fencing_token == RM_TOKEN  # the token the registration answered
    assert declared.jobmaster_id == h.token
    assert sum(r.number_of_slots for r in declared.requirements) == 3  # one shared slot per sink subtask


@pytest.mark.parametrize(
    "refusal", [RpcUnreachable("connection refused"), RpcTimeout("deadline exceeded"), FencingTokenMismatch("standby")]
)
def test_a_failed_registration_at_the_resource_manager_is_retried(
    start_jobmaster: StartJobMaster, refusal: Exception
) -> None:
    h = start_jobmaster(start=False)
    succeed = h.rm.register_job_master_function
    h.rm.register_job_master_function = lambda r: (
        succeed(r) if h.rm.count("register_job_master") > 1 else raises(refusal)(r)
    )
    h.jm.start()

    wait_until(lambda: h.rm.count("declare_required_resources") == 1, what="registered and declared")
    assert h.rm.count("register_job_master") == 2
    assert h.rm.requests("declare_required_resources")[0].fencing_token == RM_TOKEN


@pytest.mark.parametrize(
    "answer",
    [lambda r: False, raises(RpcUnreachable("connection refused")), raises(RpcTimeout("deadline exceeded"))],
    ids=["job-forgotten", "unreachable", "silent"],  # silent: lost after the timeout the registration gave
)
def test_heartbeats_go_to_the_resource_manager_and_a_lost_connection_registers_again(
    start_jobmaster: StartJobMaster, answer: Callable[[Any], bool]
) -> None:
    h = start_jobmaster()
    wait_until(lambda: h.rm.count("heartbeat_from_job_master") >= 1, what="a heartbeat")
    beat = h.rm.requests("heartbeat_from_job_master")[0]
    assert (beat.fencing_token, beat.job_id, beat.jobmaster_id) == (RM_TOKEN, h.jm.job_id, h.token)

    h.rm.heartbeat_from_job_master_function = answer  # False: "I do not know this job" (a restarted RM)

    wait_until(lambda: h.rm.count("register_job_master") >= 2, what="registered again")
    wait_until(lambda: h.rm.count("declare_required_resources") >= 2, what="declared again")


def test_a_failed_declaration_is_made_again_with_a_new_registration(start_jobmaster: StartJobMaster) -> None:
    h = start_jobmaster(start=False)
    h.rm.declare_required_resources_function = lambda r: (
        raises(RpcTimeout("deadline exceeded"))(r) if h.rm.count("declare_required_resources") == 1 else None
    )
    h.jm.start()

    wait_until(lambda: h.rm.count("declare_required_resources") == 2, what="declared again")
    assert h.rm.count("register_job_master") == 2
    wait_until(lambda: h.rm.count("heartbeat_from_job_master") >= 1, what="connected: heartbeats")


def test_a_new_resource_manager_leader_is_registered_at_with_its_new_token(start_jobmaster: StartJobMaster) -> None:
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


def test_offered_slots_are_accepted_and_the_tasks_deployed_into_them(start_jobmaster: StartJobMaster) -> None:
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


def test_slots_beyond_the_need_and_from_an_unregistered_task_executor_are_refused(
    start_jobmaster: StartJobMaster,
) -> None:
    h = start_jobmaster()
    wait_until(lambda: h.rm.count("declare_required_resources") >= 1, what="requirements declared")
    stranger = h.add_task_executor("te-9")
    assert h.offer(stranger, "alloc-9") == ()  # it never registered

    te = h.add_task_executor("te-1")
    h.register(te)
    assert h.offer(te, "alloc-1", "alloc-2") == ("alloc-1",)  # the job needs one slot


def test_the_job_finishes_when_every_task_finished_and_then_frees_its_slot_and_disconnects(
    start_jobmaster: StartJobMaster,
) -> None:
    h, te = running_with_one_slot(start_jobmaster)

    for submit in h.deployed(te):
        h.update(submit.tdd.execution_id, ExecutionState.FINISHED)

    assert h.terminated.wait(10), "on_terminated was not called"
    assert h.jm.eg.status == JobStatus.FINISHED
    wait_until(lambda: h.rm.count("disconnect_job_master") == 1, what="disconnected from the ResourceManager")
    assert h.rm.requests("disconnect_job_master")[0].cause == "FINISHED"
    wait_until(lambda: te.count("free_slot") == 1, what="the slot freed")
    assert te.requests("free_slot")[0].allocation_id == "alloc-1"


def test_a_failed_task_fails_the_job_without_a_restart_strategy(start_jobmaster: StartJobMaster) -> None:
    h, te = running_with_one_slot(start_jobmaster)
    src = h.execution_id(te, "src")

    h.update(src, ExecutionState.FAILED, SerializedThrowable("ValueError", "bad record", "Traceback ..."))

    wait_until(lambda: te.count("cancel_task") == 1, what="the other task cancelled")
    sink = h.execution_id(te, "sink")
    assert te.requests("cancel_task")[0].execution_id == sink
    h.update(sink, ExecutionState.CANCELED)
    assert h.terminated.wait(10)
    assert h.jm.eg.status == JobStatus.FAILED
    assert "bad record" in h.failures()


def test_a_failed_task_is_restarted_by_the_restart_strategy(start_jobmaster: StartJobMaster) -> None:
    h, te = running_with_one_slot(
        start_jobmaster,
        config={"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "0 ms"},
    )
    first = {s.tdd.execution_id for s in h.deployed(te)}
    src = h.execution_id(te, "src")

    h.update(src, ExecutionState.FAILED, SerializedThrowable("ValueError", "bad record"))
    wait_until(lambda: te.count("cancel_task") == 1, what="the other task cancelled")
    h.update(te.requests("cancel_task")[0].execution_id, ExecutionState.CANCELED)

    wait_until(lambda: len(h.deployed(te)) == 4, what="both tasks deployed again")
    again = {s.tdd.execution_id for s in h.deployed(te)[2:]}
    assert not again & first  # new attempts
    assert {s.tdd.attempt_number for s in h.deployed(te)[2:]} == {1}
    assert h.jm.eg.status == JobStatus.RUNNING and h.jm.num_restarts == 1


def test_a_task_executor_unreachable_while_deploying_is_lost_at_once(start_jobmaster: StartJobMaster) -> None:
    h = start_jobmaster(config={"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "0 ms"})
    wait_until(lambda: h.rm.count("declare_required_resources") >= 1, what="requirements declared")
    dead = h.add_task_executor("te-1")
    dead.submit_task_function = raises(RpcUnreachable("connection refused"))
    h.register(dead)

    assert h.offer(dead, "alloc-1") == ("alloc-1",)

    # the ResourceManager is told at once (not after a heartbeat timeout), and its slots are gone
    wait_until(lambda: h.rm.count("disconnect_task_executor") >= 1, what="the ResourceManager told")
    lost = h.rm.requests("disconnect_task_executor")[0]
    assert lost.resource_id == "te-1" and "unreachable" in lost.cause and lost.fencing_token == RM_TOKEN
    wait_until(lambda: "te-1" not in h.jm.slot_pool.task_managers, what="te-1 dropped")
    # the job restarts on a live TaskExecutor
    live = h.add_task_executor("te-2")
    h.register(live)
    wait_until(lambda: h.offer(live, "alloc-2") == ("alloc-2",), what="the new slot accepted")
    wait_until(lambda: len(h.deployed(live)) == 2, what="deployed to te-2")


@pytest.mark.parametrize("refusal", [RpcRejected("no slot alloc-1 here"), RpcTimeout("deadline exceeded")])
def test_a_refused_or_timed_out_deployment_fails_the_task_but_keeps_the_task_executor(
    start_jobmaster: StartJobMaster, refusal: Exception
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
    assert "could not deploy" in h.failures()
    assert h.rm.count("disconnect_task_executor") == 0  # it answered: not lost


@pytest.mark.parametrize(
    "refusal", [RpcUnreachable("connection refused"), UnknownTarget("no task here")], ids=["unreachable", "task-gone"]
)
def test_a_cancel_that_fails_counts_the_task_as_canceled(start_jobmaster: StartJobMaster, refusal: Exception) -> None:
    h, te = running_with_one_slot(start_jobmaster)
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


def test_a_disconnected_task_manager_fails_its_tasks_and_is_forgotten(start_jobmaster: StartJobMaster) -> None:
    h, te = running_with_one_slot(start_jobmaster)

    h.call(lambda: h.jm.disconnect_task_manager(DisconnectTaskManager(h.token, "te-1", "its process exited")))

    assert h.terminated.wait(10)
    assert h.jm.eg.status == JobStatus.FAILED
    assert "its process exited" in h.failures()
    assert "te-1" not in h.jm.slot_pool.task_managers


def test_a_task_manager_lost_while_alive_is_told_to_drop_the_jobs_slots(start_jobmaster: StartJobMaster) -> None:
    """Chaos finding 4: the ResourceManager's notice (or a heartbeat timeout) makes a TaskExecutor
    lost that is in fact alive; unless told, it keeps the job's slots and tasks, and its slot
    report has the ResourceManager count them as the job's while the restart waits for slots."""
    h, te = running_with_one_slot(start_jobmaster)

    h.call(lambda: h.jm.disconnect_task_manager(DisconnectTaskManager(h.token, "te-1", "heartbeat timed out")))

    wait_until(lambda: te.count("disconnect_job_manager") == 1, what="the TaskExecutor told to drop the job")
    request = next(c.request for c in te.calls if c.method == "disconnect_job_manager")
    assert request.job_id == h.jm.job_id and "heartbeat timed out" in request.cause
    # should that not reach it, its heartbeats go unanswered: it times this JobMaster out and frees them
    with pytest.raises(UnknownTarget):
        h.call(lambda: h.jm.heartbeat_from_task_manager(TaskManagerHeartbeat(h.token, "te-1", ())))


def test_a_task_manager_without_heartbeats_is_lost_after_the_heartbeat_timeout(start_jobmaster: StartJobMaster) -> None:
    h, te = running_with_one_slot(start_jobmaster, heartbeat_interval_s=0.05, heartbeat_timeout_s=2.0)
    noted = h.jm.slot_pool.task_managers["te-1"].last_heartbeat
    h.call(lambda: h.jm.heartbeat_from_task_manager(TaskManagerHeartbeat(h.token, "te-1", ())))
    assert h.jm.slot_pool.task_managers["te-1"].last_heartbeat > noted  # a heartbeat keeps it

    assert h.terminated.wait(10), "the silent TaskManager was not lost"
    assert "heartbeat of TaskManager te-1 timed out" in h.failures()


def test_a_batch_job_runs_region_by_region_and_releases_the_blocking_results_at_its_end(
    start_jobmaster: StartJobMaster,
) -> None:
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
    start_jobmaster: StartJobMaster, probe: Exception | None
) -> None:
    h, te = running_with_one_slot(
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


def test_a_suspended_jobmaster_keeps_its_slots_and_refuses_every_call(start_jobmaster: StartJobMaster) -> None:
    h, te = running_with_one_slot(start_jobmaster)
    old = h.token

    h.call(lambda: h.jm.suspend("leadership lost"))

    # the tasks keep running for the next leader, which adopts them (issue 18)
    assert te.requests("free_slot") == [] and te.requests("cancel_task") == []
    with pytest.raises(FencingTokenMismatch):
        h.call(lambda: h.jm.heartbeat_from_task_manager(TaskManagerHeartbeat(old, "te-1")))
    assert not h.terminated.is_set()  # not a terminal state: the next leader goes on with the job


# ---------------------------------------------------------------------------- collect and fencing


def test_collected_results_are_kept_and_an_unknown_kind_of_data_is_an_invalid_request(
    start_jobmaster: StartJobMaster,
) -> None:
    h, te = running_with_one_slot(start_jobmaster)
    sink = h.execution_id(te, "sink")

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
    start_jobmaster: StartJobMaster, name: str, call: Callable[[JobMaster, str], Coroutine[Any, Any, Any]]
) -> None:
    h, te = running_with_one_slot(start_jobmaster)

    for stale in ("an-old-jobmaster-id", ""):
        with pytest.raises(FencingTokenMismatch):
            h.call(lambda: call(h.jm, stale))

    assert h.jm.eg.status == JobStatus.RUNNING
    assert set(h.jm.slot_pool.task_managers) == {"te-1"} and set(h.jm.slot_pool.slots) == {"alloc-1"}
    assert h.jm.collected_payloads() == []


def test_a_stopping_jobmaster_ends_its_calls_in_flight(
    start_jobmaster: StartJobMaster, caplog: pytest.LogCaptureFixture
) -> None:
    h = start_jobmaster()
    wait_until(lambda: h.rm.count("declare_required_resources") >= 1, what="requirements declared")
    te = h.add_task_executor("te-1")
    h.register(te)
    ended: list[tuple[BaseException, bool]] = []  # (how, whether the JobMaster's connections were closed)

    async def blocked(request: object) -> None:  # a deployment that takes forever
        try:
            await asyncio.Event().wait()
        except BaseException as e:
            ended.append((e, h.resolver.closed))
            raise

    te.submit_task_function = blocked
    assert h.offer(te, "alloc-1") == ("alloc-1",)
    wait_until(lambda: te.count("submit_task") == 2, what="both deployments in flight")

    started = time.monotonic()
    h.jm.stop()

    assert time.monotonic() - started < 5
    # cancelled by the JobMaster, while its connections were open
    assert [(type(e), closed) for e, closed in ended] == [(asyncio.CancelledError, False)] * 2
    gc.collect()
    assert "Task was destroyed but it is pending" not in caplog.text
