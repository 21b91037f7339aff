"""The real TaskExecutor, on its own thread as in production and running real tasks, driven through
every call of its TaskExecutorGateway, with a TestingResourceManagerGateway and
TestingJobMasterGateways as its peers (no other process, no gRPC): registration and heartbeats,
slot requests and offers, task submission, cancellation and state updates, freeing slots,
checkpoints, a JobMaster that disappears, and stale fencing tokens."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from tests.fakes.conditions import wait_until
from tests.fakes.gateways import (
    raises,
)
from tests.unit.taskexecutor.harness import (
    ENDLESS,
    JM_TOKEN,
    JOB,
    RM_TOKEN,
    StartTaskExecutor,
    collecting_task,
    source_task,
)
from yarnflink.common.rpc_errors import (
    FencingTokenMismatch,
    RpcRejected,
    RpcTimeout,
    RpcUnreachable,
    UnknownTarget,
)
from yarnflink.executiongraph.executiongraph import ExecutionState
from yarnflink.operators.specs import MapSpec, SequenceSourceSpec
from yarnflink.resourcemanager.gateway import RegisterTaskExecutor
from yarnflink.resourcemanager.resources import UNKNOWN
from yarnflink.taskexecutor.gateway import (
    CancelTask,
    ChainedOperator,
    DisconnectJobManager,
    FreeSlot,
    NotifyCheckpoint,
    ReleasePartitions,
    RequestSlot,
    RequestTaskExecutorInfo,
    SubmitTask,
    TriggerCheckpoint,
)
from yarnflink.taskexecutor.slottable import SlotState
from yarnflink.taskexecutor.taskexecutor import TaskExecutor

# ---------------------------------------------------------------------------- ResourceManager


def test_it_registers_at_the_resource_manager_with_its_slots_and_answers_its_heartbeats(
    start_task_executor: StartTaskExecutor,
) -> None:
    h = start_task_executor()

    (registration,) = h.rm.requests("register_task_executor")
    assert isinstance(registration, RegisterTaskExecutor)
    assert (registration.resource_id, registration.rpc_address, registration.num_slots) == ("te-1", h.te.address, 2)
    assert registration.data_address == h.te.shuffle.address
    assert [s.index for s in registration.slot_report.slots] == [0, 1]
    assert h.te.rm_token == RM_TOKEN
    report = h.call(lambda: h.te.heartbeat_from_resource_manager(RM_TOKEN))
    assert [s.allocation_id for s in report.slots] == ["", ""]


@pytest.mark.parametrize(
    "refusal", [RpcUnreachable("connection refused"), RpcTimeout("deadline exceeded"), FencingTokenMismatch("standby")]
)
def test_a_failed_registration_is_retried(start_task_executor: StartTaskExecutor, refusal: Exception) -> None:
    h = start_task_executor(start=False)
    succeed = h.rm.register_task_executor_function
    h.rm.register_task_executor_function = lambda r: (
        succeed(r) if h.rm.count("register_task_executor") > 1 else raises(refusal)(r)
    )

    h.te.start()

    wait_until(lambda: h.te.rm_token == RM_TOKEN, what="registered")
    assert h.rm.count("register_task_executor") == 2


def test_a_heartbeat_with_a_stale_resource_manager_token_is_refused(start_task_executor: StartTaskExecutor) -> None:
    h = start_task_executor()

    for stale in ("an-old-session", ""):
        with pytest.raises(FencingTokenMismatch, match="stale ResourceManager"):
            h.call(lambda: h.te.heartbeat_from_resource_manager(stale))

    assert h.te.stale_rpcs_rejected == 2


def test_without_heartbeats_from_the_resource_manager_it_registers_again(
    start_task_executor: StartTaskExecutor,
) -> None:
    h = start_task_executor(heartbeat_timeout_s=0.3)

    wait_until(lambda: h.rm.count("register_task_executor") >= 2, what="registered again")


# ---------------------------------------------------------------------------- slots


def test_a_requested_slot_is_offered_to_the_jobmaster_and_active_once_accepted(
    start_task_executor: StartTaskExecutor,
) -> None:
    h = start_task_executor()

    ack = h.request_slot("alloc-1", slot_index=1)

    assert ack.slot_index == 1 and ack.slot_report_version >= 1
    wait_until(lambda: h.slot_state("alloc-1") == SlotState.ACTIVE, what="the slot active")
    (registration,) = h.jm.requests("register_task_manager")
    assert (registration.jobmaster_id, registration.job_id, registration.resource_id) == (JM_TOKEN, JOB, "te-1")
    assert registration.rpc_address == h.te.address
    (offer,) = h.jm.requests("offer_slots")
    assert offer.jobmaster_id == JM_TOKEN and [(o.allocation_id, o.slot_index) for o in offer.offers] == [
        ("alloc-1", 1)
    ]
    report = h.call(lambda: h.te.heartbeat_from_resource_manager(RM_TOKEN))
    assert [(s.allocation_id, s.job_id) for s in report.slots] == [("", ""), ("alloc-1", JOB)]


def test_a_slot_request_from_a_stale_resource_manager_is_refused(start_task_executor: StartTaskExecutor) -> None:
    h = start_task_executor()

    with pytest.raises(FencingTokenMismatch, match="stale ResourceManager"):
        h.request_slot(token="an-old-session")

    assert h.slot_state("alloc-1") is None and h.jm.count("offer_slots") == 0


def test_a_request_for_a_taken_slot_is_refused(start_task_executor: StartTaskExecutor) -> None:
    h = start_task_executor()
    h.active_slot("alloc-1")

    with pytest.raises(RpcRejected):
        h.request_slot("alloc-2", slot_index=0)

    assert h.slot_state("alloc-2") is None


@pytest.mark.parametrize(
    "answer",
    [lambda r: (), raises(RpcUnreachable("connection refused")), raises(FencingTokenMismatch("not the leader"))],
    ids=["rejected", "unreachable", "fenced"],
)
def test_an_offer_the_jobmaster_does_not_accept_frees_the_slot_and_tells_the_resource_manager(
    start_task_executor: StartTaskExecutor, answer: Callable[[Any], tuple[str, ...]]
) -> None:
    h = start_task_executor()
    h.jm.offer_slots_function = answer

    h.request_slot("alloc-1", slot_index=0)

    wait_until(lambda: len(h.freed()) == 1, what="the ResourceManager told")
    notice = h.freed()[0]
    assert (notice.fencing_token, notice.resource_id, notice.allocation_id) == (RM_TOKEN, "te-1", "alloc-1")
    assert h.slot_state("alloc-1") is None


# ---------------------------------------------------------------------------- tasks


def test_a_submitted_task_runs_and_reports_its_states_in_order(start_task_executor: StartTaskExecutor) -> None:
    h = start_task_executor()
    h.active_slot("alloc-1")

    h.submit("exec-1", end=999)

    h.wait_state("exec-1", ExecutionState.FINISHED)
    assert h.states("exec-1") == [ExecutionState.INITIALIZING, ExecutionState.RUNNING, ExecutionState.FINISHED]
    final = [u for u in h.jm.requests("update_task_execution_state") if u.state == ExecutionState.FINISHED][0]
    assert final.jobmaster_id == JM_TOKEN and final.io_metrics  # the task's final metrics go with it
    assert "exec-1" not in h.te.tasks


def test_a_submission_from_an_unknown_jobmaster_or_for_a_task_already_here_is_refused(
    start_task_executor: StartTaskExecutor,
) -> None:
    h = start_task_executor()
    h.active_slot("alloc-1")
    tdd = source_task("exec-1", "alloc-1", ENDLESS, {})

    with pytest.raises(FencingTokenMismatch, match="stale JobMaster"):
        h.call(lambda: h.te.submit_task(SubmitTask("an-old-jobmaster", tdd)))
    assert "exec-1" not in h.te.tasks

    h.submit("exec-1")
    with pytest.raises(RpcRejected, match="already running"):
        h.submit("exec-1")


def test_a_cancelled_task_reports_canceled(start_task_executor: StartTaskExecutor) -> None:
    h = start_task_executor()
    h.active_slot("alloc-1")
    h.submit("exec-1")
    h.wait_state("exec-1", ExecutionState.RUNNING)

    h.call(lambda: h.te.cancel_task(CancelTask(JM_TOKEN, "exec-1")))

    h.wait_state("exec-1", ExecutionState.CANCELED)
    with pytest.raises(UnknownTarget):
        h.call(lambda: h.te.cancel_task(CancelTask(JM_TOKEN, "exec-1")))


def test_a_cancel_from_an_unknown_jobmaster_is_refused(start_task_executor: StartTaskExecutor) -> None:
    h = start_task_executor()
    h.active_slot("alloc-1")
    h.submit("exec-1")
    h.wait_state("exec-1", ExecutionState.RUNNING)

    with pytest.raises(FencingTokenMismatch):
        h.call(lambda: h.te.cancel_task(CancelTask("an-old-jobmaster", "exec-1")))

    assert h.te.tasks["exec-1"].state == ExecutionState.RUNNING


def test_freeing_a_slot_cancels_its_tasks_and_tells_the_resource_manager(
    start_task_executor: StartTaskExecutor,
) -> None:
    h = start_task_executor()
    h.active_slot("alloc-1")
    h.submit("exec-1")
    h.wait_state("exec-1", ExecutionState.RUNNING)

    h.call(lambda: h.te.free_slot(FreeSlot("alloc-1", "the job ended")))

    # (the job's last slot: its connection closes once the task's final state went out)
    wait_until(lambda: "exec-1" not in h.te.tasks, what="the task cancelled")
    assert h.slot_state("alloc-1") is None
    assert [n.allocation_id for n in h.freed()] == ["alloc-1"]
    h.call(lambda: h.te.free_slot(FreeSlot("alloc-1", "again")))  # nothing to free: no second notice
    assert len(h.freed()) == 1


def test_freeing_the_jobs_last_slot_still_reports_its_tasks_final_state(
    start_task_executor: StartTaskExecutor,
) -> None:
    h = start_task_executor()
    h.active_slot("alloc-1")
    h.submit("exec-1")
    h.wait_state("exec-1", ExecutionState.RUNNING)

    h.call(lambda: h.te.free_slot(FreeSlot("alloc-1", "the job ended")))

    h.wait_state("exec-1", ExecutionState.CANCELED)  # before the connection closed
    wait_until(lambda: JOB not in h.te.job_managers, what="the job's connection closed")


def test_the_info_lists_the_running_tasks(start_task_executor: StartTaskExecutor) -> None:
    h = start_task_executor()
    h.active_slot("alloc-1")
    h.submit("exec-1")
    h.wait_state("exec-1", ExecutionState.RUNNING)

    info = h.call(lambda: h.te.request_task_executor_info(RequestTaskExecutorInfo()))

    assert info.resource_id == "te-1"
    assert [(t.execution_id, t.allocation_id, t.state) for t in info.tasks] == [("exec-1", "alloc-1", "RUNNING")]


def test_released_partitions_are_forgotten(start_task_executor: StartTaskExecutor) -> None:
    h = start_task_executor()
    h.te.partitions_by_job[JOB] = {"p-1", "p-2"}  # (what a producer's deployment registers)

    h.call(lambda: h.te.release_partitions(ReleasePartitions(JOB, ("p-1",))))
    assert h.te.partitions_by_job[JOB] == {"p-2"}
    h.call(lambda: h.te.release_partitions(ReleasePartitions(JOB)))  # every partition of the job
    assert JOB not in h.te.partitions_by_job


# ---------------------------------------------------------------------------- the JobMaster


@pytest.mark.parametrize(
    "failure, options",
    [
        (RpcUnreachable("connection refused"), {"rpc_failure_threshold": 2, "heartbeat_timeout_s": 3600}),
        (FencingTokenMismatch("not the leader of the job"), {"heartbeat_timeout_s": 3600}),
        (RpcTimeout("deadline exceeded"), {"heartbeat_timeout_s": 0.5}),
    ],
    ids=["unreachable", "no-longer-leader", "silent"],
)
def test_a_jobmaster_that_disappears_loses_its_tasks_and_slots(
    start_task_executor: StartTaskExecutor, failure: Exception, options: dict[str, Any]
) -> None:
    h = start_task_executor(**options)
    h.active_slot("alloc-1")
    h.submit("exec-1")
    h.wait_state("exec-1", ExecutionState.RUNNING)
    wait_until(lambda: h.jm.count("heartbeat_from_task_manager") >= 1, what="heartbeats to the JobMaster")
    assert h.jm.requests("heartbeat_from_task_manager")[-1].running_execution_ids == ("exec-1",)

    h.jm.heartbeat_from_task_manager_function = raises(failure)

    wait_until(lambda: h.slot_state("alloc-1") is None, what="the slot freed")
    wait_until(lambda: "exec-1" not in h.te.tasks, what="the task gone")
    assert [n.allocation_id for n in h.freed()] == ["alloc-1"]
    assert JOB not in h.te.job_managers


def test_a_disconnected_jobmaster_loses_its_slots(start_task_executor: StartTaskExecutor) -> None:
    h = start_task_executor()
    h.active_slot("alloc-1")
    h.active_slot("alloc-2")

    h.call(lambda: h.te.disconnect_job_manager(DisconnectJobManager(JOB, "the job ended")))

    assert h.slot_state("alloc-1") is None and h.slot_state("alloc-2") is None
    assert sorted(n.allocation_id for n in h.freed()) == ["alloc-1", "alloc-2"]


def test_a_slot_for_a_new_jobmaster_of_the_job_replaces_the_old_connection(
    start_task_executor: StartTaskExecutor,
) -> None:
    h = start_task_executor()
    h.active_slot("alloc-1")
    new = h.resolver.add_job_master("jm-2:6123", jobmaster_id="jm-token-2")

    request = RequestSlot(RM_TOKEN, 1, JOB, "alloc-2", UNKNOWN, new.address, new.jobmaster_id)
    h.call(lambda: h.te.request_slot(request))

    wait_until(lambda: new.count("offer_slots") == 1, what="offered to the new JobMaster")
    with pytest.raises(FencingTokenMismatch):  # the old JobMaster's calls are stale now
        h.call(lambda: h.te.submit_task(SubmitTask(JM_TOKEN, source_task("exec-1", "alloc-1", ENDLESS, {}))))


# ---------------------------------------------------------------------------- checkpoints


def test_a_triggered_checkpoint_is_acknowledged_to_the_jobmaster(
    start_task_executor: StartTaskExecutor, tmp_path: Path
) -> None:
    h = start_task_executor()
    h.active_slot("alloc-1")
    config = {"execution.checkpointing.interval": "1 h", "execution.checkpointing.dir": f"file://{tmp_path}"}
    h.submit("exec-1", config=config)
    h.wait_state("exec-1", ExecutionState.RUNNING)

    h.call(lambda: h.te.trigger_checkpoint(TriggerCheckpoint(JM_TOKEN, "exec-1", 1, 1_700_000_000_000)))

    wait_until(lambda: h.jm.count("acknowledge_checkpoint") == 1, timeout=30, what="the acknowledgement")
    ack = h.jm.requests("acknowledge_checkpoint")[0]
    assert (ack.jobmaster_id, ack.execution_id, ack.checkpoint_id) == (JM_TOKEN, "exec-1", 1)
    assert h.jm.count("decline_checkpoint") == 0
    h.call(lambda: h.te.notify_checkpoint_complete(NotifyCheckpoint(JM_TOKEN, "exec-1", 1)))
    h.call(lambda: h.te.notify_checkpoint_aborted(NotifyCheckpoint(JM_TOKEN, "exec-1", 2)))
    assert h.te.tasks["exec-1"].state == ExecutionState.RUNNING


CHECKPOINT_CALLS: list[tuple[str, Callable[[TaskExecutor, str], Coroutine[Any, Any, None]]]] = [
    ("trigger_checkpoint", lambda te, t: te.trigger_checkpoint(TriggerCheckpoint(t, "exec-1", 1, 0))),
    ("notify_checkpoint_complete", lambda te, t: te.notify_checkpoint_complete(NotifyCheckpoint(t, "exec-1", 1))),
    ("notify_checkpoint_aborted", lambda te, t: te.notify_checkpoint_aborted(NotifyCheckpoint(t, "exec-1", 1))),
]


@pytest.mark.parametrize("name, call", CHECKPOINT_CALLS, ids=[n for n, _ in CHECKPOINT_CALLS])
def test_a_checkpoint_call_from_a_stale_jobmaster_is_refused(
    start_task_executor: StartTaskExecutor, name: str, call: Callable[[TaskExecutor, str], Coroutine[Any, Any, None]]
) -> None:
    h = start_task_executor()
    h.active_slot("alloc-1")
    h.submit("exec-1")
    h.wait_state("exec-1", ExecutionState.RUNNING)

    with pytest.raises(FencingTokenMismatch, match="stale JobMaster"):
        h.call(lambda: call(h.te, "an-old-jobmaster"))

    assert h.te.stale_rpcs_rejected == 1
    assert h.te.tasks["exec-1"].state == ExecutionState.RUNNING


def test_a_task_that_fails_reports_failed_with_its_error(start_task_executor: StartTaskExecutor) -> None:
    h = start_task_executor()
    h.active_slot("alloc-1")
    broken = dataclasses.replace(
        source_task("exec-1", "alloc-1", ENDLESS, {}),
        operators=(ChainedOperator(node_id=1, name="source", kind="source", uid="source", spec=b"not a pickle"),),
    )

    h.call(lambda: h.te.submit_task(SubmitTask(JM_TOKEN, broken)))

    h.wait_state("exec-1", ExecutionState.FAILED)
    failed = [u for u in h.jm.requests("update_task_execution_state") if u.state == ExecutionState.FAILED][0]
    assert failed.error is not None and failed.error.exception_class and failed.error.traceback


def test_a_state_update_the_jobmaster_could_not_take_is_sent_again(start_task_executor: StartTaskExecutor) -> None:
    h = start_task_executor()
    h.active_slot("alloc-1")
    take = h.jm.update_task_execution_state_function
    h.jm.update_task_execution_state_function = lambda u: (
        raises(RpcUnreachable("connection refused"))(u) if h.jm.count("update_task_execution_state") == 1 else take(u)
    )

    h.submit("exec-1", end=999)

    h.wait_state("exec-1", ExecutionState.FINISHED)
    assert h.states("exec-1") == [
        ExecutionState.INITIALIZING,  # refused
        ExecutionState.INITIALIZING,  # again, before the next one
        ExecutionState.RUNNING,
        ExecutionState.FINISHED,
    ]


def test_a_checkpoint_the_task_cannot_write_is_declined_to_the_jobmaster(
    start_task_executor: StartTaskExecutor, tmp_path: Path
) -> None:
    h = start_task_executor()
    h.active_slot("alloc-1")
    not_a_directory = tmp_path / "a-file"
    not_a_directory.write_text("")
    config = {"execution.checkpointing.interval": "1 h", "execution.checkpointing.dir": f"file://{not_a_directory}"}
    h.submit("exec-1", config=config)
    h.wait_state("exec-1", ExecutionState.RUNNING)

    h.call(lambda: h.te.trigger_checkpoint(TriggerCheckpoint(JM_TOKEN, "exec-1", 1, 1_700_000_000_000)))

    wait_until(lambda: h.jm.count("decline_checkpoint") == 1, timeout=30, what="the decline")
    decline = h.jm.requests("decline_checkpoint")[0]
    assert (decline.jobmaster_id, decline.execution_id, decline.checkpoint_id) == (JM_TOKEN, "exec-1", 1)
    assert decline.reason
    assert h.jm.count("acknowledge_checkpoint") == 0
    assert h.te.tasks["exec-1"].state == ExecutionState.RUNNING  # the job goes on


def test_a_stopping_task_executor_says_goodbye_to_the_resource_manager(start_task_executor: StartTaskExecutor) -> None:
    h = start_task_executor()

    h.te.stop()

    (goodbye,) = h.rm.requests("disconnect_task_executor")
    assert (goodbye.fencing_token, goodbye.resource_id) == (RM_TOKEN, "te-1")


def test_a_collect_sinks_results_go_to_the_jobmaster(start_task_executor: StartTaskExecutor) -> None:
    h = start_task_executor()
    h.active_slot("alloc-1")
    tdd = collecting_task("exec-1", "alloc-1")

    h.call(lambda: h.te.submit_task(SubmitTask(JM_TOKEN, tdd)))

    h.wait_state("exec-1", ExecutionState.FINISHED)
    batches = h.jm.requests("send_coordination_data")
    assert batches and {(b.jobmaster_id, b.execution_id, b.kind) for b in batches} == {(JM_TOKEN, "exec-1", "collect")}
    # every batch arrived before the task's end was reported
    methods = [c.method for c in h.jm.calls if c.method in ("send_coordination_data", "update_task_execution_state")]
    assert methods[-1] == "update_task_execution_state"


def test_a_freed_slot_the_resource_manager_did_not_hear_of_is_free_in_the_next_heartbeats_report(
    start_task_executor: StartTaskExecutor,
) -> None:
    h = start_task_executor()
    h.active_slot("alloc-1")
    h.rm.notify_slot_available_function = raises(RpcUnreachable("connection refused"))

    h.call(lambda: h.te.free_slot(FreeSlot("alloc-1", "the job ended")))

    assert len(h.freed()) == 1  # tried once, not retried: the report repairs it
    report = h.call(lambda: h.te.heartbeat_from_resource_manager(RM_TOKEN))
    assert [s.allocation_id for s in report.slots] == ["", ""]
    assert report.version >= h.freed()[0].slot_report_version


def test_a_state_update_refused_by_a_jobmaster_that_no_longer_leads_is_not_sent_again(
    start_task_executor: StartTaskExecutor,
) -> None:
    h = start_task_executor()
    h.active_slot("alloc-1")
    h.jm.update_task_execution_state_function = raises(FencingTokenMismatch("not the leader of the job"))

    h.submit("exec-1", end=999)

    wait_until(lambda: "exec-1" not in h.te.tasks, what="the task finished")
    # each update tried once (the next one goes to the same sender after it): no retries
    wait_until(lambda: ExecutionState.FINISHED in h.states("exec-1"), what="the last update tried")
    assert h.states("exec-1") == [ExecutionState.INITIALIZING, ExecutionState.RUNNING, ExecutionState.FINISHED]


def test_a_collect_sink_whose_results_the_jobmaster_refuses_fails(start_task_executor: StartTaskExecutor) -> None:
    h = start_task_executor()
    h.active_slot("alloc-1")
    h.jm.send_coordination_data_function = raises(RpcRejected("results exceed the limit"))
    tdd = collecting_task("exec-1", "alloc-1")

    h.call(lambda: h.te.submit_task(SubmitTask(JM_TOKEN, tdd)))

    h.wait_state("exec-1", ExecutionState.FAILED)
    failed = [u for u in h.jm.requests("update_task_execution_state") if u.state == ExecutionState.FAILED][0]
    assert failed.error is not None and "results exceed the limit" in failed.error.message


#: A map that blocks its task until the test lets it go (shared with the task's thread: cloudpickle
#: pickles this module's functions by reference).
_MAP_ENTERED = threading.Event()
_MAP_RELEASED = threading.Event()


def _blocking_map(x: Any) -> Any:
    _MAP_ENTERED.set()
    _MAP_RELEASED.wait(30)
    return x


def test_a_task_that_ends_after_its_task_executor_stopped_does_not_fail_its_thread(
    start_task_executor: StartTaskExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", failures.append)
    _MAP_ENTERED.clear()
    _MAP_RELEASED.clear()
    h = start_task_executor()
    h.te.task_end_timeout_s = 0.1  # the stop does not wait for the blocked task long
    h.active_slot("alloc-1")
    source = ChainedOperator(
        node_id=1,
        name="source",
        kind="source",
        spec=cloudpickle.dumps(SequenceSourceSpec(0, ENDLESS)),
        chained_outputs=(2,),
    )
    blocking = ChainedOperator(node_id=2, name="map", kind="map", spec=cloudpickle.dumps(MapSpec(_blocking_map)))
    tdd = dataclasses.replace(source_task("exec-1", "alloc-1", ENDLESS, {}), operators=(source, blocking))
    h.call(lambda: h.te.submit_task(SubmitTask(JM_TOKEN, tdd)))
    assert _MAP_ENTERED.wait(10)
    task = h.te.tasks["exec-1"]

    h.te.stop()  # its loop is closed when this returns; the task still runs
    _MAP_RELEASED.set()

    wait_until(lambda: not task.is_alive, what="the task thread ended")
    assert failures == []
