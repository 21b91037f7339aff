"""The testing gateways (tests/fakes/gateways.py) and drivers (tests/fakes/driver.py, leadership.py)
are their Protocols: mypy checks the assignments below (a fake that drifts from its Protocol fails the type
gate), and the tests check the same at run time, and that the fakes record, answer and fail as set."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from tests.fakes.driver import TestingResourceManagerDriver
from tests.fakes.gateways import (
    TestingGatewayResolver,
    TestingJobMasterGateway,
    TestingResourceManagerGateway,
    TestingTaskExecutorGateway,
    raises,
)
from tests.fakes.leadership import TestingLeaderRetrievalDriver
from yarnflink.common.rpc_errors import FencingTokenMismatch, RpcTimeout, RpcUnreachable
from yarnflink.highavailability.leaderretrieval import LeaderRetrievalDriver
from yarnflink.jobmaster.gateway import JobMasterGateway, OfferSlots, SlotOffer
from yarnflink.resourcemanager.driver import ResourceManagerDriver
from yarnflink.resourcemanager.gateway import RegisterJobMaster, ResourceManagerControlGateway, ResourceManagerGateway
from yarnflink.resourcemanager.resources import UNKNOWN
from yarnflink.rpc.resolver import GatewayResolver
from yarnflink.taskexecutor.gateway import CancelTask, RequestSlot, SlotRequestAck, TaskExecutorGateway

# the static check: mypy fails here if a fake no longer implements its Protocol
_task_executor: TaskExecutorGateway = TestingTaskExecutorGateway()
_job_master: JobMasterGateway = TestingJobMasterGateway()
_resource_manager: ResourceManagerGateway = TestingResourceManagerGateway()
_resource_manager_control: ResourceManagerControlGateway = TestingResourceManagerGateway()
_resolver: GatewayResolver = TestingGatewayResolver()
_driver: ResourceManagerDriver = TestingResourceManagerDriver()
_leader_retrieval: LeaderRetrievalDriver = TestingLeaderRetrievalDriver()


def _protocol_methods(protocol: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in vars(protocol).items()
        if not name.startswith("_") and callable(member)
    }


@pytest.mark.parametrize(
    "protocol, fake",
    [
        (TaskExecutorGateway, TestingTaskExecutorGateway),
        (JobMasterGateway, TestingJobMasterGateway),
        (ResourceManagerGateway, TestingResourceManagerGateway),
        (ResourceManagerControlGateway, TestingResourceManagerGateway),
        (GatewayResolver, TestingGatewayResolver),
        (ResourceManagerDriver, TestingResourceManagerDriver),
        (LeaderRetrievalDriver, TestingLeaderRetrievalDriver),
    ],
)
def test_each_fake_has_every_method_of_its_protocol_with_the_same_parameters(protocol: type, fake: type) -> None:
    methods = _protocol_methods(protocol)
    assert methods, protocol
    for name, expected in methods.items():
        member = getattr(fake, name, None)
        assert member is not None, f"{fake.__name__} lacks {name}"
        assert inspect.iscoroutinefunction(member) == inspect.iscoroutinefunction(getattr(protocol, name)), name
        got = inspect.signature(member)
        assert [(p.name, p.kind, p.default) for p in got.parameters.values()] == [
            (p.name, p.kind, p.default) for p in expected.parameters.values()
        ], f"{fake.__name__}.{name}{got} is not {protocol.__name__}.{name}{expected}"


def test_a_fake_records_each_call_and_answers_with_its_default() -> None:
    te = TestingTaskExecutorGateway("te-1:1")
    request = RequestSlot("rm-token", 2, "job", "alloc-1", UNKNOWN, "jm:1", "jm-token")

    ack = asyncio.run(te.request_slot(request, timeout=3.0))

    assert ack == SlotRequestAck(2, slot_report_version=1)
    assert te.requests("request_slot") == [request]
    assert te.calls[0].timeout == 3.0
    jm = TestingJobMasterGateway()
    offers = OfferSlots("jm-token-1", "te-1", (SlotOffer("a1", 0), SlotOffer("a2", 1)))
    assert asyncio.run(jm.offer_slots(offers)) == ("a1", "a2")


def test_a_fakes_behaviour_is_a_function_set_per_test_plain_or_async() -> None:
    jm = TestingJobMasterGateway()
    jm.offer_slots_function = lambda r: (r.offers[0].allocation_id,)
    assert asyncio.run(jm.offer_slots(OfferSlots("t", "te", (SlotOffer("a1", 0), SlotOffer("a2", 1))))) == ("a1",)

    async def refuse(r: OfferSlots) -> tuple[str, ...]:
        await asyncio.sleep(0)
        return ()

    jm.offer_slots_function = refuse
    assert asyncio.run(jm.offer_slots(OfferSlots("t", "te", (SlotOffer("a1", 0),)))) == ()


@pytest.mark.parametrize(
    "error", [RpcUnreachable("refused"), RpcTimeout("deadline"), FencingTokenMismatch("stale token")]
)
def test_a_fake_can_be_told_to_fail_a_call_with_each_rpc_exception(error: Exception) -> None:
    te = TestingTaskExecutorGateway()
    te.cancel_task_function = raises(error)

    for _ in range(2):  # every call, each with a fresh exception
        with pytest.raises(type(error), match=str(error)):
            asyncio.run(te.cancel_task(CancelTask("jm", "e1")))
    assert te.count("cancel_task") == 2


def test_a_gateway_that_is_down_fails_every_call_and_still_records_it() -> None:
    rm = TestingResourceManagerGateway()
    rm.down = RpcUnreachable("gone")

    with pytest.raises(RpcUnreachable):
        asyncio.run(rm.register_job_master(RegisterJobMaster("job", "jm:1", "jm-token")))
    assert rm.count("register_job_master") == 1


def test_the_resolver_hands_out_what_was_added_and_an_unreachable_peer_for_any_other_address() -> None:
    resolver = TestingGatewayResolver()
    te = resolver.add_task_executor("te-1:1")

    assert resolver.task_executor("te-1:1") is te
    nobody = resolver.task_executor("te-9:9")
    with pytest.raises(RpcUnreachable):
        asyncio.run(nobody.cancel_task(CancelTask("jm", "e1")))
    assert resolver.task_executor("te-9:9") is nobody  # the calls to it stay visible
    asyncio.run(resolver.forget("te-1:1"))
    asyncio.run(resolver.close())
    assert resolver.forgotten == ["te-1:1"] and resolver.closed
