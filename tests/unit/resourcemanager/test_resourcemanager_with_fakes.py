"""The real ResourceManager, on its own thread as in production, driven through every call of its
ResourceManagerGateway, with TestingTaskExecutorGateways and TestingJobMasterGateways as its peers
(no other process, no gRPC): TaskExecutor registration and heartbeats, JobMaster registration,
requirements and heartbeats, slot requests acknowledged, refused, unreachable or timing out,
lost TaskExecutors, and leadership (fencing tokens)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from tests.fakes.conditions import wait_until
from tests.fakes.gateways import (
    raises,
)
from tests.unit.resourcemanager.harness import FAST, JOB, StartResourceManager
from yarnflink.common.rpc_errors import (
    FencingTokenMismatch,
    InvalidRequest,
    RpcRejected,
    RpcTimeout,
    RpcUnreachable,
)
from yarnflink.resourcemanager.gateway import (
    DeclareRequiredResources,
    DisconnectJobMaster,
    DisconnectTaskExecutor,
    JobMasterHeartbeat,
    NotifySlotAvailable,
    RegisterJobMaster,
    RegisterTaskExecutor,
    ReportedSlot,
    ResourceOverview,
    ResourceRequirement,
    SlotInfo,
    SlotReport,
    TaskManagerSlot,
)
from yarnflink.resourcemanager.local_gateway import LocalResourceManagerGateway
from yarnflink.resourcemanager.resourcemanager import ResourceManager
from yarnflink.resourcemanager.resources import UNKNOWN
from yarnflink.resourcemanager.slotmanager import AllocationState
from yarnflink.taskexecutor.gateway import RequestSlot, SlotRequestAck

# ---------------------------------------------------------------------------- TaskExecutors


def test_a_registered_task_executor_gets_the_leaders_token_and_is_heartbeaten(
    start_resource_manager: StartResourceManager,
) -> None:
    h = start_resource_manager(FAST)

    te, success = h.register_task_executor("te-1", num_slots=3)

    assert success.fencing_token == h.token and success.resource_manager_resource_id == h.rm.resource_id
    assert (success.heartbeat_interval_ms, success.heartbeat_timeout_ms) == (50, 5000)
    assert h.rm.slot_manager.totals() == (3, 3)
    wait_until(lambda: te.count("heartbeat_from_resource_manager") >= 3, what="heartbeats")
    assert set(te.requests("heartbeat_from_resource_manager")) == {h.token}
    assert "te-1" in h.rm.slot_manager.task_executors  # its answers keep it


@pytest.mark.parametrize(
    "request_",
    [
        RegisterTaskExecutor("te-1", "te-1:6122", "te-1:9000", num_slots=0),
        RegisterTaskExecutor("te-1", "te-1:6122", "te-1:9000", num_slots=1025),
        RegisterTaskExecutor("te-1", "", "te-1:9000", num_slots=1),
        RegisterTaskExecutor("", "te-1:6122", "te-1:9000", num_slots=1),
    ],
)
def test_an_invalid_registration_is_refused(
    start_resource_manager: StartResourceManager, request_: RegisterTaskExecutor
) -> None:
    h = start_resource_manager(FAST)

    with pytest.raises(InvalidRequest):
        h.call(lambda: h.rm.register_task_executor(request_))

    assert not h.rm.slot_manager.task_executors


def test_a_task_executor_registering_from_a_new_address_replaces_the_old_one(
    start_resource_manager: StartResourceManager,
) -> None:
    h = start_resource_manager(FAST)
    h.register_task_executor("te-1")
    moved = h.resolver.add_task_executor("te-1-restarted:6122", resource_id="te-1")
    moved.slot_report = SlotReport((ReportedSlot(0), ReportedSlot(1)), 0)

    h.call(
        lambda: h.rm.register_task_executor(
            RegisterTaskExecutor("te-1", moved.address, "te-1:9001", 2, slot_report=moved.slot_report)
        )
    )

    wait_until(lambda: "te-1:6122" in h.resolver.forgotten, what="the old address forgotten")
    assert h.rm.slot_manager.task_executors["te-1"].rpc_address == moved.address
    wait_until(lambda: moved.count("heartbeat_from_resource_manager") >= 1, what="heartbeats to the new address")


@pytest.mark.parametrize(
    "failure", [RpcUnreachable("connection refused"), FencingTokenMismatch("registered elsewhere")]
)
def test_a_task_executor_failing_heartbeats_is_lost_and_its_jobs_are_told(
    start_resource_manager: StartResourceManager, failure: Exception
) -> None:
    h = start_resource_manager(FAST | {"heartbeat.timeout": "1 h"})  # the failure threshold decides
    te, _ = h.register_task_executor("te-1", num_slots=1)
    jm = h.register_job_master(slots=1)
    wait_until(lambda: h.allocations("te-1"), what="a slot allocated")

    answered = te.count("heartbeat_from_resource_manager")  # (a heartbeat in flight now may still succeed)
    te.heartbeat_from_resource_manager_function = raises(failure)

    wait_until(lambda: "te-1" not in h.rm.slot_manager.task_executors, what="te-1 lost")
    wait_until(lambda: jm.count("disconnect_task_manager") == 1, what="the JobMaster told")
    notice = jm.requests("disconnect_task_manager")[0]
    assert (notice.jobmaster_id, notice.resource_id) == (jm.jobmaster_id, "te-1")
    assert "heartbeats failed" in notice.cause
    assert te.count("heartbeat_from_resource_manager") - answered in (2, 3)  # the threshold (2) failed in a row
    assert "te-1:6122" in h.resolver.forgotten


def test_a_task_executor_whose_heartbeats_time_out_is_lost_after_the_heartbeat_timeout(
    start_resource_manager: StartResourceManager,
) -> None:
    h = start_resource_manager(FAST | {"heartbeat.timeout": "1 s"})  # (its JobMaster keeps heartbeating)
    te, _ = h.register_task_executor("te-1", num_slots=1)
    jm = h.register_job_master(slots=1)
    h.keep_alive(jm)
    wait_until(lambda: h.allocations("te-1"), what="a slot allocated")
    wait_until(lambda: te.count("heartbeat_from_resource_manager") >= 2, what="heartbeats answered")

    te.heartbeat_from_resource_manager_function = raises(RpcTimeout("deadline exceeded"))  # not counted as failures

    wait_until(lambda: "te-1" not in h.rm.slot_manager.task_executors, what="te-1 lost")
    wait_until(lambda: jm.count("disconnect_task_manager") == 1, what="the JobMaster told")
    assert "timed out" in jm.requests("disconnect_task_manager")[0].cause


def test_the_slot_report_of_a_heartbeat_corrects_the_resource_managers_view(
    start_resource_manager: StartResourceManager,
) -> None:
    h = start_resource_manager(FAST)
    te, _ = h.register_task_executor("te-1", num_slots=2)

    # the TaskExecutor says (newer version) that slot 1 went to a job: a notice the RM missed
    te.slot_report = SlotReport((ReportedSlot(0), ReportedSlot(1, "alloc-x", JOB)), version=5)

    wait_until(lambda: h.allocations("te-1") == {"alloc-x": AllocationState.ALLOCATED}, what="the report applied")
    assert h.rm.slot_manager.totals() == (2, 1)


def test_a_task_executor_that_disconnects_is_lost_at_once(start_resource_manager: StartResourceManager) -> None:
    h = start_resource_manager(FAST | {"heartbeat.timeout": "1 h"})
    h.register_task_executor("te-1", num_slots=1)
    jm = h.register_job_master(slots=1)
    wait_until(lambda: h.allocations("te-1"), what="a slot allocated")

    h.call(lambda: h.rm.disconnect_task_executor(DisconnectTaskExecutor(h.token, "te-1", "TaskExecutor stopped")))

    assert "te-1" not in h.rm.slot_manager.task_executors
    wait_until(lambda: jm.count("disconnect_task_manager") == 1, what="the JobMaster told")
    assert "TaskExecutor stopped" in jm.requests("disconnect_task_manager")[0].cause


# ---------------------------------------------------------------------------- slot requests


def test_declared_requirements_become_slot_requests_to_task_executors(
    start_resource_manager: StartResourceManager,
) -> None:
    h = start_resource_manager(FAST)
    te, _ = h.register_task_executor("te-1", num_slots=2)

    jm = h.register_job_master(slots=2)

    wait_until(lambda: te.count("request_slot") == 2, what="two slot requests")
    requests: list[RequestSlot] = te.requests("request_slot")
    assert {r.resource_manager_token for r in requests} == {h.token}
    assert {(r.job_id, r.jobmaster_address, r.jobmaster_id) for r in requests} == {(JOB, jm.address, jm.jobmaster_id)}
    assert sorted(r.slot_index for r in requests) == [0, 1]
    assert len({r.allocation_id for r in requests}) == 2
    wait_until(lambda: set(h.allocations("te-1").values()) == {AllocationState.ALLOCATED}, what="both acknowledged")
    assert h.rm.slot_manager.allocated_to(JOB) == 2


def test_by_default_a_jobs_slots_spread_over_task_executors_before_two_share_one(
    start_resource_manager: StartResourceManager,
) -> None:
    """A TaskExecutor's slots share one Python interpreter lock: by default (no
    cluster.evenly-spread-out-slots in the configuration) a job's two slots go to two processes."""
    h = start_resource_manager(FAST)
    first, _ = h.register_task_executor("te-1", num_slots=2)
    second, _ = h.register_task_executor("te-2", num_slots=2)

    h.register_job_master(slots=2)

    wait_until(lambda: first.count("request_slot") + second.count("request_slot") == 2, what="two slot requests")
    assert (first.count("request_slot"), second.count("request_slot")) == (1, 1)


def test_the_control_gateway_reads_task_executors_and_slots_from_another_loop(
    start_resource_manager: StartResourceManager,
) -> None:
    h = start_resource_manager(FAST)
    h.register_task_executor("te-1", num_slots=2)
    h.register_task_executor("te-2", num_slots=1)
    h.register_job_master(slots=1)
    wait_until(lambda: h.rm.slot_manager.allocated_to(JOB) == 1, what="the slot allocated")
    gateway = LocalResourceManagerGateway(h.rm)

    async def read() -> Any:  # on the test's own loop, as the Dispatcher's
        return await gateway.request_resource_overview(), await gateway.request_task_manager_info()

    overview, infos = asyncio.run(read())

    assert overview == ResourceOverview(number_task_managers=2, number_registered_slots=3, number_free_slots=2)
    assert gateway.address == h.rm.address
    by_id = {i.resource_id: i for i in infos}
    assert set(by_id) == {"te-1", "te-2"}
    assert (by_id["te-1"].rpc_address, by_id["te-1"].data_port, by_id["te-1"].number_slots) == ("te-1:6122", 9000, 2)
    used = next(i for i in infos if i.allocated_slots)
    assert used.allocated_slots == (SlotInfo(JOB, used.slots[0].resource),)
    allocated, *free = used.slots
    assert (allocated.job_id, allocated.status) == (JOB, "ALLOCATED") and allocated.allocation_id
    assert all(s == TaskManagerSlot(s.index, None, None, "FREE", s.resource) for s in free)
    assert used.number_available_slots == used.number_slots - 1 == len(free)


def test_a_slot_request_in_flight_is_pending_until_acknowledged(start_resource_manager: StartResourceManager) -> None:
    h = start_resource_manager(FAST)
    te, _ = h.register_task_executor("te-1", num_slots=1)
    answer = asyncio.Event()

    async def slow_ack(r: RequestSlot) -> SlotRequestAck:
        await answer.wait()
        return SlotRequestAck(r.slot_index, slot_report_version=1)

    te.request_slot_function = slow_ack
    h.register_job_master(slots=1)
    wait_until(lambda: te.count("request_slot") == 1, what="the slot request")

    assert set(h.allocations("te-1").values()) == {AllocationState.PENDING}
    h.rm.call_soon(answer.set)
    wait_until(lambda: set(h.allocations("te-1").values()) == {AllocationState.ALLOCATED}, what="acknowledged")


@pytest.mark.parametrize(
    "failure",
    [RpcRejected("slot 0 is taken"), RpcUnreachable("connection refused"), RpcTimeout("deadline exceeded")],
    ids=["refused", "unreachable", "timeout"],
)
def test_a_failed_slot_request_is_tried_at_another_task_executor(
    start_resource_manager: StartResourceManager, failure: Exception
) -> None:
    h = start_resource_manager(FAST)
    bad, _ = h.register_task_executor("te-1", num_slots=1)
    bad.request_slot_function = raises(failure)
    good, _ = h.register_task_executor("te-2", num_slots=1)

    h.register_job_master(slots=1)

    wait_until(lambda: good.count("request_slot") == 1, what="the slot requested at te-2")
    assert bad.count("request_slot") == 1
    wait_until(lambda: set(h.allocations("te-2").values()) == {AllocationState.ALLOCATED}, what="allocated at te-2")
    assert h.allocations("te-1") == {}


def test_a_freed_slot_goes_to_a_job_still_waiting(start_resource_manager: StartResourceManager) -> None:
    h = start_resource_manager(FAST)
    te, _ = h.register_task_executor("te-1", num_slots=1)
    h.register_job_master("job-1", slots=1)
    wait_until(lambda: te.count("request_slot") == 1, what="job-1's slot")
    h.register_job_master("job-2", slots=1)  # waits: no free slot
    first: RequestSlot = te.requests("request_slot")[0]

    h.call(
        lambda: h.rm.notify_slot_available(
            NotifySlotAvailable(h.token, "te-1", first.slot_index, first.allocation_id, slot_report_version=2)
        )
    )

    wait_until(lambda: te.count("request_slot") == 2, what="the freed slot requested for job-2")
    assert te.requests("request_slot")[1].job_id == "job-2"


# ---------------------------------------------------------------------------- JobMasters


def test_a_job_master_registers_and_its_heartbeats_find_its_job_known_until_it_disconnects(
    start_resource_manager: StartResourceManager,
) -> None:
    h = start_resource_manager(FAST)
    te, _ = h.register_task_executor("te-1", num_slots=1)
    jm = h.resolver.add_job_master("jm-1:6123")

    success = h.call(lambda: h.rm.register_job_master(RegisterJobMaster(JOB, jm.address, jm.jobmaster_id)))

    assert success.fencing_token == h.token
    assert (success.heartbeat_interval_ms, success.heartbeat_timeout_ms) == (50, 5000)
    assert success.heartbeat_rpc_failure_threshold == 2
    beat = JobMasterHeartbeat(h.token, JOB, jm.jobmaster_id)
    assert h.call(lambda: h.rm.heartbeat_from_job_master(beat)) is True
    h.declare(jm, JOB, 1)
    wait_until(lambda: h.rm.slot_manager.allocated_to(JOB) == 1, what="the slot allocated")

    h.call(lambda: h.rm.disconnect_job_master(DisconnectJobMaster(h.token, JOB, "FINISHED")))

    assert h.call(lambda: h.rm.heartbeat_from_job_master(beat)) is False  # register again
    assert JOB not in h.rm.slot_manager.jobs


def test_a_silent_job_master_loses_its_requirements_after_the_heartbeat_timeout(
    start_resource_manager: StartResourceManager,
) -> None:
    h = start_resource_manager(FAST | {"heartbeat.timeout": "600 ms"})
    h.register_task_executor("te-1", num_slots=1)
    h.register_job_master("job-1", slots=2)  # one slot missing
    assert h.rm.slot_manager.missing_slots("job-1") >= 1

    wait_until(lambda: "job-1" not in h.rm.slot_manager.jobs, timeout=10, what="the requirements dropped")
    beat = JobMasterHeartbeat(h.token, "job-1", "jm-token-job-1")
    assert h.call(lambda: h.rm.heartbeat_from_job_master(beat)) is False


@pytest.mark.parametrize(
    "request_",
    [RegisterJobMaster("", "jm:1", "t"), RegisterJobMaster(JOB, "", "t"), RegisterJobMaster(JOB, "jm:1", "")],
)
def test_an_invalid_job_master_registration_is_refused(
    start_resource_manager: StartResourceManager, request_: Any
) -> None:
    h = start_resource_manager(FAST)
    with pytest.raises(InvalidRequest):
        h.call(lambda: h.rm.register_job_master(request_))


def test_an_invalid_requirement_is_refused(start_resource_manager: StartResourceManager) -> None:
    h = start_resource_manager(FAST)
    jm = h.register_job_master()
    with pytest.raises(InvalidRequest):
        h.declare(jm, JOB, -1)
    with pytest.raises(InvalidRequest):
        h.declare(jm, JOB, 100_001)
    assert h.rm.slot_manager.missing_slots(JOB) == 0


# ---------------------------------------------------------------------------- leadership and fencing


def _fenced_calls(token: str) -> list[Callable[[ResourceManager], Coroutine[Any, Any, Any]]]:
    return [
        lambda rm: rm.notify_slot_available(NotifySlotAvailable(token, "te-1", 0, "alloc-1", 9)),
        lambda rm: rm.disconnect_task_executor(DisconnectTaskExecutor(token, "te-1", "stale")),
        lambda rm: rm.declare_required_resources(
            DeclareRequiredResources(token, "job-2", "jm:1", (ResourceRequirement(UNKNOWN, 1),), "t")
        ),
        lambda rm: rm.disconnect_job_master(DisconnectJobMaster(token, JOB, "stale")),
        lambda rm: rm.heartbeat_from_job_master(JobMasterHeartbeat(token, JOB, "jm-token-job-1")),
    ]


FENCED = ["notify_slot_available", "disconnect_task_executor", "declare_required_resources", "disconnect_job_master"]


@pytest.mark.parametrize("index", range(5), ids=FENCED + ["heartbeat_from_job_master"])
def test_every_fenced_call_with_a_stale_token_is_refused_and_changes_nothing(
    start_resource_manager: StartResourceManager, index: int
) -> None:
    h = start_resource_manager(FAST | {"heartbeat.timeout": "1 h"})
    te, _ = h.register_task_executor("te-1", num_slots=1)
    h.register_job_master(JOB, slots=1)
    wait_until(lambda: set(h.allocations("te-1").values()) == {AllocationState.ALLOCATED}, what="allocated")
    before = h.allocations("te-1")

    for stale in ("an-old-session", ""):
        with pytest.raises(FencingTokenMismatch):
            h.call(lambda: _fenced_calls(stale)[index](h.rm))

    assert h.allocations("te-1") == before
    assert set(h.rm.slot_manager.jobs) == {JOB}


def test_a_standby_refuses_registrations_and_acts_only_after_leadership_is_granted(
    start_resource_manager: StartResourceManager,
) -> None:
    h = start_resource_manager(FAST, high_availability=True)
    te = h.resolver.add_task_executor("te-1:6122", resource_id="te-1")
    jm = h.resolver.add_job_master("jm-1:6123")
    register_te = RegisterTaskExecutor("te-1", te.address, "te-1:9000", 1, slot_report=SlotReport((ReportedSlot(0),)))

    with pytest.raises(FencingTokenMismatch, match="not the leader"):
        h.call(lambda: h.rm.register_task_executor(register_te))
    with pytest.raises(FencingTokenMismatch, match="not the leader"):
        h.call(lambda: h.rm.register_job_master(RegisterJobMaster(JOB, jm.address, jm.jobmaster_id)))
    assert not h.rm.slot_manager.task_executors

    h.rm.grant_leadership("session-2")

    assert h.call(lambda: h.rm.register_task_executor(register_te)).fencing_token == "session-2"
    success = h.call(lambda: h.rm.register_job_master(RegisterJobMaster(JOB, jm.address, jm.jobmaster_id)))
    assert success.fencing_token == "session-2"
    with pytest.raises(FencingTokenMismatch):  # a JobMaster still holding a former leader's token
        h.declare(jm, JOB, 1, token="session-1")
    h.declare(jm, JOB, 1, token="session-2")
    wait_until(lambda: te.count("request_slot") == 1, what="the slot requested")
    assert te.requests("request_slot")[0].resource_manager_token == "session-2"


def test_a_revoked_leader_refuses_everything(start_resource_manager: StartResourceManager) -> None:
    h = start_resource_manager(FAST)
    te, _ = h.register_task_executor("te-1", num_slots=1)
    jm = h.register_job_master()
    old = h.token

    h.rm.revoke_leadership()

    with pytest.raises(FencingTokenMismatch):
        h.declare(jm, JOB, 1, token=old)
    with pytest.raises(FencingTokenMismatch):
        h.call(lambda: h.rm.register_job_master(RegisterJobMaster("job-2", jm.address, jm.jobmaster_id)))
    with pytest.raises(FencingTokenMismatch):
        h.register_task_executor("te-2")
    assert te.count("request_slot") == 0 and "te-2" not in h.rm.slot_manager.task_executors
